#include "transports/verbs/rc_mesh_flow_control.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::transport::rc {

namespace {

// Counters wrap: a is ahead of b when the signed distance is positive.
bool ahead(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }

}  // namespace

FlowControl::FlowControl(const FlowParams& params) : params_(params) {
  if (params.size < 1 || params.credits < 1 || params.sq_capacity < 1 || params.send_buffers < 1 ||
      params.send_buffers > (1u << 28)) {
    fail(Status::internal, "verbs flow control: bad parameters (", params.size, " ranks, ", params.credits,
         " credits, send queue of ", params.sq_capacity, ", ", params.send_buffers,
         " bounce buffers; each must be at least 1, bounce buffers at most 2^28)");
  }
  peers_.resize(static_cast<size_t>(params.size));
  for (Peer& peer : peers_) {
    peer.sent = params.initial_count;
    peer.limit = params.initial_count;
    peer.granted = params.initial_count + params.credits;
    peer.advertised = peer.granted;
  }
  // Handed out from the back: buffer 0 first.
  for (uint32_t i = 0; i < params.send_buffers; ++i) {
    free_send_buffers_.push_back(static_cast<int32_t>(params.send_buffers - 1 - i));
  }
}

void FlowControl::not_a_peer(int peer, const char* what) const {
  fail(Status::internal, "verbs flow control: ", what, " for rank ", peer, ", not in 0..", params_.size - 1);
}

void FlowControl::connect_peer(int peer, uint32_t remote_credits, int max_reads) {
  Peer& state = peer_at(peer, "connect");
  if (remote_credits < 1 || max_reads < 1) {
    fail(Status::internal, "verbs flow control: rank ", peer, " grants ", remote_credits, " credits and serves ",
         max_reads, " reads; each must be at least 1");
  }
  state.limit = params_.initial_count + remote_credits;
  state.max_reads = max_reads;
}

size_t FlowControl::bytes_per_peer() { return sizeof(Peer); }

uint32_t FlowControl::credits_left(int peer) const {
  const Peer& state = peers_[static_cast<size_t>(peer)];
  return state.limit - state.sent;
}

bool FlowControl::sends_pending() const {
  return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return !p.failed && !p.backlog.empty(); });
}

std::string FlowControl::describe(int peer) const {
  const Peer& state = peers_[static_cast<size_t>(peer)];
  return concat(state.reads_in_flight, " RDMA reads in flight and ", state.reads.size(), " queued, send queue ",
                state.sq_used, "/", params_.sq_capacity, ", ", state.limit - state.sent, " send credits, ",
                state.backlog.size(), " sends waiting for credits");
}

void FlowControl::send(int peer, const void* header, size_t header_bytes, const void* payload, size_t payload_bytes,
                       Poster& poster) {
  Peer& state = peer_at(peer, "send");
  if (state.backlog.empty() && try_send(peer, header, header_bytes, payload, payload_bytes, poster)) return;
  std::vector<uint8_t> message(header_bytes + payload_bytes);
  if (header_bytes != 0) std::memcpy(message.data(), header, header_bytes);
  if (payload_bytes != 0) std::memcpy(message.data() + header_bytes, payload, payload_bytes);
  state.backlog.push_back(std::move(message));
  mark_for_service(peer);
}

void FlowControl::read(int peer, const std::vector<PendingRead>& pieces, Poster& poster) {
  Peer& state = peer_at(peer, "read");
  state.reads.insert(state.reads.end(), pieces.begin(), pieces.end());
  start_reads(peer, poster);
  if (!state.reads.empty()) mark_for_service(peer);
}

// Whether the next work request on this QP must be signalled: periodically,
// so unsignalled entries are retired, and early when bounce buffers run low
// or the send queue is about to fill.
bool FlowControl::want_signal(Peer& peer, bool uses_buffer) {
  const int interval = std::max(1, std::min(16, params_.sq_capacity / 4));
  if (++peer.unsignaled >= interval || (uses_buffer && free_send_buffers_.size() < params_.send_buffers / 4) ||
      peer.sq_used + 1 >= params_.sq_capacity) {
    peer.unsignaled = 0;
    return true;
  }
  return false;
}

uint32_t FlowControl::push_sq_entry(Peer& peer, int32_t send_buffer) {
  const uint32_t sequence = peer.next_sequence++;
  peer.in_flight.push_back(SqEntry{sequence, send_buffer});
  ++peer.sq_used;
  return sequence;
}

// The post of the newest entry failed: nothing was posted.
void FlowControl::pop_sq_entry(Peer& peer) {
  if (peer.in_flight.back().send_buffer >= 0) free_send_buffers_.push_back(peer.in_flight.back().send_buffer);
  peer.in_flight.pop_back();
  --peer.sq_used;
  --peer.next_sequence;
}

// Posts now if a credit, a send-queue slot and (unless inlined) a bounce
// buffer are free; false means "queue it" and nothing was posted.
bool FlowControl::try_send(int p, const void* header, size_t header_bytes, const void* payload, size_t payload_bytes,
                           Poster& poster) {
  Peer& peer = peers_[static_cast<size_t>(p)];
  if (!ahead(peer.limit, peer.sent)) {
    const uint32_t written = poster.mailbox(p);
    if (ahead(written, peer.limit)) peer.limit = written;
  }
  if (!ahead(peer.limit, peer.sent) || peer.sq_used >= params_.sq_capacity) return false;
  const bool inline_send = kEagerHeaderBytes + header_bytes + payload_bytes <= inline_limit_;
  if (!inline_send && free_send_buffers_.empty()) return false;
  int32_t buffer = -1;
  if (!inline_send) {
    buffer = free_send_buffers_.back();
    free_send_buffers_.pop_back();
  }
  const bool signaled = want_signal(peer, !inline_send);
  const uint32_t sequence = push_sq_entry(peer, buffer);
  try {
    poster.post_message(SendWr{p, sequence, signaled}, buffer, peer.granted, header, header_bytes, payload,
                      payload_bytes);
  } catch (...) {
    pop_sq_entry(peer);
    throw;
  }
  ++peer.sent;
  peer.advertised = peer.granted;
  return true;
}

bool FlowControl::credit_write_due(const Peer& peer) const {
  return peer.granted - peer.advertised >= std::max(1u, params_.credits / 2);
}

// Tells the peer how many receives we have made available to it, without
// using one of its receives: credits never depend on credits.
bool FlowControl::send_credit_write(int p, Poster& poster) {
  Peer& peer = peers_[static_cast<size_t>(p)];
  if (peer.sq_used >= params_.sq_capacity) return false;
  const bool signaled = want_signal(peer, false);
  const uint32_t sequence = push_sq_entry(peer, -1);
  try {
    poster.post_credit_write(SendWr{p, sequence, signaled}, peer.granted);
  } catch (...) {
    pop_sq_entry(peer);
    throw;
  }
  peer.advertised = peer.granted;
  ++credit_writes_;
  return true;
}

void FlowControl::start_reads(int p, Poster& poster) {
  Peer& peer = peers_[static_cast<size_t>(p)];
  while (!peer.reads.empty() && peer.reads_in_flight < peer.max_reads && peer.sq_used < params_.sq_capacity) {
    peer.unsignaled = 0;  // a READ is always signalled
    const uint32_t sequence = push_sq_entry(peer, -1);
    try {
      poster.post_read_piece(SendWr{p, sequence, true}, peer.reads.front());
    } catch (...) {
      pop_sq_entry(peer);
      throw;
    }
    ++peer.reads_in_flight;
    peer.reads.pop_front();
  }
}

void FlowControl::on_received(int p, uint32_t granted_by_peer) {
  Peer& peer = peer_at(p, "receive");
  if (ahead(granted_by_peer, peer.limit)) peer.limit = granted_by_peer;
}

void FlowControl::on_reposted(int p) {
  Peer& peer = peer_at(p, "repost");
  ++peer.granted;
  if (!peer.backlog.empty() || credit_write_due(peer)) mark_for_service(p);
}

void FlowControl::on_completion(int p, uint32_t sequence) {
  Peer& peer = peer_at(p, "completion");
  while (!peer.in_flight.empty()) {
    const SqEntry entry = peer.in_flight.front();
    if (ahead(entry.sequence, sequence)) break;
    peer.in_flight.pop_front();
    --peer.sq_used;
    if (entry.send_buffer >= 0) free_send_buffers_.push_back(entry.send_buffer);
  }
  if (!peer.backlog.empty() || !peer.reads.empty()) mark_for_service(p);
}

void FlowControl::on_read_done(int p) {
  Peer& peer = peer_at(p, "read completion");
  --peer.reads_in_flight;
  if (!peer.reads.empty()) mark_for_service(p);
}

void FlowControl::fail_peer(int p) {
  peer_at(p, "failure").failed = true;
  mark_for_service(p);
}

void FlowControl::mark_for_service(int p) {
  Peer& peer = peers_[static_cast<size_t>(p)];
  if (!peer.needs_service) {
    peer.needs_service = true;
    service_list_.push_back(p);
  }
}

int FlowControl::service(Poster& poster, ReadJobs& reads) {
  int progressed = 0;
  const size_t count = service_list_.size();
  for (size_t i = 0; i < count; ++i) {
    const int p = service_list_.front();
    service_list_.pop_front();
    Peer& peer = peers_[static_cast<size_t>(p)];
    peer.needs_service = false;
    if (peer.failed) {
      // The engine already failed every request involving this peer.
      peer.backlog.clear();
      for (PendingRead& read : peer.reads) {
        read.job->failed = true;
        if (--read.job->pieces_left == 0) reads.finish(read.job);
      }
      peer.reads.clear();
      continue;
    }
    while (!peer.backlog.empty()) {
      const std::vector<uint8_t>& message = peer.backlog.front();
      if (!try_send(p, message.data(), message.size(), nullptr, 0, poster)) break;
      peer.backlog.pop_front();
      ++progressed;
    }
    start_reads(p, poster);
    if (credit_write_due(peer) && send_credit_write(p, poster)) ++progressed;
    if (!peer.backlog.empty() || !peer.reads.empty() || credit_write_due(peer)) mark_for_service(p);
  }
  return progressed;
}

}  // namespace chorus::transport::rc
