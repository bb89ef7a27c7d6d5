// The verbs RC mesh transport. Design and parameters: docs/transport-verbs.md.
#include "transports/verbs/verbs_transport.hpp"

#include "common/log.hpp"
#include "transports/verbs/verbs_async.hpp"
#include "transports/verbs/verbs_common.hpp"
#include "transports/verbs/verbs_device.hpp"
#include "transports/verbs/verbs_rdmacm.hpp"
#include "transports/verbs/verbs_resources.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <random>
#include <unordered_map>

namespace chorus::transport {

namespace {

using namespace verbs;

// The blob each rank publishes. Fixed-width fields copied as one struct: all
// ranks of a job share the architecture (little-endian x86-64/aarch64).
struct WireAddress {
  uint32_t magic;
  uint16_t version;
  uint16_t lid;
  uint8_t gid[16];
  uint32_t psn;
  uint8_t active_mtu;           // ibv_mtu
  uint8_t roce;                 // 1: address by GID
  uint8_t responder_resources;  // RDMA READs this rank serves at once per QP
  uint8_t initiator_depth;      // RDMA READs this rank issues at once per QP
  uint32_t credits;             // eager receives this rank grants each peer
  uint64_t mailbox_address;     // where peers RDMA WRITE their credit counts
  uint32_t mailbox_rkey;
  uint32_t cm_ipv4;             // rdma_cm listener (network order), 0 if unused
  uint16_t cm_port;             // network order
  uint16_t reserved;
  uint32_t size;                // followed by uint32_t qp_num[size]
};
constexpr uint32_t kWireMagic = 0x42564843;  // "CHVB"
constexpr uint16_t kWireVersion = 1;

// Before every eager payload: the receiver-side credit count of the sender
// (see "credits" in docs/transport-verbs.md), piggy-backed for free.
struct EagerHeader {
  uint32_t granted;
  uint32_t reserved;
};
constexpr size_t kEagerHeader = sizeof(EagerHeader);

constexpr size_t kSendBuffers = 256;
constexpr int kMaxReadsPerQp = 16;
constexpr uint32_t kRequestedInline = 256;
constexpr int kSpareSendSlots = 4;  // credit writes and slack per QP

// The kind in each wr_id (verbs_common.hpp).
enum class WrKind : uint64_t { send = 1, credit_write = 2, read = 3, recv = 4 };
uint64_t make_wr_id(WrKind kind, int peer, uint32_t value) {
  return verbs::make_wr_id(static_cast<uint64_t>(kind), peer, value);
}
WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(wr_kind_bits(id)); }

// Counters wrap: a is ahead of b when the signed distance is positive.
bool ahead(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) > 0; }

const char* kind_text(WrKind kind) {
  switch (kind) {
    case WrKind::send: return "eager send to";
    case WrKind::credit_write: return "credit update to";
    case WrKind::read: return "RDMA READ from";
    case WrKind::recv: return "eager receive from";
  }
  return "operation with";
}


// One posted send-queue work request, retired when a signalled completion
// at or after it arrives (send queues complete in order).
struct SqEntry {
  uint32_t sequence;
  int32_t send_buffer;  // -1: none (inline send, credit write, read)
};

struct Peer {
  ibv_qp* qp = nullptr;
  QpPtr owned_qp;  // bootstrap mode; rdma_cm owns its QPs
  // Flow control: we may send while `limit` is ahead of `sent`.
  uint32_t sent = 0;
  uint32_t limit = 0;
  // Receives we made available to this peer (cumulative) and what it knows.
  uint32_t granted = 0;
  uint32_t advertised = 0;
  // Send queue.
  int sq_capacity = 0;
  int sq_used = 0;
  uint32_t next_sequence = 0;
  int unsignaled = 0;
  std::deque<SqEntry> in_flight;
  int reads_in_flight = 0;
  int max_reads = 1;
  std::deque<std::vector<uint8_t>> backlog;  // engine header + payload, waiting for credits
  std::deque<PendingRead> reads;
  bool needs_service = false;
  bool failed = false;
  uint64_t remote_mailbox = 0;
  uint32_t remote_mailbox_rkey = 0;
};

class VerbsTransport final : public Transport {
 public:
  VerbsTransport(int rank, int size, const VerbsOptions& options)
      : rank_(rank),
        size_(size),
        settings_(options.settings),
        max_eager_(std::max<size_t>(4096, options.max_eager_bytes + 64)),
        use_cm_(options.settings.connect == "rdmacm"),
        timeout_(options.timeout),
        completion_vector_(options.completion_vector) {
    port_ = choose_port(settings_);
    if (use_cm_) {
      // rdma_cm creates QPs on its own device context: PD and CQ must live there.
      cm_ = std::make_unique<CmConnector>(port_, rank_, settings_);
      context_ = cm_->context();
    } else {
      owned_context_ = open_device(port_.device);
      context_ = owned_context_.get();
    }
    check_rc(ibv_query_device(context_, &device_attr_), concat("ibv_query_device(", port_.device, ")"));
    pd_.reset(check_ptr(ibv_alloc_pd(context_), "ibv_alloc_pd"));
    plan_queues();
    create_completion_queue();
    create_buffers();
    peers_.resize(static_cast<size_t>(size_));
    if (settings_.srq) create_srq();
    psn_ = std::random_device{}() & 0xffffff;
    for (int p = 0; p < size_; ++p) {
      if (!use_cm_ || p == rank_) create_qp(p);  // rdma_cm makes the others in connect()
    }
    log::info("verbs: ", port_.device, " port ", port_.port, " (", port_.reason, "), active MTU ",
              mtu_string(port_.attr.active_mtu), ", ", settings_.srq ? "SRQ of " : "receive buffers per QP: ",
              settings_.srq ? srq_buffers_ : credits_, ", credits per peer ", credits_, ", CQ ", cq_entries_,
              " entries on completion vector ", completion_vector_, ", connect via ", settings_.connect);
  }

  ~VerbsTransport() override {
    // Order matters: stop reading async events (the thread acks what it read),
    // then QPs (rdma_cm disconnects its own), SRQ, MRs, CQ with its channel,
    // PD, device.
    monitor_.reset();
    for (Peer& peer : peers_) peer.owned_qp.reset();
    if (cm_) cm_->disconnect_all();
    srq_.reset();
    send_mr_.reset();
    recv_mr_.reset();
    mailbox_mr_.reset();
    credit_source_mr_.reset();
    cq_.reset();
    pd_.reset();
    cm_.reset();  // its listener holds rdma_cm's device context
    owned_context_.reset();
  }

  // One QP, its receive buffers (per QP, or its share of the SRQ) and its
  // flow-control words per rank (ourselves included: reads from our own
  // memory use a QP to ourselves); the send bounce buffers are shared.
  MemoryUse memory_use() const override {
    const size_t receive_bytes = settings_.srq ? static_cast<size_t>(srq_buffers_) * slot_bytes() / static_cast<size_t>(size_)
                                                : static_cast<size_t>(credits_) * slot_bytes();
    const size_t qp_heap = qps_measured_ == 0 ? 0 : qp_heap_bytes_ / static_cast<size_t>(qps_measured_);
    const size_t words = 3 * sizeof(uint32_t);  // mailbox, credit staging, the peer's QP number
    MemoryUse use;
    use.per_peer = sizeof(Peer) + receive_bytes + qp_heap + words;
    use.shared = sizeof(*this) + send_slab_.size();
    use.detail = concat("receive buffers ", receive_bytes, " B (", settings_.srq ? "SRQ share" : "per QP: ",
                        settings_.srq ? "" : concat(credits_, " x ", slot_bytes(), " B"), "), RC QP ", qp_heap,
                        " B of provider heap, peer state ", sizeof(Peer) + words, " B");
    return use;
  }

  std::string name() const override {
    return concat("verbs:rc", settings_.srq ? "+srq" : "", use_cm_ ? "+rdmacm" : "");
  }

  Blob address() override {
    WireAddress wire{};
    wire.magic = kWireMagic;
    wire.version = kWireVersion;
    wire.lid = port_.attr.lid;
    std::copy(port_.gid.begin(), port_.gid.end(), wire.gid);
    wire.psn = psn_;
    wire.active_mtu = static_cast<uint8_t>(port_.attr.active_mtu);
    wire.roce = port_.roce ? 1 : 0;
    wire.responder_resources = static_cast<uint8_t>(std::min(device_attr_.max_qp_rd_atom, kMaxReadsPerQp));
    wire.initiator_depth = static_cast<uint8_t>(std::min(device_attr_.max_qp_init_rd_atom, kMaxReadsPerQp));
    wire.credits = credits_;
    wire.mailbox_address = reinterpret_cast<uintptr_t>(mailbox_.data());
    wire.mailbox_rkey = mailbox_mr_->rkey;
    if (cm_) {
      wire.cm_ipv4 = cm_->listen_ipv4();
      wire.cm_port = cm_->listen_port();
    }
    wire.size = static_cast<uint32_t>(size_);
    Blob blob(sizeof wire + sizeof(uint32_t) * static_cast<size_t>(size_));
    std::memcpy(blob.data(), &wire, sizeof wire);
    for (int p = 0; p < size_; ++p) {
      uint32_t qpn = peers_[static_cast<size_t>(p)].qp ? peers_[static_cast<size_t>(p)].qp->qp_num : 0;
      std::memcpy(blob.data() + sizeof wire + sizeof(uint32_t) * static_cast<size_t>(p), &qpn, sizeof qpn);
    }
    return blob;
  }

  void connect(const std::vector<Blob>& blobs) override {
    if (blobs.size() != static_cast<size_t>(size_)) {
      fail(Status::internal, "verbs: connect got ", blobs.size(), " addresses for ", size_, " ranks");
    }
    std::vector<WireAddress> remote(blobs.size());
    for (int p = 0; p < size_; ++p) remote[static_cast<size_t>(p)] = parse_address(p, blobs[static_cast<size_t>(p)]);
    for (int p = 0; p < size_; ++p) {
      Peer& peer = peers_[static_cast<size_t>(p)];
      const WireAddress& w = remote[static_cast<size_t>(p)];
      peer.limit = w.credits;
      peer.granted = credits_;
      peer.advertised = credits_;
      peer.remote_mailbox = w.mailbox_address + sizeof(uint32_t) * static_cast<uint64_t>(rank_);
      peer.remote_mailbox_rkey = w.mailbox_rkey;
      // Reads we issue are bounded by what the peer serves and what we may issue.
      peer.max_reads = std::max(1, std::min<int>(w.responder_resources,
                                                 std::min(device_attr_.max_qp_init_rd_atom, kMaxReadsPerQp)));
    }
    if (cm_) {
      std::vector<CmPeer> targets(blobs.size());
      for (int p = 0; p < size_; ++p) {
        const WireAddress& w = remote[static_cast<size_t>(p)];
        targets[static_cast<size_t>(p)] = CmPeer{w.cm_ipv4, w.cm_port, peers_[static_cast<size_t>(p)].max_reads,
                                                 std::min(device_attr_.max_qp_rd_atom, kMaxReadsPerQp)};
      }
      cm_->connect_all(targets, pd_.get(), [this](int p) { return qp_init_attr(p); },
                       [this](int p, ibv_qp* qp) { attach_qp(p, qp); }, timeout_);
      bring_up(rank_, remote[static_cast<size_t>(rank_)]);
    } else {
      for (int p = 0; p < size_; ++p) bring_up(p, remote[static_cast<size_t>(p)]);
    }
    for (int p = 0; p < size_; ++p) qp_to_peer_[peers_[static_cast<size_t>(p)].qp->qp_num] = p;
    monitor_ = std::make_unique<AsyncEventMonitor>(context_, [this](uint32_t qpn) { return peer_of_qp(qpn); });
    cq_->watch(monitor_->event_fd(), "async failure eventfd");
    connected_ = true;
  }

  size_t max_eager_bytes() const override { return max_eager_; }

  // Posted work requests are the HCA's to finish; only the credit backlog
  // still needs this process.
  bool sends_pending() const override {
    return std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) { return !p.failed && !p.backlog.empty(); });
  }

  void post_eager(int peer_rank, const void* header, size_t header_bytes, const void* payload,
                  size_t payload_bytes) override {
    Peer& peer = usable_peer(peer_rank);
    maybe_inject_qp_error();
    const size_t bytes = header_bytes + payload_bytes;
    if (bytes > max_eager_) fail(Status::internal, "verbs: eager message of ", bytes, " bytes exceeds ", max_eager_);
    if (peer.backlog.empty() && try_send(peer_rank, header, header_bytes, payload, payload_bytes)) return;
    std::vector<uint8_t> message(bytes);
    if (header_bytes != 0) std::memcpy(message.data(), header, header_bytes);
    if (payload_bytes != 0) std::memcpy(message.data() + header_bytes, payload, payload_bytes);
    peer.backlog.push_back(std::move(message));
    mark_for_service(peer_rank);
  }

  bool registration_pins_pages() const override { return true; }

  std::unique_ptr<MemoryRegion> register_memory(void* base, size_t length) override {
    return std::make_unique<VerbsRegion>(
        register_range(base, length, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), base, length);
  }

  void post_read(int peer_rank, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                 uint64_t context) override {
    Peer& peer = usable_peer(peer_rank);
    ReadJob& job = reads_.start(context);
    const std::vector<PendingRead> pieces =
        read_pieces(job, port_.attr.max_msg_sz, remote, local, local_offset, bytes, "verbs");
    peer.reads.insert(peer.reads.end(), pieces.begin(), pieces.end());
    if (bytes == 0) reads_.finish(&job);
    start_reads(peer_rank);
    if (!peer.reads.empty()) mark_for_service(peer_rank);
  }

  int poll(Sink& sink) override {
    int events = report_async_failures(sink);
    events += cq_->drain([&](const ibv_wc& wc) { complete(sink, wc); });
    events += service_peers();
    return events + reads_.deliver(sink);
  }

  std::string describe_peer(int p) override {
    if (p < 0 || p >= size_ || !connected_) return {};
    const Peer& peer = peers_[static_cast<size_t>(p)];
    if (peer.qp == nullptr) return {};
    return concat("QP 0x", std::hex, peer.qp->qp_num, std::dec, " to rank ", p, " in state ", query_qp_state(peer.qp), ", ",
                  peer.reads_in_flight, " RDMA reads in flight and ", peer.reads.size(), " queued, send queue ",
                  peer.sq_used, "/", peer.sq_capacity, ", ", peer.limit - peer.sent, " send credits, ",
                  peer.backlog.size(), " sends waiting for credits", peer.failed ? ", connection failed" : "");
  }

  int wait_fd() override { return cq_->epoll_fd(); }

  bool arm() override {
    if (!service_list_.empty() || reads_.any_finished()) return false;
    if (monitor_ && monitor_->pending()) return false;
    return cq_->arm();
  }

 private:
  // --- setup -------------------------------------------------------------------

  // Receive buffers and credits. Per-QP mode: every peer gets recv_depth
  // receives on its own QP. SRQ mode: one pool shared by all peers, smaller
  // than size*recv_depth at scale; each peer's credit share keeps the sum of
  // credits within the pool, so a sender never finds it empty (no RNR).
  void plan_queues() {
    const int depth = settings_.recv_depth;
    if (settings_.srq) {
      srq_buffers_ = static_cast<uint32_t>(std::min<int64_t>(int64_t{size_} * depth, std::max(256, 8 * size_)));
      srq_buffers_ = std::min<uint32_t>(srq_buffers_, static_cast<uint32_t>(device_attr_.max_srq_wr));
      credits_ = std::max<uint32_t>(1, srq_buffers_ / static_cast<uint32_t>(size_));
      if (credits_ < 2) {
        fail(Status::config, "verbs: the device's SRQ holds ", device_attr_.max_srq_wr, " receives, too few for ", size_,
             " peers (2 each); unset CHORUS_VERBS_SRQ");
      }
    } else {
      credits_ = static_cast<uint32_t>(depth);
    }
    const int reads = std::min(device_attr_.max_qp_init_rd_atom, kMaxReadsPerQp);
    sq_capacity_ = static_cast<int>(credits_) + std::max(reads, 1) + kSpareSendSlots;
    if (sq_capacity_ > device_attr_.max_qp_wr) {
      fail(Status::config, "CHORUS_VERBS_RECV_DEPTH=\"", depth, "\": needs ", sq_capacity_,
           " send work requests per QP but ", port_.device, " allows ", device_attr_.max_qp_wr);
    }
    // Every work request that can be outstanding may complete into the CQ.
    const int64_t sends = int64_t{size_} * sq_capacity_;
    const int64_t receives = settings_.srq ? int64_t{srq_buffers_} : int64_t{size_} * credits_;
    const int64_t needed = sends + receives;
    if (settings_.cq_entries != 0 && settings_.cq_entries < needed) {
      fail(Status::config, "CHORUS_VERBS_CQ_ENTRIES=\"", settings_.cq_entries, "\": the completion queue must hold ",
           needed, " entries (", size_, " QPs x ", sq_capacity_, " send work requests + ", receives,
           " receives) or it could overrun; raise it or lower CHORUS_VERBS_RECV_DEPTH");
    }
    if (needed > device_attr_.max_cqe) {
      fail(Status::config, "verbs: the completion queue needs ", needed, " entries (", size_, " QPs x ", sq_capacity_,
           " send work requests + ", receives, " receives) but ", port_.device, " allows ", device_attr_.max_cqe,
           "; lower CHORUS_VERBS_RECV_DEPTH or set CHORUS_VERBS_SRQ=1");
    }
    cq_entries_ = static_cast<int>(settings_.cq_entries != 0 ? settings_.cq_entries : needed);
  }

  void create_completion_queue() {
    cq_ = std::make_unique<CompletionQueue>(context_, cq_entries_, completion_vector_);
    completion_vector_ = cq_->vector();
  }

  ibv_mr* register_range(void* base, size_t length, int access) {
    return verbs::register_range(pd_.get(), base, length, access);
  }

  size_t slot_bytes() const { return kEagerHeader + max_eager_; }

  void create_buffers() {
    const size_t receive_slots = settings_.srq ? srq_buffers_ : static_cast<size_t>(size_) * credits_;
    send_slab_.resize(kSendBuffers * slot_bytes());
    recv_slab_.resize(receive_slots * slot_bytes());
    send_mr_.reset(register_range(send_slab_.data(), send_slab_.size(), IBV_ACCESS_LOCAL_WRITE));
    recv_mr_.reset(register_range(recv_slab_.data(), recv_slab_.size(), IBV_ACCESS_LOCAL_WRITE));
    mailbox_.assign(static_cast<size_t>(size_), 0);
    mailbox_mr_.reset(register_range(mailbox_.data(), mailbox_.size() * sizeof(uint32_t),
                                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
    credit_source_.assign(static_cast<size_t>(size_), 0);
    credit_source_mr_.reset(
        register_range(credit_source_.data(), credit_source_.size() * sizeof(uint32_t), IBV_ACCESS_LOCAL_WRITE));
    for (size_t i = 0; i < kSendBuffers; ++i) free_send_buffers_.push_back(static_cast<int32_t>(kSendBuffers - 1 - i));
  }

  void create_srq() {
    ibv_srq_init_attr attr{};
    attr.attr.max_wr = srq_buffers_;
    attr.attr.max_sge = 1;
    srq_.reset(check_ptr(ibv_create_srq(pd_.get(), &attr), concat("ibv_create_srq(", srq_buffers_, " receives)")));
    for (uint32_t slot = 0; slot < srq_buffers_; ++slot) post_receive(-1, slot);
  }

  ibv_qp_init_attr qp_init_attr(int /*peer*/) {
    ibv_qp_init_attr attr{};
    attr.send_cq = cq_->get();
    attr.recv_cq = cq_->get();
    attr.srq = srq_.get();
    attr.qp_type = IBV_QPT_RC;
    attr.sq_sig_all = 0;  // selective signalling
    attr.cap.max_send_wr = static_cast<uint32_t>(sq_capacity_);
    attr.cap.max_recv_wr = srq_ ? 0 : credits_;
    attr.cap.max_send_sge = 1;
    attr.cap.max_recv_sge = 1;
    attr.cap.max_inline_data = inline_request_;
    return attr;
  }

  void create_qp(int p) {
    // Ask for inline data; a device that offers less refuses the QP, so step down.
    for (;;) {
      ibv_qp_init_attr attr = qp_init_attr(p);
      errno = 0;
      const size_t heap_before = heap_bytes_in_use();
      ibv_qp* qp = ibv_create_qp(pd_.get(), &attr);
      if (qp != nullptr) {
        qp_heap_bytes_ += heap_bytes_in_use() - std::min(heap_before, heap_bytes_in_use());
        ++qps_measured_;
        max_inline_ = attr.cap.max_inline_data;
        Peer& peer = peers_[static_cast<size_t>(p)];
        peer.owned_qp.reset(qp);
        peer.qp = qp;
        rc_to_init(qp, port_, p);  // receives can only be posted from INIT on
        attach_qp(p, qp);
        return;
      }
      if (inline_request_ == 0 || errno != EINVAL) fail_errno(concat("ibv_create_qp (RC, to rank ", p, ")"), errno, p);
      inline_request_ /= 4;
    }
  }

  // A QP exists (ours or rdma_cm's): size its send queue and post its receives.
  void attach_qp(int p, ibv_qp* qp) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    peer.qp = qp;
    peer.sq_capacity = sq_capacity_;
    if (use_cm_) {
      ibv_qp_attr attr{};
      ibv_qp_init_attr init{};
      check_rc(ibv_query_qp(qp, &attr, IBV_QP_CAP, &init), concat("ibv_query_qp (QP to rank ", p, ")"), p);
      max_inline_ = init.cap.max_inline_data;
    }
    if (!srq_) {
      for (uint32_t i = 0; i < credits_; ++i) post_receive(p, static_cast<uint32_t>(p) * credits_ + i);
    }
  }

  // RTR then RTS with the peer's QP number, PSN, LID/GID and the common MTU.
  void bring_up(int p, const WireAddress& remote) {
    RcRemote path;
    path.qpn = remote_qpns_[static_cast<size_t>(p)];
    path.psn = remote.psn;
    path.mtu = static_cast<ibv_mtu>(remote.active_mtu);
    path.lid = remote.lid;
    path.gid = to_array(remote.gid);
    path.max_reads_served = remote.responder_resources;
    RcLimits limits;
    limits.sq_psn = psn_;
    limits.qp_timeout = settings_.qp_timeout;
    limits.retry_count = settings_.retry_count;
    limits.max_reads_served = std::min(device_attr_.max_qp_rd_atom, kMaxReadsPerQp);
    limits.max_reads_issued = peers_[static_cast<size_t>(p)].max_reads;
    rc_to_rts(peers_[static_cast<size_t>(p)].qp, port_, path, limits, p);
  }

  static std::array<uint8_t, 16> to_array(const uint8_t* gid) {
    std::array<uint8_t, 16> out{};
    std::copy(gid, gid + 16, out.begin());
    return out;
  }

  WireAddress parse_address(int p, const Blob& blob) {
    WireAddress wire{};
    if (blob.size() < sizeof wire) {
      fail(Status::bootstrap, "verbs: rank ", p, " published a ", blob.size(), "-byte address, expected at least ",
           sizeof wire, " (is it running the verbs transport?)");
    }
    std::memcpy(&wire, blob.data(), sizeof wire);
    if (wire.magic != kWireMagic || wire.version != kWireVersion) {
      fail(Status::bootstrap, "verbs: rank ", p, "'s address is not a chorus verbs v", kWireVersion,
           " address (magic 0x", std::hex, wire.magic, std::dec, ", version ", wire.version,
           "); all ranks must run the same chorus with CHORUS_TRANSPORT=verbs");
    }
    if (wire.size != static_cast<uint32_t>(size_) || blob.size() != sizeof wire + 4 * static_cast<size_t>(size_)) {
      fail(Status::bootstrap, "verbs: rank ", p, "'s address describes a job of ", wire.size, " ranks, this one has ",
           size_);
    }
    if (static_cast<bool>(wire.roce) != port_.roce) {
      fail(Status::config, "verbs: rank ", p, " uses ", wire.roce ? "RoCE" : "InfiniBand", " but this rank uses ",
           port_.roce ? "RoCE" : "InfiniBand", "; set CHORUS_IB_DEVICE/CHORUS_IB_PORT to ports of one fabric");
    }
    // The QP the peer created for us.
    if (remote_qpns_.empty()) remote_qpns_.assign(static_cast<size_t>(size_), 0);
    std::memcpy(&remote_qpns_[static_cast<size_t>(p)], blob.data() + sizeof wire + 4 * static_cast<size_t>(rank_), 4);
    return wire;
  }

  int peer_of_qp(uint32_t qpn) const {
    auto it = qp_to_peer_.find(qpn);
    return it == qp_to_peer_.end() ? -1 : it->second;
  }

  // --- sending -------------------------------------------------------------------

  Peer& usable_peer(int p) {
    if (p < 0 || p >= size_ || !connected_) {
      fail(Status::invalid_argument, "verbs: rank ", p, " is not a connected peer (0..", size_ - 1, ")");
    }
    Peer& peer = peers_[static_cast<size_t>(p)];
    if (peer.failed) {
      throw Error(Status::peer_failed, concat("verbs: the connection to rank ", p, " failed earlier"), p);
    }
    if (fatal_) throw *fatal_;
    return peer;
  }

  // CHORUS_TEST_VERBS_QP_ERROR: what a broken link or a remote access error
  // does to a QP, on demand, so the fault tests can show it is reported.
  void maybe_inject_qp_error() {
    // Every rank gets the variable; the named peer itself ignores it.
    if (settings_.test_qp_error_peer < 0 || settings_.test_qp_error_peer >= size_ ||
        settings_.test_qp_error_peer == rank_) {
      return;
    }
    if (eager_posts_++ != static_cast<uint64_t>(settings_.test_qp_error_after)) return;
    const int p = settings_.test_qp_error_peer;
    log::warn("verbs: test hook: moving the QP to rank ", p, " into the error state");
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    check_rc(ibv_modify_qp(peers_[static_cast<size_t>(p)].qp, &attr, IBV_QP_STATE),
             concat("ibv_modify_qp(ERR) of the QP to rank ", p, " (test hook)"), p);
  }

  void refresh_credits(Peer& peer, int p) {
    const uint32_t written = __atomic_load_n(&mailbox_[static_cast<size_t>(p)], __ATOMIC_ACQUIRE);
    if (ahead(written, peer.limit)) peer.limit = written;
  }

  // Whether the next work request on this QP must be signalled: periodically,
  // so unsignalled entries are retired, and early when bounce buffers run low.
  bool want_signal(Peer& peer, bool uses_buffer) {
    const int interval = std::max(1, std::min(16, peer.sq_capacity / 4));
    if (++peer.unsignaled >= interval || (uses_buffer && free_send_buffers_.size() < kSendBuffers / 4) ||
        peer.sq_used + 1 >= peer.sq_capacity) {
      peer.unsignaled = 0;
      return true;
    }
    return false;
  }

  uint32_t push_sq_entry(Peer& peer, int32_t send_buffer) {
    const uint32_t sequence = peer.next_sequence++;
    peer.in_flight.push_back(SqEntry{sequence, send_buffer});
    ++peer.sq_used;
    return sequence;
  }

  // Sends now if credits, a send-queue slot and (unless inlined) a bounce
  // buffer are free; false means "queue it" and nothing was posted.
  bool try_send(int p, const void* header, size_t header_bytes, const void* payload, size_t payload_bytes) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    if (!ahead(peer.limit, peer.sent)) refresh_credits(peer, p);
    if (!ahead(peer.limit, peer.sent) || peer.sq_used >= peer.sq_capacity) return false;
    const size_t bytes = kEagerHeader + header_bytes + payload_bytes;
    const bool inline_send = bytes <= std::min<size_t>(max_inline_, kRequestedInline);
    if (!inline_send && free_send_buffers_.empty()) return false;

    uint8_t staging[kRequestedInline];
    int32_t buffer = -1;
    uint8_t* out = staging;
    if (!inline_send) {
      buffer = free_send_buffers_.back();
      free_send_buffers_.pop_back();
      out = &send_slab_[static_cast<size_t>(buffer) * slot_bytes()];
    }
    const EagerHeader eager{peer.granted, 0};
    std::memcpy(out, &eager, kEagerHeader);
    if (header_bytes != 0) std::memcpy(out + kEagerHeader, header, header_bytes);
    if (payload_bytes != 0) std::memcpy(out + kEagerHeader + header_bytes, payload, payload_bytes);

    ibv_sge sge{reinterpret_cast<uintptr_t>(out), static_cast<uint32_t>(bytes), send_mr_->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = (inline_send ? IBV_SEND_INLINE : 0) | (want_signal(peer, !inline_send) ? IBV_SEND_SIGNALED : 0);
    const uint32_t sequence = push_sq_entry(peer, buffer);
    wr.wr_id = make_wr_id(WrKind::send, p, sequence);
    post_send(peer, p, wr, concat("ibv_post_send (eager, ", bytes, " bytes, to rank ", p, ")"));
    ++peer.sent;
    peer.advertised = peer.granted;
    return true;
  }

  void post_send(Peer& peer, int p, ibv_send_wr& wr, const std::string& what) {
    ibv_send_wr* bad = nullptr;
    int rc = ibv_post_send(peer.qp, &wr, &bad);
    if (rc != 0) {
      // Nothing was posted: undo the bookkeeping before reporting.
      if (peer.in_flight.back().send_buffer >= 0) free_send_buffers_.push_back(peer.in_flight.back().send_buffer);
      peer.in_flight.pop_back();
      --peer.sq_used;
      --peer.next_sequence;
      fail_errno(what, rc, p);
    }
  }

  // Tells the peer how many receives we have made available to it, by an
  // RDMA WRITE into its mailbox: no receive consumed, so credits never
  // depend on credits.
  bool send_credit_update(int p) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    if (peer.sq_used >= peer.sq_capacity) return false;
    credit_source_[static_cast<size_t>(p)] = peer.granted;
    ibv_sge sge{reinterpret_cast<uintptr_t>(&credit_source_[static_cast<size_t>(p)]), sizeof(uint32_t),
                credit_source_mr_->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = peer.remote_mailbox;
    wr.wr.rdma.rkey = peer.remote_mailbox_rkey;
    wr.send_flags = (max_inline_ >= sizeof(uint32_t) ? IBV_SEND_INLINE : 0) |
                    (want_signal(peer, false) ? IBV_SEND_SIGNALED : 0);
    const uint32_t sequence = push_sq_entry(peer, -1);
    wr.wr_id = make_wr_id(WrKind::credit_write, p, sequence);
    post_send(peer, p, wr, concat("ibv_post_send (credit RDMA WRITE to rank ", p, ")"));
    peer.advertised = peer.granted;
    ++credit_writes_;
    return true;
  }

  bool credit_update_due(const Peer& peer) const { return peer.granted - peer.advertised >= std::max(1u, credits_ / 2); }

  void start_reads(int p) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    while (!peer.reads.empty() && peer.reads_in_flight < peer.max_reads && peer.sq_used < peer.sq_capacity) {
      PendingRead& read = peer.reads.front();
      ibv_sge sge{};
      ibv_send_wr wr = read_work_request(read, sge);
      peer.unsignaled = 0;
      const uint32_t sequence = push_sq_entry(peer, -1);
      const uint32_t op = allocate_read_op(read.job);
      wr.wr_id = make_wr_id(WrKind::read, p, op);
      read_ops_[op].sequence = sequence;
      ibv_send_wr* bad = nullptr;
      int rc = ibv_post_send(peer.qp, &wr, &bad);
      if (rc != 0) {
        peer.in_flight.pop_back();
        --peer.sq_used;
        --peer.next_sequence;
        free_read_ops_.push_back(op);
        fail_errno(concat("ibv_post_send (RDMA READ of ", read.bytes, " bytes from rank ", p, ")"), rc, p);
      }
      ++peer.reads_in_flight;
      peer.reads.pop_front();
    }
  }

  struct ReadOp {
    ReadJob* job = nullptr;
    uint32_t sequence = 0;
  };

  uint32_t allocate_read_op(ReadJob* job) {
    if (free_read_ops_.empty()) {
      read_ops_.emplace_back();
      free_read_ops_.push_back(static_cast<uint32_t>(read_ops_.size() - 1));
    }
    uint32_t op = free_read_ops_.back();
    free_read_ops_.pop_back();
    read_ops_[op].job = job;
    return op;
  }

  void mark_for_service(int p) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    if (!peer.needs_service) {
      peer.needs_service = true;
      service_list_.push_back(p);
    }
  }

  // Backlogged sends, pending reads and due credit updates, peer by peer.
  int service_peers() {
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
          if (--read.job->pieces_left == 0) reads_.finish(read.job);
        }
        peer.reads.clear();
        continue;
      }
      while (!peer.backlog.empty()) {
        auto& message = peer.backlog.front();
        if (!try_send(p, message.data(), message.size(), nullptr, 0)) break;
        peer.backlog.pop_front();
        ++progressed;
      }
      start_reads(p);
      if (credit_update_due(peer) && send_credit_update(p)) ++progressed;
      if (!peer.backlog.empty() || !peer.reads.empty() || credit_update_due(peer)) mark_for_service(p);
    }
    return progressed;
  }

  // --- receiving -------------------------------------------------------------------

  void post_receive(int p, uint32_t slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(&recv_slab_[slot * slot_bytes()]), static_cast<uint32_t>(slot_bytes()),
                recv_mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = make_wr_id(WrKind::recv, std::max(p, 0), slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (srq_) {
      check_rc(ibv_post_srq_recv(srq_.get(), &wr, &bad), "ibv_post_srq_recv (reposting an eager buffer)");
    } else {
      check_rc(ibv_post_recv(peers_[static_cast<size_t>(p)].qp, &wr, &bad),
               concat("ibv_post_recv (eager buffer for rank ", p, ")"), p);
    }
  }

  void complete(Sink& sink, const ibv_wc& wc) {
    if (wc.status != IBV_WC_SUCCESS) return complete_with_error(sink, wc);
    const WrKind kind = wr_kind(wc.wr_id);
    switch (kind) {
      case WrKind::send:
      case WrKind::credit_write:
        retire(wr_peer(wc.wr_id), wr_value(wc.wr_id));
        return;
      case WrKind::read: {
        ReadOp& op = read_ops_[wr_value(wc.wr_id)];
        const int p = wr_peer(wc.wr_id);
        retire(p, op.sequence);
        finish_read_piece(p, wr_value(wc.wr_id));
        return;
      }
      case WrKind::recv:
        return receive(sink, wc);
    }
  }

  void retire(int p, uint32_t sequence) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    while (!peer.in_flight.empty()) {
      SqEntry entry = peer.in_flight.front();
      if (ahead(entry.sequence, sequence)) break;
      peer.in_flight.pop_front();
      --peer.sq_used;
      if (entry.send_buffer >= 0) free_send_buffers_.push_back(entry.send_buffer);
    }
    if (!peer.backlog.empty() || !peer.reads.empty()) mark_for_service(p);
  }

  void finish_read_piece(int p, uint32_t op_index) {
    Peer& peer = peers_[static_cast<size_t>(p)];
    --peer.reads_in_flight;
    ReadJob* job = read_ops_[op_index].job;
    free_read_ops_.push_back(op_index);
    if (--job->pieces_left == 0) reads_.finish(job);
    if (!peer.reads.empty()) mark_for_service(p);
  }

  void receive(Sink& sink, const ibv_wc& wc) {
    const uint32_t slot = wr_value(wc.wr_id);
    const int p = srq_ ? peer_of_qp(wc.qp_num) : wr_peer(wc.wr_id);
    if (p < 0) {
      post_receive(-1, slot);
      sink.on_error(0, -1, Error(Status::internal, concat("verbs: eager message on unknown QP 0x", std::hex, wc.qp_num)));
      return;
    }
    Peer& peer = peers_[static_cast<size_t>(p)];
    const uint8_t* data = &recv_slab_[slot * slot_bytes()];
    if (wc.byte_len < kEagerHeader) {
      post_receive(p, slot);
      sink.on_error(0, p, Error(Status::internal, concat("verbs: malformed eager message of ", wc.byte_len,
                                                         " bytes from rank ", p), p));
      return;
    }
    EagerHeader header{};
    std::memcpy(&header, data, kEagerHeader);
    if (ahead(header.granted, peer.limit)) peer.limit = header.granted;
    sink.on_eager(p, data + kEagerHeader, wc.byte_len - kEagerHeader);
    post_receive(p, slot);  // after the sink is done with the bytes
    ++peer.granted;
    if (!peer.backlog.empty() || credit_update_due(peer)) mark_for_service(p);
  }

  // On an error completion only wr_id, status, qp_num and vendor_err are valid.
  void complete_with_error(Sink& sink, const ibv_wc& wc) {
    const WrKind kind = wr_kind(wc.wr_id);
    int p = kind == WrKind::recv && srq_ ? peer_of_qp(wc.qp_num) : wr_peer(wc.wr_id);
    if (kind == WrKind::recv && wc.status == IBV_WC_WR_FLUSH_ERR) return;  // QP left RTS: receives flushed
    Error failure(Status::peer_failed,
                  concat("verbs: ", kind_text(kind), " rank ", p, " failed: ", ibv_wc_status_str(wc.status),
                         " (status ", static_cast<int>(wc.status), ", vendor_err 0x", std::hex, wc.vendor_err,
                         ", QP 0x", wc.qp_num, std::dec, ")",
                         wc.status == IBV_WC_RETRY_EXC_ERR ? "; the peer is unreachable or its process died" : ""),
                  p);
    if (p < 0 || p >= size_) {
      sink.on_error(0, -1, failure);
      return;
    }
    Peer& peer = peers_[static_cast<size_t>(p)];
    switch (kind) {
      case WrKind::send:
      case WrKind::credit_write:
        retire(p, wr_value(wc.wr_id));
        break;
      case WrKind::read: {
        ReadOp& op = read_ops_[wr_value(wc.wr_id)];
        retire(p, op.sequence);
        op.job->failed = true;
        const uint64_t context = op.job->context;
        finish_read_piece(p, wr_value(wc.wr_id));
        sink.on_error(context, p, failure);
        break;
      }
      case WrKind::recv:
        break;
    }
    if (!peer.failed) {
      peer.failed = true;
      log::warn(failure.what());
      sink.on_error(0, p, failure);
    }
  }

  int report_async_failures(Sink& sink) {
    if (!monitor_ || !monitor_->pending()) return 0;
    int events = 0;
    for (AsyncFailure& failure : monitor_->take()) {
      if (failure.peer >= 0 && failure.peer < size_) {
        peers_[static_cast<size_t>(failure.peer)].failed = true;
      } else {
        fatal_ = failure.error;
      }
      sink.on_error(0, failure.peer, failure.error);
      ++events;
    }
    return events;
  }

  int rank_;
  int size_;
  config::VerbsSettings settings_;
  size_t max_eager_;
  bool use_cm_;
  std::chrono::milliseconds timeout_;
  int completion_vector_;  // of the CQ (placement's choice)
  PortChoice port_;
  ibv_context* context_ = nullptr;
  ContextPtr owned_context_;
  ibv_device_attr device_attr_{};
  PdPtr pd_;
  std::unique_ptr<CompletionQueue> cq_;
  SrqPtr srq_;

  uint32_t credits_ = 0;
  uint32_t srq_buffers_ = 0;
  int sq_capacity_ = 0;
  int cq_entries_ = 0;
  uint32_t inline_request_ = kRequestedInline;
  uint32_t max_inline_ = 0;
  uint32_t psn_ = 0;

  std::vector<uint8_t> send_slab_, recv_slab_;
  MrPtr send_mr_, recv_mr_;
  std::vector<int32_t> free_send_buffers_;
  std::vector<uint32_t> mailbox_;        // mailbox_[p]: receives rank p granted us (written by p)
  std::vector<uint32_t> credit_source_;  // staging for credit writes that cannot be inlined
  MrPtr mailbox_mr_, credit_source_mr_;
  uint64_t credit_writes_ = 0;
  uint64_t eager_posts_ = 0;

  std::vector<Peer> peers_;
  std::vector<uint32_t> remote_qpns_;
  size_t qp_heap_bytes_ = 0;  // provider heap taken by the QPs we created (memory_use)
  int qps_measured_ = 0;
  std::unordered_map<uint32_t, int> qp_to_peer_;
  std::deque<int> service_list_;

  ReadJobs reads_;
  std::vector<ReadOp> read_ops_;
  std::vector<uint32_t> free_read_ops_;

  std::unique_ptr<CmConnector> cm_;
  std::unique_ptr<AsyncEventMonitor> monitor_;
  std::optional<Error> fatal_;
  bool connected_ = false;
};

}  // namespace

std::unique_ptr<Transport> make_verbs_transport(int rank, int size, const VerbsOptions& options) {
  if (options.settings.mode == "ud") return make_ud_transport(rank, size, options);
  return std::make_unique<VerbsTransport>(rank, size, options);
}

}  // namespace chorus::transport
