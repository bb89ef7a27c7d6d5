// RC mesh setup (docs/transport-verbs.md): the queue plan, buffers, SRQ and
// QPs, registrations, the memory account, and the factory with its test hook.
#include "common/log.hpp"
#include "transports/verbs/rc_mesh_transport.hpp"

#include <algorithm>
#include <random>

namespace chorus::transport {

namespace verbs {

RcMeshTransport::RcMeshTransport(int rank, int size, const VerbsOptions& options)
    : VerbsTransportBase(rank, size, options),
      use_cm_(options.settings.connect == "rdmacm"),
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
  rc::FlowParams flow;
  flow.size = size_;
  flow.credits = credits_;
  flow.sq_capacity = sq_capacity_;
  flow.send_buffers = kSendBuffers;
  flow_ = rc::FlowControl(flow);
  cq_ = std::make_unique<CompletionQueue>(context_, cq_entries_, completion_vector_);
  completion_vector_ = cq_->vector();
  create_buffers();
  peers_.resize(static_cast<size_t>(size_));
  if (settings_.srq) create_srq();
  psn_ = std::random_device{}() & 0xffffff;
  for (int p = 0; p < size_; ++p) {
    if (!use_cm_ || p == rank_) create_qp(p);  // rdma_cm makes the others in connect()
  }
  log::info("verbs: ", port_.device, " port ", port_.port, " (", port_.reason, "), active MTU ",
            mtu_string(port_.attr.active_mtu), ", ", settings_.srq ? "SRQ of " : "receive buffers per QP: ",
            settings_.srq ? srq_buffers_ : credits_, settings_.srq ? "" : concat(" (reposted ", repost_batch_, " at a time)"),
            ", credits per peer ", credits_, ", CQ ", cq_entries_,
            " entries on completion vector ", completion_vector_, ", connect via ", settings_.connect);
}

RcMeshTransport::~RcMeshTransport() {
  // Order matters: stop reading async events (the thread acks what it read),
  // then QPs (rdma_cm disconnects its own), SRQ, MRs, CQ with its channel,
  // PD, device.
  monitor_.reset();
  for (RcPeer& peer : peers_) peer.owned_qp.reset();
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
// flow-control state per rank (ourselves included: reads from our own
// memory use a QP to ourselves); the send bounce buffers are shared.
MemoryUse RcMeshTransport::memory_use() const {
  const size_t receive_bytes = settings_.srq ? static_cast<size_t>(srq_buffers_) * slot_bytes() / static_cast<size_t>(size_)
                                              : static_cast<size_t>(credits_) * slot_bytes();
  const size_t qp_heap = qps_measured_ == 0 ? 0 : qp_heap_bytes_ / static_cast<size_t>(qps_measured_);
  const size_t words = 3 * sizeof(uint32_t);  // mailbox, credit staging, the peer's QP number
  const size_t peer_state = sizeof(RcPeer) + rc::FlowControl::bytes_per_peer() + words;
  MemoryUse use;
  use.per_peer = peer_state + receive_bytes + qp_heap;
  use.shared = sizeof(*this) + send_slab_.size();
  use.detail = concat("receive buffers ", receive_bytes, " B (", settings_.srq ? "SRQ share" : "per QP: ",
                      settings_.srq ? "" : concat(credits_, " x ", slot_bytes(), " B"), "), RC QP ", qp_heap,
                      " B of provider heap, peer state ", peer_state, " B");
  return use;
}

std::string RcMeshTransport::name() const {
  return concat("verbs:rc", settings_.srq ? "+srq" : "", use_cm_ ? "+rdmacm" : "");
}

std::unique_ptr<MemoryRegion> RcMeshTransport::register_memory(void* base, size_t length) {
  return std::make_unique<VerbsRegion>(
      register_range(base, length, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), base, length);
}

ibv_mr* RcMeshTransport::register_range(void* base, size_t length, int access) {
  return verbs::register_range(pd_.get(), base, length, access);
}

// Receive buffers and credits. Per-QP mode: every peer gets recv_depth
// receives on its own QP. SRQ mode: one pool shared by all peers, smaller
// than size*recv_depth at scale; each peer's credit share keeps the sum of
// credits within the pool, so a sender never finds it empty (no RNR).
void RcMeshTransport::plan_queues() {
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
    repost_batch_ = std::clamp<uint32_t>(credits_ / 8, 1, kMaxRepostBatch);
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

void RcMeshTransport::create_buffers() {
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
}

void RcMeshTransport::create_srq() {
  ibv_srq_init_attr attr{};
  attr.attr.max_wr = srq_buffers_;
  attr.attr.max_sge = 1;
  srq_.reset(check_ptr(ibv_create_srq(pd_.get(), &attr), concat("ibv_create_srq(", srq_buffers_, " receives)")));
  for (uint32_t slot = 0; slot < srq_buffers_; ++slot) post_receive(-1, slot);
}

ibv_qp_init_attr RcMeshTransport::qp_init_attr(int /*peer*/) {
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

void RcMeshTransport::create_qp(int p) {
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
      RcPeer& peer = peers_[static_cast<size_t>(p)];
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

// A QP exists (ours or rdma_cm's): learn its inline limit, post its receives.
void RcMeshTransport::attach_qp(int p, ibv_qp* qp) {
  peers_[static_cast<size_t>(p)].qp = qp;
  if (use_cm_) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    check_rc(ibv_query_qp(qp, &attr, IBV_QP_CAP, &init), concat("ibv_query_qp (QP to rank ", p, ")"), p);
    max_inline_ = init.cap.max_inline_data;
  }
  flow_.set_inline_limit(std::min<size_t>(max_inline_, kRequestedInline));
  if (!srq_) {
    for (uint32_t i = 0; i < credits_; ++i) post_receive(p, static_cast<uint32_t>(p) * credits_ + i);
    peers_[static_cast<size_t>(p)].unposted.reserve(repost_batch_);
  }
}

void RcMeshTransport::check_usable(int p) {
  if (p < 0 || p >= size_ || !connected_) {
    fail(Status::invalid_argument, "verbs: rank ", p, " is not a connected peer (0..", size_ - 1, ")");
  }
  if (flow_.failed(p)) throw Error(Status::peer_failed, concat("verbs: the connection to rank ", p, " failed earlier"), p);
  if (fatal_) throw *fatal_;
}

void RcMeshTransport::force_qp_error(int p) {
  log::warn("verbs: test hook: moving the QP to rank ", p, " into the error state");
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  check_rc(ibv_modify_qp(peers_[static_cast<size_t>(p)].qp, &attr, IBV_QP_STATE),
           concat("ibv_modify_qp(ERR) of the QP to rank ", p, " (test hook)"), p);
}

namespace {

// CHORUS_TEST_VERBS_QP_ERROR: what a broken link or a remote access error
// does to a QP, on demand, so the fault tests can show it is reported. Made
// instead of the plain RC mesh only when the hook names another rank, so
// the data path of every other job carries no check for it.
class RcMeshWithQpErrorHook final : public RcMeshTransport {
 public:
  RcMeshWithQpErrorHook(int rank, int size, const VerbsOptions& options)
      : RcMeshTransport(rank, size, options),
        victim_(options.settings.test_qp_error_peer),
        after_(static_cast<uint64_t>(options.settings.test_qp_error_after)) {}

  void post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                  size_t payload_bytes) override {
    check_usable(peer);
    if (eager_posts_++ == after_) force_qp_error(victim_);
    RcMeshTransport::post_eager(peer, header, header_bytes, payload, payload_bytes);
  }

 private:
  int victim_;
  uint64_t after_;
  uint64_t eager_posts_ = 0;  // eager sends so far, to any peer
};

}  // namespace

}  // namespace verbs

std::unique_ptr<Transport> make_rc_mesh_transport(int rank, int size, const VerbsOptions& options) {
  // Every rank gets the variable; the named peer itself ignores it.
  const int victim = options.settings.test_qp_error_peer;
  if (victim >= 0 && victim < size && victim != rank) {
    return std::make_unique<verbs::RcMeshWithQpErrorHook>(rank, size, options);
  }
  return std::make_unique<verbs::RcMeshTransport>(rank, size, options);
}

}  // namespace chorus::transport
