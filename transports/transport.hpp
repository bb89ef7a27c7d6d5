// The transport contract (docs/architecture.md §2). A transport moves bytes between ranks
// and nothing else: it never sees tags, collectives or user requests.
//
// Threading: a Transport is driven by one thread at a time (the P2P engine
// serialises calls). Callbacks into the Sink happen only inside poll().
//
// Ordering: eager messages from one peer are delivered to the Sink in the
// order they were posted (the engine relies on this for MPI-style
// non-overtaking). Reads carry no ordering promise.
//
// Errors: every method throws chorus::Error naming the operation, the peer
// rank and the provider's message. A failure that belongs to one operation
// (an error completion) is reported through Sink::on_error for that context
// when it can be attributed, so the engine fails only what is affected.
#pragma once

#include "transports/board.hpp"

#include <chorus/chorus.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chorus::transport {

using Blob = std::vector<uint8_t>;

// A registered memory range. Destroying it deregisters (explicit and safe:
// the engine only destroys registrations with no operation in flight).
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  void* base() const { return base_; }
  size_t length() const { return length_; }
  // What a remote peer needs to read [base, base+length): the address to use
  // for byte 0 (the virtual address, or 0 for offset-based providers) and the key.
  uint64_t remote_address() const { return remote_address_; }
  uint64_t remote_key() const { return remote_key_; }
  // What `peer` needs: the same for every peer, except where a transport
  // reaches different peers through different transports (the hybrid one).
  virtual std::pair<uint64_t, uint64_t> remote_for(int /*peer*/) const { return {remote_address_, remote_key_}; }

 protected:
  MemoryRegion(void* base, size_t length, uint64_t remote_address, uint64_t remote_key)
      : base_(base), length_(length), remote_address_(remote_address), remote_key_(remote_key) {}

 private:
  void* base_;
  size_t length_;
  uint64_t remote_address_;
  uint64_t remote_key_;
};

// Where to read from, as advertised by the owner of the memory.
struct RemoteBuffer {
  uint64_t address = 0;  // MemoryRegion::remote_address() of the owner + offset
  uint64_t key = 0;
};

// Receives what poll() found.
class Sink {
 public:
  virtual ~Sink() = default;
  // An eager message from `peer`. `data` is valid only during the call.
  virtual void on_eager(int peer, const void* data, size_t bytes) = 0;
  // A read posted with `context` finished; the bytes are in local memory.
  virtual void on_read_done(uint64_t context) = 0;
  // An operation posted with `context` (a read) or a peer failed. `context`
  // is 0 when the failure cannot be attributed to one read (e.g. a broken
  // connection); `peer` is -1 when no peer can be named.
  virtual void on_error(uint64_t context, int peer, const Error& error) = 0;
};

// What a transport keeps in this process' memory, split by what it grows
// with (bench/verbs-memory prints it for the RC mesh and the UD mode). Counted
// are chorus' own allocations and what the provider library allocates on the
// heap for its objects (QPs, address handles); not the queue rings a kernel
// driver maps into the process, which the benchmark sees in its RSS column.
struct MemoryUse {
  size_t per_peer = 0;         // kept for each peer, whether or not it talks to us
  size_t shared = 0;           // does not grow with the number of peers
  size_t on_demand = 0;        // state made for the peers in use now (UD: the RC set)
  size_t on_demand_bound = 0;  // the most `on_demand` can reach (0: unbounded or none)
  std::string detail;          // what per_peer is made of, for a person
};

// A transport's max_eager_bytes() for the engine's eager limit (the
// transports' options.max_eager_bytes): 64 bytes on top, room for the
// engine's message header (src/p2p/wire.hpp), and at least 4096. Every
// transport sizes its eager messages so.
inline size_t eager_capacity(size_t engine_eager_limit) { return std::max<size_t>(4096, engine_eager_limit + 64); }

class Transport {
 public:
  virtual ~Transport() = default;

  // "ofi:tcp;ofi_rxm", "ofi:shm", "verbs:rc", "inproc", ...
  virtual std::string name() const = 0;

  // This rank's connection blob, published through the bootstrap store.
  virtual Blob address() = 0;
  // Establish connectivity to every rank; `peers[r]` is rank r's address()
  // (including our own). Called once.
  virtual void connect(const std::vector<Blob>& peers) = 0;

  // Largest header+payload post_eager() accepts (>= 4096 on every
  // transport): eager_capacity() of the engine's eager limit.
  virtual size_t max_eager_bytes() const = 0;

  // Sends header followed by payload to `peer` as one eager message. The bytes
  // are copied (into a registered bounce buffer, or the provider's inject
  // path) before this returns, so the caller may reuse both buffers at once.
  // When credits or bounce buffers are exhausted the message is queued inside
  // the transport and sent from poll(); it is never dropped and never blocks.
  virtual void post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                          size_t payload_bytes) = 0;

  // True while eager messages accepted by post_eager() may not have left this
  // process yet (queued for credits or buffers, or awaiting their local
  // completion), so tearing down now could lose them.
  virtual bool sends_pending() const { return false; }
  // Registers [base, base+length) for local writes by reads and remote reads.
  virtual std::unique_ptr<MemoryRegion> register_memory(void* base, size_t length) = 0;

  // True when a registration pins the physical pages behind the range (verbs,
  // hardware libfabric providers): after free() and a new allocation at the
  // same address it would still point at the old pages, so registrations of
  // memory chorus does not own must not be cached.
  virtual bool registration_pins_pages() const { return false; }

  // One-sided read of `bytes` from `remote` on `peer` into `local` at
  // `local_offset`. Completion is reported as Sink::on_read_done(context).
  // `context` must be non-zero. Reads beyond what the transport can have in
  // flight are queued internally.
  virtual void post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                         uint64_t context) = 0;
  // The operation behind `context` was abandoned (it failed while its reads
  // were in flight): none of their bytes may land in local memory any more,
  // and nothing more is reported for them. The default does nothing: where
  // the NIC writes (verbs, ofi), closing the local registration, which the
  // engine does next, makes the device refuse the writes.
  virtual void cancel_reads(uint64_t /*context*/) {}
  // Everything outstanding was abandoned because of `cause` (the owner's
  // communicator failed): a peer refused a read from now on learns why, so
  // its own error can name the rank that really failed.
  virtual void note_abandoned(const Error& /*cause*/) {}

  // Drains completions without blocking; returns how many events it handed to
  // the sink or progressed (0 = nothing happened).
  virtual int poll(Sink& sink) = 0;

  // A file descriptor that becomes readable when poll() may have work, or -1
  // if the transport cannot block (the engine then yields instead).
  virtual int wait_fd() = 0;
  // Prepare wait_fd() for blocking (re-arm notifications). Returns false if
  // work is already pending, in which case the caller must poll() instead of
  // blocking.
  virtual bool arm() = 0;

  // Progress between calls (docs/nonblocking.md, docs/transport-ud.md): true
  // for a transport that owes its peers work while the application computes
  // outside chorus: acks and retransmissions it makes in software (UD), where
  // with RC or TCP the NIC or the kernel makes them. Such a transport gets the
  // progress thread from the start (CHORUS_PROGRESS=thread), which then
  // polls, arm()s and sleeps on wait_fd() whenever no operation is
  // outstanding; so after arm() the fd must become readable at the deadline
  // of every such duty (UD: a timerfd) as well as at every arrival.
  virtual bool needs_progress_between_calls() const { return false; }

  // The transport's state towards `peer`, for a timeout message (queue
  // depths, connection state): what a person needs to tell a stalled peer
  // from a stalled transport. Empty when there is nothing to add.
  virtual std::string describe_peer(int /*peer*/) { return {}; }

  // Where every rank maps every other rank's memory (shm, inproc): their
  // boards for message-less small collectives (transports/board.hpp), valid
  // after connect(). nullptr elsewhere.
  virtual Boards* boards() { return nullptr; }

  // This transport's memory now (after connect()). Zero where not counted.
  virtual MemoryUse memory_use() const { return {}; }
};

}  // namespace chorus::transport
