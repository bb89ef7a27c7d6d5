// binding_probe: joins the job (chorus places the rank), then reads the
// process' binding with hwloc itself, independently of chorus' report, and
// checks an allreduce still adds up. Prints
//   probe: rank=R cpubind=0,1 allreduce=ok
// (physical PU numbers, comma-separated, as hwloc-calc --po -I pu prints them).
#include <chorus/chorus.hpp>

#include <hwloc.h>

#include <cstdio>
#include <string>

namespace {

std::string process_cpubind() {
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0 || hwloc_topology_load(topology) != 0) return "hwloc_topology_load failed";
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  std::string list;
  if (set == nullptr || hwloc_get_cpubind(topology, set, HWLOC_CPUBIND_PROCESS) != 0) {
    list = "hwloc_get_cpubind failed";
  } else {
    for (int cpu = hwloc_bitmap_first(set); cpu >= 0; cpu = hwloc_bitmap_next(set, cpu)) {
      list += (list.empty() ? "" : ",") + std::to_string(cpu);
    }
  }
  hwloc_bitmap_free(set);
  hwloc_topology_destroy(topology);
  return list;
}

}  // namespace

int main() {
  try {
    auto comm = chorus::Communicator::init();
    int one = 1;
    comm.allreduce(std::span<int>(&one, 1), chorus::ReduceOp::sum);
    const bool sum_ok = one == comm.size();
    std::printf("probe: rank=%d cpubind=%s allreduce=%s\n", comm.rank(), process_cpubind().c_str(),
                sum_ok ? "ok" : "FAILED: wrong sum");
    comm.finalize();
    return sum_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
}
