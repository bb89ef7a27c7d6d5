#include "topology/placement.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "topology/irq.hpp"
#include "topology/topology.hpp"

#include <cstdio>

namespace chorus::topology {

namespace {

// `with_io_devices`: only a NIC with a locality to find needs the PCI devices.
Topology load_topology(const PlacementSettings& settings, bool with_io_devices) {
  // An XML export is taken to be of this machine (saved to skip discovery on
  // big nodes, like HWLOC_XMLFILE): binding through it must reach real CPUs.
  if (settings.topology_xml.empty()) return Topology::this_machine(with_io_devices);
  try {
    return Topology::from_xml(settings.topology_xml, true);
  } catch (const Error& e) {
    fail(Status::config, "CHORUS_TOPOLOGY_XML=\"", settings.topology_xml, "\": not a usable hwloc XML topology: ", e.what());
  }
}

// A launcher's binding (mpirun --bind-to, srun --cpu-bind, taskset) is a
// process mask narrower than what the process is allowed.
CpuSet inherited_binding(const Topology& topology) {
  const CpuSet bound = topology.process_binding();
  const CpuSet allowed = topology.allowed_cpus();
  return bound != allowed && contains_all(allowed, bound) ? bound : CpuSet{};
}

NicView view_of(const NicDescription& nic, const Topology& topology) {
  NicView view;
  view.name = nic.name;
  if (nic.locate) view.locality = nic.locate(topology);
  view.completion_vectors = nic.completion_vectors;
  view.vector_cpus = read_vector_cpus(nic.pci, nic.completion_vectors);
  return view;
}

// Said once per node (local rank 0): every rank of the node sees the same.
void say_no_locality(const NicView& nic, Policy requested, const RankIdentity& who) {
  if (who.local_rank != 0) return;
  const auto message = concat("placement: ", nic.name,
                              " has no CPU locality (soft-RoCE, a VM, or a shm/tcp provider): binding by core");
  if (requested == Policy::nic) {
    log::warn(message);
  } else {
    log::info(message);
  }
}

std::string report_line(const Placement& placement, const NicView& nic, const RankIdentity& who) {
  const Plan& plan = placement.plan;
  const std::string where = nic.locality.empty() ? "no locality" : "near " + format_cpu_list(nic.locality);
  const std::string vector = plan.completion_vector < 0 ? "none" : std::to_string(plan.completion_vector);
  return concat("chorus bindings: host=", who.host, " rank=", who.rank, " local_rank=", who.local_rank, "/",
                who.local_size, " policy=", policy_name(plan.policy), plan.bind ? "" : " (not bound by chorus)",
                " cpuset=", format_cpu_list(placement.running_on), " nic=", nic.name, " (", where, ") cq_vector=",
                vector, " progress_cpus=", format_cpu_list(plan.progress_cpus),
                plan.note.empty() ? "" : " note=\"" + plan.note + "\"");
}

}  // namespace

Policy parse_policy(const std::string& text) {
  if (text == "auto") return Policy::automatic;
  if (text == "nic") return Policy::nic;
  if (text == "core") return Policy::core;
  if (text == "none") return Policy::none;
  fail(Status::config, "CHORUS_BIND=\"", text, "\": expected one of auto, nic, core, none");
}

Placement place_rank(const PlacementSettings& settings, const NicDescription& nic, const RankIdentity& who) {
  const Topology topology = load_topology(settings, static_cast<bool>(nic.locate));
  const NicView view = view_of(nic, topology);
  PlanRequest request;
  request.policy = parse_policy(settings.bind);
  request.local_rank = who.local_rank;
  request.local_size = who.local_size;
  request.inherited = inherited_binding(topology);

  Placement placement;
  placement.plan = plan_placement(topology.machine(), view, request);
  const Plan& plan = placement.plan;
  if (plan.bind && view.locality.empty() && plan.policy != Policy::core) say_no_locality(view, request.policy, who);
  if (plan.bind) topology.bind_process(plan.cpuset);
  placement.running_on = topology.process_binding();
  placement.report = report_line(placement, view, who);
  if (settings.report) {
    std::fprintf(stderr, "%s\n", placement.report.c_str());
  } else {
    log::info(placement.report);
  }
  return placement;
}

}  // namespace chorus::topology
