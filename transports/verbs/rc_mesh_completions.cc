// RC mesh progress (docs/transport-verbs.md, "Completions, errors and
// progress"): poll and arm, completions of sends, credit writes and READs,
// received eager messages, error completions and async failures.
#include "common/log.hpp"
#include "transports/verbs/rc_mesh_transport.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace chorus::transport::verbs {

const char* RcMeshTransport::kind_text(WrKind kind) {
  switch (kind) {
    case WrKind::send: return "eager send to";
    case WrKind::credit_write: return "credit update to";
    case WrKind::read: return "RDMA READ from";
    case WrKind::recv: return "eager receive from";
  }
  return "operation with";
}

int RcMeshTransport::poll(Sink& sink) {
  int events = report_async_failures(sink);
  events += cq_->drain([&](const ibv_wc& wc) { complete(sink, wc); });
  events += flow_.service(*this, reads_);
  return events + reads_.deliver(sink);
}

std::string RcMeshTransport::describe_peer(int p) {
  if (p < 0 || p >= size_ || !connected_) return {};
  const RcPeer& peer = peers_[static_cast<size_t>(p)];
  if (peer.qp == nullptr) return {};
  return concat("QP 0x", std::hex, peer.qp->qp_num, std::dec, " to rank ", p, " in state ", query_qp_state(peer.qp),
                ", ", flow_.describe(p), ", ", peer.unposted.size(), " used receives awaiting their batched repost",
                flow_.failed(p) ? ", connection failed" : "");
}

// While messages wait, refuse to block: their credit arrives by an RDMA
// WRITE, which raises no completion here.
bool RcMeshTransport::arm() {
  if (flow_.needs_service() || reads_.any_finished()) return false;
  if (monitor_ && monitor_->pending()) return false;
  return cq_->arm();
}

// Eager buffer `slot` as a receive work request (p < 0: the SRQ's).
void RcMeshTransport::receive_request(int p, uint32_t slot, ibv_sge& sge, ibv_recv_wr& wr) {
  sge = ibv_sge{reinterpret_cast<uintptr_t>(&recv_slab_[slot * slot_bytes()]), static_cast<uint32_t>(slot_bytes()),
                recv_mr_->lkey};
  wr = ibv_recv_wr{};
  wr.wr_id = make_wr_id(static_cast<uint64_t>(WrKind::recv), std::max(p, 0), slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
}

void RcMeshTransport::post_receive(int p, uint32_t slot) {
  ibv_sge sge;
  ibv_recv_wr wr;
  receive_request(p, slot, sge, wr);
  ibv_recv_wr* bad = nullptr;
  if (srq_) {
    check_rc(ibv_post_srq_recv(srq_.get(), &wr, &bad), "ibv_post_srq_recv (reposting an eager buffer)");
  } else {
    check_rc(ibv_post_recv(peers_[static_cast<size_t>(p)].qp, &wr, &bad),
             [&] { return concat("ibv_post_recv (eager buffer for rank ", p, ")"); }, p);
  }
}

void RcMeshTransport::repost_receive(int p, uint32_t slot) {
  if (srq_ || repost_batch_ <= 1) {
    post_receive(p, slot);
    flow_.on_reposted(p);
    return;
  }
  std::vector<uint32_t>& unposted = peers_[static_cast<size_t>(p)].unposted;
  unposted.push_back(slot);
  if (unposted.size() >= repost_batch_) post_receive_batch(p, unposted);
}

// One chain, one call. Credits are granted only for what was posted; if the
// post fails the QP is broken and the error names the peer.
void RcMeshTransport::post_receive_batch(int p, std::vector<uint32_t>& slots) {
  std::array<ibv_sge, kMaxRepostBatch> sges;
  std::array<ibv_recv_wr, kMaxRepostBatch> wrs;
  const size_t n = slots.size();
  for (size_t i = 0; i < n; ++i) {
    receive_request(p, slots[i], sges[i], wrs[i]);
    wrs[i].next = i + 1 < n ? &wrs[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  check_rc(ibv_post_recv(peers_[static_cast<size_t>(p)].qp, wrs.data(), &bad),
           [&] { return concat("ibv_post_recv (", n, " eager buffers for rank ", p, ")"); }, p);
  slots.clear();
  for (size_t i = 0; i < n; ++i) flow_.on_reposted(p);
}

void RcMeshTransport::complete(Sink& sink, const ibv_wc& wc) {
  if (wc.status != IBV_WC_SUCCESS) return complete_with_error(sink, wc);
  switch (static_cast<WrKind>(wr_kind_bits(wc.wr_id))) {
    case WrKind::send:
    case WrKind::credit_write:
      flow_.on_completion(wr_peer(wc.wr_id), wr_value(wc.wr_id));
      return;
    case WrKind::read: {
      const int p = wr_peer(wc.wr_id);
      flow_.on_completion(p, read_ops_[wr_value(wc.wr_id)].sequence);
      finish_read_piece(p, wr_value(wc.wr_id));
      return;
    }
    case WrKind::recv:
      return receive(sink, wc);
  }
}

void RcMeshTransport::finish_read_piece(int p, uint32_t op_index) {
  ReadJob* job = read_ops_[op_index].job;
  free_read_ops_.push_back(op_index);
  if (--job->pieces_left == 0) reads_.finish(job);
  flow_.on_read_done(p);
}

void RcMeshTransport::receive(Sink& sink, const ibv_wc& wc) {
  const uint32_t slot = wr_value(wc.wr_id);
  const int p = srq_ ? peer_of_qp(wc.qp_num) : wr_peer(wc.wr_id);
  if (p < 0) {
    post_receive(-1, slot);
    sink.on_error(0, -1, Error(Status::internal, concat("verbs: eager message on unknown QP 0x", std::hex, wc.qp_num)));
    return;
  }
  const uint8_t* data = &recv_slab_[slot * slot_bytes()];
  if (wc.byte_len < rc::kEagerHeaderBytes) {
    post_receive(p, slot);
    sink.on_error(0, p, Error(Status::internal, concat("verbs: malformed eager message of ", wc.byte_len,
                                                       " bytes from rank ", p), p));
    return;
  }
  rc::EagerHeader header{};
  std::memcpy(&header, data, rc::kEagerHeaderBytes);
  flow_.on_received(p, header.granted);
  sink.on_eager(p, data + rc::kEagerHeaderBytes, wc.byte_len - rc::kEagerHeaderBytes);
  repost_receive(p, slot);  // after the sink is done with the bytes
}

// On an error completion only wr_id, status, qp_num and vendor_err are valid.
void RcMeshTransport::complete_with_error(Sink& sink, const ibv_wc& wc) {
  const auto kind = static_cast<WrKind>(wr_kind_bits(wc.wr_id));
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
  switch (kind) {
    case WrKind::send:
    case WrKind::credit_write:
      flow_.on_completion(p, wr_value(wc.wr_id));
      break;
    case WrKind::read: {
      ReadOp& op = read_ops_[wr_value(wc.wr_id)];
      flow_.on_completion(p, op.sequence);
      op.job->failed = true;
      const uint64_t context = op.job->context;
      finish_read_piece(p, wr_value(wc.wr_id));
      sink.on_error(context, p, failure);
      break;
    }
    case WrKind::recv:
      break;
  }
  if (!flow_.failed(p)) {
    flow_.fail_peer(p);
    log::warn(failure.what());
    sink.on_error(0, p, failure);
  }
}

int RcMeshTransport::report_async_failures(Sink& sink) {
  if (!monitor_) return 0;
  return monitor_->report(sink, size_, [this](int peer) { flow_.fail_peer(peer); }, fatal_);
}

}  // namespace chorus::transport::verbs
