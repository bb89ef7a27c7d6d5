// The verbs UD scalable mode (CHORUS_VERBS_MODE=ud; docs/transport-ud.md):
// one UD QP and one SRQ per process, an address handle per peer, datagrams
// made reliable by ud::Reliability, and RC QPs made on demand, over the
// reliable datagrams themselves, only for peers we RDMA READ from.
#include "common/log.hpp"
#include "transports/verbs/ud_rc_links.hpp"
#include "transports/verbs/ud_reliability.hpp"
#include "transports/verbs/verbs_async.hpp"
#include "transports/verbs/verbs_common.hpp"
#include "transports/verbs/verbs_transport.hpp"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <random>
#include <unordered_map>
#include <unordered_set>

namespace chorus::transport {

namespace {

using namespace verbs;

// The blob each rank publishes: the same size at any job size.
struct UdWireAddress {
  uint32_t magic;
  uint16_t version;
  uint16_t lid;
  uint8_t gid[16];
  uint32_t qpn;
  uint32_t qkey;
  uint8_t active_mtu;  // ibv_mtu
  uint8_t roce;
  uint16_t reserved;
};
constexpr uint32_t kUdMagic = 0x55564843;  // "CHVU"
constexpr uint16_t kUdVersion = 1;

constexpr size_t kGrhBytes = 40;  // every UD receive buffer starts with room for the GRH
constexpr uint32_t kReceiveBuffers = 512;
constexpr int kMaxReadsPerQp = 16;
constexpr uint32_t kRequestedInline = 64;
constexpr uint8_t kEngineChannel = 0;
constexpr uint8_t kControlChannel = 1;

enum class WrKind : uint64_t { fragment = 1, ack = 2, recv = 3, read = 4 };
uint64_t wr_id(WrKind kind, int peer, uint32_t value) { return make_wr_id(static_cast<uint64_t>(kind), peer, value); }
WrKind wr_kind(uint64_t id) { return static_cast<WrKind>(wr_kind_bits(id)); }

size_t mtu_bytes(ibv_mtu mtu) { return size_t{128} << static_cast<int>(mtu); }

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// Kept for every peer: what a datagram to it needs.
struct UdPeer {
  AhPtr ah;
  uint32_t qpn = 0;
  uint32_t qkey = 0;
};

class UdTransport;

// What the reliability layer delivers, routed for one poll().
class Deliveries final : public ud::Delivery {
 public:
  Deliveries(UdTransport& transport, Sink& sink) : transport_(transport), sink_(sink) {}
  void on_message(int peer, uint8_t channel, const void* data, size_t bytes) override;
  void on_peer_failed(int peer, const Error& error) override;
  void report(uint64_t context, int peer, const Error& error) { sink_.on_error(context, peer, error); }
  void fail_all(const Error& error) { sink_.on_error(0, -1, error); }

 private:
  UdTransport& transport_;
  Sink& sink_;
};

class UdTransport final : public Transport, private ud::Link {
 public:
  UdTransport(int rank, int size, const VerbsOptions& options)
      : rank_(rank),
        size_(size),
        settings_(options.settings),
        max_eager_(std::max<size_t>(4096, options.max_eager_bytes + 64)),
        timeout_(options.timeout) {
    if (settings_.connect != "bootstrap" || settings_.srq) {
      fail(Status::config, "CHORUS_VERBS_MODE=\"ud\" has one SRQ and no RC mesh to connect: unset ",
           settings_.srq ? "CHORUS_VERBS_SRQ" : "CHORUS_VERBS_CONNECT");
    }
    port_ = choose_port(settings_);
    context_ = open_device(port_.device);
    check_rc(ibv_query_device(context_.get(), &device_attr_), concat("ibv_query_device(", port_.device, ")"));
    pd_.reset(check_ptr(ibv_alloc_pd(context_.get()), "ibv_alloc_pd"));
    // Half the timeout: the peer is reported before the engine's own wait gives up.
    params_.give_up_ns = std::max<uint64_t>(1'000'000'000, static_cast<uint64_t>(
                                                               std::chrono::nanoseconds(timeout_).count()) / 2);
    max_reads_ = std::max(1, std::min({device_attr_.max_qp_init_rd_atom, device_attr_.max_qp_rd_atom, kMaxReadsPerQp}));
    read_budget_ = settings_.ud_rc_max * max_reads_;
    const int send_queue = static_cast<int>(params_.slots + params_.ack_slots);
    const int cq_entries = send_queue + static_cast<int>(kReceiveBuffers) + read_budget_;
    if (cq_entries > device_attr_.max_cqe) {
      fail(Status::config, "verbs UD: the completion queue needs ", cq_entries, " entries but ", port_.device,
           " allows ", device_attr_.max_cqe, "; lower CHORUS_UD_RC_MAX");
    }
    cq_ = std::make_unique<CompletionQueue>(context_.get(), cq_entries, options.completion_vector);
    create_receive_buffers();
    create_ud_qp(static_cast<uint32_t>(send_queue));
    timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (timer_fd_ < 0) fail_errno("timerfd_create (UD retransmission timer)", errno);
    cq_->watch(timer_fd_, "UD retransmission timer");
    log::info("verbs UD: ", port_.device, " port ", port_.port, " (", port_.reason, "), active MTU ",
              mtu_string(port_.attr.active_mtu), ", UD QP 0x", std::hex, ud_qp_->qp_num, std::dec, ", SRQ of ",
              kReceiveBuffers, ", up to ", settings_.ud_rc_max, " RC QPs for reads, CQ of ", cq_entries,
              " on completion vector ", cq_->vector());
  }

  ~UdTransport() override {
    if (reliability_) {
      const ud::Stats& s = reliability_->stats();
      log::info("verbs UD: ", s.fragments_sent, " fragments sent, ", s.retransmissions, " retransmitted (",
                s.timeouts, " timer expiries), ", s.acks_sent, " standalone acks (", s.gap_acks_sent, " gap), ",
                s.duplicates, " duplicates and ", s.out_of_order, " out of order dropped, ", s.malformed + stray_datagrams_,
                " malformed or stray; ", links_ ? links_->closed_for_lru() : 0, " RC QPs closed for the LRU");
    }
    // Async events first, then every QP and the SRQ, then what they used.
    monitor_.reset();
    links_.reset();
    ud_qp_.reset();
    srq_.reset();
    peers_.clear();
    arena_mr_.reset();
    recv_mr_.reset();
    ack_mr_.reset();
    cq_.reset();
    if (timer_fd_ >= 0) close(timer_fd_);
    pd_.reset();
  }

  std::string name() const override { return "verbs:ud"; }

  // Per rank: an address handle, where its UD QP is, and the reliability
  // counters. The SRQ buffers, the retransmission slots and the RC set's
  // bound do not grow with the job.
  MemoryUse memory_use() const override {
    MemoryUse use;
    use.per_peer = sizeof(UdPeer) + ud::Reliability::bytes_per_peer() + ah_bytes_;
    use.shared = sizeof(*this) + recv_slab_.size() + ack_ring_.size() + (reliability_ ? reliability_->bytes_shared() : 0);
    const size_t link_bytes = RcReadLinks::bytes_per_link() + qp_heap_bytes_;
    if (links_) use.on_demand = links_->bytes_in_use() + static_cast<size_t>(links_->qp_count()) * qp_heap_bytes_;
    if (reliability_) use.on_demand += reliability_->bytes_in_use();
    use.on_demand_bound = static_cast<size_t>(settings_.ud_rc_max) * link_bytes;
    use.detail = concat("address handle ", ah_bytes_, " B of provider heap, peer address ", sizeof(UdPeer),
                        " B, reliability ", ud::Reliability::bytes_per_peer(), " B; RC set: at most ",
                        settings_.ud_rc_max, " links of ", link_bytes, " B");
    return use;
  }

  Blob address() override {
    UdWireAddress wire{};
    wire.magic = kUdMagic;
    wire.version = kUdVersion;
    wire.lid = port_.attr.lid;
    std::copy(port_.gid.begin(), port_.gid.end(), wire.gid);
    wire.qpn = ud_qp_->qp_num;
    wire.qkey = qkey_;
    wire.active_mtu = static_cast<uint8_t>(port_.attr.active_mtu);
    wire.roce = port_.roce ? 1 : 0;
    Blob blob(sizeof wire);
    std::memcpy(blob.data(), &wire, sizeof wire);
    return blob;
  }

  void connect(const std::vector<Blob>& blobs) override {
    if (blobs.size() != static_cast<size_t>(size_)) {
      fail(Status::internal, "verbs UD: connect got ", blobs.size(), " addresses for ", size_, " ranks");
    }
    ibv_mtu mtu = port_.attr.active_mtu;
    std::vector<UdWireAddress> remote(blobs.size());
    for (int p = 0; p < size_; ++p) {
      remote[static_cast<size_t>(p)] = parse_address(p, blobs[static_cast<size_t>(p)]);
      mtu = std::min(mtu, static_cast<ibv_mtu>(remote[static_cast<size_t>(p)].active_mtu));
    }
    path_mtu_ = mtu;
    peers_.resize(static_cast<size_t>(size_));
    // What the provider allocates per address handle, measured
    // (docs/transport-ud.md): after the first, whose one-time costs (the
    // provider's caches) are not a per-peer cost.
    create_address_handle(0, remote[0]);
    const size_t heap_before = heap_bytes_in_use();
    for (int p = 1; p < size_; ++p) create_address_handle(p, remote[static_cast<size_t>(p)]);
    const size_t heap_after = heap_bytes_in_use();
    ah_bytes_ = heap_after > heap_before ? (heap_after - heap_before) / static_cast<size_t>(std::max(size_ - 1, 1)) : 0;
    log::info("verbs UD: per-peer state ", sizeof(UdPeer) + ud::Reliability::bytes_per_peer() + ah_bytes_,
              " bytes (", sizeof(UdPeer), " address, ", ud::Reliability::bytes_per_peer(), " reliability, ", ah_bytes_,
              " address handle); path MTU ", mtu_string(path_mtu_));

    const size_t frame = mtu_bytes(path_mtu_);
    arena_.resize(static_cast<size_t>(params_.slots) * frame);
    arena_mr_.reset(register_range(pd_.get(), arena_.data(), arena_.size(), IBV_ACCESS_LOCAL_WRITE));
    reliability_ = std::make_unique<ud::Reliability>(rank_, size_, params_, frame, arena_.data());
    RcReadLinks::Setup setup;
    setup.rank = rank_;
    setup.pd = pd_.get();
    setup.cq = cq_->get();
    setup.port = port_;
    setup.path_mtu = path_mtu_;
    setup.max_reads = max_reads_;
    setup.max_links = settings_.ud_rc_max;
    setup.qp_timeout = settings_.qp_timeout;
    setup.retry_count = settings_.retry_count;
    setup.read_wr_kind = static_cast<uint64_t>(WrKind::read);
    links_ = std::make_unique<RcReadLinks>(setup, [this](int peer, const void* message, size_t bytes) {
      reliability_->send(peer, kControlChannel, message, bytes, nullptr, 0, *this, now_ns());
    });
    RcReadLinks* links = links_.get();
    monitor_ = std::make_unique<AsyncEventMonitor>(context_.get(), [links](uint32_t qpn) { return links->peer_of_qp(qpn); });
    cq_->watch(monitor_->event_fd(), "async failure eventfd");
    connected_ = true;
  }

  size_t max_eager_bytes() const override { return max_eager_; }

  // Until acknowledged, a datagram may have to be sent again by this process.
  bool sends_pending() const override { return reliability_ && reliability_->sends_pending(); }

  void post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                  size_t payload_bytes) override {
    check_usable(peer);
    const size_t bytes = header_bytes + payload_bytes;
    if (bytes > max_eager_) fail(Status::internal, "verbs UD: eager message of ", bytes, " bytes exceeds ", max_eager_);
    reliability_->send(peer, kEngineChannel, header, header_bytes, payload, payload_bytes, *this, now_ns());
  }

  bool registration_pins_pages() const override { return true; }

  std::unique_ptr<MemoryRegion> register_memory(void* base, size_t length) override {
    return std::make_unique<VerbsRegion>(
        register_range(pd_.get(), base, length, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), base, length);
  }

  void post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                 uint64_t context) override {
    check_usable(peer);
    ReadJob& job = reads_.start(context);
    const std::vector<PendingRead> pieces =
        read_pieces(job, port_.attr.max_msg_sz, remote, local, local_offset, bytes, "verbs UD");
    if (bytes == 0) {
      reads_.finish(&job);
      return;
    }
    links_->enqueue(peer, pieces);
  }

  int poll(Sink& sink) override {
    int events = report_async_failures(sink);
    Deliveries deliveries(*this, sink);
    events += cq_->drain([&](const ibv_wc& wc) { complete(wc, deliveries); });
    if (reliability_) reliability_->tick(*this, deliveries, now_ns());
    if (links_) {
      links_->service();
      std::vector<ReadJob*>& finished = links_->finished();
      for (ReadJob* job : finished) reads_.finish(job);
      finished.clear();
    }
    return events + reads_.deliver(sink);
  }

  std::string describe_peer(int p) override {
    if (p < 0 || p >= size_ || !connected_) return {};
    return concat(reliability_->describe(p), ", ", links_->describe(p));
  }

  int wait_fd() override { return cq_->epoll_fd(); }

  bool arm() override {
    if (reads_.any_finished() || (links_ && (links_->needs_service() || !links_->finished().empty()))) return false;
    if (monitor_ && monitor_->pending()) return false;
    const uint64_t deadline = reliability_ ? reliability_->next_deadline_ns() : std::numeric_limits<uint64_t>::max();
    if (deadline != std::numeric_limits<uint64_t>::max()) {
      if (deadline <= now_ns()) return false;
      set_timer(deadline);
    } else if (timer_set_) {
      set_timer(0);  // disarmed
    }
    return cq_->arm();
  }

  // --- called by Deliveries --------------------------------------------------

  void on_control(int peer, const void* data, size_t bytes) { links_->on_control(peer, data, bytes); }

  void on_peer_failed(int peer) {
    failed_.insert(peer);
    links_->fail_peer(peer);
  }

 private:
  // --- setup -------------------------------------------------------------------

  void create_receive_buffers() {
    recv_bytes_ = kGrhBytes + mtu_bytes(port_.attr.active_mtu);
    recv_slab_.resize(kReceiveBuffers * recv_bytes_);
    recv_mr_.reset(register_range(pd_.get(), recv_slab_.data(), recv_slab_.size(), IBV_ACCESS_LOCAL_WRITE));
    ack_ring_.resize(static_cast<size_t>(params_.ack_slots) * sizeof(ud::WireHeader));
    ack_mr_.reset(register_range(pd_.get(), ack_ring_.data(), ack_ring_.size(), IBV_ACCESS_LOCAL_WRITE));
    ibv_srq_init_attr attr{};
    attr.attr.max_wr = std::min<uint32_t>(kReceiveBuffers, static_cast<uint32_t>(device_attr_.max_srq_wr));
    attr.attr.max_sge = 1;
    srq_.reset(check_ptr(ibv_create_srq(pd_.get(), &attr), concat("ibv_create_srq(", attr.attr.max_wr, " receives)")));
    for (uint32_t slot = 0; slot < attr.attr.max_wr; ++slot) post_receive(slot);
  }

  void create_ud_qp(uint32_t send_queue) {
    qkey_ = (std::random_device{}() & 0x7fffffffu) | 1u;  // high bit clear: not a controlled qkey
    uint32_t inline_request = kRequestedInline;
    for (;;) {
      ibv_qp_init_attr attr{};
      attr.send_cq = cq_->get();
      attr.recv_cq = cq_->get();
      attr.srq = srq_.get();
      attr.qp_type = IBV_QPT_UD;
      attr.sq_sig_all = 1;  // every send frees a slot or an ack buffer
      attr.cap.max_send_wr = send_queue;
      attr.cap.max_send_sge = 1;
      attr.cap.max_inline_data = inline_request;
      errno = 0;
      const size_t heap_before = heap_bytes_in_use();
      ibv_qp* qp = ibv_create_qp(pd_.get(), &attr);
      if (qp != nullptr) {
        // An RC QP for reads costs the provider about what the UD QP did.
        qp_heap_bytes_ = heap_bytes_in_use() - std::min(heap_before, heap_bytes_in_use());
        ud_qp_.reset(qp);
        max_inline_ = attr.cap.max_inline_data;
        break;
      }
      if (inline_request == 0 || errno != EINVAL) fail_errno("ibv_create_qp (UD)", errno);
      inline_request /= 4;
    }
    ibv_qp_attr init{};
    init.qp_state = IBV_QPS_INIT;
    init.pkey_index = 0;
    init.port_num = static_cast<uint8_t>(port_.port);
    init.qkey = qkey_;
    check_rc(ibv_modify_qp(ud_qp_.get(), &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
             "ibv_modify_qp(INIT) of the UD QP");
    ibv_qp_attr rtr{};
    rtr.qp_state = IBV_QPS_RTR;
    check_rc(ibv_modify_qp(ud_qp_.get(), &rtr, IBV_QP_STATE), "ibv_modify_qp(RTR) of the UD QP");
    ibv_qp_attr rts{};
    rts.qp_state = IBV_QPS_RTS;
    rts.sq_psn = std::random_device{}() & 0xffffff;
    check_rc(ibv_modify_qp(ud_qp_.get(), &rts, IBV_QP_STATE | IBV_QP_SQ_PSN), "ibv_modify_qp(RTS) of the UD QP");
  }

  UdWireAddress parse_address(int p, const Blob& blob) {
    UdWireAddress wire{};
    if (blob.size() != sizeof wire) {
      fail(Status::bootstrap, "verbs UD: rank ", p, " published a ", blob.size(), "-byte address, expected ",
           sizeof wire, " (do all ranks run CHORUS_VERBS_MODE=ud?)");
    }
    std::memcpy(&wire, blob.data(), sizeof wire);
    if (wire.magic != kUdMagic || wire.version != kUdVersion) {
      fail(Status::bootstrap, "verbs UD: rank ", p, "'s address is not a chorus UD v", kUdVersion,
           " address (magic 0x", std::hex, wire.magic, std::dec, ", version ", wire.version,
           "); all ranks must run the same chorus with CHORUS_VERBS_MODE=ud");
    }
    if (static_cast<bool>(wire.roce) != port_.roce) {
      fail(Status::config, "verbs UD: rank ", p, " uses ", wire.roce ? "RoCE" : "InfiniBand", " but this rank uses ",
           port_.roce ? "RoCE" : "InfiniBand", "; set CHORUS_IB_DEVICE/CHORUS_IB_PORT to ports of one fabric");
    }
    return wire;
  }

  void create_address_handle(int p, const UdWireAddress& remote) {
    ibv_ah_attr attr{};
    attr.port_num = static_cast<uint8_t>(port_.port);
    if (port_.roce) {
      attr.is_global = 1;
      std::memcpy(attr.grh.dgid.raw, remote.gid, 16);
      attr.grh.sgid_index = static_cast<uint8_t>(port_.gid_index);
      attr.grh.hop_limit = 64;
    } else {
      attr.dlid = remote.lid;
    }
    UdPeer& peer = peers_[static_cast<size_t>(p)];
    peer.ah.reset(check_ptr(ibv_create_ah(pd_.get(), &attr), concat("ibv_create_ah (to rank ", p, ")"), p));
    peer.qpn = remote.qpn;
    peer.qkey = remote.qkey;
  }

  void check_usable(int p) {
    if (p < 0 || p >= size_ || !connected_) {
      fail(Status::invalid_argument, "verbs UD: rank ", p, " is not a connected peer (0..", size_ - 1, ")");
    }
    if (fatal_) throw *fatal_;
    if (failed_.count(p) != 0 || reliability_->peer_failed(p)) {
      throw Error(Status::peer_failed, concat("verbs UD: rank ", p, " failed earlier"), p);
    }
  }

  // --- datagrams (ud::Link) ----------------------------------------------------

  void transmit(int peer, int slot, const void* frame, size_t bytes) override {
    const UdPeer& to = peers_[static_cast<size_t>(peer)];
    ibv_sge sge{reinterpret_cast<uintptr_t>(frame), static_cast<uint32_t>(bytes), arena_mr_->lkey};
    ibv_send_wr wr{};
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = to.ah.get();
    wr.wr.ud.remote_qpn = to.qpn;
    wr.wr.ud.remote_qkey = to.qkey;
    if (slot == ud::Reliability::kAckSlot) {
      wr.wr_id = wr_id(WrKind::ack, peer, 0);
      if (bytes <= max_inline_) {
        wr.send_flags |= IBV_SEND_INLINE;
      } else {
        // Acks complete in order and at most ack_slots are outstanding: a ring suffices.
        uint8_t* copy = &ack_ring_[(next_ack_++ % params_.ack_slots) * sizeof(ud::WireHeader)];
        std::memcpy(copy, frame, bytes);
        sge.addr = reinterpret_cast<uintptr_t>(copy);
        sge.lkey = ack_mr_->lkey;
      }
    } else {
      wr.wr_id = wr_id(WrKind::fragment, peer, static_cast<uint32_t>(slot));
    }
    ibv_send_wr* bad = nullptr;
    check_rc(ibv_post_send(ud_qp_.get(), &wr, &bad),
             concat("ibv_post_send (UD ", slot == ud::Reliability::kAckSlot ? "ack" : "fragment", " of ", bytes,
                    " bytes to rank ", peer, ")"),
             peer);
  }

  void post_receive(uint32_t slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(&recv_slab_[slot * recv_bytes_]), static_cast<uint32_t>(recv_bytes_),
                recv_mr_->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = wr_id(WrKind::recv, 0, slot);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    check_rc(ibv_post_srq_recv(srq_.get(), &wr, &bad), "ibv_post_srq_recv (reposting a UD receive buffer)");
  }

  // Wakes a blocked engine at the reliability layer's next deadline (0:
  // never). Setting it also clears an earlier expiry, so the fd is never
  // left readable with nothing to do.
  void set_timer(uint64_t deadline_ns) {
    itimerspec when{};
    when.it_value.tv_sec = static_cast<time_t>(deadline_ns / 1'000'000'000);
    when.it_value.tv_nsec = static_cast<long>(deadline_ns % 1'000'000'000);
    if (timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &when, nullptr) != 0) {
      fail_errno("timerfd_settime (UD retransmission timer)", errno);
    }
    timer_set_ = deadline_ns != 0;
  }

  // --- completions ---------------------------------------------------------------

  void complete(const ibv_wc& wc, Deliveries& deliveries) {
    if (wc.status != IBV_WC_SUCCESS) return complete_with_error(wc, deliveries);
    switch (wr_kind(wc.wr_id)) {
      case WrKind::fragment: return reliability_->on_sent(static_cast<int>(wr_value(wc.wr_id)));
      case WrKind::ack: return reliability_->on_sent(ud::Reliability::kAckSlot);
      case WrKind::recv: return receive(wc, deliveries);
      case WrKind::read: links_->complete(wr_peer(wc.wr_id), wr_value(wc.wr_id)); return;
    }
  }

  void receive(const ibv_wc& wc, Deliveries& deliveries) {
    const uint32_t slot = wr_value(wc.wr_id);
    const uint8_t* frame = &recv_slab_[slot * recv_bytes_] + kGrhBytes;
    ud::WireHeader header{};
    if (wc.byte_len >= kGrhBytes + sizeof header) std::memcpy(&header, frame, sizeof header);
    // Only the QP the claimed sender published may speak for it.
    if (!reliability_ || wc.byte_len < kGrhBytes + sizeof header || header.src >= static_cast<uint32_t>(size_) ||
        peers_[header.src].qpn != wc.src_qp) {
      ++stray_datagrams_;
      post_receive(slot);
      return;
    }
    try {
      reliability_->on_frame(frame, wc.byte_len - kGrhBytes, *this, deliveries, now_ns());
    } catch (...) {
      post_receive(slot);  // the SRQ must not shrink when a consumer throws
      throw;
    }
    post_receive(slot);  // after the consumer is done with the bytes
  }

  // On an error completion only wr_id, status, qp_num and vendor_err are valid.
  void complete_with_error(const ibv_wc& wc, Deliveries& deliveries) {
    const WrKind kind = wr_kind(wc.wr_id);
    if (kind == WrKind::recv) {
      if (wc.status != IBV_WC_WR_FLUSH_ERR) post_receive(wr_value(wc.wr_id));
      return;
    }
    const int p = wr_peer(wc.wr_id);
    const std::string what = concat("verbs UD: ",
                                    kind == WrKind::read ? "RDMA READ from" : (kind == WrKind::ack ? "ack to" : "datagram to"),
                                    " rank ", p, " failed: ", ibv_wc_status_str(wc.status), " (status ",
                                    static_cast<int>(wc.status), ", vendor_err 0x", std::hex, wc.vendor_err, ", QP 0x",
                                    wc.qp_num, std::dec, ")");
    if (kind == WrKind::fragment || kind == WrKind::ack) {
      reliability_->on_sent(kind == WrKind::ack ? ud::Reliability::kAckSlot : static_cast<int>(wr_value(wc.wr_id)));
      // A UD send fails only locally (the QP or an address handle is broken):
      // nothing more can be sent to anyone.
      if (!fatal_) {
        fatal_ = Error(Status::transport, what, -1);
        log::warn(what);
        deliveries.fail_all(*fatal_);
      }
      return;
    }
    ReadJob* job = links_->complete(p, wr_value(wc.wr_id));
    job->failed = true;
    const Error failure(Status::peer_failed,
                        concat(what, wc.status == IBV_WC_RETRY_EXC_ERR ? "; the peer is unreachable or its process died"
                                                                        : ""),
                        p);
    deliveries.report(job->context, p, failure);
    if (failed_.insert(p).second) {
      log::warn(failure.what());
      deliveries.report(0, p, failure);
    }
    links_->fail_peer(p);
  }

  int report_async_failures(Sink& sink) {
    if (!monitor_ || !monitor_->pending()) return 0;
    int events = 0;
    for (AsyncFailure& failure : monitor_->take()) {
      if (failure.peer >= 0 && failure.peer < size_) {
        failed_.insert(failure.peer);
      } else {
        fatal_ = failure.error;
      }
      sink.on_error(0, failure.peer, failure.error);
      ++events;
    }
    return events;
  }

  friend class Deliveries;

  int rank_;
  int size_;
  config::VerbsSettings settings_;
  size_t max_eager_;
  std::chrono::milliseconds timeout_;
  PortChoice port_;
  ContextPtr context_;
  ibv_device_attr device_attr_{};
  PdPtr pd_;
  std::unique_ptr<CompletionQueue> cq_;
  SrqPtr srq_;
  QpPtr ud_qp_;
  uint32_t qkey_ = 0;
  uint32_t max_inline_ = 0;
  ibv_mtu path_mtu_ = IBV_MTU_1024;
  int timer_fd_ = -1;
  bool timer_set_ = false;

  ud::Params params_;
  std::unique_ptr<ud::Reliability> reliability_;
  std::vector<uint8_t> arena_;      // the reliability layer's retransmission slots
  std::vector<uint8_t> recv_slab_;  // SRQ buffers: GRH + one MTU each
  std::vector<uint8_t> ack_ring_;   // standalone acks when the device cannot inline them
  size_t recv_bytes_ = 0;
  uint64_t next_ack_ = 0;
  MrPtr arena_mr_, recv_mr_, ack_mr_;
  std::vector<UdPeer> peers_;
  size_t ah_bytes_ = 0;             // heap bytes per address handle, measured at connect
  size_t qp_heap_bytes_ = 0;        // heap bytes the provider took for the UD QP
  uint64_t stray_datagrams_ = 0;

  std::unique_ptr<RcReadLinks> links_;
  int max_reads_ = 1;
  int read_budget_ = 0;             // RDMA READs in flight over all links (sizes the CQ)

  ReadJobs reads_;
  std::unordered_set<int> failed_;
  std::unique_ptr<AsyncEventMonitor> monitor_;
  std::optional<Error> fatal_;
  bool connected_ = false;
};

void Deliveries::on_message(int peer, uint8_t channel, const void* data, size_t bytes) {
  if (channel == kControlChannel) {
    transport_.on_control(peer, data, bytes);
  } else {
    sink_.on_eager(peer, data, bytes);
  }
}

void Deliveries::on_peer_failed(int peer, const Error& error) {
  transport_.on_peer_failed(peer);
  log::warn(error.what());
  sink_.on_error(0, peer, error);
}

}  // namespace

std::unique_ptr<Transport> make_ud_transport(int rank, int size, const VerbsOptions& options) {
  return std::make_unique<UdTransport>(rank, size, options);
}

}  // namespace chorus::transport
