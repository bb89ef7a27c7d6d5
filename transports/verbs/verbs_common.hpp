// What the RC mesh and the UD mode share: opening the device, the completion
// queue with its channel and epoll fd, RC queue pairs' state machine, and
// registrations. Each ibv_* call is checked and named (verbs_resources.hpp).
#pragma once

#include "transports/transport.hpp"
#include "transports/verbs/verbs_device.hpp"
#include "transports/verbs/verbs_reads.hpp"
#include "transports/verbs/verbs_resources.hpp"
#include "transports/verbs/verbs_settings.hpp"
#include "transports/verbs/verbs_transport.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace chorus::transport::verbs {

// RDMA READs one QP has in flight at the most, issued or served (the
// device's limits may be lower): the RC mesh's QPs and UD mode's RC links.
inline constexpr int kMaxReadsPerQp = 16;

using AhPtr = std::unique_ptr<ibv_ah, Destroyer<ibv_destroy_ah>>;

ContextPtr open_device(const std::string& name);

// A zero-length registration is refused by some providers; one byte is harmless.
ibv_mr* register_range(ibv_pd* pd, void* base, size_t length, int access);

// Bytes the C heap has handed out in this process now (mallinfo2): taken
// around the creation of provider objects (QPs, address handles) to count
// what the provider library allocates for them (MemoryUse). Other threads'
// allocations in between would be counted too; creation runs at setup,
// where there are none on the data path.
size_t heap_bytes_in_use();

const char* qp_state_name(ibv_qp_state state);
// "RTS", or "unknown (ibv_query_qp: ...)": for timeout messages.
std::string query_qp_state(ibv_qp* qp);

// wr_id = kind (4 bits) | peer (28 bits) | value (32 bits): a completion,
// even an error one (only wr_id is valid then), leads back to its peer.
inline uint64_t make_wr_id(uint64_t kind, int peer, uint32_t value) {
  return (kind << 60) | (static_cast<uint64_t>(peer) << 32) | value;
}
inline uint64_t wr_kind_bits(uint64_t id) { return id >> 60; }
inline int wr_peer(uint64_t id) { return static_cast<int>((id >> 32) & 0x0fffffff); }
inline uint32_t wr_value(uint64_t id) { return static_cast<uint32_t>(id); }

// One CQ, its completion channel, and the epoll fd the engine blocks on (the
// channel and whatever else the transport watches).
class CompletionQueue {
 public:
  CompletionQueue(ibv_context* context, int entries, int completion_vector);
  // Destroy every QP and SRQ that uses the CQ first.
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  ibv_cq* get() const { return cq_.get(); }
  int entries() const { return entries_; }
  int vector() const { return vector_; }
  int epoll_fd() const { return epoll_fd_; }
  void watch(int fd, const char* what);

  // Hands every completion (those found while arming first) to `handle`;
  // returns how many there were.
  template <class Handle>
  int drain(Handle&& handle) {
    take_events();
    int count = 0;
    if (!stash_.empty()) {
      std::vector<ibv_wc> stashed;
      stashed.swap(stash_);
      for (const ibv_wc& wc : stashed) handle(wc);
      count += static_cast<int>(stashed.size());
    }
    ibv_wc batch[kBatch];
    for (;;) {
      const int n = poll_batch(batch);
      for (int i = 0; i < n; ++i) handle(batch[i]);
      count += n;
      if (n < kBatch) return count;
    }
  }

  // Requests a notification for the next completion. False when completions
  // arrived before the request (they are kept for drain()): poll, don't block.
  bool arm();
  bool has_stashed() const { return !stash_.empty(); }

 private:
  static constexpr int kBatch = 32;
  int poll_batch(ibv_wc* batch);
  void take_events();

  ChannelPtr channel_;
  CqPtr cq_;
  int entries_;
  int vector_;
  int epoll_fd_ = -1;
  unsigned unacked_events_ = 0;
  bool armed_ = false;         // notification requested since the channel was last read
  std::vector<ibv_wc> stash_;  // completions found while arming
};

// A registration for the transports: local work requests need its lkey.
class VerbsRegion final : public MemoryRegion {
 public:
  VerbsRegion(ibv_mr* mr, void* base, size_t length)
      : MemoryRegion(base, length, reinterpret_cast<uintptr_t>(base), mr->rkey), mr_(mr) {}
  uint32_t lkey() const { return mr_->lkey; }

 private:
  MrPtr mr_;
};

// Cuts a read of `bytes` from `remote` into `local` at `local_offset` into
// work requests of at most the port's largest message (and 1 GiB), and sets
// job.pieces_left. Fails, naming `transport`, when the read would overrun `local`.
std::vector<PendingRead> read_pieces(ReadJob& job, uint32_t max_message_bytes, RemoteBuffer remote, MemoryRegion& local,
                                     size_t local_offset, size_t bytes, const char* transport);

// Starts a job in `jobs` for one post_read() and cuts it into pieces
// (read_pieces); a read of 0 bytes has none and is finished at once.
std::vector<PendingRead> start_read(ReadJobs& jobs, uint64_t context, uint32_t max_message_bytes, RemoteBuffer remote,
                                    MemoryRegion& local, size_t local_offset, size_t bytes, const char* transport);

// Fails (Status::config) when `peer`'s port is of the other link layer
// (RoCE vs InfiniBand) than ours; `transport` names the caller.
void check_same_fabric(const char* transport, int peer, bool peer_roce, const PortChoice& port);

// What every verbs transport's published address starts with (24 bytes, no
// padding: the wire structs derive from it and keep their layout). Fixed-width
// fields copied as one struct: all ranks of a job share the architecture.
struct AddressHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t lid;
  uint8_t gid[16];
};
static_assert(sizeof(AddressHeader) == 24);

// How parse_address checks and names a transport's published address; a
// wire struct Wire (an AddressHeader with its own fields, roce among them)
// carries it as Wire::kKind, beside Wire::kMagic and Wire::kVersion.
struct AddressKind {
  const char* transport;    // starts every message: "verbs", "verbs UD"
  const char* name;         // "chorus <name> v<version> address"
  const char* run_setting;  // what every rank must run: "CHORUS_TRANSPORT=verbs"
  const char* size_hint;    // after a wrong length: "is it running the verbs transport?"
  bool exact_size;          // false: more may follow the struct (the RC mesh's QP numbers)
};
[[noreturn]] void fail_address_size(const AddressKind& kind, int peer, size_t blob_bytes, size_t wire_bytes);
[[noreturn]] void fail_address_header(const AddressKind& kind, int peer, uint16_t expected_version, uint32_t magic,
                                      uint16_t version);

// A Wire struct with what every verbs address holds filled in from `port`:
// magic, version, LID, GID, active MTU and link layer (parse_address checks
// them on the other side); the transport adds its own fields.
template <class Wire>
Wire start_address(const PortChoice& port) {
  Wire wire{};
  wire.magic = Wire::kMagic;
  wire.version = Wire::kVersion;
  wire.lid = port.attr.lid;
  std::copy(port.gid.begin(), port.gid.end(), wire.gid);
  wire.active_mtu = static_cast<uint8_t>(port.attr.active_mtu);
  wire.roce = port.roce ? 1 : 0;
  return wire;
}

// Rank `peer`'s published address: the Wire struct at the start of `blob`,
// checked for its length, magic and version, and for a port of our link
// layer (check_same_fabric). Throws Error(Status::bootstrap) naming the rank
// and what every rank must run, or Status::config for the fabric.
template <class Wire>
Wire parse_address(int peer, const Blob& blob, const PortChoice& port) {
  constexpr const AddressKind& kind = Wire::kKind;
  Wire wire{};
  if (kind.exact_size ? blob.size() != sizeof wire : blob.size() < sizeof wire) {
    fail_address_size(kind, peer, blob.size(), sizeof wire);
  }
  std::memcpy(&wire, blob.data(), sizeof wire);
  if (wire.magic != Wire::kMagic || wire.version != Wire::kVersion) {
    fail_address_header(kind, peer, Wire::kVersion, wire.magic, wire.version);
  }
  check_same_fabric(kind.transport, peer, wire.roce != 0, port);
  return wire;
}

// The signalled RDMA READ work request for `read`, gathering into `sge`; the
// caller sets wr_id.
ibv_send_wr read_work_request(const PendingRead& read, ibv_sge& sge);

// What the RC mesh and the UD mode take from their constructor's arguments:
// this rank, the job's size, the settings, the eager capacity
// (eager_capacity() of the engine's limit) and the timeout. Both register
// memory by pinning it.
class VerbsTransportBase : public Transport {
 public:
  size_t max_eager_bytes() const override { return max_eager_; }
  bool registration_pins_pages() const override { return true; }

 protected:
  VerbsTransportBase(int rank, int size, const VerbsOptions& options)
      : rank_(rank),
        size_(size),
        settings_(options.settings),
        max_eager_(eager_capacity(options.max_eager_bytes)),
        timeout_(options.timeout) {}

  int rank_;
  int size_;
  Settings settings_;
  size_t max_eager_;
  std::chrono::milliseconds timeout_;
};

// Where an RC QP connects to.
struct RcRemote {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  ibv_mtu mtu = IBV_MTU_1024;   // the peer's active MTU
  uint16_t lid = 0;
  std::array<uint8_t, 16> gid{};
  int max_reads_served = 1;     // RDMA READs the peer serves at once on this QP
};

struct RcLimits {
  uint32_t sq_psn = 0;
  int qp_timeout = kDefaultQpTimeout;    // CHORUS_VERBS_QP_TIMEOUT
  int retry_count = kDefaultRetryCount;  // CHORUS_VERBS_RETRY_COUNT
  int max_reads_served = 1;     // READs this side serves at once (max_dest_rd_atomic)
  int max_reads_issued = 1;     // READs this side issues at once (max_rd_atomic)
};

// RESET -> INIT with local write and remote read/write access.
void rc_to_init(ibv_qp* qp, const PortChoice& port, int peer);
// INIT -> RTR -> RTS towards `remote`, at the smaller of both MTUs.
void rc_to_rts(ibv_qp* qp, const PortChoice& port, const RcRemote& remote, const RcLimits& limits, int peer);

}  // namespace chorus::transport::verbs
