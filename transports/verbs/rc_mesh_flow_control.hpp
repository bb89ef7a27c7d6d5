// Credits and send-queue accounting of the RC mesh (docs/transport-verbs.md,
// "Eager messages and credits"), as a pure state machine: no verbs calls, no
// device. The transport (rc_mesh_*.cc) carries out the work requests it asks
// for through Poster and reports completions and receives back; the unit
// tests (tests/verbs/test_rc_flow_control.cc) drive it over a simulated wire.
//
// Per peer it keeps:
//  - credits: we may post an eager message while `limit` (receives the peer
//    granted us, cumulative) is ahead of `sent`. The peer's count reaches us
//    piggy-backed in every eager message it sends (EagerHeader) or by an RDMA
//    WRITE into our mailbox (Poster::mailbox), read only when we run out.
//  - what we grant: `granted` (receives we made available to the peer,
//    cumulative) and `advertised` (what it last heard). Half the credits used
//    without reverse traffic: a credit write is due.
//  - the send queue: at most `sq_capacity` work requests posted; selectively
//    signalled, and a signalled completion retires every earlier one (send
//    queues complete in order), returning send-queue slots and bounce buffers.
//  - a backlog of eager messages that found no credit, send-queue slot or
//    bounce buffer, sent in order (a new message waits behind it), and the
//    RDMA READ pieces beyond `max_reads` in flight.
// Shared by all peers: the bounce buffers, and the list of peers with work
// for service().
#pragma once

#include "transports/verbs/verbs_reads.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace chorus::transport::rc {

using verbs::PendingRead;
using verbs::ReadJobs;

// Before every eager payload on the wire: the sender's `granted` towards
// the receiver, piggy-backed for free.
struct EagerHeader {
  uint32_t granted;
  uint32_t reserved;
};
constexpr size_t kEagerHeaderBytes = sizeof(EagerHeader);

struct FlowParams {
  int size = 1;                 // ranks, this one included (it has a QP to itself)
  uint32_t credits = 64;        // receives this rank makes available to each peer
  int sq_capacity = 84;         // send work requests per QP
  uint32_t send_buffers = 256;  // bounce buffers, all peers together
  uint32_t initial_count = 0;   // origin of the cumulative counters (the tests start near 2^32)
};

// A send-queue work request the state machine asks for. A completion of a
// signalled one is reported with on_completion(peer, sequence).
struct SendWr {
  int peer;
  uint32_t sequence;
  bool signaled;
};

// What the state machine asks the QPs to do. A post that throws posted
// nothing: the state machine undoes its accounting and lets the error pass.
class Poster {
 public:
  virtual ~Poster() = default;
  // EagerHeader{granted} + header + payload. send_buffer >= 0: copy into that
  // bounce buffer; -1: the message fits the inline limit, send it inline.
  virtual void post_message(const SendWr& wr, int32_t send_buffer, uint32_t granted, const void* header,
                          size_t header_bytes, const void* payload, size_t payload_bytes) = 0;
  // RDMA WRITE of `granted` into the peer's credit mailbox (no receive used).
  virtual void post_credit_write(const SendWr& wr, uint32_t granted) = 0;
  // One READ piece (always signalled).
  virtual void post_read_piece(const SendWr& wr, const PendingRead& read) = 0;
  // What `peer` last wrote into our mailbox: the receives it granted us.
  virtual uint32_t mailbox(int peer) = 0;
};

class FlowControl {
 public:
  // Throws Error(Status::internal) for parameters it cannot work with.
  explicit FlowControl(const FlowParams& params);

  // At connect: the receives `peer` grants us, and the READs we may have in
  // flight to it.
  void connect_peer(int peer, uint32_t remote_credits, int max_reads);
  // Eager messages of up to this many bytes (EagerHeader included) go inline.
  void set_inline_limit(size_t bytes) { inline_limit_ = bytes; }

  // Posts the message now, or queues it behind the peer's backlog.
  void send(int peer, const void* header, size_t header_bytes, const void* payload, size_t payload_bytes,
            Poster& poster);
  // Queues READ pieces and posts what the peer's limits allow.
  void read(int peer, const std::vector<PendingRead>& pieces, Poster& poster);

  // An eager message from `peer` arrived carrying its `granted` count; call
  // before handing it on (a reply from inside delivery may use the credits).
  void on_received(int peer, uint32_t granted_by_peer);
  // Its receive buffer was posted again: one more receive granted to `peer`.
  void on_reposted(int peer);
  // The signalled work request `sequence` to `peer` completed (successfully
  // or not): it and every earlier one are retired.
  void on_completion(int peer, uint32_t sequence);
  // A READ piece to `peer` ended.
  void on_read_done(int peer);

  // The connection to `peer` failed: nothing more is posted to it; service()
  // drops its backlog and fails its queued READ pieces.
  void fail_peer(int peer);
  bool failed(int peer) const { return peers_[static_cast<size_t>(peer)].failed; }

  // Backlogs, queued READs and due credit writes, peer by peer; returns the
  // messages and credit writes posted.
  int service(Poster& poster, ReadJobs& reads);
  // Some peer has work for service(): do not block.
  bool needs_service() const { return !service_list_.empty(); }
  // Some live peer has eager messages not yet posted.
  bool sends_pending() const;

  // For timeout messages and tests.
  std::string describe(int peer) const;  // "0 RDMA reads in flight and 0 queued, send queue 1/84, ..."
  uint32_t credits_left(int peer) const;  // as last refreshed
  int sq_used(int peer) const { return peers_[static_cast<size_t>(peer)].sq_used; }
  size_t backlog(int peer) const { return peers_[static_cast<size_t>(peer)].backlog.size(); }
  int reads_in_flight(int peer) const { return peers_[static_cast<size_t>(peer)].reads_in_flight; }
  size_t reads_queued(int peer) const { return peers_[static_cast<size_t>(peer)].reads.size(); }
  size_t free_send_buffers() const { return free_send_buffers_.size(); }
  uint64_t credit_writes() const { return credit_writes_; }
  const FlowParams& params() const { return params_; }
  // Accounting kept per peer (memory_use()), not counting queued messages.
  static size_t bytes_per_peer();

 private:
  struct SqEntry {
    uint32_t sequence;
    int32_t send_buffer;  // -1: none (inline send, credit write, read)
  };

  struct Peer {
    uint32_t sent = 0;        // eager messages posted (cumulative)
    uint32_t limit = 0;       // receives the peer granted us (cumulative)
    uint32_t granted = 0;     // receives we made available to the peer (cumulative)
    uint32_t advertised = 0;  // what the peer last heard of `granted`
    int sq_used = 0;
    uint32_t next_sequence = 0;
    int unsignaled = 0;
    int reads_in_flight = 0;
    int max_reads = 1;
    bool needs_service = false;
    bool failed = false;
    std::deque<SqEntry> in_flight;
    std::deque<std::vector<uint8_t>> backlog;  // engine header + payload
    std::deque<PendingRead> reads;
  };

  // Inline: several calls per message; the error path stays out of line.
  Peer& peer_at(int peer, const char* what) {
    if (peer < 0 || peer >= params_.size) [[unlikely]] not_a_peer(peer, what);
    return peers_[static_cast<size_t>(peer)];
  }
  [[noreturn]] void not_a_peer(int peer, const char* what) const;
  bool try_send(int peer, const void* header, size_t header_bytes, const void* payload, size_t payload_bytes,
                Poster& poster);
  bool send_credit_write(int peer, Poster& poster);
  bool credit_write_due(const Peer& peer) const;
  void start_reads(int peer, Poster& poster);
  bool want_signal(Peer& peer, bool uses_buffer);
  uint32_t push_sq_entry(Peer& peer, int32_t send_buffer);
  void pop_sq_entry(Peer& peer);
  void mark_for_service(int peer);

  FlowParams params_;
  size_t inline_limit_ = 0;
  std::vector<Peer> peers_;
  std::vector<int32_t> free_send_buffers_;
  std::deque<int> service_list_;
  uint64_t credit_writes_ = 0;
};

}  // namespace chorus::transport::rc
