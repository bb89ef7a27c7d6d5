// Ranks that left the job. A rank whose world communicator is finalized or
// destroyed (normally, early, or after an error) announces it in the store;
// a peer whose wait has stalled asks which ranks left and fails within about
// a second naming the one it can no longer hear from, instead of waiting out
// CHORUS_TIMEOUT (docs/errors.md, "A rank leaves early").
#pragma once

#include "bootstrap/store.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace chorus::bootstrap {

// How a rank that called finalize() left: the one departure that is no fault.
inline constexpr const char* kFinalizeDeparture = "called finalize()";

struct Departure {
  int rank = -1;
  bool failed = false;  // left after an error; `how` is that error
  std::string how;      // e.g. "called finalize()"
  // Collective calls this rank made, per communicator context id.
  std::vector<std::pair<uint32_t, uint64_t>> calls;
  // Recorded by the launcher, which saw the process end without a word
  // (exit(0) mid-job, a return before init): counts as failed; `how` is
  // what the launcher saw, e.g. "exited with status 0 without finalize()".
  bool ended_unannounced = false;
  // Failed because another rank failed (its error named that peer: a closed
  // connection, that rank's own departure): the rank to name, so survivors
  // name the first rank that failed, not the one that left because of it.
  // -1: this rank's own error, or unknown.
  int cause = -1;

  uint64_t calls_on(uint32_t context) const;
  // "rank 2 left the job (called finalize())", "rank 2 left the job after an
  // error: ...", "rank 2 exited with status 0 without finalize() (...)".
  std::string describe() const;
};

// Text form in the store; decode() returns nullopt for a malformed record.
Bytes encode(const Departure& departure);
std::optional<Departure> decode_departure(std::span<const uint8_t> bytes);

// What a rank is waiting in, to match against departures.
// Set at the start of every call, so it only points into the caller's
// communicator, which outlives the call.
struct CurrentCall {
  uint32_t context = 0;
  uint64_t calls = 0;            // collective calls on `context`, this one included; 0: point-to-point
  std::span<const int> members;  // job ranks of the communicator
  int peer = -1;                 // point-to-point: the job rank waited on, or -1 for any source
  std::string_view what;         // "allreduce", "recv", ...
};

// The departure that keeps `call` (on rank `self`) from ever completing, as
// Error(Status::peer_failed) naming the rank that left; nullopt if none.
std::optional<Error> departure_blocking(const std::vector<Departure>& departures, const CurrentCall& call, int self);

// Announcements live under "<job id>/chorus/departures" (a counter) and
// ".../departure/<n>" (the records), so they are read in one request when
// nothing is new.
class Departures {
 public:
  Departures(StoreAccess& store, std::string job_id) : store_(store), job_id_(std::move(job_id)) {}
  void announce(const Departure& departure);
  // Reads the announcements made since the last refresh.
  const std::vector<Departure>& refresh();
  const std::vector<Departure>& known() const { return known_; }
  // The first departure after an error, if any.
  const Departure* first_failed() const;

  static std::string counter_key(const std::string& job_id);
  static std::string record_key(const std::string& job_id, int64_t number);
  // Set by each rank once it reached the store (Communicator::init): a
  // launcher tells a rank that left the job from one that never joined it.
  static std::string joined_key(const std::string& job_id, int rank);

 private:
  StoreAccess& store_;
  std::string job_id_;
  std::vector<Departure> known_;
};

}  // namespace chorus::bootstrap
