// Says whether this process has libfabric mapped after joining a job and
// running one collective (docs/transport-ofi.md, "Loading libfabric"): a
// process on another transport must never load it (its psm providers' library
// constructor costs 0.2 s or more at every start); one on ofi must.
#include <chorus/chorus.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <span>
#include <string>

namespace {
bool libfabric_mapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/libfabric.so") != std::string::npos) return true;
  }
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf("usage: chorusrun -n N [--transport T] chorus-libfabric-loaded\n"
                "Prints, per rank, whether libfabric is mapped after init and an allreduce.\n");
    return 0;
  }
  try {
    chorus::Communicator comm = chorus::Communicator::init();
    int32_t value = comm.rank() + 1;
    comm.allreduce(std::span<int32_t>(&value, 1), chorus::ReduceOp::sum);
    const int expected = comm.size() * (comm.size() + 1) / 2;
    if (value != expected) {
      std::printf("rank %d: FAILED: allreduce gave %d, expected %d\n", comm.rank(), value, expected);
      return 1;
    }
    std::printf("rank %d: transport %s, libfabric %s\n", comm.rank(), comm.transport_name().c_str(),
                libfabric_mapped() ? "loaded" : "not loaded");
    const int rank = comm.rank();
    comm.finalize();
    // Every rank's own pass line, after finalize (tests/job_verdict.py).
    std::printf("chorus-libfabric-loaded: rank %d passed\n", rank);
    return 0;
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
}
