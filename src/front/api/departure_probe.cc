// How a rank learns that a peer has left the job (bootstrap/departures.hpp):
// the engine's failure probe, asked about once a second by a wait that makes
// no progress, and the announcement a leaving rank makes.
#include "api/communicator_impl.hpp"

#include "common/log.hpp"

namespace chorus {

namespace {

// How long a stalled wait must have received nothing before it opens the
// store connection under PMIx (at least; twice the slowest fence of the
// setup if that is longer): a wait that still receives is slow, not stuck.
constexpr auto kQuietBeforeStore = std::chrono::milliseconds(500);

}  // namespace

std::optional<Error> Session::peer_failure(bool stalled) {
  if (!bootstrap) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  // Under PMIx the store connection is opened only by a stalled wait that
  // has received nothing for a while: a healthy job never connects to rank
  // 0, even where a large message keeps a wait long (docs/bootstrap.md).
  const bool was_open = bootstrap->store_open();
  const bool may_use_store = was_open || (stalled && receiving_stopped(now));
  if (may_use_store && !was_open) {
    log::debug("rank ", job.rank, ": a wait has received nothing for ",
               std::chrono::duration_cast<std::chrono::milliseconds>(now - received_changed).count(),
               " ms: reading departures from the store");
  }
  // First: a rank that found a disagreement may have left since, and its
  // departure or exit is the echo, not the cause.
  if (stalled && may_use_store) {
    if (std::optional<Error> disagreement = compare_calls()) return disagreement;
  }
  // A stalled wait probes ten times a second at first; the launcher and the
  // departures are asked about once a second, as before (and at once when
  // this probe opened the store).
  if (now < next_departure_probe && (was_open || !may_use_store)) return std::nullopt;
  next_departure_probe = now + p2p::ProgressRules::kFailureProbeInterval - std::chrono::milliseconds(100);
  if (std::optional<Error> failure = bootstrap->launcher_failure()) return failure;
  // The departures before the /proc watch: a same-host peer that left after
  // an error, and then exited, said why (and which rank caused it) in its
  // record; its exit alone would name it as the rank that failed.
  if (bootstrap->store_answers() && may_use_store) {
    try {
      if (std::optional<Error> departed =
              bootstrap::departure_blocking(bootstrap->departures().refresh(), current_call, job.rank)) {
        return departed;
      }
    } catch (const Error&) {
      // The store is gone (rank 0 served it): the watch, the transport or the timeout will tell.
    }
  }
  if (local_liveness) {
    if (std::optional<Error> dead = local_liveness->dead_peer()) return dead;
  }
  return std::nullopt;
}

bool Session::receiving_stopped(std::chrono::steady_clock::time_point now) {
  if (!engine) return true;
  const p2p::Counters& counted = engine->counters();
  const uint64_t received =
      counted.eager_received + counted.rendezvous_received + counted.bytes_in_this_host + counted.bytes_in_other_hosts;
  if (received != received_at_probe || received_changed == std::chrono::steady_clock::time_point{}) {
    received_at_probe = received;
    received_changed = now;
  }
  // A job whose fences are slow (large, oversubscribed) is quiet longer between messages.
  const auto quiet = std::max<std::chrono::steady_clock::duration>(kQuietBeforeStore, 2 * bootstrap->slowest_fence());
  return now - received_changed >= quiet;
}

void Session::announce_departure(const std::string& how, bool failed, int cause) noexcept {
  if (!bootstrap || !bootstrap->store_answers()) return;
  try {
    bootstrap::Departure departure{job.rank, failed, how, {calls_made.begin(), calls_made.end()}};
    if (failed && cause != job.rank) departure.cause = cause;
    bootstrap->departures().announce(departure);
  } catch (const std::exception& e) {
    log::debug("rank ", job.rank, " could not announce that it leaves the job: ", e.what());
  }
}

}  // namespace chorus
