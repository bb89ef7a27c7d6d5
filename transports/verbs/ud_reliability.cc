// Go-back-N reliability over UD datagrams. The protocol and its parameters:
// docs/transport-ud.md; the contract: ud_reliability.hpp.
#include "transports/verbs/ud_reliability.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

namespace chorus::transport::ud {

namespace {

// Sequence numbers wrap: a is ahead of b when the signed distance is positive.
bool ahead(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }

constexpr uint8_t kMaxBackoff = 30;
constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

}  // namespace

Reliability::Reliability(int rank, int size, const Params& params, size_t max_frame_bytes, uint8_t* arena)
    : rank_(rank), size_(size), params_(params), max_frame_bytes_(max_frame_bytes), arena_(arena) {
  if (size < 1 || rank < 0 || rank >= size) fail(Status::internal, "UD reliability: rank ", rank, " of ", size);
  if (params.window < 1 || params.slots < 1 || params.ack_slots < 1 || params.ack_every < 1)
    fail(Status::config, "UD reliability: window, slots, ack slots and ack_every must be at least 1");
  if (params.window > (1u << 30))
    fail(Status::config, "UD reliability: a window of ", params.window, " fragments leaves no room to tell old from new");
  if (max_frame_bytes <= sizeof(WireHeader) || max_frame_bytes > sizeof(WireHeader) + UINT16_MAX)
    fail(Status::config, "UD reliability: a datagram of ", max_frame_bytes, " bytes cannot carry a ",
         sizeof(WireHeader), "-byte header and a payload");
  if (arena_ == nullptr) {
    own_arena_.resize(static_cast<size_t>(params.slots) * max_frame_bytes);
    arena_ = own_arena_.data();
  }
  peers_.resize(static_cast<size_t>(size));
  for (PeerState& state : peers_) state.next_seq = state.unacked_seq = state.expected = params.initial_seq;
  slots_.resize(params.slots);
  free_slots_.reserve(params.slots);
  for (int32_t slot = static_cast<int32_t>(params.slots) - 1; slot >= 0; --slot) free_slots_.push_back(slot);
}

void Reliability::send(int peer, uint8_t channel, const void* header, size_t header_bytes, const void* payload,
                       size_t payload_bytes, Link& link, uint64_t now_ns) {
  if (peer < 0 || peer >= size_)
    fail(Status::internal, "UD reliability: no peer ", peer, " to send to (rank ", rank_, " of ", size_, ")");
  PeerState& state = peers_[peer];
  if (state.failed)
    fail_peer(Status::peer_failed, peer, "UD: rank ", peer, " stopped acknowledging earlier; nothing more is sent to it");
  PendingMessage message{peer, channel, 0, {}};
  message.bytes.resize(header_bytes + payload_bytes);
  if (header_bytes != 0) std::memcpy(message.bytes.data(), header, header_bytes);
  if (payload_bytes != 0) std::memcpy(message.bytes.data() + header_bytes, payload, payload_bytes);
  // Behind queued messages of the same peer: keep the order.
  if (state.backlog == 0 && send_fragments(message, link, now_ns)) return;
  backlog_.push_back(std::move(message));
  ++state.backlog;
}

bool Reliability::send_fragments(PendingMessage& message, Link& link, uint64_t now_ns) {
  PeerState& state = peers_[message.peer];
  const size_t total = message.bytes.size();
  do {
    if (state.next_seq - state.unacked_seq >= params_.window || free_slots_.empty()) return false;
    const int32_t slot = free_slots_.back();
    free_slots_.pop_back();
    const size_t chunk = std::min(max_payload(), total - message.offset);
    uint8_t flags = kData;
    if (message.offset == 0) flags |= kFirst;
    if (message.offset + chunk == total) flags |= kLast;
    const WireHeader header{state.next_seq, state.expected, static_cast<uint32_t>(rank_),
                            static_cast<uint16_t>(chunk), flags, message.channel};
    uint8_t* frame = slot_frame(slot);
    std::memcpy(frame, &header, sizeof header);
    if (chunk != 0) std::memcpy(frame + sizeof header, message.bytes.data() + message.offset, chunk);

    Slot& entry = slots_[slot];
    entry = Slot{state.next_seq, static_cast<uint16_t>(sizeof header + chunk), 0, -1, message.peer, false};
    ++state.next_seq;
    if (state.head == -1) {
      // The first unacknowledged fragment starts both clocks afresh.
      state.head = slot;
      state.backoff = 0;
      state.progress_at = now_ns;
      state.retransmit_at = now_ns + backoff_ns(0);
    } else {
      slots_[state.tail].next = slot;
    }
    state.tail = slot;
    activate(message.peer);
    message.offset += chunk;
    transmit_slot(slot, link);
    ++stats_.fragments_sent;
    // The fragment carries our cumulative ack; a gap report still needs its own ack.
    if (!state.gap_pending) {
      state.ack_at = 0;
      state.received_unacked = 0;
    }
  } while (message.offset < total);
  return true;
}

void Reliability::transmit_slot(int slot, Link& link) {
  Slot& entry = slots_[slot];
  uint8_t* frame = slot_frame(slot);
  if (entry.sends_in_flight == 0) {
    // Nothing is reading the frame: a retransmission carries a fresh ack.
    const uint32_t ack = peers_[entry.peer].expected;
    std::memcpy(frame + offsetof(WireHeader, ack), &ack, sizeof ack);
  }
  ++entry.sends_in_flight;
  link.transmit(entry.peer, slot, frame, entry.frame_bytes);
}

void Reliability::on_frame(const void* frame, size_t bytes, Link& link, Delivery& delivery, uint64_t now_ns) {
  WireHeader header;
  if (bytes < sizeof header) {
    ++stats_.malformed;
    return;
  }
  std::memcpy(&header, frame, sizeof header);
  const bool data = (header.flags & kData) != 0;
  const bool valid = header.src < static_cast<uint32_t>(size_) &&
                     sizeof header + header.bytes == bytes && (data || header.bytes == 0) &&
                     (header.flags & ~(kData | kFirst | kLast | kGap)) == 0;
  if (!valid) {
    ++stats_.malformed;
    return;
  }
  const int peer = static_cast<int>(header.src);
  if (peers_[peer].failed) return;
  process_ack(peer, header.ack, !data && (header.flags & kGap) != 0, link, now_ns);
  if (data) receive_data(peer, header, static_cast<const uint8_t*>(frame) + sizeof header, delivery, now_ns);
}

void Reliability::process_ack(int peer, uint32_t ack, bool gap, Link& link, uint64_t now_ns) {
  PeerState& state = peers_[peer];
  if (ahead(ack, state.next_seq)) {
    ++stats_.malformed;  // acknowledges what was never sent
    return;
  }
  if (ahead(state.unacked_seq, ack)) return;  // older than what we know: a late frame
  if (ack != state.unacked_seq) {
    while (state.head != -1 && ahead(ack, slots_[state.head].seq)) {
      const int32_t slot = state.head;
      state.head = slots_[slot].next;
      release_slot(slot);
    }
    if (state.head == -1) state.tail = -1;
    state.unacked_seq = ack;
    state.backoff = 0;
    state.progress_at = now_ns;
    state.retransmit_at = now_ns + backoff_ns(0);
  }
  // A hole at `ack`: go back to it now rather than after the timer.
  if (gap && state.head != -1) retransmit(peer, link);
}

void Reliability::receive_data(int peer, const WireHeader& header, const uint8_t* payload, Delivery& delivery,
                               uint64_t now_ns) {
  PeerState& state = peers_[peer];
  if (header.seq != state.expected) {
    if (ahead(state.expected, header.seq)) {
      ++stats_.duplicates;  // our ack was lost or is late: say again what arrived
      owe_ack(peer, now_ns);
    } else {
      ++stats_.out_of_order;  // one gap ack per hole; the sender goes back to it
      if (!state.gap_reported) {
        state.gap_reported = true;
        state.gap_pending = true;
        owe_ack(peer, now_ns);
      }
    }
    return;
  }
  const bool first = (header.flags & kFirst) != 0;
  const bool last = (header.flags & kLast) != 0;
  auto partial = partial_.find(peer);
  // In-order delivery means a message's fragments arrive back to back.
  if (first == (partial != partial_.end())) {
    ++stats_.malformed;
    return;
  }
  ++state.expected;
  state.gap_reported = false;
  ++state.received_unacked;
  owe_ack(peer, state.received_unacked >= params_.ack_every ? now_ns : now_ns + params_.ack_delay_ns);
  if (first && last) {
    ++stats_.messages_delivered;
    delivery.on_message(peer, header.channel, payload, header.bytes);
    return;
  }
  if (first) partial = partial_.emplace(peer, std::vector<uint8_t>{}).first;
  partial->second.insert(partial->second.end(), payload, payload + header.bytes);
  if (!last) return;
  // Out of the map before the call: the consumer may send, or throw.
  std::vector<uint8_t> message = std::move(partial->second);
  partial_.erase(partial);
  ++stats_.messages_delivered;
  delivery.on_message(peer, header.channel, message.data(), message.size());
}

void Reliability::owe_ack(int peer, uint64_t due_ns) {
  PeerState& state = peers_[peer];
  due_ns = std::max<uint64_t>(due_ns, 1);  // 0 means "none owed"
  if (state.ack_at == 0 || due_ns < state.ack_at) state.ack_at = due_ns;
  activate(peer);
}

void Reliability::send_ack(int peer, Link& link) {
  if (acks_in_flight_ >= params_.ack_slots) return;  // stays owed until a slot completes
  PeerState& state = peers_[peer];
  const WireHeader header{0, state.expected, static_cast<uint32_t>(rank_), 0,
                          static_cast<uint8_t>(state.gap_pending ? kGap : 0), 0};
  ++acks_in_flight_;
  ++stats_.acks_sent;
  if (state.gap_pending) ++stats_.gap_acks_sent;
  state.ack_at = 0;
  state.received_unacked = 0;
  state.gap_pending = false;
  link.transmit(peer, kAckSlot, &header, sizeof header);
}

void Reliability::retransmit(int peer, Link& link) {
  // Go-back-N: everything from the oldest unacknowledged fragment, except
  // frames whose previous send has not even left yet.
  for (int32_t slot = peers_[peer].head; slot != -1; slot = slots_[slot].next) {
    if (slots_[slot].sends_in_flight != 0) continue;
    transmit_slot(slot, link);
    ++stats_.retransmissions;
  }
}

void Reliability::on_sent(int slot) {
  if (slot == kAckSlot) {
    if (acks_in_flight_ > 0) --acks_in_flight_;
    return;
  }
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) return;
  Slot& entry = slots_[slot];
  if (entry.sends_in_flight > 0) --entry.sends_in_flight;
  if (entry.acked && entry.sends_in_flight == 0) {
    entry.peer = -1;
    free_slots_.push_back(slot);
  }
}

void Reliability::release_slot(int slot) {
  Slot& entry = slots_[slot];
  entry.acked = true;
  entry.next = -1;
  // A send still reading the frame keeps it until on_sent().
  if (entry.sends_in_flight == 0) {
    entry.peer = -1;
    free_slots_.push_back(slot);
  }
}

void Reliability::tick(Link& link, Delivery& delivery, uint64_t now_ns) {
  pump_backlog(link, now_ns);
  std::vector<int> failed;
  for (size_t i = 0; i < active_.size();) {
    const int peer = active_[i];
    PeerState& state = peers_[peer];
    if (!state.failed && state.head != -1 && now_ns >= state.retransmit_at) {
      if (now_ns - state.progress_at >= params_.give_up_ns) {
        failed.push_back(peer);
      } else {
        ++stats_.timeouts;
        retransmit(peer, link);
        state.backoff = static_cast<uint8_t>(std::min<int>(state.backoff + 1, kMaxBackoff));
        state.retransmit_at = now_ns + backoff_ns(state.backoff);
      }
    }
    if (!state.failed && state.ack_at != 0 && now_ns >= state.ack_at) send_ack(peer, link);
    if (state.head == -1 && state.ack_at == 0) {
      state.active = false;
      active_[i] = active_.back();
      active_.pop_back();
    } else {
      ++i;
    }
  }
  // Reported after the loop: the consumer may send to others from the callback.
  for (int peer : failed) give_up_on(peer, delivery, now_ns);
}

void Reliability::pump_backlog(Link& link, uint64_t now_ns) {
  std::vector<int> blocked;  // peers whose window is full: their later messages wait too
  for (auto it = backlog_.begin(); it != backlog_.end() && !free_slots_.empty();) {
    const int peer = it->peer;
    if (std::find(blocked.begin(), blocked.end(), peer) != blocked.end()) {
      ++it;
    } else if (send_fragments(*it, link, now_ns)) {
      --peers_[peer].backlog;
      it = backlog_.erase(it);
    } else {
      blocked.push_back(peer);
      ++it;
    }
  }
}

void Reliability::give_up_on(int peer, Delivery& delivery, uint64_t now_ns) {
  PeerState& state = peers_[peer];
  const uint32_t unacked = state.next_seq - state.unacked_seq;
  const double silent_s = static_cast<double>(now_ns - state.progress_at) / 1e9;
  const unsigned rounds = state.backoff;
  state.failed = true;
  for (int32_t slot = state.head; slot != -1;) {
    const int32_t next = slots_[slot].next;
    release_slot(slot);
    slot = next;
  }
  state.head = state.tail = -1;
  state.ack_at = 0;
  state.backlog = 0;
  std::erase_if(backlog_, [peer](const PendingMessage& message) { return message.peer == peer; });
  partial_.erase(peer);
  delivery.on_peer_failed(
      peer, Error(Status::peer_failed,
                  concat("UD: rank ", peer, " acknowledged nothing for ", silent_s, " s (", unacked,
                         " fragments unacknowledged from sequence ", state.unacked_seq, ", ", rounds,
                         " retransmission rounds): it has likely failed or its host is unreachable"),
                  peer));
}

void Reliability::activate(int peer) {
  if (peers_[peer].active) return;
  peers_[peer].active = true;
  active_.push_back(peer);
}

uint64_t Reliability::backoff_ns(uint8_t backoff) const {
  return std::min(params_.rto_initial_ns << backoff, params_.rto_max_ns);
}

uint64_t Reliability::next_deadline_ns() const {
  uint64_t next = kNever;
  for (int peer : active_) {
    const PeerState& state = peers_[peer];
    if (state.failed) continue;
    if (state.head != -1) next = std::min(next, state.retransmit_at);
    if (state.ack_at != 0) next = std::min(next, state.ack_at);
  }
  return next;
}

bool Reliability::sends_pending() const {
  if (!backlog_.empty()) return true;
  return std::any_of(active_.begin(), active_.end(), [this](int peer) { return peers_[peer].head != -1; });
}

uint32_t Reliability::in_flight(int peer) const { return peers_[peer].next_seq - peers_[peer].unacked_seq; }

std::string Reliability::describe(int peer) const {
  const PeerState& state = peers_[peer];
  if (state.failed) return "UD: failed (stopped acknowledging)";
  std::string sending = state.head == -1
                            ? std::string("nothing unacknowledged")
                            : concat("sequence ", state.unacked_seq, "..", state.next_seq - 1, " unacknowledged (",
                                     in_flight(peer), " of a window of ", params_.window, "), backoff ",
                                     static_cast<int>(state.backoff));
  return concat("UD: ", sending, ", ", state.backlog, " messages waiting, next expected from it ", state.expected);
}

size_t Reliability::bytes_shared() const {
  return sizeof(*this) + static_cast<size_t>(params_.slots) * max_frame_bytes_ + slots_.capacity() * sizeof(Slot) +
         free_slots_.capacity() * sizeof(int32_t) + active_.capacity() * sizeof(int);
}

size_t Reliability::bytes_in_use() const {
  size_t bytes = 0;
  for (const PendingMessage& message : backlog_) bytes += sizeof message + message.bytes.capacity();
  for (const auto& [peer, partial] : partial_) bytes += sizeof peer + sizeof partial + partial.capacity();
  return bytes;
}

}  // namespace chorus::transport::ud
