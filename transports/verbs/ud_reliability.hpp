// Software reliability for the UD scalable mode (docs/transport-ud.md,
// docs/architecture.md §4).
//
// UD delivers datagrams of at most one path MTU, may lose them, and (across
// switches) may duplicate or reorder them. This state machine turns that into
// what the P2P engine needs: every message from a peer delivered once, whole,
// in the order it was sent, or an error naming the peer.
//
// Protocol: go-back-N. Each fragment carries a per-peer sequence number and a
// cumulative ack of what this rank has received from the destination. The
// receiver accepts only the next expected fragment, so its per-peer state is
// two counters and no reorder buffer (the few bytes per peer are the point of
// the mode). A hole is reported at once with one gap ack, so one lost frame
// costs a round trip, not a retransmission timeout. Acks ride on data in the
// other direction; a standalone ack goes out after `ack_delay`, or at once
// after `ack_every` unacknowledged fragments, after a duplicate, or after a
// gap. Retransmission timeouts back off exponentially; a peer that
// acknowledges nothing for `give_up` is reported failed.
//
// Pure logic: no verbs calls and no clock reads. The owner passes the time,
// hands in every received frame, and carries out transmissions through Link,
// so the unit tests drive it over a simulated lossy wire.
#pragma once

#include <chorus/chorus.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace chorus::transport::ud {

// At the start of every UD payload (after the 40-byte GRH the receive buffer
// reserves). Fixed-width fields: all ranks of a job share the architecture.
struct WireHeader {
  uint32_t seq;    // data: this fragment's sequence number towards the receiver
  uint32_t ack;    // every fragment before this one from the receiver arrived
  uint32_t src;    // the sender's rank
  uint16_t bytes;  // payload bytes after this header
  uint8_t flags;   // WireFlag bits
  uint8_t channel; // data: which consumer the message is for (Delivery::on_message)
};
static_assert(sizeof(WireHeader) == 16);

enum WireFlag : uint8_t {
  kData = 1,      // carries a fragment (else: a standalone ack)
  kFirst = 2,     // first fragment of a message
  kLast = 4,      // last fragment of a message
  kGap = 8,       // standalone ack: a later fragment arrived, resend from `ack`
};

struct Params {
  uint32_t window = 64;          // unacknowledged fragments per peer
  uint32_t slots = 256;          // fragments kept for retransmission, all peers together
  uint32_t ack_slots = 32;       // standalone acks in the send queue at once
  uint32_t ack_every = 16;       // fragments received before an ack goes out at once
  uint64_t ack_delay_ns = 200'000;
  uint64_t rto_initial_ns = 5'000'000;
  uint64_t rto_max_ns = 500'000'000;
  uint64_t give_up_ns = 30'000'000'000;  // no ack for this long: the peer failed
  uint32_t initial_seq = 0;      // the same on every rank (tests start near wrap-around)
};

// What the state machine asks the UD QP to do. Must not fail for lack of
// room: the owner sizes its send queue for `slots + ack_slots` sends, which
// is the most the state machine ever has outstanding.
class Link {
 public:
  virtual ~Link() = default;
  // Send `bytes` starting at `frame` (a WireHeader, then the payload) to
  // `peer`. `slot` >= 0: the frame lives in slot `slot` of the arena and
  // stays unchanged until Reliability::on_sent(slot). kAckSlot: a standalone
  // ack on the caller's stack, to be copied or inlined before returning;
  // report its completion with on_sent(kAckSlot).
  virtual void transmit(int peer, int slot, const void* frame, size_t bytes) = 0;
};

// Where in-order messages go.
class Delivery {
 public:
  virtual ~Delivery() = default;
  // A whole message. `data` is valid only during the call.
  virtual void on_message(int peer, uint8_t channel, const void* data, size_t bytes) = 0;
  // `peer` acknowledged nothing for Params::give_up_ns; called once per peer.
  virtual void on_peer_failed(int peer, const Error& error) = 0;
};

struct Stats {
  uint64_t fragments_sent = 0;      // first transmissions
  uint64_t retransmissions = 0;     // fragments sent again (timeouts and gaps)
  uint64_t timeouts = 0;            // retransmission timers that fired
  uint64_t acks_sent = 0;           // standalone acks
  uint64_t gap_acks_sent = 0;       // of which reported a hole
  uint64_t duplicates = 0;          // fragments received twice (dropped)
  uint64_t out_of_order = 0;        // fragments beyond a hole (dropped, gap reported)
  uint64_t malformed = 0;           // frames that failed validation (dropped)
  uint64_t messages_delivered = 0;
};

class Reliability {
 public:
  static constexpr int kAckSlot = -1;

  // `max_frame_bytes`: the largest datagram (path MTU), header included.
  // `arena`: Params::slots * max_frame_bytes bytes that outlive this object
  // (registered memory on verbs), or nullptr to allocate them here.
  Reliability(int rank, int size, const Params& params, size_t max_frame_bytes, uint8_t* arena = nullptr);

  // Queues a message of header+payload to `peer` (bytes copied before
  // return), sends what the window allows now. Throws if `peer` failed.
  void send(int peer, uint8_t channel, const void* header, size_t header_bytes, const void* payload,
            size_t payload_bytes, Link& link, uint64_t now_ns);

  // A received datagram's payload (GRH stripped). Never throws on bad input:
  // a malformed frame is counted and dropped.
  void on_frame(const void* frame, size_t bytes, Link& link, Delivery& delivery, uint64_t now_ns);

  // The send from `slot` (or a standalone ack: kAckSlot) completed locally.
  void on_sent(int slot);

  // Retransmission timers, due acks, the backlog; give-up reports.
  void tick(Link& link, Delivery& delivery, uint64_t now_ns);

  // When tick() next has timed work (UINT64_MAX: none), for the owner's wait.
  uint64_t next_deadline_ns() const;

  // True while a message accepted by send() is not yet acknowledged.
  bool sends_pending() const;
  bool peer_failed(int peer) const { return peers_[peer].failed; }

  const Stats& stats() const { return stats_; }
  // Unacknowledged fragments towards `peer` (never above Params::window).
  uint32_t in_flight(int peer) const;
  // "seq 12..19 unacked, next expected 7, backoff 3": for a timeout message.
  std::string describe(int peer) const;

  // Memory accounting (docs/transport-ud.md): state kept for every peer,
  // whether or not it talks to us, and state that does not grow with peers.
  static constexpr size_t bytes_per_peer() { return sizeof(PeerState); }
  size_t bytes_shared() const;
  // Backlog and partial messages now: grows with traffic, not with peers.
  size_t bytes_in_use() const;

 private:
  struct PeerState {
    // Sending.
    uint32_t next_seq;        // sequence number of the next new fragment
    uint32_t unacked_seq;     // oldest unacknowledged (== next_seq when none)
    int32_t head = -1;        // unacknowledged slots, oldest first
    int32_t tail = -1;
    uint32_t backlog = 0;     // messages of this peer in backlog_
    uint8_t backoff = 0;      // retransmission timer doublings so far
    bool failed = false;
    bool active = false;      // listed in active_
    bool gap_reported = false;// the hole before `expected` was reported
    bool gap_pending = false; // ... and the gap ack reporting it has not gone out
    uint64_t retransmit_at = 0;
    uint64_t progress_at = 0; // last time an ack moved forward (or sending started)
    // Receiving.
    uint32_t expected;        // next fragment to accept
    uint32_t received_unacked = 0;
    uint64_t ack_at = 0;      // a standalone ack is owed from this time (0: none)
  };

  struct Slot {
    uint32_t seq = 0;
    uint16_t frame_bytes = 0;
    uint16_t sends_in_flight = 0;
    int32_t next = -1;        // next unacknowledged slot of the same peer
    int32_t peer = -1;        // -1: free
    bool acked = false;       // acknowledged; free once its sends complete
  };

  struct PendingMessage {
    int peer;
    uint8_t channel;
    size_t offset = 0;        // bytes already fragmented
    std::vector<uint8_t> bytes;
  };

  uint8_t* slot_frame(int slot) { return arena_ + static_cast<size_t>(slot) * max_frame_bytes_; }
  size_t max_payload() const { return max_frame_bytes_ - sizeof(WireHeader); }
  void activate(int peer);
  void pump_backlog(Link& link, uint64_t now_ns);
  // Sends fragments of `message` while the window and the pool allow; true when all went.
  bool send_fragments(PendingMessage& message, Link& link, uint64_t now_ns);
  void transmit_slot(int slot, Link& link);
  void process_ack(int peer, uint32_t ack, bool gap, Link& link, uint64_t now_ns);
  void receive_data(int peer, const WireHeader& header, const uint8_t* payload, Delivery& delivery, uint64_t now_ns);
  void owe_ack(int peer, uint64_t due_ns);
  void send_ack(int peer, Link& link);
  void retransmit(int peer, Link& link);
  void release_slot(int slot);
  void give_up_on(int peer, Delivery& delivery, uint64_t now_ns);
  uint64_t backoff_ns(uint8_t backoff) const;

  int rank_;
  int size_;
  Params params_;
  size_t max_frame_bytes_;
  std::vector<uint8_t> own_arena_;
  uint8_t* arena_;
  std::vector<PeerState> peers_;
  std::vector<Slot> slots_;
  std::vector<int32_t> free_slots_;
  std::vector<int> active_;                              // peers with unacked data or an owed ack
  std::deque<PendingMessage> backlog_;                   // messages the window or pool held back
  std::unordered_map<int, std::vector<uint8_t>> partial_; // messages being reassembled
  uint32_t acks_in_flight_ = 0;
  Stats stats_;
};

}  // namespace chorus::transport::ud
