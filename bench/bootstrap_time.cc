// chorus-bootstrap-time: how long a rank takes from the start of main to the
// end of its first collective (a barrier), for bench/bootstrap-scale
// (docs/bootstrap.md, "Scale"). Every rank measures its own init and barrier;
// an allreduce then takes the maximum of each to rank 0, which prints one line:
//   bootstrap-time: ranks N init_max_ms X barrier_max_ms Y first_collective_done_ms Z init_cpu_sum_ms C
//                   start_spread_ms S after_last_start_ms A
// Z is the wall clock (CLOCK_REALTIME, ms since the epoch) at which the last
// rank left the barrier: the script subtracts its own launch time from it.
// C is the CPU time (user + system, every thread) the ranks spent from exec
// to the end of init, summed: on an oversubscribed host it bounds the wall
// time from below (C / cores), whatever the launcher.
// S and A split X in two: S, from the first rank's main to the last rank's,
// is the launcher's (how fast it starts N processes); A, from the last
// rank's main to the moment every rank has returned from init, is the
// bootstrap's own (a rank's init cannot end before the last one started).
// Both compare wall clocks of different processes: meaningful on one host
// (bench/bootstrap-scale), only as good as the clocks' agreement across hosts.
#include <sys/resource.h>
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

// CPU time of this process so far (all its threads), in ms.
double process_cpu_ms() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto ms = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3; };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

}  // namespace

int main(int argc, char** argv) {
  const double start = monotonic_ms();
  const double start_epoch = epoch_ms();
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
    const double initialised_epoch = epoch_ms();
    const double init_cpu = process_cpu_ms();
    comm.barrier();
    const double done = monotonic_ms();
    // Maxima over the ranks: init, barrier, when the barrier ended, the last
    // start, the first start (as the maximum of its negation), the last init's end.
    double mine[6] = {initialised - start, done - initialised, epoch_ms(), start_epoch, -start_epoch, initialised_epoch};
    double most[6] = {};
    comm.allreduce(mine, most, 6, chorus::ReduceOp::max);
    double cpu_sum = 0;
    comm.allreduce(&init_cpu, &cpu_sum, 1, chorus::ReduceOp::sum);
    if (comm.rank() == 0) {
      std::printf(
          "bootstrap-time: ranks %d init_max_ms %.1f barrier_max_ms %.1f first_collective_done_ms %.1f "
          "init_cpu_sum_ms %.1f start_spread_ms %.1f after_last_start_ms %.1f\n",
          comm.size(), most[0], most[1], most[2], cpu_sum, most[3] + most[4], most[5] - most[3]);
    }
    comm.finalize();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-bootstrap-time: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
