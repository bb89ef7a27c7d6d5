#include "topology/planner.hpp"

#include <algorithm>
#include <set>

namespace chorus::topology {

namespace {

CpuSet all_cpus(const Machine& machine) {
  CpuSet cpus;
  for (const Core& core : machine.cores) cpus = set_union(cpus, core.cpus);
  return cpus;
}

CpuSet package_cpus(const Machine& machine, int package) {
  CpuSet cpus;
  for (const Core& core : machine.cores) {
    if (core.package == package) cpus = set_union(cpus, core.cpus);
  }
  return cpus;
}

bool core_near_nic(const Core& core, const CpuSet& locality) {
  return !locality.empty() && contains_all(locality, core.cpus);
}

std::vector<size_t> topology_order(const Machine& machine) {
  std::vector<size_t> order(machine.cores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  return order;
}

// Distinct per local rank modulo the vector count; among the free vectors a
// rank prefers one whose interrupt is delivered to its own CPUs.
void assign_completion_vectors(std::vector<Plan>& plans, const NicView& nic) {
  const int count = nic.completion_vectors;
  std::set<int> used;
  for (Plan& plan : plans) {
    if (count <= 0) continue;
    if (static_cast<int>(used.size()) == count) used.clear();
    int chosen = -1;
    for (int vector = 0; vector < count && chosen < 0; ++vector) {
      const auto v = static_cast<size_t>(vector);
      const bool irq_here = v < nic.vector_cpus.size() && intersects(nic.vector_cpus[v], plan.cpuset);
      if (!used.count(vector) && irq_here) chosen = vector;
    }
    for (int vector = 0; vector < count && chosen < 0; ++vector) {
      if (!used.count(vector)) chosen = vector;
    }
    used.insert(chosen);
    plan.completion_vector = chosen;
  }
}

// A progress thread gets a core no rank is given (next to the NIC first),
// else shares its rank's CPUs.
void assign_progress_cpus(std::vector<Plan>& plans, const Machine& machine, const std::vector<size_t>& order,
                          size_t ranks_with_own_core) {
  std::vector<size_t> spare(order.begin() + static_cast<std::ptrdiff_t>(std::min(ranks_with_own_core, order.size())),
                            order.end());
  for (size_t r = 0; r < plans.size(); ++r) {
    plans[r].progress_cpus = spare.empty() ? plans[r].cpuset : machine.cores[spare[r % spare.size()]].cpus;
  }
}

}  // namespace

const char* policy_name(Policy policy) {
  switch (policy) {
    case Policy::automatic: return "auto";
    case Policy::nic: return "nic";
    case Policy::core: return "core";
    case Policy::package: return "package";
    case Policy::none: return "none";
  }
  return "?";
}

Policy resolve_policy(const Machine& machine, const PlanRequest& request) {
  if (request.policy != Policy::automatic) return request.policy;
  if (!request.inherited.empty()) return Policy::none;
  if (static_cast<size_t>(request.local_size) > machine.cores.size()) return Policy::none;
  return request.local_size <= 2 ? Policy::nic : Policy::package;
}

std::vector<size_t> nic_core_order(const Machine& machine, const CpuSet& locality) {
  std::set<int> nic_packages;
  for (const Core& core : machine.cores) {
    if (core_near_nic(core, locality)) nic_packages.insert(core.package);
  }
  if (nic_packages.empty()) return topology_order(machine);
  auto rank_of = [&](const Core& core) {
    if (core_near_nic(core, locality)) return 0;
    return nic_packages.count(core.package) ? 1 : 2;
  };
  std::vector<size_t> order = topology_order(machine);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rank_of(machine.cores[a]) < rank_of(machine.cores[b]); });
  return order;
}

std::vector<Plan> plan_node(const Machine& machine, const NicView& nic, Policy policy, int local_size) {
  const std::vector<size_t> order =
      policy == Policy::core ? topology_order(machine) : nic_core_order(machine, nic.locality);
  const CpuSet everything = all_cpus(machine);
  std::vector<Plan> plans(static_cast<size_t>(std::max(local_size, 0)));
  for (size_t r = 0; r < plans.size(); ++r) {
    Plan& plan = plans[r];
    plan.policy = policy;
    if (policy == Policy::none || order.empty()) {
      plan.cpuset = everything;
      continue;
    }
    // Round-robin when ranks outnumber cores: each core gets ranks evenly.
    const Core& core = machine.cores[order[r % order.size()]];
    plan.bind = true;
    plan.cpuset = policy == Policy::package ? package_cpus(machine, core.package) : core.cpus;
    plan.nic_local = core_near_nic(core, nic.locality);
  }
  const bool own_cores = policy == Policy::nic || policy == Policy::core;
  assign_progress_cpus(plans, machine, order, own_cores ? plans.size() : order.size());
  assign_completion_vectors(plans, nic);
  return plans;
}

Plan plan_placement(const Machine& machine, const NicView& nic, const PlanRequest& request) {
  const Policy policy = resolve_policy(machine, request);
  Plan plan = plan_node(machine, nic, policy, request.local_size).at(static_cast<size_t>(request.local_rank));
  const bool automatic = request.policy == Policy::automatic;
  // none (the default) never moves the process: a launcher's binding stays.
  if ((automatic || request.policy == Policy::none) && !request.inherited.empty()) {
    // Other ranks' launcher bindings are unknown here: plain round-robin.
    plan.cpuset = request.inherited;
    plan.progress_cpus = request.inherited;
    plan.nic_local = !nic.locality.empty() && contains_all(nic.locality, request.inherited);
    plan.completion_vector = nic.completion_vectors > 0 ? request.local_rank % nic.completion_vectors : -1;
    plan.note = "kept the launcher's binding";
  } else if (automatic && policy == Policy::none) {
    plan.note = "more local ranks than cores: not bound";
  } else if ((policy == Policy::nic || policy == Policy::package) && nic.locality.empty()) {
    plan.note = "no NIC locality: bound in core order";
  }
  return plan;
}

}  // namespace chorus::topology
