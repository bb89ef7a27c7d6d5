// The P2P engine (engine.hpp): posting sends and receives, matching them with
// arrivals, the transport's callbacks and failing operations; the Engine
// facade. Rendezvous: engine_rendezvous.cc; waiting: progress.cc.
#include "p2p/engine_impl.hpp"

#include "common/log.hpp"
#include "common/copy.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace chorus::p2p {

Engine::Impl::Impl(transport::Transport& transport, int rank, int size, int local_size, const config::Settings& settings)
    : transport_(transport),
      rank_(rank),
      size_(size),
      settings_(settings),
      eager_limit_(std::min<size_t>(settings.eager_limit, transport.max_eager_bytes() - sizeof(MessageHeader))),
      reg_cache_(transport, settings.reg_cache_bytes, settings.leave_pinned),
      posted_(size),
      unexpected_(size),
      peer_failures_(static_cast<size_t>(size)),
      progress_(*this, local_size) {}

Request Engine::Impl::isend(int peer, Tag tag, const void* buffer, size_t bytes, uint32_t call_check,
                            bool synchronous) {
  check_peer(peer, "send to");
  check_buffer(buffer, bytes, "send");
  const bool eager = bytes <= eager_limit_ && !synchronous;
  if (!synchronous && sends_at_once(peer, bytes)) {
    MessageHeader header{MessageType::eager, tag, bytes, call_check};
    transport_.post_eager(peer, &header, sizeof header, buffer, bytes);
    ++counters_.eager_sent;
    count_out(peer, bytes);
    // The transport copied the bytes: done, with no slot to allocate or free.
    return Request{Request::kFinishedSend, static_cast<uint32_t>(peer)};
  }
  auto [request, slot] = allocate(Slot::Kind::send, peer, tag);
  slot.buffer = const_cast<void*>(buffer);
  slot.capacity = bytes;
  slot.result = Completion{peer};
  if (eager) {
    // The peer has failed: nothing is sent, and the request fails just below
    // (fail_slot leaves finished requests alone, so it must not look done).
    slot.state = Slot::State::posted;
  } else {
    slot.start_rendezvous_state();
    RtsMessage rts{};
    rts.header = MessageHeader{MessageType::rts, tag, bytes, call_check};
    if (bytes != 0) {  // an empty synchronous send has nothing to read: nothing registered
      slot.registration = reg_cache_.acquire(buffer, bytes);
      const auto [remote_address, remote_key] = slot.registration->remote_for(peer);
      rts.body.address = remote_address + (reinterpret_cast<uintptr_t>(buffer) -
                                           reinterpret_cast<uintptr_t>(slot.registration->base()));
      rts.body.key = remote_key;
    }
    rts.body.send_id = encode_id(request);
    transport_.post_eager(peer, &rts, sizeof rts, nullptr, 0);
    slot.state = Slot::State::awaiting_fin;
    ++counters_.rendezvous_sent;
  }
  fail_if_peer_failed(slot);
  return request;
}

Request Engine::Impl::irecv(int peer, Tag tag, void* buffer, size_t bytes, Tag mask, CallCheck check) {
  if (peer != kAnySource) check_peer(peer, "receive from");
  check_buffer(buffer, bytes, "receive");
  auto [request, slot] = allocate(Slot::Kind::recv, peer, tag);
  slot.tag_mask = mask;
  slot.check = check;
  slot.buffer = buffer;
  slot.capacity = bytes;
  slot.state = Slot::State::posted;
  if (auto found = unexpected_.take(peer, tag, mask)) {
    deliver_queued(request.slot, found->first, found->second);
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

bool Engine::Impl::test(Request& request, Completion* done) {
  poll_transport();  // a test progresses, even when its request is done
  return reap(request, done);
}

std::optional<Completion> Engine::Impl::probe(int peer, Tag tag, Tag mask) {
  if (peer != kAnySource) check_peer(peer, "probe for a message from");
  poll_transport();
  auto [source, message] = unexpected_.peek(peer, tag, mask);
  if (message == nullptr) return std::nullopt;
  return Completion{source, message->tag, message->length};
}

std::optional<std::pair<uint64_t, Completion>> Engine::Impl::claim(int peer, Tag tag, Tag mask) {
  if (peer != kAnySource) check_peer(peer, "matched probe for a message from");
  poll_transport();
  auto found = unexpected_.take(peer, tag, mask);
  if (!found) return std::nullopt;
  const Completion what{found->first, found->second.tag, found->second.length};
  const uint64_t id = ++last_claim_;
  claimed_.emplace(id, std::move(*found));
  return std::pair<uint64_t, Completion>{id, what};
}

Request Engine::Impl::irecv_claimed(uint64_t id, void* buffer, size_t bytes) {
  check_buffer(buffer, bytes, "receive");
  auto claimed = claimed_.extract(id);  // delivered or failed below, never received again
  if (claimed.empty()) {
    fail(Status::invalid_argument, "a receive of a matched message that was already received or never probed");
  }
  const auto& [source, message] = claimed.mapped();
  auto [request, slot] = allocate(Slot::Kind::recv, source, message.tag);
  slot.buffer = buffer;
  slot.capacity = bytes;
  slot.state = Slot::State::posted;
  deliver_queued(request.slot, source, message);
  return request;
}

bool Engine::Impl::withdraw_receive(const Request& request) {
  if (!request.valid() || request.finished_send()) return false;
  Slot* slot = find_by_id(encode_id(request));
  // A posted receive is one no message has matched: a match moves it on
  // (done, failed, or reading) in the same call.
  if (slot == nullptr || slot->kind != Slot::Kind::recv || slot->state != Slot::State::posted) return false;
  posted_.remove(slot->index, slot->peer);
  release(slot->index);
  return true;
}

std::optional<std::pair<int, Tag>> Engine::Impl::find_unexpected(const std::function<bool(int, Tag)>& match) const {
  std::optional<std::pair<int, Tag>> found;
  unexpected_.for_each([&](int source, Tag tag, const Unexpected&) {
    if (!found && match(source, tag)) found = std::pair<int, Tag>{source, tag};
  });
  return found;
}

void Engine::Impl::on_eager(int peer, const void* data, size_t bytes) {
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
      count_in(peer, body_bytes);
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

void Engine::Impl::on_read_done(uint64_t context) {
  auto found = find_by_id(context);
  if (!found) return;  // the request failed meanwhile
  Slot& slot = *found;
  --slot.reads_outstanding;
  deferred_reads_.push_back(context);
}

void Engine::Impl::on_error(uint64_t context, int peer, const Error& error) {
  if (context != 0) {
    if (auto found = find_by_id(context)) return fail_slot(*found, error);
  }
  if (peer >= 0 && peer < size_) {
    peer_failures_[static_cast<size_t>(peer)] = error;
    for (size_t index = 0; index < slots_.size(); ++index) {
      Slot& slot = slots_[index];
      if (slot.peer == peer || (slot.kind == Slot::Kind::recv && slot.peer == kAnySource)) fail_slot(slot, error);
    }
    return;
  }
  abandon_all(error);
}

void Engine::Impl::abandon_all(const Error& cause) {
  transport_.note_abandoned(cause);
  for (size_t index = 0; index < slots_.size(); ++index) fail_slot(slots_[index], cause);
}

void Engine::Impl::cancel(const Request& request, const Error& cause) {
  if (!request.valid() || request.finished_send()) return;
  if (Slot* slot = find_by_id(encode_id(request))) fail_slot(*slot, cause);
}

std::pair<Request, Slot&> Engine::Impl::allocate(Slot::Kind kind, int peer, Tag tag) {
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

void Engine::Impl::fail_slot(Slot& slot, const Error& error) {
  if (slot.state == Slot::State::free || finished(slot)) return;
  if (slot.kind == Slot::Kind::recv && slot.state == Slot::State::posted) posted_.remove(slot.index, slot.peer);
  withdraw(slot);
  slot.state = Slot::State::failed;
  slot.error = error;
  count_finished(slot);
}

// A failed operation's buffer is the application's again as soon as the
// failure is reported (it may free it), so the engine takes back what it
// lent the transport: reads still in flight into the buffer land nowhere,
// and a peer still acting on the operation is refused the send buffer
// (its read fails) instead of reading memory that may be freed.
void Engine::Impl::withdraw(Slot& slot) {
  if (!slot.rendezvous || !slot.registration) return;
  if (slot.reads_outstanding > 0) {
    transport_.cancel_reads(encode_id(Request{slot.index, slot.generation}));
    slot.reads_outstanding = 0;
  }
  reg_cache_.withdraw(slot.registration);
  slot.registration.reset();  // once no other operation holds it, the transport forgets it
}

// A message (eager payload or RTS) arrived: match it or keep it.
void Engine::Impl::arrive(int source, const MessageHeader& header, const uint8_t* payload, const RtsBody* rts) {
  if (const uint32_t index = posted_.match_slot(source, header.tag); index != PostedReceives::kNoSlot) {
    return deliver(index, source, header.tag, header.call_check, header.length, payload, rts);
  }
  ++counters_.unexpected;
  fail_receives_of_other_calls(source, header.tag, header.call_check);
  Unexpected message{header.tag, header.type, header.call_check, header.length};
  if (rts == nullptr) {
    message.keep_payload(payload);
  } else {
    message.rts = *rts;
  }
  unexpected_.add(source, header.tag, std::move(message));
}

// A posted receive takes a message that waited for it (unexpected, or
// claimed by a matched probe). Inlined into irecv, as deliver.
[[gnu::always_inline]] inline void Engine::Impl::deliver_queued(uint32_t index, int source,
                                                                const Unexpected& message) {
  const bool eager = message.type == MessageType::eager;
  deliver(index, source, message.tag, message.call_check, message.length, eager ? message.payload() : nullptr,
          eager ? nullptr : &message.rts);
  if (!eager) flush_deferred();
}

// A matched message: eager payload (rts == nullptr) or a rendezvous RTS.
// Inlined into its two callers: its own call frame was about a tenth of an
// eager message's delivery (callgrind; docs/performance.md).
[[gnu::always_inline]] inline void Engine::Impl::deliver(uint32_t index, int source, Tag tag, uint32_t call_check,
                                                         size_t length, const uint8_t* payload, const RtsBody* rts) {
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
void Engine::Impl::fail_receives_of_other_calls(int source, Tag tag, uint32_t call_check) {
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

Error Engine::Impl::other_call_error(int source, Tag tag) const {
  return Error(Status::invalid_argument,
               concat("rank ", rank_, " received from rank ", source,
                      " a message of a collective call with other arguments (", CallTag::describe(tag),
                      "): the ranks disagree on the collective, count, datatype, reduction op, root or algorithm"),
               source);
}

void Engine::Impl::deliver_eager(Slot& slot, int source, Tag tag, const uint8_t* payload, size_t length) {
  slot.result = Completion{source, tag, length};
  if (length > slot.capacity) return fail_slot(slot, truncation_error(slot, source, length));
  if (length != 0) copy_bytes(slot.buffer, payload, length);
  slot.state = Slot::State::done;
  ++finished_requests_;
  // A non-blocking receive completes here, its slot freed first (reaped as
  // reap() does, without looking it up again).
  if (slot.waiter != nullptr) {
    void* const waiter = slot.waiter;
    const Completion done = slot.result;
    release(slot.index);
    progress_.complete_delivered(waiter, done);
  }
}

Error Engine::Impl::truncation_error(const Slot& slot, int source, size_t length) const {
  return Error(Status::truncated,
               concat("rank ", rank_, " received a ", length, "-byte message from rank ", source,
                      " into a ", slot.capacity, "-byte buffer (", CallTag::describe(slot.tag),
                      "): counts or datatypes differ between ranks"),
               source);
}

// A peer sent something that breaks the protocol: fail what involves it.
void Engine::Impl::report_protocol_error(int peer, const std::string& what) {
  on_error(0, peer, Error(Status::internal, concat("protocol error from rank ", peer, ": ", what), peer));
}

Engine::Engine(transport::Transport& transport, int rank, int size, int local_size, const config::Settings& settings)
    : impl_(std::make_unique<Impl>(transport, rank, size, local_size, settings)) {}
Engine::~Engine() = default;
int Engine::rank() const { return impl_->rank(); }
int Engine::size() const { return impl_->size(); }
transport::Transport& Engine::transport() { return impl_->transport(); }
Request Engine::isend(int peer, Tag tag, const void* buf, size_t bytes, uint32_t call_check) {
  return impl_->isend(peer, tag, buf, bytes, call_check, false);
}
Request Engine::issend(int peer, Tag tag, const void* buf, size_t bytes) {
  return impl_->isend(peer, tag, buf, bytes, 0, true);
}
Request Engine::irecv(int peer, Tag tag, void* buf, size_t bytes, Tag tag_mask, CallCheck check) {
  return impl_->irecv(peer, tag, buf, bytes, tag_mask, check);
}
Completion Engine::wait(Request& request) { return impl_->wait(request); }
void Engine::wait_all(std::span<Request> requests) { impl_->wait_all(requests); }
bool Engine::test(Request& request, Completion* done) { return impl_->test(request, done); }
int Engine::progress() { return impl_->progress(); }
std::optional<Completion> Engine::probe(int peer, Tag tag, Tag tag_mask) { return impl_->probe(peer, tag, tag_mask); }
std::optional<std::pair<uint64_t, Completion>> Engine::claim(int peer, Tag tag, Tag tag_mask) {
  return impl_->claim(peer, tag, tag_mask);
}
Request Engine::irecv_claimed(uint64_t id, void* buf, size_t bytes) { return impl_->irecv_claimed(id, buf, bytes); }
bool Engine::holds_claim(uint64_t id) const { return impl_->holds_claim(id); }
bool Engine::withdraw_receive(const Request& request) { return impl_->withdraw_receive(request); }
void Engine::progress_until(const Request& request, const std::function<bool()>& stop) {
  impl_->progress_until(request, stop);
}
bool Engine::oversubscribed() const { return impl_->progress_engine().waiter_yields(); }
void Engine::wait_until(const std::function<bool()>& done, const std::function<Waiting()>& waiting_for) {
  impl_->wait_until(done, waiting_for);
}
void Engine::set_failure_probe(std::function<std::optional<Error>(bool stalled)> probe) {
  impl_->progress_engine().set_failure_probe(std::move(probe));
}
void Engine::flush_sends(std::chrono::milliseconds linger, std::chrono::milliseconds limit) noexcept {
  impl_->flush_sends(linger, limit);
}
void Engine::set_timeout(std::chrono::milliseconds timeout) { impl_->set_timeout(timeout); }
std::chrono::milliseconds Engine::timeout() const { return impl_->settings().timeout; }
bool Engine::finished(const Request& request) const { return impl_->finished(request); }
bool Engine::sends_at_once(int peer, size_t bytes) const { return impl_->sends_at_once(peer, bytes); }
Error Engine::timeout_error(const Request& request) { return impl_->timeout_error(request); }
std::optional<Error> Engine::probe_failure() { return impl_->progress_engine().probe_failure(/*stalled=*/true); }
size_t Engine::unexpected_count() const { return impl_->unexpected_count(); }
std::optional<std::pair<int, Tag>> Engine::find_unexpected(const std::function<bool(int, Tag)>& match) const {
  return impl_->find_unexpected(match);
}
Progress& Engine::progress_engine() { return impl_->progress_engine(); }
const Counters& Engine::counters() const { return impl_->counters(); }
void Engine::set_other_hosts(std::vector<bool> other_host) { impl_->set_other_hosts(std::move(other_host)); }
void Engine::abandon_all(const Error& cause) { impl_->abandon_all(cause); }
void Engine::cancel(const Request& request, const Error& cause) { impl_->cancel(request, cause); }
void Engine::persist_memory(const void* base, size_t bytes) { impl_->reg_cache().add_persistent(base, bytes); }
void Engine::forget_memory(const void* base, size_t bytes) { impl_->reg_cache().forget(base, bytes); }

}  // namespace chorus::p2p
