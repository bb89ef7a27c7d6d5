// UD mode setup (docs/transport-ud.md, "The transport"): the device, the
// SRQ and the UD QP, the address blob, an address handle per peer, the
// reliability layer and the RC read links, and the memory account.
#include "common/log.hpp"
#include "transports/verbs/ud_transport.hpp"

#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>

namespace chorus::transport {

namespace verbs {

UdTransport::UdTransport(int rank, int size, const VerbsOptions& options)
    : VerbsTransportBase(rank, size, options) {
  if (settings_.connect != "bootstrap" || settings_.srq) {
    fail(Status::config, "CHORUS_VERBS_MODE=\"ud\" has one SRQ and no RC mesh to connect: unset ",
         settings_.srq ? "CHORUS_VERBS_SRQ" : "CHORUS_VERBS_CONNECT");
  }
  if (settings_.test_ud_drop_rank == rank) drop_fragment_ = static_cast<uint64_t>(settings_.test_ud_drop_fragment);
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

UdTransport::~UdTransport() {
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

// Per rank: an address handle, where its UD QP is, and the reliability
// counters. The SRQ buffers, the retransmission slots and the RC set's
// bound do not grow with the job.
MemoryUse UdTransport::memory_use() const {
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

Blob UdTransport::address() {
  UdWireAddress wire = start_address<UdWireAddress>(port_);
  wire.qpn = ud_qp_->qp_num;
  wire.qkey = qkey_;
  Blob blob(sizeof wire);
  std::memcpy(blob.data(), &wire, sizeof wire);
  return blob;
}

void UdTransport::connect(const std::vector<Blob>& blobs) {
  if (blobs.size() != static_cast<size_t>(size_)) {
    fail(Status::internal, "verbs UD: connect got ", blobs.size(), " addresses for ", size_, " ranks");
  }
  ibv_mtu mtu = port_.attr.active_mtu;
  std::vector<UdWireAddress> remote(blobs.size());
  for (int p = 0; p < size_; ++p) {
    remote[static_cast<size_t>(p)] = parse_address<UdWireAddress>(p, blobs[static_cast<size_t>(p)], port_);
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
  setup.read_wr_kind = static_cast<uint64_t>(UdWrKind::read);
  links_ = std::make_unique<RcReadLinks>(setup, [this](int peer, const void* message, size_t bytes) {
    reliability_->send(peer, kControlChannel, message, bytes, nullptr, 0, *this, now_ns());
  });
  RcReadLinks* links = links_.get();
  monitor_ = std::make_unique<AsyncEventMonitor>(context_.get(), [links](uint32_t qpn) { return links->peer_of_qp(qpn); });
  cq_->watch(monitor_->event_fd(), "async failure eventfd");
  connected_ = true;
}

std::unique_ptr<MemoryRegion> UdTransport::register_memory(void* base, size_t length) {
  return std::make_unique<VerbsRegion>(
      register_range(pd_.get(), base, length, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), base, length);
}

void UdTransport::create_receive_buffers() {
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

void UdTransport::create_ud_qp(uint32_t send_queue) {
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

void UdTransport::create_address_handle(int p, const UdWireAddress& remote) {
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

}  // namespace verbs

std::unique_ptr<Transport> make_ud_transport(int rank, int size, const VerbsOptions& options) {
  return std::make_unique<verbs::UdTransport>(rank, size, options);
}

}  // namespace chorus::transport
