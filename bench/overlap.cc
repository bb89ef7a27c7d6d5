// chorus-overlap: computation/communication overlap of iallreduce and
// ibroadcast, OSU's method; the twin of bench/mpi/osu_style_overlap.c (the
// same sizes, iterations, barriers, busy loop, inputs, check and output), so
// bench/compare-overlap sets the two side by side. See that file's comment
// for the definitions (blocking, pure, compute, overall, overlap %).
#include <chorus/chorus.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

double now_us() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) * 1e-3;
}

volatile double g_sink;
// Busy work for `us` microseconds that makes no chorus call.
void compute_for(double us) {
  const double until = now_us() + us;
  double x = 1.0;
  while (now_us() < until) {
    for (int i = 0; i < 64; ++i) x = std::sqrt(x + 1.0);
  }
  g_sink = x;
}

double slowest(chorus::Communicator& comm, double local) {
  comm.allreduce(&local, &local, 1, chorus::ReduceOp::max);
  return local;
}

int iterations_for(size_t bytes, bool quick) {
  if (quick) return 5;
  if (bytes <= 65536) return 100;
  if (bytes <= (4u << 20)) return 20;
  return 5;
}

void usage() {
  std::printf(
      "Usage: chorusrun -n N chorus-overlap [--op iallreduce|ibcast] [--min-bytes B] [--max-bytes B] [--quick]\n\n"
      "Overlap of a non-blocking collective with computation, OSU's method:\n"
      "overlap %% = 100 (1 - (overall - compute) / pure), sizes x4 from min to max\n"
      "(default 4 B .. 64 MiB); --quick: 5 iterations per size. CHORUS_PROGRESS\n"
      "chooses the progress mode (thread, the default, or caller).\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string op = "iallreduce";
  size_t min_bytes = 4, max_bytes = size_t{64} << 20;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage();
      return 0;
    } else if (arg == "--op" && i + 1 < argc) {
      op = argv[++i];
    } else if (arg == "--min-bytes" && i + 1 < argc) {
      min_bytes = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--max-bytes" && i + 1 < argc) {
      max_bytes = std::strtoull(argv[++i], nullptr, 10);
    } else if (arg == "--quick") {
      quick = true;
    } else {
      std::fprintf(stderr, "chorus-overlap: unknown argument %s (see --help)\n", arg.c_str());
      return 2;
    }
  }
  const bool is_bcast = op == "ibcast";
  if (!is_bcast && op != "iallreduce") {
    std::fprintf(stderr, "chorus-overlap: --op must be iallreduce or ibcast, not \"%s\"\n", op.c_str());
    return 2;
  }
  min_bytes = std::max<size_t>(min_bytes, 4);
  try {
    auto comm = chorus::Communicator::init();
    const int rank = comm.rank(), size = comm.size();
    const size_t max_count = max_bytes / sizeof(float);
    std::vector<float> send(max_count), recv(max_count);
    for (size_t i = 0; i < max_count; ++i) send[i] = static_cast<float>((i + static_cast<size_t>(rank) * 7) % 13);
    int wrong_total = 0;
    if (rank == 0) {
      std::printf("# %s overlap, %d ranks, float32%s (chorus-overlap, %s)\n", op.c_str(), size,
                  is_bcast ? ", root 0" : " sum", comm.transport_name().c_str());
      std::printf("# %12s %12s %12s %12s %12s %9s\n", "bytes", "blocking us", "pure us", "compute us", "overall us",
                  "overlap %");
    }
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      const size_t count = bytes / sizeof(float);
      const int iters = iterations_for(bytes, quick), warmup = quick ? 1 : 3;
      float* buffer = rank == 0 ? send.data() : recv.data();
      double blocking = 0, pure = 0, overall = 0;
      for (int phase = 0; phase < 3; ++phase) {
        double total = 0;
        for (int it = -warmup; it < iters; ++it) {
          comm.barrier();
          const double start = now_us();
          if (phase == 0) {
            if (is_bcast) comm.broadcast(buffer, count, chorus::DataType::float32, 0);
            else comm.allreduce(send.data(), recv.data(), count, chorus::ReduceOp::sum);
          } else {
            chorus::Request request = is_bcast ? comm.ibroadcast(buffer, count, chorus::DataType::float32, 0)
                                               : comm.iallreduce(send.data(), recv.data(), count,
                                                                 chorus::DataType::float32, chorus::ReduceOp::sum);
            if (phase == 2) compute_for(pure);
            request.wait();
          }
          if (it >= 0) total += now_us() - start;
        }
        const double mean = slowest(comm, total / iters);
        if (phase == 0) blocking = mean;
        if (phase == 1) pure = mean;
        if (phase == 2) overall = mean;
      }
      int wrong = 0;
      if (!is_bcast || rank != 0) {
        for (size_t i = 0; i < count; ++i) {
          double expected = 0;
          if (is_bcast) {
            expected = static_cast<double>(i % 13);
          } else {
            for (int r = 0; r < size; ++r) expected += static_cast<double>((i + static_cast<size_t>(r) * 7) % 13);
          }
          if (static_cast<double>(recv[i]) != expected) ++wrong;
        }
      }
      comm.allreduce(&wrong, &wrong, 1, chorus::ReduceOp::sum);
      wrong_total += wrong;
      const double percent = std::clamp(100.0 * (1.0 - (overall - pure) / pure), 0.0, 100.0);
      if (rank == 0) {
        std::printf("  %12zu %12.2f %12.2f %12.2f %12.2f %9.1f%s\n", bytes, blocking, pure, pure, overall, percent,
                    wrong ? "  WRONG RESULTS" : "");
        std::printf("overlap,%s,%zu,%.3f,%.3f,%.3f,%.3f,%.1f\n", op.c_str(), bytes, blocking, pure, pure, overall,
                    percent);
        std::fflush(stdout);
      }
      if (bytes > max_bytes / 4) break;
    }
    if (rank == 0) {
      if (wrong_total) std::printf("chorus-overlap: %d wrong elements\n", wrong_total);
      else std::printf("chorus-overlap: all results correct\n");
    }
    comm.finalize();
    return wrong_total ? 1 : 0;
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus-overlap: %s\n", e.what());
    return 1;
  }
}
