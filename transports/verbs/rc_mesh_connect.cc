// RC mesh connection (docs/transport-verbs.md, "Queue pairs and
// connection"): the address blob each rank publishes, and every QP taken
// INIT -> RTR -> RTS, through the bootstrap store's blobs or rdma_cm.
#include "transports/verbs/rc_mesh_transport.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::transport::verbs {

namespace {

std::array<uint8_t, 16> to_array(const uint8_t* gid) {
  std::array<uint8_t, 16> out{};
  std::copy(gid, gid + 16, out.begin());
  return out;
}

}  // namespace

Blob RcMeshTransport::address() {
  RcWireAddress wire = start_address<RcWireAddress>(port_);
  wire.psn = psn_;
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

void RcMeshTransport::connect(const std::vector<Blob>& blobs) {
  if (blobs.size() != static_cast<size_t>(size_)) {
    fail(Status::internal, "verbs: connect got ", blobs.size(), " addresses for ", size_, " ranks");
  }
  std::vector<RcWireAddress> remote(blobs.size());
  for (int p = 0; p < size_; ++p) remote[static_cast<size_t>(p)] = take_address(p, blobs[static_cast<size_t>(p)]);
  std::vector<int> max_reads(blobs.size());
  for (int p = 0; p < size_; ++p) {
    RcPeer& peer = peers_[static_cast<size_t>(p)];
    const RcWireAddress& w = remote[static_cast<size_t>(p)];
    peer.remote_mailbox = w.mailbox_address + sizeof(uint32_t) * static_cast<uint64_t>(rank_);
    peer.remote_mailbox_rkey = w.mailbox_rkey;
    // Reads we issue are bounded by what the peer serves and what we may issue.
    max_reads[static_cast<size_t>(p)] =
        std::max(1, std::min<int>(w.responder_resources, std::min(device_attr_.max_qp_init_rd_atom, kMaxReadsPerQp)));
    flow_.connect_peer(p, w.credits, max_reads[static_cast<size_t>(p)]);
  }
  const auto bring_up = [&](int p) {
    const RcWireAddress& w = remote[static_cast<size_t>(p)];
    RcRemote path;
    path.qpn = remote_qpns_[static_cast<size_t>(p)];
    path.psn = w.psn;
    path.mtu = static_cast<ibv_mtu>(w.active_mtu);
    path.lid = w.lid;
    path.gid = to_array(w.gid);
    path.max_reads_served = w.responder_resources;
    RcLimits limits;
    limits.sq_psn = psn_;
    limits.qp_timeout = settings_.qp_timeout;
    limits.retry_count = settings_.retry_count;
    limits.max_reads_served = std::min(device_attr_.max_qp_rd_atom, kMaxReadsPerQp);
    limits.max_reads_issued = max_reads[static_cast<size_t>(p)];
    rc_to_rts(peers_[static_cast<size_t>(p)].qp, port_, path, limits, p);
  };
  if (cm_) {
    std::vector<CmPeer> targets(blobs.size());
    for (int p = 0; p < size_; ++p) {
      const RcWireAddress& w = remote[static_cast<size_t>(p)];
      targets[static_cast<size_t>(p)] = CmPeer{w.cm_ipv4, w.cm_port, max_reads[static_cast<size_t>(p)],
                                               std::min(device_attr_.max_qp_rd_atom, kMaxReadsPerQp)};
    }
    cm_->connect_all(targets, pd_.get(), [this](int p) { return qp_init_attr(p); },
                     [this](int p, ibv_qp* qp) { attach_qp(p, qp); }, timeout_);
    bring_up(rank_);  // the QP to ourselves is made with plain verbs
  } else {
    for (int p = 0; p < size_; ++p) bring_up(p);
  }
  for (int p = 0; p < size_; ++p) qp_to_peer_[peers_[static_cast<size_t>(p)].qp->qp_num] = p;
  monitor_ = std::make_unique<AsyncEventMonitor>(context_, [this](uint32_t qpn) { return peer_of_qp(qpn); });
  cq_->watch(monitor_->event_fd(), "async failure eventfd");
  connected_ = true;
}

RcWireAddress RcMeshTransport::take_address(int p, const Blob& blob) {
  const RcWireAddress wire = parse_address<RcWireAddress>(p, blob, port_);
  if (wire.size != static_cast<uint32_t>(size_) || blob.size() != sizeof wire + 4 * static_cast<size_t>(size_)) {
    fail(Status::bootstrap, "verbs: rank ", p, "'s address describes a job of ", wire.size, " ranks, this one has ",
         size_);
  }
  // The QP the peer created for us.
  if (remote_qpns_.empty()) remote_qpns_.assign(static_cast<size_t>(size_), 0);
  std::memcpy(&remote_qpns_[static_cast<size_t>(p)], blob.data() + sizeof wire + 4 * static_cast<size_t>(rank_), 4);
  return wire;
}

int RcMeshTransport::peer_of_qp(uint32_t qpn) const {
  auto it = qp_to_peer_.find(qpn);
  return it == qp_to_peer_.end() ? -1 : it->second;
}

}  // namespace chorus::transport::verbs
