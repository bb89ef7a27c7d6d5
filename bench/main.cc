// chorus-bench driver: sweeps sizes for each requested collective and
// algorithm, times the calls, optionally verifies every element of separate
// untimed calls, and prints an nccl-tests style table (rank 0 only).
#include "bench.hpp"
#include "options.hpp"
#include "roofline.hpp"
#include "verify.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

class Runner {
 public:
  Runner(chorus::Communicator& comm, const Options& options) : comm_(comm), options_(options) {}

  // Returns the number of wrong elements over all rows and ranks.
  uint64_t sweep(const CollectiveBench& spec, const std::string& algorithm) {
    comm_.set_algorithm(spec.op, algorithm == "auto" ? "" : algorithm);
    print_header(spec, algorithm);
    uint64_t wrong_total = 0;
    size_t previous_count = SIZE_MAX;
    for (size_t bytes = options_.min_bytes;; bytes = next_size(bytes)) {
      CallShape shape = spec.shape(bytes, chorus::datatype_size(options_.dtype), comm_.size());
      bool first_barrier = spec.op == Collective::barrier;
      if (first_barrier || shape.count != previous_count) {
        previous_count = shape.count;
        wrong_total += row(spec, shape);
      }
      if (first_barrier || bytes >= options_.max_bytes) break;
    }
    return wrong_total;
  }

 private:
  size_t next_size(size_t bytes) const {
    size_t next = static_cast<size_t>(std::ceil(static_cast<double>(bytes) * options_.step_factor));
    if (next <= bytes) next = bytes + 1;  // 0 * factor, or a factor close to 1
    return std::min(next, options_.max_bytes);
  }

  void print_header(const CollectiveBench& spec, const std::string& algorithm) {
    if (comm_.rank() != 0) return;
    if (options_.csv) {
      std::printf("op,algorithm,bytes,count,dtype,redop,root,time_us,algbw_GBs,busbw_GBs,wrong%s%s\n",
                  options_.stats ? ",net_out_per_host,net_in_per_host" : "",
                  roofline_ ? ",limit_us,op_limit_us,percent_of_limit" : "");
      return;
    }
    std::printf("#\n# %s  ranks %d  transport %s  dtype %s  redop %s  root %d  %s  algorithm %s\n",
                std::string(chorus::to_string(spec.op)).c_str(), comm_.size(), comm_.transport_name().c_str(),
                std::string(chorus::to_string(options_.dtype)).c_str(),
                spec.reduces ? std::string(chorus::to_string(options_.redop)).c_str() : "-", options_.root,
                options_.in_place ? "in-place" : "out-of-place", algorithm.c_str());
    std::printf("# iters %d  warmup %d  check %d  sync %s  (time: %s)\n", options_.iters, options_.warmup,
                options_.check_iters, options_.sync ? "on" : "off",
                options_.sync ? "each call alone after a barrier, the median over the calls of the slowest rank's time"
                              : "the timed calls back to back as one batch, the slowest rank's mean");
    if (options_.stats) {
      std::printf("# net out/in: payload bytes one call sent to / received from other hosts' ranks, summed over\n"
                  "# a host's ranks, the busiest host's\n");
    }
    std::printf("# %12s %12s %-20s %10s %9s %9s %8s%s%s\n", "size(B)", "count", "algorithm", "time(us)", "algbw",
                "busbw", "#wrong", options_.stats ? "      net out       net in" : "",
                roofline_ ? "  limit(us)   %limit" : "");
    std::printf("# %12s %12s %-20s %10s %9s %9s %8s%s\n", "", "(elements)", "", "", "(GB/s)", "(GB/s)", "",
                options_.stats ? "    (B/call)     (B/call)" : "");
    std::fflush(stdout);
  }

  // As nccl-tests: warmup, the timed calls (one batch, or each alone after a
  // barrier with --sync), then the verified calls, untimed, so checking one
  // rank's result never shows up in another rank's time.
  uint64_t row(const CollectiveBench& spec, const CallShape& shape) {
    Setup setup{options_.dtype, options_.redop, options_.root, options_.in_place};
    Buffers buffers(spec, shape, setup, comm_.rank(), comm_.size());
    const Call call = buffers.call();
    // --roofline: the copy rate at this row's size, measured before the
    // call's buffers are warm (a size that fits in a cache copies faster).
    std::optional<CopyRate> row_rate;
    if (roofline_ && moved_bytes(spec, shape) > 0) row_rate = measure_copy_rate(comm_, moved_bytes(spec, shape));
    buffers.fill();  // in-place results then drift, which timing does not mind
    for (int iteration = 0; iteration < options_.warmup; ++iteration) spec.run(comm_, call);
    double busy_seconds = 0;
    std::vector<double> call_seconds;  // --sync: each call's own time
    const chorus::Traffic before = comm_.traffic();
    if (options_.sync) {
      call_seconds.reserve(static_cast<size_t>(options_.iters));
      for (int iteration = 0; iteration < options_.iters; ++iteration) {
        comm_.barrier();
        call_seconds.push_back(timed([&] {
          if (iteration == 0 && comm_.rank() == comm_.size() - 1 && options_.delay_one_call_ms_for_test > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(options_.delay_one_call_ms_for_test));
          }
          spec.run(comm_, call);
        }));
      }
    } else {
      comm_.barrier();
      busy_seconds = timed([&] {
        for (int iteration = 0; iteration < options_.iters; ++iteration) spec.run(comm_, call);
      });
    }
    const chorus::Traffic after = comm_.traffic();
    uint64_t wrong = 0;
    for (int iteration = 0; iteration < options_.check_iters; ++iteration) {
      buffers.fill();
      spec.run(comm_, call);
      if (comm_.rank() == comm_.size() - 1) {
        if (options_.inject_error_for_test) buffers.corrupt_one_element();
        std::this_thread::sleep_for(std::chrono::milliseconds(options_.check_delay_ms_for_test));
      }
      wrong += buffers.count_wrong(stderr, wrong < 3 ? 3 : 0);
    }
    // The time: back to back, the slowest rank's mean; --sync, every call's
    // slowest rank, and the median of those (a call a late rank delayed
    // once moves a mean, not the median). Then everyone's wrong elements.
    double slowest = 0;
    if (options_.sync) {
      std::vector<double> slowest_per_call(call_seconds.size());
      comm_.allreduce(call_seconds.data(), slowest_per_call.data(), call_seconds.size(), chorus::ReduceOp::max);
      slowest = median(slowest_per_call);
    } else {
      double mean = busy_seconds / options_.iters;
      comm_.allreduce(&mean, &slowest, 1, chorus::ReduceOp::max);
    }
    uint64_t wrong_all = 0;
    comm_.allreduce(&wrong, &wrong_all, 1, chorus::ReduceOp::sum);
    const NetworkBytes network = options_.stats ? busiest_host(before, after) : NetworkBytes{};
    if (comm_.rank() == 0) print_row(spec, shape, slowest, wrong_all, network, row_rate);
    return wrong_all;
  }

  struct NetworkBytes {
    uint64_t out = 0, in = 0;  // per timed call, the busiest host's
  };

  // Every rank's network bytes over the timed calls, summed per host.
  NetworkBytes busiest_host(const chorus::Traffic& before, const chorus::Traffic& after) {
    const auto ranks = static_cast<size_t>(comm_.size());
    const uint64_t mine[3] = {static_cast<uint64_t>(comm_.host()),
                              after.bytes_out_other_hosts - before.bytes_out_other_hosts,
                              after.bytes_in_other_hosts - before.bytes_in_other_hosts};
    std::vector<uint64_t> everyone(3 * ranks);
    comm_.allgather(mine, everyone.data(), 3, chorus::DataType::uint64);
    std::vector<NetworkBytes> hosts(ranks);  // hosts are numbered below the job's rank count
    for (size_t r = 0; r < ranks; ++r) {
      NetworkBytes& host = hosts[std::min<size_t>(everyone[3 * r], ranks - 1)];
      host.out += everyone[3 * r + 1];
      host.in += everyone[3 * r + 2];
    }
    NetworkBytes busiest;
    const auto calls = static_cast<uint64_t>(std::max(options_.iters, 1));
    for (const NetworkBytes& host : hosts) {
      busiest.out = std::max(busiest.out, host.out / calls);
      busiest.in = std::max(busiest.in, host.in / calls);
    }
    return busiest;
  }

  static double median(std::vector<double> values) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const size_t middle = values.size() / 2;
    return values.size() % 2 == 1 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
  }

  template <class Body>
  static double timed(Body&& body) {
    const auto start = Clock::now();
    body();
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  // Bytes one call moves: the larger of the send and receive buffers (the
  // whole gathered/scattered buffer for the block collectives), as nccl-tests.
  size_t moved_bytes(const CollectiveBench& spec, const CallShape& shape) const {
    if (spec.op == Collective::barrier) return 0;
    return std::max(shape.send_elems, shape.recv_elems) * chorus::datatype_size(options_.dtype);
  }

  void print_row(const CollectiveBench& spec, const CallShape& shape, double seconds, uint64_t wrong,
                 const NetworkBytes& network, const std::optional<CopyRate>& rate) {
    const size_t shown_bytes = moved_bytes(spec, shape);
    double algbw = seconds > 0 ? static_cast<double>(shown_bytes) / seconds / 1e9 : 0;
    double busbw = algbw * spec.bus_factor(comm_.size());
    std::string algorithm = comm_.selected_algorithm(spec.op, shown_bytes);
    std::string wrong_text = options_.check() ? std::to_string(wrong) : "N/A";
    char stats[64] = "";
    if (options_.stats) {
      std::snprintf(stats, sizeof stats, options_.csv ? ",%llu,%llu" : " %12llu %12llu",
                    static_cast<unsigned long long>(network.out), static_cast<unsigned long long>(network.in));
    }
    char limit[96] = "";
    if (roofline_) roofline_columns(spec, algorithm, shown_bytes, seconds, rate, limit, sizeof limit);
    if (options_.csv) {
      std::printf("%s,%s,%zu,%zu,%s,%s,%d,%.2f,%.4f,%.4f,%s%s%s\n", std::string(chorus::to_string(spec.op)).c_str(),
                  algorithm.c_str(), shown_bytes, shape.count, std::string(chorus::to_string(options_.dtype)).c_str(),
                  spec.reduces ? std::string(chorus::to_string(options_.redop)).c_str() : "-", options_.root,
                  seconds * 1e6, algbw, busbw, wrong_text.c_str(), stats, limit);
    } else {
      std::printf("  %12zu %12zu %-20s %10.2f %9.3f %9.3f %8s%s%s\n", shown_bytes, shape.count, algorithm.c_str(),
                  seconds * 1e6, algbw, busbw, wrong_text.c_str(), stats, limit);
    }
    std::fflush(stdout);
  }

  // --roofline: the row's limit for the algorithm that ran, the least any
  // modelled algorithm of the op needs, and how much of the limit the row
  // reached (limit / time; "-" where the model has no figure).
  void roofline_columns(const CollectiveBench& spec, const std::string& algorithm, size_t bytes, double seconds,
                        const std::optional<CopyRate>& rate, char* text, size_t size) const {
    const auto work = rate ? memory_work(spec.op, algorithm, bytes, comm_.size()) : std::nullopt;
    const auto least = rate ? op_limit_seconds(spec.op, bytes, comm_.size(), *rate) : std::nullopt;
    const double limit = work ? limit_seconds(*work, *rate) : 0;
    char own[24] = "-", any[24] = "-", percent[24] = "-";
    if (work) std::snprintf(own, sizeof own, "%.2f", limit * 1e6);
    if (least) std::snprintf(any, sizeof any, "%.2f", *least * 1e6);
    if (work && seconds > 0) std::snprintf(percent, sizeof percent, "%.1f", 100 * limit / seconds);
    if (options_.csv) {
      std::snprintf(text, size, ",%s,%s,%s", own, any, percent);
    } else {
      std::snprintf(text, size, " %10s %8s", own, percent);
    }
  }

  chorus::Communicator& comm_;
  const Options& options_;
  const bool roofline_ = options_.roofline;
};

}  // namespace
}  // namespace bench

int main(int argc, char** argv) {
  bench::Options options;
  try {
    options = bench::parse_options(argc, argv);
  } catch (const bench::UsageError& e) {
    std::fprintf(stderr, "chorus-bench: %s\nRun 'chorus-bench --help' for the options.\n", e.what());
    return 2;
  }
  if (options.help) {
    std::fputs(bench::usage_text(), stdout);
    return 0;
  }
  try {
    auto comm = chorus::Communicator::init();
    if (options.root >= comm.size()) {
      if (comm.rank() == 0) {
        std::fprintf(stderr, "chorus-bench: --root %d is not a rank of this %d-rank job\n", options.root, comm.size());
      }
      return 2;
    }
    if (options.roofline) {
      // The machine's memory rate, for the header; each row measures again at its own size.
      const bench::CopyRate rate = bench::measure_copy_rate(comm);
      if (comm.rank() == 0) {
        std::printf("# roofline: memcpy of %zu MiB: %.2f GB/s per rank with all %d ranks copying at once (%.2f GB/s "
                    "together), %.2f GB/s one rank alone\n",
                    rate.buffer_bytes >> 20, rate.all_ranks / 1e9, comm.size(), rate.all_ranks * comm.size() / 1e9,
                    rate.one_rank / 1e9);
        std::printf("# limit: the copies the algorithm must make, at the copy rates measured at the row's size "
                    "(docs/benchmarking.md, \"Roofline\"); %%limit = limit / time\n");
      }
    }
    bench::Runner runner(comm, options);
    uint64_t wrong = 0;
    for (chorus::Collective op : options.ops) {
      const auto& spec = bench::bench_for(op);
      std::vector<std::string> algorithms = {options.algorithm};
      if (options.algorithm == "all") algorithms = bench::algorithms_that_apply(comm, op);
      for (const auto& algorithm : algorithms) wrong += runner.sweep(spec, algorithm);
    }
    comm.finalize();
    if (comm.rank() == 0 && options.check()) {
      std::printf("# chorus-bench: %s\n", wrong == 0 ? "all results correct" : "WRONG RESULTS");
    }
    // Every rank's own last line (a comment, as the header): tests require
    // one from each rank (tests/job_verdict.py), not only rank 0's summary.
    if (wrong == 0) std::printf("# chorus-bench: rank %d passed\n", comm.rank());
    return wrong == 0 ? 0 : 1;
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus-bench: %s\n", e.what());
    return 1;
  }
}
