// The engine's state (Engine::Impl): request slots, matching queues and
// deferred rendezvous work. Shared by engine.cc (posting, matching, the
// transport's callbacks, failing operations), engine_rendezvous.cc
// (RTS -> reads -> FIN) and progress.cc (waiting, through the engine's
// Progress: spin, block, timeouts, the failure probe).
#pragma once

#include "p2p/engine.hpp"

#include "common/error.hpp"
#include "p2p/progress.hpp"
#include "p2p/reg_cache.hpp"
#include "p2p/wire.hpp"

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace chorus::p2p {

// Request slots are recycled; the generation tells a stale handle (or a stale
// FIN/read completion) from the slot's current occupant.
// Three cache lines, on a line of its own: what every request touches
// (the first two) apart from the rendezvous' state (the third), which an
// eager message never reads or writes. A window of requests touches each
// slot in several passes (post, deliver, reap), each after the window's
// others: every line a pass touches is a cache miss (docs/performance.md).
struct alignas(64) Slot {
  enum class Kind : uint8_t { send, recv };
  enum class State : uint8_t { free, posted, awaiting_fin, reading, done, failed };

  // --- line 0: the request and its match ---
  Kind kind = Kind::send;
  State state = State::free;
  bool rendezvous = false;  // the third line is in use (reset by reuse(), not before)
  uint32_t generation = 0;
  int peer = 0;
  uint32_t index = 0;  // its place in the engine's slot table (fixed)
  Tag tag = 0;
  Tag tag_mask = kExactTag;
  CallCheck check;     // receives: the call it belongs to (digest 0: any)
  void* buffer = nullptr;
  size_t capacity = 0;
  // --- line 1: the outcome ---
  Completion result;
  // The point-to-point operation of Progress that awaits this request: it
  // is told (Progress::complete_delivered, Engine::Impl::finished_waiters)
  // when the request finishes.
  void* waiter = nullptr;
  std::optional<Error> error;
  // --- line 2: rendezvous state, valid while `rendezvous` (start_rendezvous_state()) ---
  std::shared_ptr<transport::MemoryRegion> registration;
  transport::RemoteBuffer remote;
  uint64_t remote_send_id = 0;
  size_t read_total = 0;
  size_t read_next = 0;
  int reads_outstanding = 0;

  // Takes the slot for a new request: every field but the generation back to
  // its initial value, field by field (assigning a fresh Slot costs more
  // than the rest of a small send). A new field must be reset here too.
  // The rendezvous line only if a rendezvous used it.
  void reuse(Kind new_kind, int new_peer, Tag new_tag) {
    ++generation;
    kind = new_kind;
    state = State::free;
    peer = new_peer;
    tag = new_tag;
    tag_mask = kExactTag;
    check = CallCheck{};
    buffer = nullptr;
    capacity = 0;
    result = Completion{};
    waiter = nullptr;
    error.reset();
    if (rendezvous) {
      registration.reset();
      remote = transport::RemoteBuffer{};
      remote_send_id = 0;
      read_total = 0;
      read_next = 0;
      reads_outstanding = 0;
      rendezvous = false;
    }
  }
  // Before the first write to the rendezvous line.
  void start_rendezvous_state() { rendezvous = true; }
};
static_assert(sizeof(Slot) == 192, "a slot is three cache lines (see above)");

// The engine's slots, in chunks that never move: a Slot& stays valid as the
// table grows (as in a std::deque), and finding slot i costs two loads (a
// deque's indexing cost about 40 instructions per request, and a request
// looks its slot up several times).
class SlotTable {
 public:
  size_t size() const { return size_; }
  Slot& operator[](size_t index) { return chunks_[index >> kChunkBits][index & kChunkMask]; }
  const Slot& operator[](size_t index) const { return chunks_[index >> kChunkBits][index & kChunkMask]; }
  Slot& emplace_back() {
    if ((size_ & kChunkMask) == 0) chunks_.push_back(std::make_unique<Slot[]>(size_t{1} << kChunkBits));
    return (*this)[size_++];
  }

 private:
  static constexpr unsigned kChunkBits = 6;
  static constexpr size_t kChunkMask = (size_t{1} << kChunkBits) - 1;
  std::vector<std::unique_ptr<Slot[]>> chunks_;
  size_t size_ = 0;
};

// A message that arrived before its receive was posted. A small eager
// payload (the common case: a peer one step ahead in a small collective) is
// kept inline, so queueing and taking it allocates nothing.
struct Unexpected {
  static constexpr size_t kInlinePayload = 64;

  Unexpected(Tag message_tag, MessageType message_type, uint32_t check, size_t bytes)
      : tag(message_tag), type(message_type), call_check(check), length(bytes) {}

  Tag tag;
  MessageType type;
  uint32_t call_check;
  size_t length;
  RtsBody rts{};  // rendezvous only

  void keep_payload(const uint8_t* payload) {
    if (length <= kInlinePayload) {
      if (length != 0) std::memcpy(inline_payload_.data(), payload, length);
    } else {
      heap_payload_.assign(payload, payload + length);
    }
  }
  const uint8_t* payload() const { return length <= kInlinePayload ? inline_payload_.data() : heap_payload_.data(); }

 private:
  std::array<uint8_t, kInlinePayload> inline_payload_;  // eager, up to kInlinePayload bytes
  std::vector<uint8_t> heap_payload_;                   // eager, larger
};

// Both tags name the same call, on the bits the receive says name a call.
inline bool same_call(const CallCheck& check, Tag posted, Tag arrived) {
  return check.call_mask != 0 && tag_matches(posted, check.call_mask, arrived);
}
inline bool calls_differ(uint32_t posted, uint32_t arrived) { return posted != 0 && arrived != 0 && posted != arrived; }

class Engine::Impl final : public transport::Sink {
 public:
  using Clock = std::chrono::steady_clock;

  Impl(transport::Transport& transport, int rank, int size, int local_size, const config::Settings& settings);

  // --- posting, matching, the transport's callbacks (engine.cc) ---

  Request isend(int peer, Tag tag, const void* buffer, size_t bytes, uint32_t call_check, bool synchronous);
  // isend's own test for a send the transport copies at once.
  bool sends_at_once(int peer, size_t bytes) const {
    return bytes <= eager_limit_ && peer >= 0 && peer < size_ && !peer_failures_[static_cast<size_t>(peer)];
  }
  Request irecv(int peer, Tag tag, void* buffer, size_t bytes, Tag mask, CallCheck check);
  bool test(Request& request, Completion* done);
  std::optional<Completion> probe(int peer, Tag tag, Tag mask);
  std::optional<std::pair<uint64_t, Completion>> claim(int peer, Tag tag, Tag mask);
  Request irecv_claimed(uint64_t id, void* buffer, size_t bytes);
  bool holds_claim(uint64_t id) const { return claimed_.count(id) != 0; }
  bool withdraw_receive(const Request& request);
  std::optional<std::pair<int, Tag>> find_unexpected(const std::function<bool(int, Tag)>& match) const;
  void on_eager(int peer, const void* data, size_t bytes) override;
  void on_read_done(uint64_t context) override;
  void on_error(uint64_t context, int peer, const Error& error) override;
  void abandon_all(const Error& cause);
  void cancel(const Request& request, const Error& cause);

  // --- waiting (progress.cc) ---

  Completion wait(Request& request);
  void wait_all(std::span<Request> requests);
  void progress_until(const Request& request, const std::function<bool()>& stop);
  void wait_until(const std::function<bool()>& done, const std::function<Waiting()>& waiting_for);
  void flush_sends(std::chrono::milliseconds linger, std::chrono::milliseconds limit) noexcept;

  int progress() { return poll_transport(); }
  Progress& progress_engine() { return progress_; }
  bool finished(const Request& request) const { return request.finished_send() || finished(lookup(request)); }
  // For a request finished() said is finished (Progress' step): frees it
  // and writes what it moved to *done, or throws its error, as wait() does.
  // In place: wait()'s returned Completion reached the caller through the
  // stack as narrow stores read back wide (a store-forwarding stall).
  void take_finished(Request& request, Completion* done) {
    if (!reap(request, done)) fail(Status::internal, "take_finished on a request that has not finished");
  }
  size_t unexpected_count() const { return unexpected_.size(); }
  // Requests that have finished (done or failed) so far: Progress steps its
  // operations only when this has changed.
  uint64_t finished_requests() const { return finished_requests_; }
  Error timeout_error(const Request& request) { return timeout_error(lookup(request)); }
  // The slot of a request that has not finished; nullptr once it has (a
  // send the transport copied has none). Throws for a stale request, as
  // lookup() does.
  Slot* pending_slot(const Request& request) {
    if (request.finished_send()) return nullptr;
    Slot& slot = lookup(request);
    return finished(slot) ? nullptr : &slot;
  }
  // Progress' point-to-point operations: the one waiting on a pending
  // request is named in its slot (Slot::waiter, set through pending_slot()),
  // and when the request finishes (done or failed) it is appended to
  // finished_waiters(), so Progress completes it without looking at the
  // others. clear_waiter: it stopped waiting (it failed on its own), so it
  // is neither named nor listed any more.
  void clear_waiter(const Request& request, void* waiter) {
    if (Slot* slot = request.valid() && !request.finished_send() ? find_by_id(encode_id(request)) : nullptr) {
      if (slot->waiter == waiter) slot->waiter = nullptr;
    }
    std::erase(finished_waiters_, waiter);
  }
  std::vector<void*>& finished_waiters() { return finished_waiters_; }

  // Polls the transport, then posts what the callbacks decided to post (the
  // transport is not re-entered from inside its own poll()).
  int poll_transport() {
    int events = transport_.poll(*this);
    if (!deferred_reads_.empty() || !deferred_fins_.empty()) events += flush_deferred();
    return events;
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  transport::Transport& transport() { return transport_; }
  const config::Settings& settings() const { return settings_; }
  void set_timeout(std::chrono::milliseconds timeout) { settings_.timeout = timeout; }
  const Counters& counters() const { return counters_; }
  void set_other_hosts(std::vector<bool> other_host) { other_host_ = std::move(other_host); }
  bool on_other_host(int peer) const {
    return static_cast<size_t>(peer) < other_host_.size() && other_host_[static_cast<size_t>(peer)];
  }
  void count_out(int peer, size_t bytes) {
    (on_other_host(peer) ? counters_.bytes_out_other_hosts : counters_.bytes_out_this_host) += bytes;
  }
  void count_in(int peer, size_t bytes) {
    (on_other_host(peer) ? counters_.bytes_in_other_hosts : counters_.bytes_in_this_host) += bytes;
  }
  RegCache& reg_cache() { return reg_cache_; }

 private:
  // Ids sent on the wire (FIN send ids, read contexts): generation and slot+1,
  // never 0.
  static uint64_t encode_id(Request request) {
    return (static_cast<uint64_t>(request.generation) << 32) | (static_cast<uint64_t>(request.slot) + 1);
  }

  Slot* find_by_id(uint64_t id) {
    uint64_t slot_plus_one = id & 0xffffffffu;
    if (slot_plus_one == 0 || slot_plus_one > slots_.size()) return nullptr;
    Slot& slot = slots_[slot_plus_one - 1];
    if (slot.generation != static_cast<uint32_t>(id >> 32) || slot.state == Slot::State::free) return nullptr;
    return &slot;
  }

  Slot& lookup(const Request& request) { return const_cast<Slot&>(std::as_const(*this).lookup(request)); }
  const Slot& lookup(const Request& request) const {
    if (request.valid() && request.slot < slots_.size()) {
      const Slot& slot = slots_[request.slot];
      if (slot.generation == request.generation && slot.state != Slot::State::free) return slot;
    }
    fail(Status::invalid_argument, "wait/test on a request that is not outstanding (already completed or never posted)");
  }

  static bool finished(const Slot& slot) {
    return slot.state == Slot::State::done || slot.state == Slot::State::failed;
  }

  // Frees a finished request's slot and reports its outcome.
  bool reap(Request& request, Completion* done) {
    if (request.finished_send()) {
      if (done != nullptr) *done = Completion{static_cast<int>(request.generation)};
      request = Request{};
      return true;
    }
    Slot& slot = lookup(request);
    if (!finished(slot)) return false;
    std::optional<Error> error = std::move(slot.error);
    Completion result = slot.result;
    release(request.slot);
    request = Request{};
    if (error) throw *error;
    if (done != nullptr) *done = result;
    return true;
  }

  // Inlined: out of line, every receive paid a call frame of about 20
  // instructions for these few stores.
  [[gnu::always_inline]] void release(uint32_t index) {
    Slot& slot = slots_[index];
    if (slot.rendezvous) slot.registration.reset();
    slot.state = Slot::State::free;
    free_slots_.push_back(index);
  }

  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_) {
      fail(Status::invalid_argument, what, " rank ", peer, ": ranks are 0..", size_ - 1);
    }
  }

  static void check_buffer(const void* buffer, size_t bytes, const char* what) {
    if (buffer == nullptr && bytes != 0) fail(Status::invalid_argument, what, " of ", bytes, " bytes from a null buffer");
  }

  void fail_if_peer_failed(Slot& slot) {
    if (slot.peer >= 0 && peer_failures_[static_cast<size_t>(slot.peer)]) {
      fail_slot(slot, *peer_failures_[static_cast<size_t>(slot.peer)]);
    }
  }

  // engine.cc
  std::pair<Request, Slot&> allocate(Slot::Kind kind, int peer, Tag tag);
  void fail_slot(Slot& slot, const Error& error);
  void withdraw(Slot& slot);
  void arrive(int source, const MessageHeader& header, const uint8_t* payload, const RtsBody* rts);
  void deliver(uint32_t index, int source, Tag tag, uint32_t call_check, size_t length, const uint8_t* payload,
               const RtsBody* rts);
  void deliver_queued(uint32_t index, int source, const Unexpected& message);
  void fail_receives_of_other_calls(int source, Tag tag, uint32_t call_check);
  Error other_call_error(int source, Tag tag) const;
  void deliver_eager(Slot& slot, int source, Tag tag, const uint8_t* payload, size_t length);
  Error truncation_error(const Slot& slot, int source, size_t length) const;
  void report_protocol_error(int peer, const std::string& what);

  // engine_rendezvous.cc
  void start_rendezvous(uint32_t index, int source, Tag tag, size_t length, const RtsBody& rts);
  int flush_deferred();
  void issue_reads(Slot& slot, uint64_t context);
  void send_fin(int peer, uint64_t send_id);
  void finish_send(int peer, uint64_t send_id);

  // progress.cc
  friend class Progress;  // polls, sleeps on the transport, counts blocked waits
  std::string describe_wait(const Slot& slot) const;
  Error timeout_error(const Slot& slot);
  template <class Done>
  void progress_until(const Slot& slot, Done done);

  transport::Transport& transport_;
  int rank_;
  int size_;
  config::Settings settings_;
  size_t eager_limit_;
  RegCache reg_cache_;
  SlotTable slots_;
  std::vector<uint32_t> free_slots_;
  PostedReceives posted_;
  UnexpectedMessages<Unexpected> unexpected_;
  // Messages a matched probe took (claim), by id, with their sources: out
  // of the unexpected queue until irecv_claimed() receives them.
  std::unordered_map<uint64_t, std::pair<int, Unexpected>> claimed_;
  uint64_t last_claim_ = 0;
  std::vector<std::optional<Error>> peer_failures_;
  std::vector<uint64_t> deferred_reads_;               // receives whose reads to (re)issue
  std::vector<std::pair<int, uint64_t>> deferred_fins_;  // (peer, send id)
  Counters counters_;
  std::vector<bool> other_host_;  // by engine rank (set_other_hosts)
  // Every change of a slot's state to done or failed counts (a new one must
  // too), and tells the slot's waiter.
  void count_finished(Slot& slot) {
    ++finished_requests_;
    if (slot.waiter != nullptr) finished_waiters_.push_back(slot.waiter);
  }
  uint64_t finished_requests_ = 0;
  std::vector<void*> finished_waiters_;
  Progress progress_;  // last: made after, and gone before, what it drives
};

}  // namespace chorus::p2p
