// The placement planner (docs/architecture.md §8, docs/placement.md): a pure function
// from what the machine looks like, where the NIC is, and which local rank
// this is, to where the rank runs and which completion vector its CQ uses.
// No system calls, no hwloc: unit tests feed it topologies of big machines.
#pragma once

#include "topology/cpu_list.hpp"

#include <string>
#include <vector>

namespace chorus::topology {

// automatic resolves to one of the others (see resolve_policy).
enum class Policy { automatic, nic, core, package, none };
const char* policy_name(Policy policy);

struct Core {
  int package = 0;  // index of its package (socket)
  CpuSet cpus;      // its hardware threads
};

// The cores the process may use, in topology order.
struct Machine {
  std::vector<Core> cores;
};

struct NicView {
  std::string name;                // "mlx5_0", "rxe0", "shm", ...
  CpuSet locality;                 // CPUs near the NIC; empty = unknown
  int completion_vectors = 0;      // verbs num_comp_vectors; 0 = no CQ vectors
  std::vector<CpuSet> vector_cpus; // IRQ affinity per vector; empty entries where unreadable
};

struct PlanRequest {
  Policy policy = Policy::automatic;
  int local_rank = 0;
  int local_size = 1;
  // Set when a launcher already bound the process to fewer CPUs than the
  // machine has; the automatic policy keeps that binding.
  CpuSet inherited;
};

struct Plan {
  Policy policy = Policy::none;  // what was applied (automatic resolved)
  bool bind = false;             // false: leave the process where it is
  CpuSet cpuset;                 // where the rank runs
  int completion_vector = -1;    // -1: the NIC has no completion vectors
  CpuSet progress_cpus;          // where a progress thread would run
  bool nic_local = false;        // the rank's cores are near the NIC
  std::string note;              // why, when it is not obvious (fallbacks)
};

// Open MPI's default, made NIC-aware: keep a launcher's binding; no binding
// when ranks outnumber cores; one core each (near the NIC) for up to 2
// ranks; a package each beyond.
Policy resolve_policy(const Machine& machine, const PlanRequest& request);

// Cores ordered for the nic policy: those near the NIC, then the rest of the
// NIC's packages, then the others. Topology order when the locality is unknown.
std::vector<size_t> nic_core_order(const Machine& machine, const CpuSet& locality);

// The whole node's plan (every local rank), so choices that must differ
// between ranks (completion vectors, progress cores) can be made distinct.
std::vector<Plan> plan_node(const Machine& machine, const NicView& nic, Policy policy, int local_size);

// This rank's plan.
Plan plan_placement(const Machine& machine, const NicView& nic, const PlanRequest& request);

}  // namespace chorus::topology
