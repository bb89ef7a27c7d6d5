// A barrier synchronises: no rank leaves it before the last rank arrives.
//
// Before each barrier one rank (a different one each time) sleeps --late-ms
// (300 ms). Every rank reads CLOCK_REALTIME right before it calls the
// barrier (arrival) and right after the call returns (exit); the ranks run
// on one host, so they read one clock. The times are then exchanged
// (allgather) and every rank checks every rank's exit against the late
// rank's arrival: exit >= arrival, or the barrier let a rank go early.
//
// Why this fails for a barrier that returns at once (--test-noop-barrier
// makes it one; barrier.detects_noop_barrier runs it and must fail): the
// ranks that are not late call the barrier right after the exchange of the
// previous round, about --late-ms before the late rank wakes up, and leave it
// microseconds later, so their exit precedes the late rank's arrival by about
// --late-ms. The check needs that premise, so it is checked too: some rank
// must arrive at least --late-ms / 2 before the late one, or the round proves
// nothing and fails as such (a loaded host that delays a rank that long fails
// the test instead of passing it unproven).
//
// Per algorithm of the barrier (every one chorus has, and the automatic
// choice: on shm that is the board), --rounds barriers in a row, then
// --rounds ibarrier + wait. Prints per rank "chorus-barrier-sync: rank R
// passed" at its very end (tests/job_verdict.py).
#include <chorus/chorus.hpp>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int64_t realtime_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

int usage(FILE* out, int status) {
  std::fprintf(out,
               "Usage: chorusrun -n N chorus-barrier-sync [--late-ms MS] [--rounds R] [--test-noop-barrier]\n\n"
               "Checks that no rank leaves a barrier before the last rank arrives: before each barrier\n"
               "one rank sleeps MS (default 300); every rank's exit time (CLOCK_REALTIME, one host)\n"
               "must not precede that rank's arrival. R barriers in a row (default 3), then R\n"
               "ibarrier+wait, for every barrier algorithm and the automatic choice.\n"
               "  --test-noop-barrier  replace the barrier by nothing: the check must fail\n"
               "Exit status 0 and \"chorus-barrier-sync: rank R passed\" only if every check passed.\n");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  int late_ms = 300, rounds = 3;
  bool noop = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return usage(stdout, 0);
    if (arg == "--late-ms" && i + 1 < argc) {
      late_ms = std::atoi(argv[++i]);
    } else if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (arg == "--test-noop-barrier") {
      noop = true;
    } else {
      std::fprintf(stderr, "chorus-barrier-sync: unknown or incomplete argument %s\n", arg.c_str());
      return usage(stderr, 2);
    }
  }
  if (late_ms < 20 || rounds < 1) {
    std::fprintf(stderr, "chorus-barrier-sync: --late-ms must be at least 20 and --rounds at least 1\n");
    return 2;
  }
  int rank = -1, failed = 0, checked = 0;
  try {
    chorus::Communicator comm = chorus::Communicator::init();
    rank = comm.rank();
    const int size = comm.size();
    if (size < 2) {
      std::fprintf(stderr, "chorus-barrier-sync: needs 2 ranks or more\n");
      return 2;
    }
    std::vector<std::string> algorithms = {""};  // "": the automatic choice
    for (const std::string& name : comm.algorithms(chorus::Collective::barrier)) algorithms.push_back(name);
    const int64_t late_ns = int64_t{late_ms} * 1000000;
    int step = 0;
    for (const std::string& algorithm : algorithms) {
      comm.set_algorithm(chorus::Collective::barrier, algorithm);
      const std::string algorithm_name = algorithm.empty() ? "auto" : algorithm;
      for (const bool nonblocking : {false, true}) {
        const char* kind = nonblocking ? "ibarrier+wait" : "barrier";
        for (int round = 0; round < rounds; ++round, ++step) {
          const int late = step % size;
          if (rank == late) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
          int64_t times[2];
          times[0] = realtime_ns();
          if (!noop) {
            if (nonblocking) {
              comm.ibarrier().wait();
            } else {
              comm.barrier();
            }
          }
          times[1] = realtime_ns();
          std::vector<int64_t> all(2 * static_cast<size_t>(size));
          comm.allgather(times, all.data(), 2, chorus::DataType::int64);
          const int64_t late_arrival = all[2 * static_cast<size_t>(late)];
          int64_t earliest_arrival = late_arrival;
          for (int r = 0; r < size; ++r) earliest_arrival = std::min(earliest_arrival, all[2 * static_cast<size_t>(r)]);
          ++checked;
          if (late_arrival - earliest_arrival < late_ns / 2) {
            ++failed;
            std::printf("FAILED: rank %d: %s %s #%d: no rank arrived %d ms before late rank %d (earliest %.1f ms "
                        "before): the round proves nothing\n",
                        rank, algorithm_name.c_str(), kind, round, late_ms / 2, late,
                        static_cast<double>(late_arrival - earliest_arrival) / 1e6);
            std::fflush(stdout);  // chorusrun may stop this rank when another fails
          }
          for (int r = 0; r < size; ++r) {
            const int64_t exit_time = all[2 * static_cast<size_t>(r) + 1];
            ++checked;
            if (exit_time < late_arrival) {
              ++failed;
              std::printf("FAILED: rank %d: %s %s #%d: rank %d left %.1f ms before late rank %d arrived\n", rank,
                          algorithm_name.c_str(), kind, round, r, static_cast<double>(late_arrival - exit_time) / 1e6,
                          late);
              std::fflush(stdout);
            }
          }
        }
      }
    }
    long failed_anywhere = 0, mine = failed;
    comm.allreduce(&mine, &failed_anywhere, 1, chorus::DataType::int64, chorus::ReduceOp::sum);
    if (rank == 0) {
      std::printf("chorus-barrier-sync: %d ranks, %s, %zu algorithms (%s), %d barriers and %d ibarriers each: "
                  "%d checks, %ld failed on any rank\n",
                  size, comm.transport_name().c_str(), algorithms.size(), [&] {
                    std::string names;
                    for (const auto& a : algorithms) names += (names.empty() ? "" : ",") + (a.empty() ? "auto" : a);
                    return names;
                  }().c_str(), rounds, rounds, checked, failed_anywhere);
    }
    comm.finalize();
    if (failed_anywhere != 0) return 1;
  } catch (const chorus::Error& e) {
    std::printf("FAILED: rank %d: %s\n", rank, e.what());
    return 1;
  }
  // Every rank's own pass line, after finalize (tests/job_verdict.py).
  std::printf("chorus-barrier-sync: rank %d passed\n", rank);
  return 0;
}
