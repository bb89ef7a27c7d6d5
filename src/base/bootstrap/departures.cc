#include "bootstrap/departures.hpp"

#include "common/config.hpp"

#include <algorithm>
#include <sstream>

namespace chorus::bootstrap {

uint64_t Departure::calls_on(uint32_t context) const {
  for (const auto& [id, count] : calls) {
    if (id == context) return count;
  }
  return 0;
}

std::string Departure::describe() const {
  if (ended_unannounced) return concat("rank ", rank, " ", how);
  if (failed) return concat("rank ", rank, " left the job after an error: ", how);
  return concat("rank ", rank, " left the job (", how, ")");
}

// "rank 2\nfailed 0\ncalls 0:5,3:1\nhow called finalize()" — `how` last: it
// may hold anything. "failed 2": ended_unannounced (failed too). A line
// "cause R" before `how` where Departure::cause is set.
Bytes encode(const Departure& departure) {
  const int failed = departure.ended_unannounced ? 2 : departure.failed ? 1 : 0;
  std::string text = concat("rank ", departure.rank, "\nfailed ", failed, "\ncalls ");
  for (size_t i = 0; i < departure.calls.size(); ++i) {
    text += concat(i == 0 ? "" : ",", departure.calls[i].first, ":", departure.calls[i].second);
  }
  if (departure.cause >= 0) text += concat("\ncause ", departure.cause);
  text += "\nhow " + departure.how.substr(0, 4000);
  return Bytes(text.begin(), text.end());
}

std::optional<Departure> decode_departure(std::span<const uint8_t> bytes) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string rank_line, failed_line, calls_line;
  if (!std::getline(in, rank_line) || !std::getline(in, failed_line) || !std::getline(in, calls_line)) return std::nullopt;
  if (rank_line.rfind("rank ", 0) != 0 || failed_line.rfind("failed ", 0) != 0 || calls_line.rfind("calls ", 0) != 0) {
    return std::nullopt;
  }
  Departure departure;
  auto rank = config::parse_int(rank_line.substr(5), 0, INT32_MAX);
  auto failed = config::parse_int(failed_line.substr(7), 0, 2);
  if (!rank || !failed) return std::nullopt;
  departure.rank = static_cast<int>(*rank);
  departure.failed = *failed >= 1;
  departure.ended_unannounced = *failed == 2;
  std::istringstream calls(calls_line.substr(6));
  for (std::string entry; std::getline(calls, entry, ',');) {
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) return std::nullopt;
    auto context = config::parse_int(entry.substr(0, colon), 0, UINT32_MAX);
    auto count = config::parse_int(entry.substr(colon + 1), 0, INT64_MAX);
    if (!context || !count) return std::nullopt;
    departure.calls.emplace_back(static_cast<uint32_t>(*context), static_cast<uint64_t>(*count));
  }
  std::string how((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (how.rfind("cause ", 0) == 0) {
    const size_t end = how.find('\n');
    if (end == std::string::npos) return std::nullopt;
    auto cause = config::parse_int(how.substr(6, end - 6), 0, INT32_MAX);
    if (!cause) return std::nullopt;
    departure.cause = static_cast<int>(*cause);
    how.erase(0, end + 1);
  }
  if (how.rfind("how ", 0) != 0) return std::nullopt;
  departure.how = how.substr(4);
  return departure;
}

std::optional<Error> departure_blocking(const std::vector<Departure>& departures, const CurrentCall& call, int self) {
  auto is_member = [&](int rank) { return std::find(call.members.begin(), call.members.end(), rank) != call.members.end(); };
  auto departed = [&](int rank) {
    return std::any_of(departures.begin(), departures.end(), [&](const Departure& d) { return d.rank == rank; });
  };
  for (const Departure& d : departures) {
    if (d.rank == self || !is_member(d.rank)) continue;
    const std::string left = d.describe();
    if (call.calls == 0) {  // point-to-point
      bool blocked = call.peer == d.rank;
      if (call.peer < 0) {
        blocked = std::all_of(call.members.begin(), call.members.end(), [&](int r) { return r == self || departed(r); });
      }
      if (blocked) return Error(Status::peer_failed, concat(left, "; this rank still waits in ", call.what), d.rank);
      continue;
    }
    // A rank that left normally took part in every call it counted; one that
    // failed did not finish the last one it counted.
    const uint64_t made = d.calls_on(call.context);
    if (d.failed ? made > call.calls : made >= call.calls) continue;
    // Named: the rank whose failure made it leave, where it said so.
    if (d.failed) return Error(Status::peer_failed, left, d.cause >= 0 && d.cause != self ? d.cause : d.rank);
    return Error(Status::peer_failed,
                 concat(left, " after ", made, " collective call", made == 1 ? "" : "s",
                        " on this communicator; this rank is in call ", call.calls, " (", call.what,
                        "), which rank ", d.rank, " never joins: every rank must make the same calls before it "
                        "finalizes"),
                 d.rank);
  }
  return std::nullopt;
}

std::string Departures::counter_key(const std::string& job_id) { return job_id + "/chorus/departures"; }
std::string Departures::record_key(const std::string& job_id, int64_t number) {
  return concat(job_id, "/chorus/departure/", number);
}
std::string Departures::joined_key(const std::string& job_id, int rank) { return concat(job_id, "/chorus/joined/", rank); }

void Departures::announce(const Departure& departure) {
  const int64_t number = store_.add(counter_key(job_id_), 1);
  store_.set(record_key(job_id_, number), encode(departure));
}

const std::vector<Departure>& Departures::refresh() {
  const int64_t count = store_.add(counter_key(job_id_), 0);
  for (auto next = static_cast<int64_t>(known_.size()) + 1; next <= count; ++next) {
    const std::string key = record_key(job_id_, next);
    if (!store_.check(key)) break;  // counted but not written yet: the next refresh reads it
    std::optional<Departure> departure = decode_departure(store_.get(key));
    if (!departure) departure = Departure{.rank = -1, .failed = false, .how = "malformed record", .calls = {}};
    known_.push_back(std::move(*departure));
  }
  return known_;
}

const Departure* Departures::first_failed() const {
  for (const Departure& d : known_) {
    if (d.failed) return &d;
  }
  return nullptr;
}

}  // namespace chorus::bootstrap
