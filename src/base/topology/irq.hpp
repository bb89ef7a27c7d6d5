// Which CPUs take the interrupts of each completion vector of a verbs
// device: /proc/interrupts names the vectors (mlx5: "mlx5_comp3@pci:0000:81:00.0"),
// /proc/irq/N/smp_affinity_list says where IRQ N is delivered. Drivers that
// name their vectors otherwise, or no permission, leave the entries empty
// and the planner falls back to round-robin.
#pragma once

#include "topology/cpu_list.hpp"
#include "topology/nic.hpp"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::topology {

// vector -> IRQ number, from the text of /proc/interrupts, for the device at
// `pci_address` ("0000:81:00.0"). Pure, so it is unit tested.
std::map<int, int> completion_vector_irqs(std::string_view interrupts, const std::string& pci_address);

// The IRQ affinity of each of `vectors` vectors; empty entries where unknown.
// Never throws: the mapping is an optimisation.
std::vector<CpuSet> read_vector_cpus(const std::optional<PciAddress>& pci, int vectors);

}  // namespace chorus::topology
