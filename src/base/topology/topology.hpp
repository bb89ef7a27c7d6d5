// The machine's topology through hwloc: loading it (this machine, an XML
// export, or a synthetic description for tests), the planner's view of it,
// where a NIC sits, and binding the process. Every hwloc call is checked
// and a failure becomes chorus::Error naming the call.
#pragma once

#include "topology/cpu_list.hpp"
#include "topology/nic.hpp"
#include "topology/planner.hpp"

#include <hwloc.h>

#include <memory>
#include <string>

namespace chorus::topology {

struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* bitmap) const { hwloc_bitmap_free(bitmap); }
};
using BitmapPtr = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

BitmapPtr to_bitmap(const CpuSet& cpus);
CpuSet to_cpu_set(hwloc_const_bitmap_t bitmap);

class Topology {
 public:
  // This machine, PCI devices and NICs included unless `with_io_devices` is
  // false: a rank whose transport has no NIC to place near (shm, tcp) skips
  // reading every PCI device's config space, which is most of the
  // discovery's cost (in a VM each read traps to the hypervisor).
  static Topology this_machine(bool with_io_devices = true);
  // An lstopo XML export. `of_this_machine`: it describes the machine we run
  // on (an export saved to skip discovery), so binding through it is allowed.
  static Topology from_xml(const std::string& path, bool of_this_machine);
  // hwloc's synthetic description, e.g. "package:2 core:4 pu:2" (no I/O).
  static Topology from_synthetic(const std::string& description);

  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  ~Topology();

  hwloc_topology_t get() const { return topology_; }
  bool is_this_system() const;

  // The cores the process may use, in topology order, with their package.
  Machine machine() const;
  // CPUs near the OS device `name` (OpenFabrics "mlx5_0", network "ib0");
  // empty when the device is not in the topology (soft-RoCE, VMs).
  CpuSet osdev_locality(const std::string& name) const;
  // CPUs near a PCI function; empty when it is not in the topology.
  CpuSet pci_locality(const PciAddress& pci) const;

  // Binds every thread of the process, then reads the binding back and
  // fails unless it is exactly `cpus`.
  void bind_process(const CpuSet& cpus) const;
  CpuSet process_binding() const;
  // Every CPU the process is allowed to run on (cgroups included).
  CpuSet allowed_cpus() const;

 private:
  explicit Topology(hwloc_topology_t topology) : topology_(topology) {}
  hwloc_topology_t topology_ = nullptr;
};

}  // namespace chorus::topology
