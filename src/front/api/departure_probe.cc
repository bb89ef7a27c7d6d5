// How a rank learns that a peer has left the job (bootstrap/departures.hpp):
// the engine's failure probe, asked about once a second by a wait that makes
// no progress, and the announcement a leaving rank makes.
#include "api/communicator_impl.hpp"

#include "common/log.hpp"

namespace chorus {

std::optional<Error> Session::peer_failure(bool stalled) {
  if (!bootstrap) return std::nullopt;
  // First: a rank that found a disagreement may have left since, and its
  // departure or exit is the echo, not the cause.
  if (stalled) {
    if (std::optional<Error> disagreement = compare_calls()) return disagreement;
  }
  // A stalled wait probes ten times a second at first; the launcher and the
  // departures are asked about once a second, as before.
  const auto now = std::chrono::steady_clock::now();
  if (now < next_departure_probe) return std::nullopt;
  next_departure_probe = now + p2p::ProgressRules::kFailureProbeInterval - std::chrono::milliseconds(100);
  if (std::optional<Error> failure = bootstrap->launcher_failure()) return failure;
  // The departures before the /proc watch: a same-host peer that left after
  // an error, and then exited, said why (and which rank caused it) in its
  // record; its exit alone would name it as the rank that failed.
  if (bootstrap->store_answers()) {
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
