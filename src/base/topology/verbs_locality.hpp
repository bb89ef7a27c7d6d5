// Where a verbs device sits: the kernel's answer (hwloc_ibv_get_device_cpuset,
// sysfs local_cpus) on this machine, the topology's OS device otherwise.
#pragma once

#include "topology/cpu_list.hpp"

#include <string>

namespace chorus::topology {

class Topology;

// Empty when the topology has no PCI device behind `device` (soft-RoCE).
CpuSet verbs_device_locality(const Topology& topology, const std::string& device);

}  // namespace chorus::topology
