// chorus-verbs-memory: what a rank keeps in memory in the verbs RC mesh and
// in the UD scalable mode (docs/transport-ud.md, "Memory"), measured at
// several job sizes and extended by the measured model to large ones.
//
// For each mode and job size N it builds the N ranks' transports in this
// process on one verbs device, connects them to each other (QPs to RTS,
// address handles), and reads each transport's own account (MemoryUse) and
// the process' resident memory. Per-rank state must not depend on N except
// through the per-peer term; the program checks that, and that UD keeps at
// most --ud-limit bytes per peer, and exits 1 with FAILED when either fails.
#include "common/config.hpp"
#include "common/error.hpp"
#include "transports/verbs/verbs_transport.hpp"

#include <algorithm>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using chorus::transport::MemoryUse;
using chorus::transport::Transport;

constexpr const char* kUsage = R"(Usage: chorus-verbs-memory [options]

Builds the transports of an N-rank job in this process on one verbs device
(CHORUS_IB_DEVICE, or the first active port), connects them, and prints what
each rank keeps in memory in the RC mesh (CHORUS_VERBS_MODE=rc) and the UD
scalable mode (ud); then extends the measured per-peer and shared figures to
larger jobs. Every other CHORUS_* variable applies as in a job.

Options:
  --ranks LIST     job sizes to build and measure (default 2,4,8,16,32)
  --model LIST     job sizes to extend the measurement to (default 1024,4096,16384)
  --modes LIST     rc, ud or both (default rc,ud)
  --ud-limit N     most bytes per peer UD mode may keep; above it the run
                   fails (default 256)
  -h, --help       this text

Columns: per-peer and shared bytes are the transport's own account
(chorus' allocations and the provider's heap for QPs and address handles);
RSS/rank is the process' resident memory growth divided by N, which also
sees the kernel queue rings mapped into the process. UD's total includes
its RC set (the QPs made for rendezvous reads) at its bound, CHORUS_UD_RC_MAX.
In the lab (docs/lab.md): tests/lab/run.sh -- build/bench/chorus-verbs-memory
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<int> parse_list(const std::string& option, const std::string& text, int min, int max) {
  std::vector<int> values;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    auto value = chorus::config::parse_int(std::string_view(text).substr(start, end - start), min, max);
    if (!value) {
      throw UsageError(chorus::concat(option, " \"", text, "\": expected a comma-separated list of integers from ", min,
                                      " to ", max));
    }
    values.push_back(static_cast<int>(*value));
    start = end + 1;
  }
  return values;
}

struct Options {
  std::vector<int> ranks{2, 4, 8, 16, 32};
  std::vector<int> model{1024, 4096, 16384};
  std::vector<std::string> modes{"rc", "ud"};
  int ud_limit = 256;
  bool help = false;
};

Options parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      continue;
    }
    if (i + 1 >= argc) throw UsageError(chorus::concat(arg, ": unknown option or missing value (see --help)"));
    const std::string value = argv[++i];
    if (arg == "--ranks") {
      options.ranks = parse_list(arg, value, 1, 1024);
    } else if (arg == "--model") {
      options.model = parse_list(arg, value, 1, 1 << 24);
    } else if (arg == "--ud-limit") {
      options.ud_limit = parse_list(arg, value, 1, 1 << 20).at(0);
    } else if (arg == "--modes") {
      options.modes.clear();
      for (const char* mode : {"rc", "ud"}) {
        if (("," + value + ",").find(chorus::concat(",", mode, ",")) != std::string::npos) options.modes.emplace_back(mode);
      }
      if (options.modes.empty() || value.size() > 5) throw UsageError("--modes \"" + value + "\": expected rc, ud or rc,ud");
    } else {
      throw UsageError(chorus::concat(arg, ": unknown option (see --help)"));
    }
  }
  return options;
}

size_t resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // kB
  }
  return 0;
}

struct Measurement {
  std::string mode;
  int ranks = 0;
  MemoryUse use;        // rank 0's account
  size_t rss_per_rank = 0;
  bool uniform = true;  // every rank reported the same per-peer figure
};

Measurement measure_here(const std::string& mode, int ranks) {
  chorus::config::Settings settings = chorus::config::Settings::from_env();
  chorus::transport::VerbsOptions options;
  options.settings = chorus::transport::verbs::Settings::from_env();
  options.settings.mode = mode;
  options.max_eager_bytes = settings.eager_limit;
  options.timeout = settings.timeout;

  const size_t rss_before = resident_bytes();
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<chorus::transport::Blob> blobs;
  for (int r = 0; r < ranks; ++r) {
    transports.push_back(mode == "ud" ? chorus::transport::make_ud_transport(r, ranks, options)
                                         : chorus::transport::make_rc_mesh_transport(r, ranks, options));
    blobs.push_back(transports.back()->address());
  }
  for (auto& transport : transports) transport->connect(blobs);
  const size_t rss_after = resident_bytes();

  Measurement m;
  m.mode = mode;
  m.ranks = ranks;
  m.use = transports.front()->memory_use();
  m.rss_per_rank = rss_after > rss_before ? (rss_after - rss_before) / static_cast<size_t>(ranks) : 0;
  for (auto& transport : transports) {
    // Address handles are measured from the heap, which may round a few bytes.
    const size_t other = transport->memory_use().per_peer;
    if (other + 16 < m.use.per_peer || other > m.use.per_peer + 16) m.uniform = false;
  }
  return m;
}

// What a child sends back through its pipe.
struct Report {
  size_t per_peer, shared, on_demand, on_demand_bound, rss_per_rank;
  bool uniform;
  char detail[400];
  char error[600];  // non-empty: the measurement failed
};

// Each job size in a child process of its own: the RSS growth is then this
// job's alone (freed memory of an earlier size is not reused), and every
// measurement opens the device afresh.
Measurement measure(const std::string& mode, int ranks) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(chorus::concat("pipe: ", std::strerror(errno)));
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(chorus::concat("fork: ", std::strerror(errno)));
  if (child == 0) {
    close(fds[0]);
    Report report{};
    try {
      const Measurement m = measure_here(mode, ranks);
      report = Report{m.use.per_peer, m.use.shared, m.use.on_demand, m.use.on_demand_bound, m.rss_per_rank, m.uniform,
                      {}, {}};
      std::snprintf(report.detail, sizeof report.detail, "%s", m.use.detail.c_str());
    } catch (const std::exception& e) {
      std::snprintf(report.error, sizeof report.error, "%s", e.what());
    }
    const bool written = write(fds[1], &report, sizeof report) == static_cast<ssize_t>(sizeof report);
    _exit(written ? 0 : 1);
  }
  close(fds[1]);
  Report report{};
  size_t got = 0;
  while (got < sizeof report) {
    const ssize_t n = read(fds[0], reinterpret_cast<char*>(&report) + got, sizeof report - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (got != sizeof report) {
    throw std::runtime_error(chorus::concat("the measurement of ", ranks, " ", mode, " ranks died (wait status ", status,
                                            ")"));
  }
  if (report.error[0] != '\0') throw std::runtime_error(report.error);
  Measurement m;
  m.mode = mode;
  m.ranks = ranks;
  m.use = MemoryUse{report.per_peer, report.shared, report.on_demand, report.on_demand_bound, report.detail};
  m.rss_per_rank = report.rss_per_rank;
  m.uniform = report.uniform;
  return m;
}

size_t total_per_rank(const MemoryUse& use, double ranks) {
  return use.shared + static_cast<size_t>(ranks * static_cast<double>(use.per_peer)) + use.on_demand_bound;
}

std::string human(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "chorus-verbs-memory: %s\n", e.what());
    return 2;
  }
  if (options.help) {
    std::fputs(kUsage, stdout);
    return 0;
  }

  std::vector<Measurement> measured;
  try {
    for (const std::string& mode : options.modes) {
      for (int ranks : options.ranks) {
        std::fprintf(stderr, "chorus-verbs-memory: building %d %s transports...\n", ranks, mode.c_str());
        measured.push_back(measure(mode, ranks));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorus-verbs-memory: FAILED: %s\n", e.what());
    return 1;
  }

  std::printf("# chorus-verbs-memory: memory per rank, measured (the N ranks' transports built and connected in one process)\n");
  std::printf("%-5s %6s %12s %12s %12s %12s %12s\n", "mode", "ranks", "per-peer B", "shared", "RC set max", "total/rank",
              "RSS/rank");
  for (const Measurement& m : measured) {
    std::printf("%-5s %6d %12zu %12s %12s %12s %12s\n", m.mode.c_str(), m.ranks, m.use.per_peer,
                human(static_cast<double>(m.use.shared)).c_str(), human(static_cast<double>(m.use.on_demand_bound)).c_str(),
                human(static_cast<double>(total_per_rank(m.use, m.ranks))).c_str(),
                human(static_cast<double>(m.rss_per_rank)).c_str());
  }
  for (const Measurement& m : measured) {
    if (m.ranks == measured.back().ranks || &m == &measured.front()) {
      std::printf("# %s per peer at %d ranks: %s\n", m.mode.c_str(), m.ranks, m.use.detail.c_str());
    }
  }

  // The model: shared + ranks x per-peer (+ the RC set's bound), with the
  // figures of the largest measured job of each mode.
  const Measurement* rc = nullptr;
  const Measurement* ud = nullptr;
  for (const Measurement& m : measured) (m.mode == "rc" ? rc : ud) = &m;
  std::vector<int> sizes = options.ranks;
  sizes.insert(sizes.end(), options.model.begin(), options.model.end());
  std::printf("\n# model: total/rank = shared + ranks x per-peer (+ RC set bound), from the largest measured job\n");
  std::printf("%6s %14s %14s %14s %14s %10s\n", "ranks", "RC per-peer", "RC total/rank", "UD per-peer", "UD total/rank",
              "RC / UD");
  for (int ranks : sizes) {
    const double rc_total = rc ? static_cast<double>(total_per_rank(rc->use, ranks)) : 0;
    const double ud_total = ud ? static_cast<double>(total_per_rank(ud->use, ranks)) : 0;
    std::printf("%6d %14s %14s %14s %14s %10s\n", ranks, rc ? human(static_cast<double>(rc->use.per_peer)).c_str() : "-",
                rc ? human(rc_total).c_str() : "-", ud ? human(static_cast<double>(ud->use.per_peer)).c_str() : "-",
                ud ? human(ud_total).c_str() : "-",
                rc && ud ? chorus::concat(static_cast<long>(rc_total / ud_total + 0.5), "x").c_str() : "-");
  }

  int failures = 0;
  for (const Measurement& m : measured) {
    const Measurement& first = *std::find_if(measured.begin(), measured.end(),
                                             [&](const Measurement& x) { return x.mode == m.mode; });
    const auto drift = static_cast<long>(m.use.per_peer) - static_cast<long>(first.use.per_peer);
    if (!m.uniform || drift > 16 || drift < -16) {
      std::printf("FAILED: %s at %d ranks keeps %zu bytes per peer, %zu at %d ranks: the model does not hold\n",
                  m.mode.c_str(), m.ranks, m.use.per_peer, first.use.per_peer, first.ranks);
      ++failures;
    }
    if (m.mode == "ud" && m.use.per_peer > static_cast<size_t>(options.ud_limit)) {
      std::printf("FAILED: UD mode keeps %zu bytes per peer at %d ranks, more than --ud-limit %d\n", m.use.per_peer,
                  m.ranks, options.ud_limit);
      ++failures;
    }
  }
  if (failures != 0) return 1;
  std::printf("chorus-verbs-memory: OK: per-peer state is the same at every measured size%s\n",
              ud ? chorus::concat("; UD keeps ", ud->use.per_peer, " B per peer (limit ", options.ud_limit, ")").c_str()
                 : "");
  return 0;
}
