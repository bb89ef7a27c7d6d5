// Placement of this rank (docs/architecture.md §8, docs/placement.md): load the
// topology, find the NIC's locality, plan (planner.hpp), bind, read the
// binding back, and print it when asked (CHORUS_REPORT_BINDINGS).
#pragma once

#include "topology/nic.hpp"
#include "topology/planner.hpp"

#include <string>

namespace chorus::topology {

struct PlacementSettings {
  std::string bind = "none";  // CHORUS_BIND: none (default), auto, nic, core
  bool report = false;        // CHORUS_REPORT_BINDINGS
  std::string topology_xml;   // CHORUS_TOPOLOGY_XML ("" = discover this machine)
};

struct RankIdentity {
  std::string host;
  int rank = 0;
  int local_rank = 0;
  int local_size = 1;
};

struct Placement {
  Plan plan;
  CpuSet running_on;  // read back with hwloc_get_cpubind after binding
  std::string report; // the --report-bindings line
};

Policy parse_policy(const std::string& text);

// Plans and applies this rank's placement. Throws chorus::Error naming the
// hwloc call that failed or the binding that could not be applied.
Placement place_rank(const PlacementSettings& settings, const NicDescription& nic, const RankIdentity& who);

}  // namespace chorus::topology
