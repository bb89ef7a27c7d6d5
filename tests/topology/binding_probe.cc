// binding_probe: joins the job (chorus places the rank), then reads the
// process' binding with hwloc itself, independently of chorus' report, and
// checks an allreduce still adds up. Prints
//   probe: rank=R cpubind=0,1 allreduce=ok
// (physical PU numbers, comma-separated, as hwloc-calc --po -I pu prints them).
//
// binding_probe --threads N [--work M]: then, as a trainer's step would, runs
// N threads of M million floating-point iterations each (a thread pool doing
// compute after init) and prints
//   pool: rank=R threads=N compute_ms=T
// the measurement behind CHORUS_BIND's default (docs/placement.md).
#include <chorus/chorus.hpp>

#include <hwloc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

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

// Milliseconds N threads take for M million dependent multiply-adds each.
double thread_pool_ms(int threads, long millions) {
  std::vector<double> results(static_cast<size_t>(threads));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&results, t, millions] {
      double x = 1.0 + t;
      for (long i = 0; i < millions * 1000000; ++i) x = x * 0.999999 + 0.000001;
      results[static_cast<size_t>(t)] = x;
    });
  }
  for (auto& thread : pool) thread.join();
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return results[0] > 0 ? ms : -1;  // uses the results, so the loops are not optimized away
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0;
  long work = 100;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--work") == 0 && i + 1 < argc) {
      work = std::atol(argv[++i]);
    } else {
      std::printf("Usage: binding_probe [--threads N [--work MILLIONS]]\n"
                  "Joins the job, prints the binding hwloc reads and whether an allreduce adds up;\n"
                  "with --threads, times N threads of MILLIONS million multiply-adds each (default 100).\n");
      return std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0 ? 0 : 2;
    }
  }
  try {
    auto comm = chorus::Communicator::init();
    int one = 1;
    comm.allreduce(std::span<int>(&one, 1), chorus::ReduceOp::sum);
    const bool sum_ok = one == comm.size();
    std::printf("probe: rank=%d cpubind=%s allreduce=%s\n", comm.rank(), process_cpubind().c_str(),
                sum_ok ? "ok" : "FAILED: wrong sum");
    if (threads > 0) {
      std::printf("pool: rank=%d threads=%d compute_ms=%.0f\n", comm.rank(), threads, thread_pool_ms(threads, work));
    }
    comm.finalize();
    return sum_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
}
