// Ranks that disagree on a collective call, named through the store
// (docs/errors.md, "Misuse by the application"; issue 42, item 3).
//
// Every message and board slot of a collective carries the call's digest, so
// a rank that receives from a rank that made another call refuses it at once
// (communicator_calls.cc, board.cc). That leaves the calls in which the ranks
// that disagree exchange nothing (two ranks that both think they are the
// root wait for each other, or both only send) and the ranks that completed
// the call. Both are found here, at no cost on the call path beyond one
// ledger entry per call (CallLedger):
//  - a wait that has made no progress for a second (the failure probe,
//    Session::peer_failure) publishes this process' last calls: per call, an
//    arrival number from a counter under "<job>/chorus/calls/<communicator>/
//    <call>/n", and the first arrival's record (rank, digest, description) under
//    ".../first". A later arrival compares its digest with the first's;
//  - a rank whose digest differs writes the disagreement, naming both calls,
//    under "<job>/chorus/mismatch/<communicator>", and fails with it;
//  - every stalled wait reads that key ten times a second (for its first
//    three seconds; then once a second), so the other ranks fail with the
//    same text (invalid_argument) within about 100 ms;
//  - a rank that found a disagreement itself (a digest, a board slot, a stray
//    message) publishes its calls at once and waits up to
//    kNameDisagreementWithin for the store to name both calls (the other
//    rank publishes its own when its wait stalls), then records the
//    disagreement, with both calls or with its side alone, before it leaves.
// Two calls differ when their digests do: the same fields as the message
// check (collective, count, datatype, op, root, algorithm) and whether the
// call is non-blocking.
#include "api/communicator_impl.hpp"

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/log.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <thread>

namespace chorus {

namespace {

// How long a rank that found a disagreement waits for the store to name the
// other call: its peer's wait stalls for a second before it publishes.
constexpr auto kNameDisagreementWithin = std::chrono::milliseconds(1500);
constexpr auto kNamePollInterval = std::chrono::milliseconds(20);

std::string describe_entry(const LedgerEntry& entry) {
  coll::Args args{nullptr, nullptr, entry.count, entry.dtype, entry.redop, entry.root};
  return describe_call(entry.op, args, entry.algorithm != nullptr ? std::string_view(entry.algorithm->name) : "?",
                       entry.nonblocking);
}

// "the 3rd collective call on the world communicator" (counting from 1, the
// call being the communicator's calls_made; the tag's "collective call N"
// counts sequence numbers from 0).
std::string which_call(const LedgerEntry& entry) {
  const uint64_t n = entry.calls;
  const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  const auto context = static_cast<uint32_t>(entry.communicator >> 32);
  return concat("the ", n, suffix, " collective call on ",
                context == 0 ? std::string("the world communicator") : concat("the communicator of context id ", context));
}

std::string text_of(const bootstrap::Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }
bootstrap::Bytes bytes_of(const std::string& text) { return bootstrap::Bytes(text.begin(), text.end()); }

// A call as published: "rank R\njob J\ndigest D\n<description>".
struct Record {
  int rank = -1;      // in the communicator
  int job_rank = -1;  // the engine's
  uint32_t digest = 0;
  std::string description;
};

std::string encode(const Record& record) {
  return concat("rank ", record.rank, "\njob ", record.job_rank, "\ndigest ", record.digest, "\n", record.description);
}

std::optional<Record> decode(const std::string& text) {
  Record record;
  size_t at = 0;
  auto field = [&](std::string_view name, int64_t max) -> std::optional<int64_t> {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos || text.compare(at, name.size(), name) != 0) return std::nullopt;
    auto value = config::parse_int(std::string_view(text).substr(at + name.size(), end - at - name.size()), 0, max);
    at = end + 1;
    return value;
  };
  const auto rank = field("rank ", INT32_MAX);
  const auto job_rank = rank ? field("job ", INT32_MAX) : std::nullopt;
  const auto digest = job_rank ? field("digest ", UINT32_MAX) : std::nullopt;
  if (!digest) return std::nullopt;
  record.rank = static_cast<int>(*rank);
  record.job_rank = static_cast<int>(*job_rank);
  record.digest = static_cast<uint32_t>(*digest);
  record.description = text.substr(at);
  return record;
}

}  // namespace

namespace {

std::string call_key(const std::string& job_id, const LedgerEntry& entry, const char* what) {
  return concat(job_id, "/chorus/calls/", entry.communicator, "/", entry.calls, "/", what);
}
std::string mismatch_key(const std::string& job_id, uint64_t communicator) {
  return concat(job_id, "/chorus/mismatch/", communicator);
}

// The disagreement as stored: "job A B\n<text>", A and B the job ranks of
// the two calls' ranks (B -1: unknown).
Error disagreement_error(const std::string& stored, int self) {
  const size_t end = stored.find('\n');
  int first = -1, second = -1;
  if (stored.rfind("job ", 0) == 0 && end != std::string::npos) {
    const std::string ranks = stored.substr(4, end - 4);
    const size_t space = ranks.find(' ');
    first = static_cast<int>(config::parse_int(ranks.substr(0, space), -1, INT32_MAX).value_or(-1));
    if (space != std::string::npos) {
      second = static_cast<int>(config::parse_int(ranks.substr(space + 1), -1, INT32_MAX).value_or(-1));
    }
  }
  const std::string text = end == std::string::npos ? stored : stored.substr(end + 1);
  return Error(Status::invalid_argument, text, first == self ? second : first);
}

}  // namespace

std::optional<Error> Session::known_disagreement(uint64_t communicator) {
  for (const auto& [id, error] : ledger.mismatches) {
    if (id == communicator) return error;
  }
  if (!bootstrap || !bootstrap->store_answers()) return std::nullopt;
  try {
    bootstrap::StoreAccess& store = bootstrap->store();
    const std::string key = mismatch_key(job.job_id, communicator);
    if (!store.check(key)) return std::nullopt;
    Error error = disagreement_error(text_of(store.get(key)), job.rank);
    ledger.mismatches.emplace_back(communicator, error);
    return error;
  } catch (const Error& e) {
    log::debug("rank ", job.rank, " could not read the store's record of a disagreement: ", e.what());
    return std::nullopt;
  }
}

void Session::record_disagreement(uint64_t communicator, const Error& error) {
  for (const auto& [id, known] : ledger.mismatches) {
    if (id == communicator) return;
  }
  ledger.mismatches.emplace_back(communicator, error);
  if (!bootstrap || !bootstrap->store_answers()) return;
  try {
    bootstrap->store().set(mismatch_key(job.job_id, communicator),
                           bytes_of(concat("job ", job.rank, " ", error.peer(), "\n", error.what())));
  } catch (const Error& e) {
    log::debug("rank ", job.rank, " could not record a disagreement in the store: ", e.what());
  }
}

std::optional<Error> Session::compare_calls() {
  if (!bootstrap || !bootstrap->store_answers() || ledger.next == 0) return std::nullopt;
  try {
    // A disagreement another rank found, on a communicator of these calls
    // (one request per communicator).
    std::array<uint64_t, CallLedger::kKept> asked{};
    size_t asked_count = 0;
    for (uint64_t seq = ledger.next > CallLedger::kKept ? ledger.next - CallLedger::kKept : 0; seq < ledger.next; ++seq) {
      const LedgerEntry& entry = ledger.entries[seq & (CallLedger::kKept - 1)];
      if (std::find(asked.begin(), asked.begin() + static_cast<std::ptrdiff_t>(asked_count), entry.communicator) !=
          asked.begin() + static_cast<std::ptrdiff_t>(asked_count)) {
        continue;
      }
      asked[asked_count++] = entry.communicator;
      if (std::optional<Error> known = known_disagreement(entry.communicator)) return known;
    }
    bootstrap::StoreAccess& store = bootstrap->store();
    // This rank's calls not yet published: the first to arrive at a call
    // leaves its record; the others compare theirs with it.
    const uint64_t from = std::max(ledger.published, ledger.next > CallLedger::kKept ? ledger.next - CallLedger::kKept : 0);
    for (uint64_t seq = from; seq < ledger.next; ++seq) {
      const LedgerEntry& entry = ledger.entries[seq & (CallLedger::kKept - 1)];
      if (entry.calls == 0) continue;
      const int64_t arrival = store.add(call_key(job.job_id, entry, "n"), 1);
      if (arrival == 1) {
        store.set(call_key(job.job_id, entry, "first"),
                  bytes_of(encode({entry.rank, job.rank, entry.digest, describe_entry(entry)})));
      } else {
        ledger.pending.push_back(entry);
      }
    }
    ledger.published = ledger.next;
    // Compare with the first record, once it is there.
    for (size_t i = 0; i < ledger.pending.size();) {
      const LedgerEntry entry = ledger.pending[i];
      const std::string key = call_key(job.job_id, entry, "first");
      if (!store.check(key)) {
        ++i;
        continue;
      }
      ledger.pending.erase(ledger.pending.begin() + static_cast<std::ptrdiff_t>(i));
      const std::optional<Record> first = decode(text_of(store.get(key)));
      if (!first || first->digest == entry.digest) continue;
      Error error(Status::invalid_argument,
                  concat("rank ", entry.rank, " made a collective call with other arguments than rank ", first->rank,
                         " (the ranks disagree on the collective, count, datatype, reduction op, root, algorithm or "
                         "whether it blocks): rank ", entry.rank, " called ", describe_entry(entry), "; rank ",
                         first->rank, " called ", first->description, " (", which_call(entry), ")"),
                  first->job_rank);
      record_disagreement(entry.communicator, error);
      return error;
    }
    // Bounded: a rank whose peers never publish keeps only its latest.
    if (ledger.pending.size() > 4 * CallLedger::kKept) {
      ledger.pending.erase(ledger.pending.begin(),
                           ledger.pending.end() - static_cast<std::ptrdiff_t>(4 * CallLedger::kKept));
    }
  } catch (const Error& e) {
    // The store is gone (rank 0 served it): the transport or the timeout will tell.
    log::debug("rank ", job.rank, " could not compare its calls through the store: ", e.what());
  }
  return std::nullopt;
}

std::optional<Error> Session::await_disagreement(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    if (std::optional<Error> found = compare_calls()) return found;
    if (!bootstrap || !bootstrap->store_answers() || std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(kNamePollInterval);
  }
}

Error CommunicatorImpl::name_disagreement(const Error& error, Collective op, const coll::Args& args,
                                          const coll::Algorithm& algorithm, bool nonblocking) {
  std::string text = error.what();
  const std::string mine = describe_call(op, args, algorithm.name, nonblocking);
  if (text.find(mine) == std::string::npos) text += concat("; this rank called ", mine);
  // Found by the probe: already named and recorded.
  std::optional<Error> both = session_->known_disagreement(ledger_id_);
  if (!both) both = session_->await_disagreement(std::chrono::steady_clock::now() + kNameDisagreementWithin);
  if (!both) {
    Error alone(Status::invalid_argument, text, error.peer());
    session_->record_disagreement(ledger_id_, alone);
    return alone;
  }
  if (text.find(both->what()) == std::string::npos) text += concat("; ", both->what());
  return Error(Status::invalid_argument, text, error.peer() >= 0 ? error.peer() : both->peer());
}

}  // namespace chorus
