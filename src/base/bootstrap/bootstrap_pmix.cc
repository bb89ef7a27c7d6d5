// Bootstrap through PMIx (docs/bootstrap.md, "Under a resource manager:
// PMIx"): all_gather is PMIx_Put + PMIx_Commit + a fence that collects the
// data + PMIx_Get per rank; barrier is a fence without data; finalize's
// question "has any rank operations outstanding" is one collecting fence.
// Rank 0 still serves a TCP store for what PMIx does not carry (departures
// and the call ledger, read by a rank whose wait has stalled); its address
// and the job secret travel through PMIx (no fence of their own), and a rank
// reads them and connects only when it first needs the store, so a healthy
// job opens no connection to rank 0.
#include "bootstrap/departures.hpp"
#include "bootstrap/pmix_client.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "common/cpu_time.hpp"
#include "common/log.hpp"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <thread>

namespace chorus::bootstrap {

namespace {

// The PMIx key of rank 0's store record: "host:port\nsecret".
constexpr const char* kStoreKey = "chorus.store";

// An address of this host that ranks on other hosts can reach: the first
// IPv4 address of an interface that is up and not loopback. CHORUS_STORE_ADDR
// overrides it (several networks, only one of them shared by the hosts).
std::string address_for_other_hosts() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) fail(Status::bootstrap, "getifaddrs failed: ", errno_string(errno));
  std::string found;
  for (ifaddrs* entry = list; entry != nullptr && found.empty(); entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
    if ((entry->ifa_flags & IFF_UP) == 0 || (entry->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr, text, sizeof text)) {
      found = text;
    }
  }
  freeifaddrs(list);
  if (found.empty()) {
    fail(Status::config, "rank 0 has no IPv4 address other than loopback for the ranks on other hosts to reach its "
                         "store; set CHORUS_STORE_ADDR=host:port to one they can reach");
  }
  return found;
}

// The local address the kernel would use toward `host` (a UDP socket's
// connect sends nothing); empty if there is no route.
std::string local_address_toward(const std::string& host) {
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(9);
  if (inet_pton(AF_INET, host.c_str(), &peer.sin_addr) != 1) return {};
  net::Fd probe(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!probe || ::connect(probe.get(), reinterpret_cast<const sockaddr*>(&peer), sizeof peer) != 0) return {};
  sockaddr_in local{};
  socklen_t length = sizeof local;
  if (getsockname(probe.get(), reinterpret_cast<sockaddr*>(&local), &length) != 0) return {};
  char text[INET_ADDRSTRLEN] = {};
  return inet_ntop(AF_INET, &local.sin_addr, text, sizeof text) != nullptr ? std::string(text) : std::string();
}

}  // namespace

void Bootstrap::open_pmix_store() {
  std::string host;
  uint16_t port = 0;
  if (job_.rank == 0) {
    // CHORUS_STORE_ADDR if given; loopback when the whole job is on this host.
    std::string bind_host = job_.store_host;
    if (bind_host.empty()) bind_host = job_.local_size == job_.size ? "127.0.0.1" : "0.0.0.0";
    try {
      server_ = std::make_unique<StoreServer>(bind_host, job_.store_port, job_.secret);
    } catch (const Error& e) {
      throw Error(e.status(), concat("rank 0 cannot serve the bootstrap store (PMIx job ", job_.job_id, "): ", e.what()));
    }
    port = server_->port();
    host = bind_host == "0.0.0.0" ? "127.0.0.1" : bind_host;
    const std::string published = bind_host == "0.0.0.0" ? address_for_other_hosts() : bind_host;
    if (job_.local_size < job_.size) address_toward_store_ = published;
    address_toward_store_known_ = true;
    const std::string record = concat(net::format_address(published, port), "\n", job_.secret);
    pmix_->put(kStoreKey, Bytes(record.begin(), record.end()));
    // Committed now, without a fence of its own: the others read it when
    // they first need the store (PMIx_Get asks rank 0's server for it), and
    // it travels with the first collecting fence to every node's server.
    pmix_->commit();
  }
  // Connected on first use (lazy_store.cc): by a rank that leaves after an
  // error, or whose wait has stalled; rank 0's process serves it.
  std::unique_ptr<LazyStore> lazy;
  if (job_.rank == 0) {
    lazy = lazy_store_client(host, port, job_.secret, timeout_, job_.rank, 0);
  } else {
    // A failure path must not wait long for a rank 0 that died before it published.
    const auto within = std::min<std::chrono::milliseconds>(timeout_, std::chrono::seconds(5));
    lazy = lazy_store_client([this, within] { return pmix_store_location(within); }, timeout_, job_.rank, 0);
  }
  lazy_ = lazy.get();
  client_ = std::move(lazy);
  departures_ = std::make_unique<Departures>(*client_, job_.job_id);
  client_->set_failure_check([this] { return peer_failure(); });
}

StoreLocation Bootstrap::pmix_store_location(std::chrono::milliseconds within) const {
  // Before the first collecting fence the record may not be there yet: rank
  // 0 commits it as it starts, but it may start later than this rank, and a
  // server may answer NOT-FOUND rather than wait for it. So ask again, more
  // slowly each time, until `within` has passed.
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + within;
  auto pause = std::chrono::milliseconds(5);
  // Each try waits only for what is left of `within` (PMIx counts whole seconds).
  auto left = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  std::optional<Bytes> record;
  while (!(record = pmix_->get_if_there(0, kStoreKey, left()))) {
    if (Clock::now() + pause > deadline) {
      fail(Status::bootstrap, "PMIx_Get(\"", kStoreKey,
           "\" of rank 0): rank 0 has not published its store's address within ", within.count(),
           " ms (has it started?)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
  const std::string text(record->begin(), record->end());
  const size_t newline = text.find('\n');
  const auto address = net::parse_host_port(text.substr(0, newline));
  if (newline == std::string::npos || !address) {
    fail(Status::bootstrap, "PMIx_Get(\"", kStoreKey, "\" of rank 0): the value is no \"host:port\\nsecret\" record");
  }
  return StoreLocation{address->host, address->port, text.substr(newline + 1)};
}

const std::string& Bootstrap::address_toward_store() {
  if (!address_toward_store_known_ && pmix_ && job_.local_size < job_.size) {
    address_toward_store_ = local_address_toward(pmix_store_location(timeout_).host);
  }
  address_toward_store_known_ = true;
  return address_toward_store_;
}

std::optional<std::vector<std::string>> Bootstrap::pmix_node_of_rank() const {
  if (!pmix_) return std::nullopt;
  std::string why;
  std::optional<std::vector<std::string>> nodes = pmix_->node_of_rank(&why);
  if (!nodes) log::debug("rank ", job_.rank, ": the host layout comes from a gather: ", why);
  return nodes;
}

void Bootstrap::wait_fence(const std::shared_ptr<PmixFence>& fence, const std::string& what,
                           const std::function<void()>& progress) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + timeout_;
  const auto interval = startup_report_interval(timeout_);
  auto next_report = start + interval;
  auto next_failure_check = start + std::chrono::seconds(1);
  // With a transport to drive, the pause between its polls grows to 5 ms;
  // without one the wait sleeps until the fence ends or a duty below is due.
  auto pause = std::chrono::microseconds(50);
  while (!fence->done.load()) {
    if (progress) progress();
    const auto now = Clock::now();
    if (fence->done.load()) break;  // `progress` may have taken a while
    if (now >= deadline) {
      throw Error(Status::timeout, concat(what, ": the PMIx fence did not complete within ", timeout_.count(),
                                          " ms (CHORUS_TIMEOUT): some rank of the ", job_.size,
                                          " has not reached it"));
    }
    if (now >= next_failure_check) {
      next_failure_check = now + std::chrono::seconds(1);
      // A job that took long to meet before (start-up, oversubscription) gets as long again, twice.
      const bool may_open = now - start >= std::max<Clock::duration>(kFenceOpensStoreAfter, 2 * slowest_fence_);
      if (may_open && !store_open()) {
        log::debug("rank ", job_.rank, ": ", what, ": the fence has waited ",
                   std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count(),
                   " ms: reading departures from the store");
      }
      if (std::optional<Error> failure = peer_failure(may_open)) {
        throw Error(failure->status(), concat(what, ": ", failure->what()), failure->peer());
      }
    }
    if (now >= next_report) {
      next_report = now + interval;
      log::warn(what, ": still waiting for every rank of ", job_.size, " to reach the PMIx fence (",
                std::chrono::duration_cast<std::chrono::seconds>(now - start).count(), " s so far; CHORUS_TIMEOUT is ",
                static_cast<double>(timeout_.count()) / 1000, " s)");
    }
    if (progress) {
      fence->wait_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(5));
    } else {
      fence->wait_for(std::min({next_failure_check, next_report, deadline}) - Clock::now());
    }
  }
  slowest_fence_ = std::max(slowest_fence_, Clock::now() - start);
  if (std::optional<Error> error = PmixClient::fence_error(*fence, what)) {
    // A fence fails when a participant is gone: say who, if anyone knows.
    if (std::optional<Error> failure = peer_failure(/*may_open_store=*/true)) {
      throw Error(failure->status(), concat(error->what(), "; ", failure->what()), failure->peer());
    }
    throw *error;
  }
}

std::vector<Bytes> Bootstrap::pmix_all_gather(const std::string& prefix, const Bytes& blob) {
  return pmix_exchange(prefix, blob, concat("all_gather \"", prefix, "\""), {});
}

bool Bootstrap::pmix_any_rank(const std::string& name, bool mine, const std::function<void()>& progress) {
  const Bytes flag{static_cast<uint8_t>(mine ? 1 : 0)};
  const std::vector<Bytes> flags =
      pmix_exchange(name, flag, concat("\"", name, "\" (has any rank operations outstanding)"), progress);
  return std::any_of(flags.begin(), flags.end(), [](const Bytes& value) { return !value.empty() && value[0] != 0; });
}

std::vector<Bytes> Bootstrap::pmix_exchange(const std::string& name, const Bytes& blob, const std::string& what,
                                            const std::function<void()>& progress) {
  // Each round of a name gets its own key: PMIx keeps every value until
  // PMIx_Finalize, and a rank must never read the previous round's.
  const int round = pmix_rounds_[name]++;
  const std::string key = round == 0 ? concat("chorus.", name) : concat("chorus.", name, "#", round);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const double cpu_start = process_cpu_ms();
  pmix_->put(key, blob);
  pmix_->commit();
  wait_fence(pmix_->start_fence(true), what, progress);
  const auto fenced = Clock::now();
  const double cpu_fenced = process_cpu_ms();
  std::vector<Bytes> blobs = pmix_->get_all(key, timeout_);
  blobs[static_cast<size_t>(job_.rank)] = blob;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  log::debug("rank ", job_.rank, ": ", what, " through PMIx: put and fence ", ms(fenced - start), " ms (CPU ",
             cpu_fenced - cpu_start, " ms), ", job_.size - 1, " gets ", ms(Clock::now() - fenced), " ms (CPU ",
             process_cpu_ms() - cpu_fenced, " ms)");
  return blobs;
}

}  // namespace chorus::bootstrap
