// gloo-bench: the Gloo side of bench/compare-openmpi's tcp paths. The sweep
// and CSV of chorus-bench --csv for allreduce (gloo::AllreduceRing),
// broadcast (gloo::BroadcastOneToAll) and barrier (gloo::BarrierAllToAll),
// float32 sum, over Gloo's own tcp transport on loopback. Started by
// chorusrun (rank and size from CHORUS_RANK/CHORUS_SIZE; it uses nothing
// else of chorus): the ranks meet through a gloo FileStore in a directory
// named after CHORUS_JOB_ID. Every element of every iteration is checked
// outside the timed region with --check; inputs keep float sums exact.
//
// Ending: no rank may close its Gloo connections while another still waits
// on one. Gloo's tcp device thread reads a peer's last message and then its
// EOF, and the waiting Buffer::waitRecv rethrows the pair's "Connection
// closed by peer" even when the message's completion is already there; so a
// Gloo barrier is not a safe last step (the rank that returns from it first
// exits, and a loaded peer then fails in the same barrier). The ranks end
// with a barrier through the FileStore instead (finish_job), and rank 0
// removes the store's directory only after every other rank has stopped
// reading it. Any exception is reported as "gloo-bench: rank R: <what>",
// status 1.
#include <gloo/allreduce_ring.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/broadcast_one_to_all.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Options {
  std::vector<std::string> ops{"allreduce"};
  size_t min_bytes = 4;
  size_t max_bytes = 1 << 20;
  double step_factor = 2;
  int iters = 20;
  int warmup = 5;
  bool check = false;
  bool csv = false;
  bool sync = false;
  std::string host = "127.0.0.1";
};

const char* kUsage =
    "Usage: chorusrun -n N gloo-bench [options]\n"
    "Gloo's allreduce (ring), broadcast (one to all) and barrier (all to all) over its tcp transport,\n"
    "float32 sum, rows in chorus-bench's format.\n"
    "  --op LIST          allreduce, broadcast, barrier (comma-separated; default allreduce)\n"
    "  --min-bytes B      smallest size (default 4; K/M/G suffixes)\n"
    "  --max-bytes B      largest size (default 1M)\n"
    "  --step-factor F    size multiplier between rows (default 2)\n"
    "  --iters N          timed iterations per size (default 20)\n"
    "  --warmup N         untimed iterations first (default 5)\n"
    "  --check            verify every element of every iteration (outside the timed region)\n"
    "  --sync             a barrier before each timed call\n"
    "  --csv              comma-separated rows, the columns of chorus-bench --csv\n"
    "  --host ADDR        the address Gloo's tcp device binds (default 127.0.0.1)\n"
    "  -h, --help         this text\n";

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "gloo-bench: %s\n%s", what.c_str(), kUsage);
  std::exit(2);
}

size_t parse_bytes(const std::string& option, const std::string& text) {
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  std::string unit = end != nullptr ? end : "";
  const size_t scale = unit.empty() ? 1 : unit == "K" ? 1024 : unit == "M" ? 1 << 20 : unit == "G" ? 1ull << 30 : 0;
  if (end == text.c_str() || scale == 0) usage_error(option + " \"" + text + "\": expected a size like 4, 64K, 1M");
  return static_cast<size_t>(value) * scale;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--op") {
      options.ops.clear();
      std::stringstream list(value());
      for (std::string op; std::getline(list, op, ',');) {
        if (op != "allreduce" && op != "broadcast" && op != "barrier") usage_error("--op: unknown collective \"" + op + "\"");
        options.ops.push_back(op);
      }
    } else if (arg == "--min-bytes") {
      options.min_bytes = parse_bytes(arg, value());
    } else if (arg == "--max-bytes") {
      options.max_bytes = parse_bytes(arg, value());
    } else if (arg == "--step-factor") {
      options.step_factor = std::atof(value().c_str());
      if (options.step_factor <= 1) usage_error("--step-factor must be above 1");
    } else if (arg == "--iters") {
      options.iters = std::atoi(value().c_str());
      if (options.iters < 1) usage_error("--iters must be at least 1");
    } else if (arg == "--warmup") {
      options.warmup = std::atoi(value().c_str());
    } else if (arg == "--check") {
      options.check = true;
    } else if (arg == "--csv") {
      options.csv = true;
    } else if (arg == "--sync") {
      options.sync = true;
    } else if (arg == "--host") {
      options.host = value();
    } else {
      usage_error("unknown option \"" + arg + "\"");
    }
  }
  if (options.min_bytes > options.max_bytes) usage_error("--min-bytes is larger than --max-bytes");
  return options;
}

int env_int(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr) {
    std::fprintf(stderr, "gloo-bench: %s is not set: start it with chorusrun\n", name);
    std::exit(2);
  }
  return std::atoi(text);
}

using Context = std::shared_ptr<gloo::Context>;

// The slowest rank's value (max) or the sum over ranks.
double reduce_double(const Context& context, double value, bool max) {
  std::vector<double*> pointers{&value};
  gloo::AllreduceRing<double> reduce(context, pointers, 1,
                                     max ? gloo::ReductionFunction<double>::max : gloo::ReductionFunction<double>::sum);
  reduce.run();
  return value;
}

// Inputs whose float sums are exact: rank r holds (r+1) * (i % 13 + 1).
float input(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 13 + 1)); }

// One size of one op: the slowest rank's mean time (s) and the wrong elements of this rank.
std::pair<double, double> run_row(const Context& context, const std::string& op, size_t count, const Options& options) {
  const int rank = context->rank;
  const int size = context->size;
  std::vector<float> data(std::max<size_t>(count, 1));
  std::vector<float*> pointers{data.data()};
  std::unique_ptr<gloo::Algorithm> algorithm;
  if (op == "allreduce") {
    algorithm = std::make_unique<gloo::AllreduceRing<float>>(context, pointers, count);
  } else if (op == "broadcast") {
    algorithm = std::make_unique<gloo::BroadcastOneToAll<float>>(context, pointers, count, 0);
  } else {
    algorithm = std::make_unique<gloo::BarrierAllToAll>(context);
  }
  gloo::BarrierAllToAll barrier(context);
  double busy = 0;
  double wrong = 0;
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
  for (int it = 0; it < options.warmup + options.iters; ++it) {
    if (options.check || it == 0) {
      for (size_t i = 0; i < count; ++i) data[i] = op == "broadcast" && rank != 0 ? 0.0f : input(rank, i);
    }
    if (options.sync) barrier.run();
    const auto start = std::chrono::steady_clock::now();
    algorithm->run();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (it >= options.warmup) busy += seconds;
    if (!options.check || op == "barrier") continue;
    for (size_t i = 0; i < count; ++i) {
      const float expected = op == "allreduce" ? ranks_sum * static_cast<float>(i % 13 + 1) : input(0, i);
      if (data[i] != expected) {
        if (wrong < 3) std::fprintf(stderr, "gloo-bench: rank %d: %s element %zu of %zu is %g, expected %g\n", rank,
                                    op.c_str(), i, count, data[i], expected);
        ++wrong;
      }
    }
  }
  return {reduce_double(context, busy / options.iters, true), reduce_double(context, wrong, false)};
}

// The store's waits: as long as the connections' (chorusrun --timeout 120 ends the job first).
constexpr std::chrono::seconds kTimeout{120};

// The job's end, after the last Gloo operation of every rank: a barrier
// through the store (each rank's "done" key), so that no rank closes its
// connections (by exiting) while another still waits in Gloo; then each
// rank but 0 says it has left the store ("left" key, its last access to the
// directory) and rank 0, once all have, removes the directory.
void finish_job(gloo::rendezvous::FileStore& store, const std::filesystem::path& store_dir, int rank, int size) {
  auto keys = [size](const std::string& name, int first) {
    std::vector<std::string> list;
    for (int r = first; r < size; ++r) list.push_back("gloo-bench/" + name + "/" + std::to_string(r));
    return list;
  };
  store.set(keys("done", 0)[rank], {'1'});
  store.wait(keys("done", 0), kTimeout);
  if (rank != 0) {
    store.set(keys("left", 0)[rank], {'1'});
    return;
  }
  store.wait(keys("left", 1), kTimeout);
  std::error_code ignored;
  std::filesystem::remove_all(store_dir, ignored);
}

// The FileStore's directory, named after the job.
std::filesystem::path store_path() {
  const char* job = std::getenv("CHORUS_JOB_ID");
  return std::filesystem::temp_directory_path() / (std::string("gloo-bench-") + (job != nullptr ? job : "job"));
}

int run(const Options& options, int rank, int size) {
  const std::filesystem::path store_dir = store_path();
  std::error_code ignored;
  std::filesystem::create_directories(store_dir, ignored);
  gloo::rendezvous::FileStore store(store_dir.string());
  gloo::transport::tcp::attr attr;
  attr.hostname = options.host;
  auto device = gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(kTimeout);
  context->connectFullMesh(store, device);

  double wrong_total = 0;
  for (const std::string& op : options.ops) {
    if (rank == 0 && options.csv) std::printf("op,algorithm,bytes,count,dtype,redop,root,time_us,algbw_GBs,busbw_GBs,wrong\n");
    size_t previous = SIZE_MAX;
    for (size_t bytes = options.min_bytes;;) {
      const size_t count = op == "barrier" ? 0 : bytes / sizeof(float);
      if (op == "barrier" || count != previous) {
        previous = count;
        const auto [seconds, wrong] = run_row(context, op, count, options);
        wrong_total += wrong;
        const size_t shown = op == "barrier" ? 0 : count * sizeof(float);
        const double algbw = seconds > 0 ? static_cast<double>(shown) / seconds / 1e9 : 0;
        const double busbw = algbw * (op == "allreduce" ? 2.0 * (size - 1) / size : 1.0);
        if (rank == 0) {
          std::printf(options.csv ? "%s,gloo,%zu,%zu,float32,%s,0,%.2f,%.4f,%.4f,%.0f\n"
                                  : "%-10s gloo %12zu B %12zu elements float32 %s root 0 %10.2f us %9.4f %9.4f GB/s "
                                    "wrong %.0f\n",
                      op.c_str(), shown, count, op == "allreduce" ? "sum" : "-", seconds * 1e6, algbw, busbw, wrong);
          std::fflush(stdout);
        }
      }
      if (op == "barrier" || bytes >= options.max_bytes) break;
      const size_t next = static_cast<size_t>(std::ceil(static_cast<double>(bytes) * options.step_factor));
      bytes = std::min(std::max(next, bytes + 1), options.max_bytes);
    }
  }
  // Not a Gloo barrier: see finish_job. The verdict is printed after it, so
  // "all results correct" means the whole job, its ending included, worked.
  finish_job(store, store_dir, rank, size);
  if (rank == 0 && options.check) {
    std::printf("# gloo-bench: %s\n", wrong_total == 0 ? "all results correct" : "WRONG RESULTS");
  }
  return wrong_total == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const int rank = env_int("CHORUS_RANK");
  const int size = env_int("CHORUS_SIZE");
  try {
    return run(options, rank, size);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "gloo-bench: rank %d: %s\n", rank, e.what());
    // The job has failed (chorusrun stops the other ranks): no store left behind in /tmp.
    std::error_code ignored;
    std::filesystem::remove_all(store_path(), ignored);
    return 1;
  }
}
