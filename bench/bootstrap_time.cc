// chorus-bootstrap-time: how long a rank takes from the start of main to the
// end of its first collective (a barrier), for bench/bootstrap-scale
// (docs/bootstrap.md, "Scale"). Every rank measures its own init and barrier;
// an allreduce then takes the maximum of each to rank 0, which prints one line:
//   bootstrap-time: ranks N init_max_ms X barrier_max_ms Y first_collective_done_ms Z
// Z is the wall clock (CLOCK_REALTIME, ms since the epoch) at which the last
// rank left the barrier: the script subtracts its own launch time from it.
#include <time.h>

#include <algorithm>
#include <chorus/chorus.hpp>
#include <cstdio>
#include <cstring>
#include <exception>

namespace {

double monotonic_ms() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

double epoch_ms() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  const double start = monotonic_ms();
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf(
        "usage: chorus-bootstrap-time\n"
        "Started as every rank of a job (chorusrun, srun, mpirun): times Communicator::init() and the first\n"
        "barrier in every rank and prints, on rank 0, the maxima and the wall-clock time (ms since the epoch)\n"
        "at which the last rank left the barrier. bench/bootstrap-scale runs it.\n");
    return 0;
  }
  try {
    chorus::Communicator comm = chorus::Communicator::init();
    const double initialised = monotonic_ms();
    comm.barrier();
    const double done = monotonic_ms();
    // Maxima over the ranks: init, barrier, and when the barrier ended.
    double mine[3] = {initialised - start, done - initialised, epoch_ms()};
    double most[3] = {};
    comm.allreduce(mine, most, 3, chorus::ReduceOp::max);
    if (comm.rank() == 0) {
      std::printf("bootstrap-time: ranks %d init_max_ms %.1f barrier_max_ms %.1f first_collective_done_ms %.1f\n",
                  comm.size(), most[0], most[1], most[2]);
    }
    comm.finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-bootstrap-time: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
