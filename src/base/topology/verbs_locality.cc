#include "topology/verbs_locality.hpp"

#include "common/error.hpp"
#include "topology/topology.hpp"

#include <hwloc/openfabrics-verbs.h>

#include <memory>

namespace chorus::topology {

namespace {

struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};

}  // namespace

CpuSet verbs_device_locality(const Topology& topology, const std::string& device) {
  // hwloc lists OpenFabrics devices under their PCI function; soft-RoCE has
  // none, and hwloc_ibv_get_device_cpuset would answer "every CPU" for it.
  CpuSet from_topology = topology.osdev_locality(device);
  if (from_topology.empty() || !topology.is_this_system()) return from_topology;
  int count = 0;
  std::unique_ptr<ibv_device*, DeviceListDeleter> list(ibv_get_device_list(&count));
  if (!list) fail(Status::transport, "verbs: ibv_get_device_list failed: ", errno_string(errno));
  for (int i = 0; i < count; ++i) {
    if (device != ibv_get_device_name(list.get()[i])) continue;
    BitmapPtr cpus = to_bitmap({});
    if (hwloc_ibv_get_device_cpuset(topology.get(), list.get()[i], cpus.get()) != 0) {
      fail(Status::internal, "hwloc: hwloc_ibv_get_device_cpuset(", device, ") failed: ", errno_string(errno));
    }
    return to_cpu_set(cpus.get());
  }
  return from_topology;
}

}  // namespace chorus::topology
