// chorusrun: starts the ranks of a chorus job (see `chorusrun --help` and
// docs/launcher.md).
#include "options.hpp"
#include "rank_processes.hpp"

#include "bootstrap/departures.hpp"
#include "bootstrap/store.hpp"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <vector>

namespace {

std::string random_hex(size_t bytes) {
  std::vector<unsigned char> data(bytes);
  size_t done = 0;
  while (done < bytes) {
    ssize_t n = getrandom(data.data() + done, bytes - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("getrandom: ") + strerror(errno));
    done += static_cast<size_t>(n);
  }
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (unsigned char c : data) {
    text += digits[c >> 4];
    text += digits[c & 15];
  }
  return text;
}

bool is_this_host(const std::string& host) {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  return host.empty() || host == "localhost" || host == "127.0.0.1" || host == name;
}

long counter_value(const std::optional<chorus::bootstrap::Bytes>& value) {
  return value ? std::strtol(std::string(value->begin(), value->end()).c_str(), nullptr, 10) : 0;
}

// The departures the ranks (and chorusrun) recorded in the store, in order;
// malformed records are left out.
std::vector<chorus::bootstrap::Departure> recorded_departures(const chorus::bootstrap::StoreServer& store,
                                                              const std::string& job_id) {
  using chorus::bootstrap::Departures;
  std::vector<chorus::bootstrap::Departure> departures;
  const long count = counter_value(store.get(Departures::counter_key(job_id)));
  for (long number = 1; number <= count; ++number) {
    const auto record = store.get(Departures::record_key(job_id, number));
    if (auto departure = record ? chorus::bootstrap::decode_departure(*record) : std::nullopt) {
      departures.push_back(std::move(*departure));
    }
  }
  return departures;
}

// ", after rank 2 left the job (called finalize())": a rank that leaves early
// is the cause of the failures that follow, though it exits last
// (docs/errors.md).
std::string ranks_that_left(const chorus::bootstrap::StoreServer& store, const std::string& job_id) {
  std::string text;
  int listed = 0;
  for (const auto& departure : recorded_departures(store, job_id)) {
    if (departure.failed) continue;  // a rank that failed says so itself
    text += (listed++ == 0 ? ", after rank " : "; rank ") + std::to_string(departure.rank) + " left the job (" +
            departure.how + ")";
    if (listed == 4) break;
  }
  return text;
}

// StoreHooks::left_early: how a rank that exited with status 0 left the job.
std::string left_early(chorus::bootstrap::StoreServer& store, const std::string& job_id, int size, int rank,
                       const std::string& who) {
  using chorus::bootstrap::Departures;
  // Every rank passed finalize's store barrier: nobody needs anyone any more.
  const long finalized = counter_value(store.get(job_id + "/barrier/chorus/finalize/arrived"));
  if (finalized > 0 && finalized % size == 0) return {};
  if (!store.get(Departures::joined_key(job_id, rank))) return chorusrun::kNeverJoined;
  for (const auto& departure : recorded_departures(store, job_id)) {
    if (departure.rank != rank) continue;
    if (departure.failed) return {};  // it failed and said why; what made it fail is named by its own rank
    return "left the job (" + departure.how + ") and exited with status 0 while the others still ran";
  }
  // It announced nothing (exit() or _exit() mid-job): record its departure,
  // so every rank whose call needs it fails naming it within about a second.
  const std::string where = who.substr(who.find('('));
  chorus::bootstrap::Departure departure;
  departure.rank = rank;
  departure.failed = true;
  departure.ended_unannounced = true;
  departure.how = "exited with status 0 without finalize() " + where + ", while the others still ran";
  const int64_t number = store.add(Departures::counter_key(job_id), 1);
  store.set(Departures::record_key(job_id, number), chorus::bootstrap::encode(departure));
  return "exited with status 0 without finalize(): it called exit() or _exit(), or returned from main without "
         "destroying its Communicator, while the others still ran";
}

std::optional<std::pair<int, std::string>> left_without_finalize(const chorus::bootstrap::StoreServer& store,
                                                                const std::string& job_id) {
  for (const auto& departure : recorded_departures(store, job_id)) {
    if (departure.failed || departure.how == chorus::bootstrap::kFinalizeDeparture) continue;
    return std::make_pair(departure.rank, departure.describe());
  }
  return std::nullopt;
}

bool anyone_joined(const chorus::bootstrap::StoreServer& store, const std::string& job_id, int size) {
  for (int rank = 0; rank < size; ++rank) {
    if (store.get(chorus::bootstrap::Departures::joined_key(job_id, rank))) return true;
  }
  return false;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "chorusrun: %s\nRun 'chorusrun --help' for the options.\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace chorusrun;
  Options options;
  try {
    options = parse_options(argc, argv);
    if (options.help) {
      std::fputs(usage_text(), stdout);
      return 0;
    }
    if (options.version) {
      std::printf("chorusrun (chorus) %s\n", CHORUS_VERSION);
      return 0;
    }
  } catch (const UsageError& e) {
    return usage_error(e.what());
  }

  std::vector<RankPlacement> placement = place_ranks(options);
  bool remote = false;
  for (auto& p : placement) {
    if (is_this_host(p.host)) {
      p.host.clear();
    } else {
      remote = true;
    }
  }
  try {
    // Local ranks exec the program directly: check it now, once, with a clear message.
    if (!remote || std::any_of(placement.begin(), placement.end(), [](auto& p) { return p.host.empty(); })) {
      options.program[0] = resolve_program(options.program[0]);
    }
    if (remote && options.store_address.empty()) {
      throw UsageError("ranks on other hosts need --store-addr: the address they can reach this host at");
    }
  } catch (const UsageError& e) {
    return usage_error(e.what());
  }

  try {
    block_handled_signals();  // before the store's thread exists
    const std::string secret = random_hex(16);
    const std::string job_id = "chorusrun-" + std::to_string(getpid()) + "-" + random_hex(4);
    // Single-host jobs keep the store on loopback; remote ranks need it reachable.
    chorus::bootstrap::StoreServer store(remote ? "0.0.0.0" : "127.0.0.1", 0, secret);
    JobEnvironment environment;
    std::string store_host = options.store_address.empty() ? "127.0.0.1" : options.store_address;
    environment.store_address = store_host + ":" + std::to_string(store.port());
    auto& vars = environment.variables;
    vars.push_back("CHORUS_STORE_ADDR=" + environment.store_address);
    vars.push_back("CHORUS_JOB_SECRET=" + secret);
    vars.push_back("CHORUS_JOB_ID=" + job_id);
    if (!options.transport.empty()) vars.push_back("CHORUS_TRANSPORT=" + options.transport);
    if (!options.ofi_provider.empty()) vars.push_back("CHORUS_OFI_PROVIDER=" + options.ofi_provider);
    if (options.timeout_seconds > 0) {
      char text[64];
      std::snprintf(text, sizeof text, "%g", options.timeout_seconds);
      vars.push_back(std::string("CHORUS_TIMEOUT=") + text);
    }
    if (!options.bind.empty()) vars.push_back("CHORUS_BIND=" + options.bind);
    if (options.report_bindings) vars.push_back("CHORUS_REPORT_BINDINGS=1");
    // libfabric's tcp provider would otherwise pick the first interface (eth0).
    if (!remote && std::getenv("FI_TCP_IFACE") == nullptr) vars.push_back("FI_TCP_IFACE=lo");
    // libfabric loads PSM (infinipath), whose handlers turn SIGSEGV, SIGINT,
    // ... into exit(1): the rank's real signal and status would be lost.
    // mpirun sets the same.
    if (std::getenv("IPATH_NO_BACKTRACE") == nullptr) vars.push_back("IPATH_NO_BACKTRACE=1");
    // -x comes last: it overrides what chorusrun sets itself.
    for (const std::string& exported : options.exports) {
      if (exported.find('=') != std::string::npos) {
        vars.push_back(exported);
      } else if (const char* value = std::getenv(exported.c_str())) {
        vars.push_back(exported + "=" + value);
      }
    }
    if (options.verbose) {
      std::fprintf(stderr, "chorusrun: %d ranks, store at %s, job %s\n", options.ranks,
                   environment.store_address.c_str(), job_id.c_str());
    }
    StoreHooks hooks;
    hooks.publish_failure = [&store](int rank, const std::string& failure) {
      // The rank first: a reader that sees chorus/failed finds it too.
      const std::string rank_text = std::to_string(rank);
      store.set("chorus/failed_rank", chorus::bootstrap::Bytes(rank_text.begin(), rank_text.end()));
      store.set("chorus/failed", chorus::bootstrap::Bytes(failure.begin(), failure.end()));
    };
    hooks.context = [&store, &job_id] { return ranks_that_left(store, job_id); };
    hooks.left_early = [&store, &job_id, &options](int rank, const std::string& who) {
      return left_early(store, job_id, options.ranks, rank, who);
    };
    hooks.left_without_finalize = [&store, &job_id] { return left_without_finalize(store, job_id); };
    hooks.anyone_joined = [&store, &job_id, &options] { return anyone_joined(store, job_id, options.ranks); };
    Job job(options, placement, environment, std::move(hooks));
    return job.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chorusrun: %s\n", e.what());
    return 1;
  }
}
