#include "p2p/engine.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "p2p/reg_cache.hpp"
#include "p2p/wire.hpp"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <utility>
#include <optional>
#include <vector>

namespace chorus::p2p {

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kFailureProbeInterval = std::chrono::seconds(1);
constexpr int kEmptyPollsPerClockRead = 32;

// Request slots are recycled; the generation tells a stale handle (or a stale
// FIN/read completion) from the slot's current occupant.
struct Slot {
  enum class Kind : uint8_t { send, recv };
  enum class State : uint8_t { free, posted, awaiting_fin, reading, done, failed };

  Kind kind = Kind::send;
  State state = State::free;
  uint32_t generation = 0;
  int peer = 0;
  Tag tag = 0;
  Tag tag_mask = kExactTag;
  CallCheck check;     // receives: the call it belongs to (digest 0: any)
  uint32_t index = 0;  // its place in the engine's slot table (fixed)
  void* buffer = nullptr;
  size_t capacity = 0;
  Completion result;
  std::optional<Error> error;
  // Rendezvous state.
  std::shared_ptr<transport::MemoryRegion> registration;
  transport::RemoteBuffer remote;
  uint64_t remote_send_id = 0;
  size_t read_total = 0;
  size_t read_next = 0;
  int reads_outstanding = 0;

  // Takes the slot for a new request: every field but the generation back to
  // its initial value, field by field (assigning a fresh Slot costs more
  // than the rest of a small send). A new field must be reset here too.
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
    error.reset();
    registration.reset();
    remote = transport::RemoteBuffer{};
    remote_send_id = 0;
    read_total = 0;
    read_next = 0;
    reads_outstanding = 0;
  }
};

// A message that arrived before its receive was posted.
struct Unexpected {
  Tag tag;
  MessageType type;
  uint32_t call_check;
  size_t length;
  std::vector<uint8_t> payload;  // eager only
  RtsBody rts{};                 // rendezvous only
};

// Both tags name the same call, on the bits the receive says name a call.
bool same_call(const CallCheck& check, Tag posted, Tag arrived) {
  return check.call_mask != 0 && tag_matches(posted, check.call_mask, arrived);
}
bool calls_differ(uint32_t posted, uint32_t arrived) { return posted != 0 && arrived != 0 && posted != arrived; }

// Cores the local ranks can share. A rank pinned to a few CPUs (placement's
// --bind=core, taskset, mpirun --bind-to core; a core may be 2 hardware
// threads) sees fewer CPUs in its own mask than there are local ranks
// although its peers sit on other cores: then the machine's online CPUs are
// what counts. Ranks deliberately pinned to one shared core are not
// detected (rare; placement leaves ranks unbound when they outnumber cores).
unsigned usable_cpus(int local_size) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  const int own = std::max(1, CPU_COUNT(&set));
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (own < local_size && online > own) return static_cast<unsigned>(online);
  return static_cast<unsigned>(own);
}

}  // namespace

class Engine::Impl final : public transport::Sink {
 public:
  Impl(transport::Transport& transport, int rank, int size, int local_size, const config::Settings& settings)
      : transport_(transport),
        rank_(rank),
        size_(size),
        settings_(settings),
        eager_limit_(std::min<size_t>(settings.eager_limit, transport.max_eager_bytes() - sizeof(MessageHeader))),
        reg_cache_(transport, settings.reg_cache_bytes, settings.leave_pinned),
        // With more ranks than cores, a spinning rank steals the core of the
        // peer it waits for: give the core away as soon as a poll is empty.
        oversubscribed_(static_cast<unsigned>(local_size) > usable_cpus(local_size)),
        posted_(size),
        unexpected_(size),
        peer_failures_(static_cast<size_t>(size)) {
    if (oversubscribed_) log::info("more local ranks (", local_size, ") than usable cores: progress yields when idle");
  }

  // --- posting ---------------------------------------------------------------

  Request isend(int peer, Tag tag, const void* buffer, size_t bytes, uint32_t call_check) {
    check_peer(peer, "send to");
    check_buffer(buffer, bytes, "send");
    auto [request, slot] = allocate(Slot::Kind::send, peer, tag);
    slot.buffer = const_cast<void*>(buffer);
    slot.capacity = bytes;
    slot.result = Completion{peer, tag, bytes};
    if (bytes <= eager_limit_) {
      MessageHeader header{MessageType::eager, tag, bytes, call_check};
      transport_.post_eager(peer, &header, sizeof header, buffer, bytes);
      slot.state = Slot::State::done;  // the transport copied the bytes
      ++counters_.eager_sent;
    } else {
      slot.registration = reg_cache_.acquire(buffer, bytes);
      RtsMessage rts{};
      rts.header = MessageHeader{MessageType::rts, tag, bytes, call_check};
      rts.body.address = slot.registration->remote_address() +
                         (reinterpret_cast<uintptr_t>(buffer) - reinterpret_cast<uintptr_t>(slot.registration->base()));
      rts.body.key = slot.registration->remote_key();
      rts.body.send_id = encode_id(request);
      transport_.post_eager(peer, &rts, sizeof rts, nullptr, 0);
      slot.state = Slot::State::awaiting_fin;
      ++counters_.rendezvous_sent;
    }
    fail_if_peer_failed(slot);
    return request;
  }

  Request irecv(int peer, Tag tag, void* buffer, size_t bytes, Tag mask, CallCheck check) {
    if (peer != kAnySource) check_peer(peer, "receive from");
    check_buffer(buffer, bytes, "receive");
    auto [request, slot] = allocate(Slot::Kind::recv, peer, tag);
    slot.tag_mask = mask;
    slot.check = check;
    slot.buffer = buffer;
    slot.capacity = bytes;
    slot.state = Slot::State::posted;
    if (auto found = unexpected_.take(peer, tag, mask)) {
      const Unexpected& message = found->second;
      const bool eager = message.type == MessageType::eager;
      deliver(request.slot, found->first, message.tag, message.call_check, message.length,
              eager ? message.payload.data() : nullptr, eager ? nullptr : &message.rts);
      if (!eager) flush_deferred();
      return request;
    }
    posted_.add(request.slot, peer, tag, mask);
    if (peer != kAnySource && check.digest != 0) {
      std::optional<Tag> other;
      unexpected_.any_from(peer, [&](Tag arrived, const Unexpected& message) {
        if (!same_call(check, tag, arrived) || !calls_differ(check.digest, message.call_check)) return false;
        other = arrived;
        return true;
      });
      if (other) fail_slot(slot, other_call_error(peer, *other));
    }
    fail_if_peer_failed(slot);
    return request;
  }

  // --- completion --------------------------------------------------------------

  bool test(Request& request, Completion* done) {
    poll_transport();
    return reap(request, done);
  }

  Completion wait(Request& request) {
    Slot& slot = lookup(request);
    if (!finished(slot)) progress_until(slot, [&] { return finished(slot); });
    Completion done;
    reap(request, &done);
    return done;
  }

  void wait_all(std::span<Request> requests) {
    for (Request& request : requests) {
      if (request.valid()) wait(request);
    }
  }

  int progress() { return poll_transport(); }

  std::optional<Completion> probe(int peer, Tag tag, Tag mask) {
    if (peer != kAnySource) check_peer(peer, "probe for a message from");
    poll_transport();
    auto [source, message] = unexpected_.peek(peer, tag, mask);
    if (message == nullptr) return std::nullopt;
    return Completion{source, message->tag, message->length};
  }

  void progress_until(const Request& request, const std::function<bool()>& stop) {
    const Slot& slot = lookup(request);
    const uint32_t generation = request.generation;
    progress_until(slot, [&] { return slot.generation != generation || finished(slot) || stop(); });
  }
  void set_failure_probe(std::function<std::optional<Error>()> probe) { failure_probe_ = std::move(probe); }
  std::optional<Error> probe_failure() { return failure_probe_ ? failure_probe_() : std::nullopt; }
  void set_progress_hook(std::function<int()> hook) { progress_hook_ = std::move(hook); }

  bool finished(const Request& request) const { return finished(lookup(request)); }
  size_t unexpected_count() const { return unexpected_.size(); }
  std::optional<std::pair<int, Tag>> find_unexpected(const std::function<bool(int, Tag)>& match) const {
    std::optional<std::pair<int, Tag>> found;
    unexpected_.for_each([&](int source, Tag tag, const Unexpected&) {
      if (!found && match(source, tag)) found = std::pair<int, Tag>{source, tag};
    });
    return found;
  }
  Error timeout_error(const Request& request) { return timeout_error(lookup(request)); }

  void flush_sends(std::chrono::milliseconds linger, std::chrono::milliseconds limit) noexcept {
    const auto start = Clock::now();
    try {
      for (;;) {
        const auto elapsed = Clock::now() - start;
        if (elapsed >= limit || (elapsed >= linger && !transport_.sends_pending())) return;
        if (poll_transport() == 0) sched_yield();
      }
    } catch (const std::exception&) {
      // A broken peer or endpoint: nothing more can be delivered.
    }
  }

  // Polls the transport, then posts what the callbacks decided to post (the
  // transport is not re-entered from inside its own poll()).
  int poll_transport() {
    int events = transport_.poll(*this);
    if (!deferred_reads_.empty() || !deferred_fins_.empty()) events += flush_deferred();
    return events;
  }

  // --- transport::Sink ---------------------------------------------------------

  void on_eager(int peer, const void* data, size_t bytes) override {
    if (bytes < sizeof(MessageHeader)) {
      return report_protocol_error(peer, concat("a ", bytes, "-byte message shorter than the chorus header"));
    }
    MessageHeader header;
    std::memcpy(&header, data, sizeof header);
    const auto* body = static_cast<const uint8_t*>(data) + sizeof header;
    const size_t body_bytes = bytes - sizeof header;
    switch (header.type) {
      case MessageType::eager:
        if (body_bytes != header.length) {
          return report_protocol_error(peer, concat("eager length ", header.length, " but ", body_bytes, " bytes"));
        }
        ++counters_.eager_received;
        return arrive(peer, header, body, nullptr);
      case MessageType::rts: {
        if (body_bytes != sizeof(RtsBody)) return report_protocol_error(peer, "RTS of the wrong size");
        RtsBody rts;
        std::memcpy(&rts, body, sizeof rts);
        ++counters_.rendezvous_received;
        return arrive(peer, header, nullptr, &rts);
      }
      case MessageType::fin: {
        if (body_bytes != sizeof(FinBody)) return report_protocol_error(peer, "FIN of the wrong size");
        FinBody fin;
        std::memcpy(&fin, body, sizeof fin);
        return finish_send(peer, fin.send_id);
      }
    }
    report_protocol_error(peer, concat("unknown message type ", static_cast<int>(header.type)));
  }

  void on_read_done(uint64_t context) override {
    auto found = find_by_id(context);
    if (!found) return;  // the request failed meanwhile
    Slot& slot = *found;
    --slot.reads_outstanding;
    deferred_reads_.push_back(context);
  }

  void on_error(uint64_t context, int peer, const Error& error) override {
    if (context != 0) {
      if (auto found = find_by_id(context)) return fail_slot(*found, error);
    }
    if (peer >= 0 && peer < size_) {
      peer_failures_[static_cast<size_t>(peer)] = error;
      for (Slot& slot : slots_) {
        if (slot.peer == peer || (slot.kind == Slot::Kind::recv && slot.peer == kAnySource)) fail_slot(slot, error);
      }
      return;
    }
    abandon_all(error);
  }

  void abandon_all(const Error& cause) {
    transport_.note_abandoned(cause);
    for (Slot& slot : slots_) fail_slot(slot, cause);
  }

  // --- accessors ---------------------------------------------------------------

  int rank() const { return rank_; }
  int size() const { return size_; }
  transport::Transport& transport() { return transport_; }
  const config::Settings& settings() const { return settings_; }
  void set_timeout(std::chrono::milliseconds timeout) { settings_.timeout = timeout; }
  const Counters& counters() const { return counters_; }
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

  std::pair<Request, Slot&> allocate(Slot::Kind kind, int peer, Tag tag) {
    uint32_t index;
    if (!free_slots_.empty()) {
      index = free_slots_.back();
      free_slots_.pop_back();
    } else {
      index = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back().index = index;
    }
    Slot& slot = slots_[index];
    slot.reuse(kind, peer, tag);
    return {Request{index, slot.generation}, slot};
  }

  Slot& lookup(const Request& request) { return const_cast<Slot&>(std::as_const(*this).lookup(request)); }
  const Slot& lookup(const Request& request) const {
    if (!request.valid() || request.slot >= slots_.size() || slots_[request.slot].generation != request.generation ||
        slots_[request.slot].state == Slot::State::free) {
      fail(Status::invalid_argument, "wait/test on a request that is not outstanding (already completed or never posted)");
    }
    return slots_[request.slot];
  }

  static bool finished(const Slot& slot) {
    return slot.state == Slot::State::done || slot.state == Slot::State::failed;
  }

  // Frees a finished request's slot and reports its outcome.
  bool reap(Request& request, Completion* done) {
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

  void release(uint32_t index) {
    Slot& slot = slots_[index];
    slot.registration.reset();
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

  void fail_slot(Slot& slot, const Error& error) {
    if (slot.state == Slot::State::free || finished(slot)) return;
    if (slot.kind == Slot::Kind::recv && slot.state == Slot::State::posted) posted_.remove(slot.index, slot.peer);
    withdraw(slot);
    slot.state = Slot::State::failed;
    slot.error = error;
  }

  // A failed operation's buffer is the application's again as soon as the
  // failure is reported (it may free it), so the engine takes back what it
  // lent the transport: reads still in flight into the buffer land nowhere,
  // and a peer still acting on the operation is refused the send buffer
  // (its read fails) instead of reading memory that may be freed.
  void withdraw(Slot& slot) {
    if (!slot.registration) return;
    if (slot.reads_outstanding > 0) {
      transport_.cancel_reads(encode_id(Request{slot.index, slot.generation}));
      slot.reads_outstanding = 0;
    }
    reg_cache_.withdraw(slot.registration);
    slot.registration.reset();  // once no other operation holds it, the transport forgets it
  }

  std::string describe_wait(const Slot& slot) const {
    if (slot.kind == Slot::Kind::send) {
      return slot.state == Slot::State::awaiting_fin
                 ? concat("rank ", slot.peer, " to read a ", slot.capacity, "-byte rendezvous send")
                 : concat("a send to rank ", slot.peer);
    }
    if (slot.state == Slot::State::reading) {
      return concat("RDMA reads of a ", slot.read_total, "-byte message from rank ", slot.result.source);
    }
    if (slot.peer == kAnySource) return "a message from any rank";
    return concat("a message from rank ", slot.peer);
  }

  Error timeout_error(const Slot& slot) {
    std::string seconds = concat(std::chrono::duration<double>(settings_.timeout).count());
    const int peer = slot.state == Slot::State::reading ? slot.result.source : slot.peer;
    const std::string transport_state = peer >= 0 && peer < size_ ? transport_.describe_peer(peer) : std::string();
    return Error(Status::timeout,
                 concat("rank ", rank_, " timed out after ", seconds, " s (CHORUS_TIMEOUT) waiting for ",
                        describe_wait(slot), " (", CallTag::describe(slot.tag),
                        "); the peer may have died, stalled, or called a different collective",
                        transport_state.empty() ? "" : "; transport: ", transport_state),
                 slot.peer);
  }

  // A long wait asks the launcher whether a rank has failed (at most once per
  // interval), so survivors learn of a death in about a second, not after
  // CHORUS_TIMEOUT.
  void probe_for_failures(const Slot& slot, Clock::time_point now, Clock::time_point& next_probe) {
    if (!failure_probe_ || now < next_probe) return;
    next_probe = now + kFailureProbeInterval;
    if (std::optional<Error> failure = failure_probe_()) {
      throw Error(failure->status(),
                  concat("rank ", rank_, " stopped waiting for ", describe_wait(slot), " (", CallTag::describe(slot.tag),
                         "): ", failure->what()),
                  failure->peer());
    }
  }

  // The progress loop of wait(). Reading the clock costs as much as an empty
  // poll of shared memory (more in a VM), so it is read only every few dozen
  // empty polls: the first read starts the timeout and the spin window, and
  // a later one restarts the spin window if anything happened in between.
  template <class Done>
  void progress_until(const Slot& slot, Done done) {
    Clock::time_point deadline, spin_until, next_probe;
    bool clock_started = false;
    int empty_polls = 0;
    bool progressed = false;
    while (!done()) {
      if (poll_transport() + (progress_hook_ ? progress_hook_() : 0) > 0) {
        progressed = true;
        empty_polls = 0;
        continue;
      }
      if (!oversubscribed_ && ++empty_polls < kEmptyPollsPerClockRead) continue;
      empty_polls = 0;
      const auto now = Clock::now();
      if (!clock_started) {
        clock_started = true;
        deadline = now + settings_.timeout;
        next_probe = now + kFailureProbeInterval;
        progressed = true;
      }
      if (progressed) {
        spin_until = now + settings_.spin;
        progressed = false;
      }
      if (now >= deadline) throw timeout_error(slot);
      probe_for_failures(slot, now, next_probe);
      if (oversubscribed_ || now >= spin_until) idle(deadline - now);
    }
  }

  // Nothing to do: block on the transport's fd if it has one, else yield.
  void idle(Clock::duration remaining) {
    int fd = transport_.wait_fd();
    if (fd >= 0 && transport_.arm()) {
      // Short slices keep the timeout check and stray wakeups cheap.
      auto slice = std::min<Clock::duration>(remaining, std::chrono::milliseconds(100));
      int ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(slice).count());
      pollfd descriptor{fd, POLLIN, 0};
      ++counters_.blocked_waits;
      if (::poll(&descriptor, 1, ms) < 0 && errno != EINTR) {
        fail(Status::internal, "poll() on the transport's wait fd failed: ", errno_string(errno));
      }
      return;
    }
    sched_yield();
  }

  // A message (eager payload or RTS) arrived: match it or keep it.
  void arrive(int source, const MessageHeader& header, const uint8_t* payload, const RtsBody* rts) {
    if (auto index = posted_.match(source, header.tag)) {
      return deliver(*index, source, header.tag, header.call_check, header.length, payload, rts);
    }
    ++counters_.unexpected;
    fail_receives_of_other_calls(source, header.tag, header.call_check);
    Unexpected message{header.tag, header.type, header.call_check, header.length, {}, {}};
    if (rts == nullptr) {
      message.payload.assign(payload, payload + header.length);
    } else {
      message.rts = *rts;
    }
    unexpected_.add(source, header.tag, std::move(message));
  }

  // A matched message: eager payload (rts == nullptr) or a rendezvous RTS.
  void deliver(uint32_t index, int source, Tag tag, uint32_t call_check, size_t length, const uint8_t* payload,
               const RtsBody* rts) {
    Slot& slot = slots_[index];
    if (calls_differ(slot.check.digest, call_check)) {
      slot.result = Completion{source, tag, length};
      if (rts != nullptr) deferred_fins_.push_back({source, rts->send_id});  // release the sender's buffer
      return fail_slot(slot, other_call_error(source, tag));
    }
    if (rts == nullptr) return deliver_eager(slot, source, tag, payload, length);
    start_rendezvous(index, source, tag, length, *rts);
  }

  // A message that belongs to the same call slot (same tag but for the step)
  // and carries another digest: the ranks disagree on what they called.
  // Checked on the unexpected path, where a mismatch of steps would otherwise
  // wait for the timeout.
  void fail_receives_of_other_calls(int source, Tag tag, uint32_t call_check) {
    if (call_check == 0) return;
    std::vector<uint32_t> mismatched;
    posted_.for_each_from(source, [&](uint32_t index, Tag posted_tag) {
      const Slot& slot = slots_[index];
      if (same_call(slot.check, posted_tag, tag) && calls_differ(slot.check.digest, call_check)) {
        mismatched.push_back(index);
      }
    });
    for (uint32_t index : mismatched) fail_slot(slots_[index], other_call_error(source, tag));
  }

  Error other_call_error(int source, Tag tag) const {
    return Error(Status::invalid_argument,
                 concat("rank ", rank_, " received from rank ", source,
                        " a message of a collective call with other arguments (", CallTag::describe(tag),
                        "): the ranks disagree on the collective, count, datatype, reduction op, root or algorithm"),
                 source);
  }

  void deliver_eager(Slot& slot, int source, Tag tag, const uint8_t* payload, size_t length) {
    slot.result = Completion{source, tag, length};
    if (length > slot.capacity) return fail_slot(slot, truncation_error(slot, source, length));
    if (length != 0) std::memcpy(slot.buffer, payload, length);
    slot.state = Slot::State::done;
  }

  Error truncation_error(const Slot& slot, int source, size_t length) const {
    return Error(Status::truncated,
                 concat("rank ", rank_, " received a ", length, "-byte message from rank ", source,
                        " into a ", slot.capacity, "-byte buffer (", CallTag::describe(slot.tag),
                        "): counts or datatypes differ between ranks"),
                 source);
  }

  void start_rendezvous(uint32_t index, int source, Tag tag, size_t length, const RtsBody& rts) {
    Slot& slot = slots_[index];
    slot.result = Completion{source, tag, length};
    slot.remote_send_id = rts.send_id;
    if (length > slot.capacity) {
      deferred_fins_.push_back({source, rts.send_id});  // the sender's part is over either way
      return fail_slot(slot, truncation_error(slot, source, length));
    }
    slot.registration = reg_cache_.acquire(slot.buffer, length);
    slot.remote = transport::RemoteBuffer{rts.address, rts.key};
    slot.read_total = length;
    slot.read_next = 0;
    slot.state = Slot::State::reading;
    deferred_reads_.push_back(encode_id(Request{index, slot.generation}));
  }

  // Issues more reads for each receive whose reads made progress, finishes
  // the ones fully read, and sends pending FINs.
  int flush_deferred() {
    int actions = 0;
    while (!deferred_reads_.empty() || !deferred_fins_.empty()) {
      std::vector<uint64_t> reads;
      reads.swap(deferred_reads_);
      for (uint64_t id : reads) {
        Slot* slot = find_by_id(id);
        if (slot == nullptr || slot->state != Slot::State::reading) continue;
        issue_reads(*slot, id);
        if (slot->reads_outstanding == 0 && slot->read_next == slot->read_total) {
          deferred_fins_.push_back({slot->result.source, slot->remote_send_id});
          slot->registration.reset();
          slot->state = Slot::State::done;
        }
        ++actions;
      }
      std::vector<std::pair<int, uint64_t>> fins;
      fins.swap(deferred_fins_);
      for (auto [peer, send_id] : fins) {
        send_fin(peer, send_id);
        ++actions;
      }
    }
    return actions;
  }

  // Keeps up to reads_in_flight chunked reads outstanding for one receive.
  void issue_reads(Slot& slot, uint64_t context) {
    const size_t chunk = settings_.rendezvous_chunk;
    while (slot.reads_outstanding < settings_.reads_in_flight && slot.read_next < slot.read_total) {
      size_t bytes = std::min(chunk, slot.read_total - slot.read_next);
      size_t local_offset = static_cast<size_t>(static_cast<uint8_t*>(slot.buffer) -
                                                static_cast<uint8_t*>(slot.registration->base())) +
                            slot.read_next;
      transport::RemoteBuffer remote{slot.remote.address + slot.read_next, slot.remote.key};
      transport_.post_read(slot.result.source, remote, *slot.registration, local_offset, bytes, context);
      slot.read_next += bytes;
      ++slot.reads_outstanding;
      ++counters_.reads_posted;
    }
  }

  void send_fin(int peer, uint64_t send_id) {
    FinMessage fin{MessageHeader{MessageType::fin, 0, 0}, FinBody{send_id}};
    transport_.post_eager(peer, &fin, sizeof fin, nullptr, 0);
  }

  void finish_send(int peer, uint64_t send_id) {
    Slot* slot = find_by_id(send_id);
    if (slot == nullptr || slot->kind != Slot::Kind::send || slot->state != Slot::State::awaiting_fin ||
        slot->peer != peer) {
      return report_protocol_error(peer, concat("FIN for unknown send 0x", std::hex, send_id));
    }
    slot->registration.reset();
    slot->state = Slot::State::done;
  }

  // A peer sent something that breaks the protocol: fail what involves it.
  void report_protocol_error(int peer, const std::string& what) {
    on_error(0, peer, Error(Status::internal, concat("protocol error from rank ", peer, ": ", what), peer));
  }

  transport::Transport& transport_;
  int rank_;
  int size_;
  config::Settings settings_;
  size_t eager_limit_;
  RegCache reg_cache_;
  bool oversubscribed_;
  std::deque<Slot> slots_;  // deque: references stay valid as it grows
  std::vector<uint32_t> free_slots_;
  PostedReceives posted_;
  UnexpectedMessages<Unexpected> unexpected_;
  std::function<std::optional<Error>()> failure_probe_;
  std::function<int()> progress_hook_;
  std::vector<std::optional<Error>> peer_failures_;
  std::vector<uint64_t> deferred_reads_;               // receives whose reads to (re)issue
  std::vector<std::pair<int, uint64_t>> deferred_fins_;  // (peer, send id)
  Counters counters_;
};

Engine::Engine(transport::Transport& transport, int rank, int size, int local_size, const config::Settings& settings)
    : impl_(std::make_unique<Impl>(transport, rank, size, local_size, settings)) {}
Engine::~Engine() = default;
int Engine::rank() const { return impl_->rank(); }
int Engine::size() const { return impl_->size(); }
transport::Transport& Engine::transport() { return impl_->transport(); }
Request Engine::isend(int peer, Tag tag, const void* buf, size_t bytes, uint32_t call_check) {
  return impl_->isend(peer, tag, buf, bytes, call_check);
}
Request Engine::irecv(int peer, Tag tag, void* buf, size_t bytes, Tag tag_mask, CallCheck check) {
  return impl_->irecv(peer, tag, buf, bytes, tag_mask, check);
}
Completion Engine::wait(Request& request) { return impl_->wait(request); }
void Engine::wait_all(std::span<Request> requests) { impl_->wait_all(requests); }
bool Engine::test(Request& request, Completion* done) { return impl_->test(request, done); }
int Engine::progress() { return impl_->progress(); }
std::optional<Completion> Engine::probe(int peer, Tag tag, Tag tag_mask) { return impl_->probe(peer, tag, tag_mask); }
void Engine::progress_until(const Request& request, const std::function<bool()>& stop) {
  impl_->progress_until(request, stop);
}
void Engine::set_failure_probe(std::function<std::optional<Error>()> probe) {
  impl_->set_failure_probe(std::move(probe));
}
void Engine::flush_sends(std::chrono::milliseconds linger, std::chrono::milliseconds limit) noexcept {
  impl_->flush_sends(linger, limit);
}
void Engine::set_timeout(std::chrono::milliseconds timeout) { impl_->set_timeout(timeout); }
std::chrono::milliseconds Engine::timeout() const { return impl_->settings().timeout; }
bool Engine::finished(const Request& request) const { return impl_->finished(request); }
Error Engine::timeout_error(const Request& request) { return impl_->timeout_error(request); }
std::optional<Error> Engine::probe_failure() { return impl_->probe_failure(); }
size_t Engine::unexpected_count() const { return impl_->unexpected_count(); }
std::optional<std::pair<int, Tag>> Engine::find_unexpected(const std::function<bool(int, Tag)>& match) const {
  return impl_->find_unexpected(match);
}
void Engine::set_progress_hook(std::function<int()> hook) { impl_->set_progress_hook(std::move(hook)); }
const Counters& Engine::counters() const { return impl_->counters(); }
void Engine::abandon_all(const Error& cause) { impl_->abandon_all(cause); }
void Engine::persist_memory(const void* base, size_t bytes) { impl_->reg_cache().add_persistent(base, bytes); }
void Engine::forget_memory(const void* base, size_t bytes) { impl_->reg_cache().forget(base, bytes); }

}  // namespace chorus::p2p
