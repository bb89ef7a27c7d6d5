// core-hop: how long one cache line takes to move from one CPU to another.
//
// Two threads, pinned to CPUs A and B, bounce a counter in one cache line;
// a sample is the mean one-way hop over N round trips, and the result the
// best of K samples. bench/compare-openmpi runs it before and after every
// launch: in a virtual machine the host may place the two vCPUs on cores
// that share a cache (here about 33 ns a hop) or on cores that do not
// (160-200 ns), and it moves them while a benchmark runs. A small
// collective is a few such hops, so in the slow placement both libraries
// slow down, by different factors, and their ratio says little
// (docs/performance.md, "The host's placement of the two vCPUs").
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int cpu_a = 0;
  int cpu_b = 1;
  long round_trips = 20000;
  int samples = 5;
  bool number_only = false;
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: core-hop [--cpus A,B] [--round-trips N] [--samples K] [--ns]\n"
               "  The one-way time of a cache line between CPUs A and B (default 0,1):\n"
               "  two pinned threads bounce a counter N times (default 20000) per sample;\n"
               "  prints the best of K samples (default 5) and their median.\n"
               "  --ns   print only the best, in ns (for scripts: bench/compare-openmpi)\n"
               "  Exit status 1 if a CPU cannot be used, 2 for usage errors.\n");
}

bool parse_int(const char* text, long low, long& value) {
  char* end = nullptr;
  errno = 0;
  const long parsed = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || parsed < low) return false;
  value = parsed;
  return true;
}

int parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      return 0;
    }
    if (arg == "--ns") {
      options.number_only = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "core-hop: %s needs a value (--help)\n", arg.c_str());
      return 2;
    }
    const char* value = argv[++i];
    long number = 0;
    if (arg == "--cpus") {
      long a = 0, b = 0;
      const char* comma = std::strchr(value, ',');
      const std::string first = comma ? std::string(value, comma) : std::string();
      const bool valid = comma && parse_int(first.c_str(), 0, a) && parse_int(comma + 1, 0, b) && a != b &&
                         a < CPU_SETSIZE && b < CPU_SETSIZE;  // CPU_SET ignores larger numbers
      if (!valid) {
        std::fprintf(stderr, "core-hop: --cpus \"%s\": expected two different CPU numbers below %d, like 0,1\n",
                     value, CPU_SETSIZE);
        return 2;
      }
      options.cpu_a = static_cast<int>(a);
      options.cpu_b = static_cast<int>(b);
    } else if (arg == "--round-trips" && parse_int(value, 1, number)) {
      options.round_trips = number;
    } else if (arg == "--samples" && parse_int(value, 1, number) && number <= 1000) {
      options.samples = static_cast<int>(number);
    } else if (arg == "--round-trips" || arg == "--samples") {
      std::fprintf(stderr, "core-hop: %s \"%s\": expected a whole number >= 1%s\n", arg.c_str(), value,
                   arg == "--samples" ? " and <= 1000" : "");
      return 2;
    } else {
      std::fprintf(stderr, "core-hop: unknown option \"%s\" (--help)\n", arg.c_str());
      return 2;
    }
  }
  return -1;
}

// Pins the calling thread; the error names the CPU and the system's reason.
bool pin(int cpu, std::string& error) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int status = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (status == 0) return true;
  error = "cannot pin a thread to CPU " + std::to_string(cpu) + ": " + std::strerror(status) +
          " (is it online and allowed to this process? taskset -p $$ shows the allowed ones)";
  return false;
}

struct alignas(64) Line {
  std::atomic<long> value{0};
  std::atomic<bool> abandoned{false};  // the other side gave up (pin failed or too slow)
};

// Waits until `line` holds `expected`; false if the other side gave up or a
// second passed (the two threads do not run at once: the same CPU after all).
bool await(Line& line, long expected) {
  const auto limit = Clock::now() + std::chrono::seconds(1);
  for (unsigned spin = 1;; ++spin) {
    if (line.value.load(std::memory_order_acquire) == expected) return true;
    if (spin % 1024 == 0 && (line.abandoned.load(std::memory_order_relaxed) || Clock::now() > limit)) return false;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

// One side of the bounce: waits for each of its turns (first, first + 2,
// ...) and answers it; false if the other side gave up or stalled.
bool bounce(Line& line, long first, long round_trips) {
  for (long i = first; i < 2 * round_trips; i += 2) {
    if (!await(line, i)) return false;
    line.value.store(i + 1, std::memory_order_release);
  }
  return true;
}

// One sample: the mean one-way hop in ns, or a negative value with `error` set.
double sample(const Options& options, std::string& error) {
  Line line;
  std::string peer_error;
  std::thread peer([&] {
    if (!pin(options.cpu_b, peer_error) || !bounce(line, 1, options.round_trips)) line.abandoned = true;
  });
  bool ok = pin(options.cpu_a, error);
  const auto start = Clock::now();
  ok = ok && bounce(line, 0, options.round_trips) && await(line, 2 * options.round_trips);
  const auto end = Clock::now();
  if (!ok) line.abandoned = true;
  peer.join();
  if (!peer_error.empty()) error = peer_error;
  if (!ok && error.empty()) {
    error = "the threads on CPUs " + std::to_string(options.cpu_a) + " and " + std::to_string(options.cpu_b) +
            " did not run at the same time (no hop within a second)";
  }
  if (!ok) return -1;
  return std::chrono::duration<double, std::nano>(end - start).count() / (2.0 * options.round_trips);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (const int status = parse(argc, argv, options); status >= 0) {
    if (status == 2) usage(stderr);
    return status;
  }
  std::vector<double> hops;
  for (int k = 0; k < options.samples; ++k) {
    std::string error;
    const double hop = sample(options, error);
    if (hop < 0) {
      std::fprintf(stderr, "core-hop: %s\n", error.c_str());
      return 1;
    }
    hops.push_back(hop);
  }
  std::sort(hops.begin(), hops.end());
  const double median = hops[hops.size() / 2];
  if (options.number_only) {
    std::printf("%.1f\n", hops.front());
  } else {
    std::printf("core-hop: CPUs %d and %d: %.1f ns one way (best of %d samples of %ld round trips; median %.1f)\n",
                options.cpu_a, options.cpu_b, hops.front(), options.samples, options.round_trips, median);
  }
  return 0;
}
