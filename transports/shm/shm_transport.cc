// The shared-memory transport's data path: eager messages through the rings
// (write, publish, drain, wait for space), rendezvous reads with
// process_vm_readv, and their reports. Segments and their setup: shm_segment.{hpp,cc}.
#include "transports/shm/shm_transport.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "transports/copies.hpp"
#include "transports/shm/shm_segment.hpp"
#include "common/copy.hpp"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <deque>
#include <vector>

namespace chorus::transport {

namespace {

using namespace shm;

class ShmRegion final : public MemoryRegion {
 public:
  ShmRegion(void* base, size_t length) : MemoryRegion(base, length, reinterpret_cast<uintptr_t>(base), 0) {}
};

// Our end of the ring we write into, which lives in the receiver's segment.
struct Outbound {
  RingControl* control = nullptr;
  uint8_t* ring = nullptr;
  uint64_t head = 0;        // bytes written (ours alone: the receiver polls the records)
  uint64_t known_tail = 0;  // last tail read; refreshed only when the ring looks full
  std::deque<std::vector<uint8_t>> waiting;  // accepted but not yet in the ring, in order
};

struct Peer {
  Mapping segment;  // the peer's segment (unmapped for ourselves: we use our own)
  pid_t pid = 0;
  Outbound out;
  uint64_t in_tail = 0;  // consumed bytes of the ring this peer writes into ours
  // That ring and its tail in our segment, located once at start: every
  // poll of every wait reads them (their offsets take a division and a
  // load from the segment's header).
  uint8_t* in_ring = nullptr;
  RingControl* in_control = nullptr;
  bool in_broken = false;  // that ring held a malformed record: not read again
};

// The one CPU this process may run on, or -1 (several, or unknown): the
// board's waits treat ranks pinned to a shared CPU apart (collectives/board.cc).
int pinned_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1) return -1;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) return cpu;
  }
  return -1;
}

struct ReadFailure {
  uint64_t context;
  int peer;
  Error error;
};

class ShmTransport final : public Transport {
 public:
  ShmTransport(int rank, int size, const ShmOptions& options)
      : rank_(rank),
        size_(size),
        max_eager_(eager_capacity(options.max_eager_bytes)),
        ring_bytes_(options.ring_bytes != 0 ? options.ring_bytes : shm_default_ring_bytes(max_eager_, size)),
        names_(options.rank_names),
        peers_(static_cast<size_t>(size)) {
    if (!names_.empty() && names_.size() != static_cast<size_t>(size_)) {
      fail(Status::internal, "shm: ", names_.size(), " rank names for ", size_, " ranks");
    }
    if (!std::has_single_bit(ring_bytes_) || ring_bytes_ < 2 * record_bytes(max_eager_)) {
      fail(Status::internal, "shm: ring of ", ring_bytes_, " bytes: must be a power of two of at least ",
           2 * record_bytes(max_eager_));
    }
    // Yama (ptrace_scope 1) only lets ancestors read our memory; the ranks
    // are siblings. No Yama: EINVAL, and nothing to do.
    if (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0 && errno != EINVAL) {
      log::warn("shm: prctl(PR_SET_PTRACER) failed: ", errno_string(errno));
    }
    OwnSegment own = create_own_segment(size_, ring_bytes_);
    own_ = std::move(own.mapping);
    own_fd_ = own.fd;
    board_tail(own_.boards(ring_bytes_))->pinned_cpu = pinned_cpu();
    for (int peer = 0; peer < size_; ++peer) {
      peers_[static_cast<size_t>(peer)].in_ring = own_.ring(peer, ring_bytes_);
      peers_[static_cast<size_t>(peer)].in_control = own_.control(peer);
    }
  }

  ~ShmTransport() override { stop_sharing_own_segment(); }

  std::string name() const override { return "shm"; }

  Blob address() override { return segment_address(own_fd_, size_, ring_bytes_); }

  void connect(const std::vector<Blob>& peers) override {
    if (peers.size() != static_cast<size_t>(size_)) {
      fail(Status::internal, "shm: connect got ", peers.size(), " addresses for ", size_, " ranks");
    }
    const std::string own_host = host_name();
    for (int peer = 0; peer < size_; ++peer) {
      Peer& state = peers_[static_cast<size_t>(peer)];
      if (peer == rank_) {
        state.pid = getpid();
        state.out.control = own_.control(rank_);
        state.out.ring = own_.ring(rank_, ring_bytes_);
        continue;
      }
      const AddressBlob blob =
          parse_address(peers[static_cast<size_t>(peer)], named(peer), named(rank_), size_, ring_bytes_, own_host);
      state.pid = static_cast<pid_t>(blob.pid);
      state.segment = open_peer_segment(blob, named(peer), size_, ring_bytes_);
      state.out.control = state.segment.control(rank_);
      state.out.ring = state.segment.ring(rank_, ring_bytes_);
      check_cross_memory_attach(state.pid, state.segment, named(peer));
      state.segment.header()->attached.fetch_add(1, std::memory_order_acq_rel);
    }
    boards_.areas.resize(static_cast<size_t>(size_));
    for (int peer = 0; peer < size_; ++peer) {
      const Mapping& segment = peer == rank_ ? own_ : peers_[static_cast<size_t>(peer)].segment;
      boards_.areas[static_cast<size_t>(peer)] = segment.boards(ring_bytes_);
    }
    boards_.learn_pinned_cpus();
    if (boards_.shared_cpus) {
      log::info("shm: rank ", named(rank_), " is pinned to CPU ", boards_.pinned_cpu[static_cast<size_t>(rank_)],
                ", and some ranks share a CPU: the board keeps a CPU's lowest rank running while the others wait");
    }
    connected_ = true;
    stop_sharing_when_everyone_attached();
  }

  size_t max_eager_bytes() const override { return max_eager_; }

  // The segments are zero-filled by posix_fallocate: every slot starts unused.
  Boards* boards() override { return connected_ ? &boards_ : nullptr; }

  void post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                  size_t payload_bytes) override {
    check_peer(peer, "send to");
    const size_t bytes = header_bytes + payload_bytes;
    if (bytes > max_eager_) fail(Status::internal, "shm: eager message of ", bytes, " bytes exceeds ", max_eager_);
    Outbound& out = peers_[static_cast<size_t>(peer)].out;
    if (peer == rank_) sent_to_self_ = true;  // only then is our own ring worth polling
    // Order per peer: once a message waits, everything after it waits too.
    if (out.waiting.empty() && write_record(out, header, header_bytes, payload, payload_bytes)) return;
    out.waiting.push_back(joined_copy(header, header_bytes, payload, payload_bytes));
    ++waiting_messages_;
  }

  bool sends_pending() const override { return waiting_messages_ != 0; }

  std::unique_ptr<MemoryRegion> register_memory(void* base, size_t length) override {
    return std::make_unique<ShmRegion>(base, length);
  }

  void post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                 uint64_t context) override {
    check_peer(peer, "read from");
    uint8_t* destination = local_read_target("shm", local, local_offset, bytes);
    if (peer == rank_) {
      copy_bytes(destination, reinterpret_cast<const void*>(remote.address), bytes);
      finished_reads_.push_back(context);
      return;
    }
    // process_vm_readv may copy less than asked (it stops at a page it
    // cannot read, or splits very large requests): continue from there.
    size_t done = 0;
    while (done < bytes) {
      iovec into{destination + done, bytes - done};
      iovec from{reinterpret_cast<void*>(remote.address + done), bytes - done};
      const ssize_t copied = process_vm_readv(peers_[static_cast<size_t>(peer)].pid, &into, 1, &from, 1, 0);
      if (copied <= 0) {
        const int err = copied < 0 ? errno : EFAULT;
        read_failures_.push_back(ReadFailure{context, peer, read_error(peer, err, bytes - done, remote.address + done)});
        return;
      }
      done += static_cast<size_t>(copied);
    }
    finished_reads_.push_back(context);
  }

  // Reads are copied when posted: only their reports are left to drop.
  void cancel_reads(uint64_t context) override {
    std::erase_if(finished_reads_, [context](uint64_t done) { return done == context; });
    std::erase_if(read_failures_, [context](const ReadFailure& failure) { return failure.context == context; });
  }

  int poll(Sink& sink) override { return nothing_to_do() ? 0 : poll_everything(sink); }

  // Most polls find nothing (a board call polls once at its end, and a
  // wait polls while its peer computes): a load per ring tells, without
  // the calls and the setup of a poll that does something.
  bool nothing_to_do() const {
    if (waiting_messages_ != 0 || !finished_reads_.empty() || !read_failures_.empty() || own_fd_ >= 0) return false;
    for (const Peer& from : peers_) {
      if (from.in_ring != nullptr && record_at(from.in_ring, from.in_tail)) return false;
    }
    return true;
  }

  int poll_everything(Sink& sink) {
    int events = 0;
    if (waiting_messages_ != 0) events += push_waiting();
    for (int sender = 0; sender < size_; ++sender) {
      if ((sender != rank_ || sent_to_self_) && !peers_[static_cast<size_t>(sender)].in_broken) {
        events += drain_ring(sender, sink);
      }
    }
    if (!finished_reads_.empty() || !read_failures_.empty()) events += report_reads(sink);
    if (own_fd_ >= 0) stop_sharing_when_everyone_attached();
    return events;
  }

  // Nothing to block on: a ring write raises no event. The engine yields.
  int wait_fd() override { return -1; }
  bool arm() override { return false; }

  std::string describe_peer(int peer) override {
    if (peer < 0 || peer >= size_ || !connected_) return {};
    const Peer& state = peers_[static_cast<size_t>(peer)];
    const uint64_t unread_by_peer = state.out.head - state.out.control->tail.load(std::memory_order_acquire);
    return concat("shm: pid ", state.pid, ", ", unread_by_peer, " bytes sent and not yet read by the peer, ",
                  state.out.waiting.size(), " messages waiting for ring space, ", state.in_tail,
                  " bytes read from it so far");
  }

  MemoryUse memory_use() const override {
    MemoryUse use;
    use.per_peer = ring_bytes_ + sizeof(RingControl) + sizeof(Peer);
    use.shared = rings_offset(size_);
    use.detail = concat("inbound ring ", ring_bytes_, " B and its tail ", sizeof(RingControl),
                        " B in our segment, peer state ", sizeof(Peer), " B");
    return use;
  }

 private:
  void check_peer(int peer, const char* what) const {
    if (peer < 0 || peer >= size_) fail(Status::internal, "shm: ", what, " index ", peer, " of ", size_);
    if (!connected_) fail(Status::internal, "shm: ", what, " rank ", named(peer), " before connect");
  }

  Error read_error(int peer, int err, size_t bytes, uint64_t address) const {
    const Peer& state = peers_[static_cast<size_t>(peer)];
    if (err == ESRCH) {
      return Error(Status::peer_failed,
                   concat("shm: rank ", named(peer), " (pid ", state.pid, ") is gone: its memory cannot be read"),
                   named(peer));
    }
    return Error(Status::transport,
                 concat("shm: process_vm_readv of ", bytes, " bytes at 0x", std::hex, address, std::dec, " from rank ",
                        named(peer), " (pid ", state.pid, ") failed: ", errno_string(err)),
                 named(peer));
  }

  // Copies one message into the ring; false when it does not fit now.
  bool write_record(Outbound& out, const void* header, size_t header_bytes, const void* payload,
                    size_t payload_bytes) {
    const size_t message = header_bytes + payload_bytes;
    const size_t need = record_bytes(message);
    const size_t offset = out.head & (ring_bytes_ - 1);
    const size_t to_end = ring_bytes_ - offset;
    const size_t wrap = to_end < need ? to_end : 0;  // a record never straddles the end
    if (out.head + wrap + need - out.known_tail > ring_bytes_) {
      out.known_tail = out.control->tail.load(std::memory_order_acquire);
      if (out.head + wrap + need - out.known_tail > ring_bytes_) return false;
    }
    if (wrap != 0) {
      publish(out.ring + offset, out.head, 0, kWrap);
      out.head += wrap;
    }
    uint8_t* record = out.ring + (out.head & (ring_bytes_ - 1));
    if (header_bytes != 0) std::memcpy(record + kRecordHeaderBytes, header, header_bytes);
    if (payload_bytes != 0) copy_bytes(record + kRecordHeaderBytes + header_bytes, payload, payload_bytes);
    publish(record, out.head, static_cast<uint32_t>(message), kMessage);
    out.head += need;
    return true;
  }

  // Writes a record's header; its sequence last, with release, so the
  // receiver that sees it sees everything written before.
  static void publish(uint8_t* record, uint64_t offset, uint32_t bytes, uint32_t kind) {
    std::memcpy(record + sizeof(uint64_t), &bytes, sizeof bytes);
    std::memcpy(record + sizeof(uint64_t) + sizeof bytes, &kind, sizeof kind);
    sequence_of(record).store(offset + 1, std::memory_order_release);
  }

  // Gives consumed space back: zero the first word of each of its lines
  // (see RecordHeader), then let the sender see the new tail.
  void clear_lines(uint8_t* ring, uint64_t from, uint64_t bytes) const {
    const size_t start = from & (ring_bytes_ - 1);
    for (size_t line = 0; line < bytes; line += kCacheLine) {
      sequence_of(ring + start + line).store(0, std::memory_order_relaxed);
    }
  }

  int push_waiting() {
    int pushed = 0;
    for (Peer& peer : peers_) {
      Outbound& out = peer.out;
      while (!out.waiting.empty() && write_record(out, out.waiting.front().data(), out.waiting.front().size(), nullptr, 0)) {
        out.waiting.pop_front();
        --waiting_messages_;
        ++pushed;
      }
    }
    return pushed;
  }

  // Whether the record at `tail` of a ring is written (its sequence word is tail + 1).
  bool record_at(uint8_t* ring, uint64_t tail) const {
    return sequence_of(ring + (tail & (ring_bytes_ - 1))).load(std::memory_order_acquire) == tail + 1;
  }

  int drain_ring(int sender, Sink& sink) {
    Peer& from = peers_[static_cast<size_t>(sender)];
    uint64_t& tail = from.in_tail;
    uint8_t* ring = from.in_ring;
    int delivered = 0;
    const uint64_t first = tail;
    for (;;) {
      const size_t offset = tail & (ring_bytes_ - 1);
      uint8_t* at = ring + offset;
      if (!record_at(ring, tail)) break;  // not written yet
      RecordHeader record;
      std::memcpy(&record, at, sizeof record);
      if (record.kind == kWrap) {
        sequence_of(at).store(0, std::memory_order_relaxed);
        tail += ring_bytes_ - offset;
        continue;
      }
      if (record.kind != kMessage || record.bytes > ring_bytes_ / 2 || offset + record_bytes(record.bytes) > ring_bytes_) {
        // Only a process writing where it must not can cause this; say so
        // instead of reading garbage as messages. The ring is not used again.
        from.in_broken = true;
        ++delivered;
        sink.on_error(0, sender,
                      Error(Status::transport,
                            concat("shm: ring from rank ", named(sender), " holds a malformed record (kind ",
                                   record.kind, ", ", record.bytes, " bytes) at offset ", offset),
                            named(sender)));
        break;
      }
      sink.on_eager(sender, at + kRecordHeaderBytes, record.bytes);
      clear_lines(ring, tail, record_bytes(record.bytes));
      tail += record_bytes(record.bytes);
      ++delivered;
    }
    // Released only after the sink is done with the bytes and the lines are clear.
    if (tail != first) from.in_control->tail.store(tail, std::memory_order_release);
    return delivered;
  }

  int report_reads(Sink& sink) {
    // The sink may post more reads, which append to these lists: take them.
    std::vector<uint64_t> finished;
    finished.swap(finished_reads_);
    std::vector<ReadFailure> failures;
    failures.swap(read_failures_);
    for (const ReadFailure& failure : failures) sink.on_error(failure.context, failure.peer, failure.error);
    for (uint64_t context : finished) sink.on_read_done(context);
    return static_cast<int>(finished.size() + failures.size());
  }

  // Once every peer has mapped our segment, the descriptor they opened it
  // through has no further use.
  void stop_sharing_when_everyone_attached() {
    if (own_.mapped() && own_.header()->attached.load(std::memory_order_acquire) == static_cast<uint32_t>(size_ - 1)) {
      stop_sharing_own_segment();
    }
  }

  void stop_sharing_own_segment() {
    if (own_fd_ >= 0) {
      close(own_fd_);
      own_fd_ = -1;
    }
  }

  // The job's rank of index `index` (ShmOptions::rank_names), for messages.
  int named(int index) const { return names_.empty() ? index : names_[static_cast<size_t>(index)]; }

  const int rank_;
  const int size_;
  const size_t max_eager_;
  const size_t ring_bytes_;
  int own_fd_ = -1;  // open until every peer has mapped the segment through it
  bool connected_ = false;
  bool sent_to_self_ = false;
  Mapping own_;
  Boards boards_;  // every rank's board area in its segment, as mapped here
  const std::vector<int> names_;
  std::vector<Peer> peers_;
  size_t waiting_messages_ = 0;
  std::vector<uint64_t> finished_reads_;
  std::vector<ReadFailure> read_failures_;
};

}  // namespace

size_t shm_default_ring_bytes(size_t max_eager_bytes, int ranks) {
  // Without the budget 256 ranks asked 64 MiB of /dev/shm each (16 GiB per
  // host), and zero-filling it was a third of their setup's CPU.
  constexpr size_t kRingBudget = 16 * 1024 * 1024;
  const size_t deep = std::max<size_t>(256 * 1024, std::bit_ceil(4 * (max_eager_bytes + kRecordAlign)));
  const size_t least = std::bit_ceil(2 * shm::record_bytes(max_eager_bytes));
  const size_t share = std::bit_floor(kRingBudget / static_cast<size_t>(std::max(ranks, 1)));
  return std::max(least, std::min(deep, share));
}

std::unique_ptr<Transport> make_shm_transport(int rank, int size, const ShmOptions& options) {
  return std::make_unique<ShmTransport>(rank, size, options);
}

}  // namespace chorus::transport
