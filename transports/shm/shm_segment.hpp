// The shared-memory transport's segment: its layout (header, ring tails,
// rings of cache-line records), the address a rank publishes for it, and
// creating, opening and checking segments (shm_segment.cc). The data path
// over the rings is shm_transport.cc.
#pragma once

#include "transports/transport.hpp"

#include <sys/mman.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace chorus::transport::shm {

constexpr uint64_t kSegmentMagic = 0x43484f5255534d31ull;  // "CHORUSM1"
constexpr uint32_t kLayoutVersion = 5;  // 3: boards after the rings; 5: three board slots per context, and a tail
constexpr size_t kCacheLine = 64;
// Records start on cache lines: a small message and its header are one line,
// so the receiver sees it with one cache miss.
constexpr size_t kRecordAlign = kCacheLine;
constexpr size_t kRecordHeaderBytes = 16;

// Record in a ring: this header, then `bytes` of message, padded to a line.
// `sequence` is the record's absolute ring offset + 1 (never 0), stored last
// with release: the receiver polls it at its tail, so no separate head
// counter (and no second cache line) is needed. The receiver zeroes the
// first word of every line it consumed before giving the space back, so a
// line start holds either 0 or a header written in the current lap; stale
// bytes can never pass for a record.
struct RecordHeader {
  uint64_t sequence;
  uint32_t bytes;
  uint32_t kind;  // kMessage, or kWrap: the rest of the ring up to its end is unused
};
constexpr uint32_t kMessage = 1;
constexpr uint32_t kWrap = 2;
static_assert(sizeof(RecordHeader) == kRecordHeaderBytes);

inline std::atomic_ref<uint64_t> sequence_of(uint8_t* record) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(record));
}

// Start of every segment. `owner_address` is where the owner mapped this
// header, so a peer can check with one process_vm_readv that it may read the
// owner's memory at all before any rendezvous depends on it.
struct SegmentHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t senders;
  uint64_t ring_bytes;
  uint64_t owner_address;
  int64_t owner_pid;
  std::atomic<uint32_t> attached;  // peers that have mapped this segment
};
static_assert(sizeof(SegmentHeader) <= kCacheLine);

// The receiver's progress, on a line of its own: written by the receiver
// after each batch, read by the sender only when the ring looks full.
struct RingControl {
  alignas(kCacheLine) std::atomic<uint64_t> tail;  // bytes consumed, by the receiver
};
static_assert(sizeof(RingControl) == kCacheLine);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

inline size_t round_up(size_t value, size_t to) { return (value + to - 1) / to * to; }
// The ring bytes a message of `message_bytes` takes: its header, the message, padding to a line.
inline size_t record_bytes(size_t message_bytes) { return round_up(kRecordHeaderBytes + message_bytes, kRecordAlign); }

inline size_t controls_offset() { return kCacheLine; }
inline size_t rings_offset(int senders) {
  return round_up(controls_offset() + static_cast<size_t>(senders) * sizeof(RingControl), 4096);
}
// The owner's board area (transports/board.hpp) follows the rings.
inline size_t boards_offset(int senders, size_t ring_bytes) {
  return rings_offset(senders) + static_cast<size_t>(senders) * ring_bytes;
}
inline size_t segment_bytes(int senders, size_t ring_bytes) {
  return boards_offset(senders, ring_bytes) + kBoardAreaBytes;
}

// The connection blob: what a peer needs to map our segment.
struct AddressBlob {
  uint64_t magic;
  int64_t pid;
  uint64_t segment_bytes;
  char host[64];
  char name[64];
};

std::string host_name();

// A mapped segment (ours or a peer's); unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* base, size_t bytes) : base_(base), bytes_(bytes) {}
  Mapping(Mapping&& other) noexcept : base_(std::exchange(other.base_, nullptr)), bytes_(other.bytes_) {}
  Mapping& operator=(Mapping&& other) noexcept {
    std::swap(base_, other.base_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~Mapping() {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  uint8_t* bytes() const { return static_cast<uint8_t*>(base_); }
  SegmentHeader* header() const { return static_cast<SegmentHeader*>(base_); }
  RingControl* control(int sender) const {
    return reinterpret_cast<RingControl*>(bytes() + controls_offset()) + sender;
  }
  uint8_t* ring(int sender, size_t ring_bytes) const {
    return bytes() + rings_offset(static_cast<int>(header()->senders)) + static_cast<size_t>(sender) * ring_bytes;
  }
  uint8_t* boards(size_t ring_bytes) const {
    return bytes() + boards_offset(static_cast<int>(header()->senders), ring_bytes);
  }
  bool mapped() const { return base_ != nullptr; }

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

// Our own segment, created and sized for `senders` rings of `ring_bytes`;
// `fd` stays open until every peer has mapped the segment through it.
struct OwnSegment {
  Mapping mapping;
  int fd = -1;
};
OwnSegment create_own_segment(int senders, size_t ring_bytes);

// The address blob of our segment, opened by peers through /proc/<pid>/fd/<fd>.
Blob segment_address(int fd, int senders, size_t ring_bytes);

// A peer's published address, checked against this rank's host and layout.
AddressBlob parse_address(const Blob& bytes, int peer, int rank, int senders, size_t ring_bytes,
                          const std::string& own_host);

// Maps a peer's segment and checks it holds the layout it announced.
Mapping open_peer_segment(const AddressBlob& blob, int peer, int senders, size_t ring_bytes);

// Rendezvous depends on reading the peer's memory: find out now, with a
// clear message, rather than in the first large collective.
void check_cross_memory_attach(pid_t pid, const Mapping& segment, int peer);

}  // namespace chorus::transport::shm
