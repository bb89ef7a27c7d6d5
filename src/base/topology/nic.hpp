// The NIC a transport is about to use, described before the transport is
// created so the rank can be bound (and its memory allocated) near it and
// the CQ given its completion vector.
#pragma once

#include "topology/cpu_list.hpp"

#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace chorus::topology {

class Topology;

// A PCI function, as libfabric's fi_pci_attr and sysfs name it.
struct PciAddress {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
};

// "0000:81:00.0"
inline std::string format_pci(const PciAddress& pci) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", pci.domain, pci.bus, pci.device, pci.function);
  return text;
}

inline std::optional<PciAddress> parse_pci(const std::string& text) {
  PciAddress pci;
  char extra = 0;
  const int fields = std::sscanf(text.c_str(), "%x:%x:%x.%x%c", &pci.domain, &pci.bus, &pci.device, &pci.function, &extra);
  return fields == 4 ? std::optional(pci) : std::nullopt;
}

struct NicDescription {
  std::string name;            // "mlx5_0", "rxe0", "shm", "tcp;ofi_rxm lo", ...
  int completion_vectors = 0;  // verbs num_comp_vectors; 0 for libfabric
  std::optional<PciAddress> pci;  // when known: locality and IRQ lookup
  // CPUs near the NIC in `topology`; empty when it has no locality
  // (soft-RoCE, VMs, shm, tcp on loopback). Unset: no locality.
  std::function<CpuSet(const Topology& topology)> locate;
};

}  // namespace chorus::topology
