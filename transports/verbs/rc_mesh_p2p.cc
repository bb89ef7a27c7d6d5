// RC mesh data path, posting side (docs/transport-verbs.md, "Eager messages
// and credits", "Rendezvous"): the engine's eager sends and READs go through
// the flow control (rc_mesh_flow_control.hpp), which calls back here
// (rc::Poster) for each work request it lets through.
#include "transports/verbs/rc_mesh_transport.hpp"

#include <cstring>

namespace chorus::transport::verbs {

void RcMeshTransport::post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                                 size_t payload_bytes) {
  check_usable(peer);
  const size_t bytes = header_bytes + payload_bytes;
  if (bytes > max_eager_) fail(Status::internal, "verbs: eager message of ", bytes, " bytes exceeds ", max_eager_);
  flow_.send(peer, header, header_bytes, payload, payload_bytes, *this);
}

void RcMeshTransport::post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                                uint64_t context) {
  check_usable(peer);
  flow_.read(peer, start_read(reads_, context, port_.attr.max_msg_sz, remote, local, local_offset, bytes, "verbs"),
             *this);
}

// --- rc::Poster ------------------------------------------------------------------

void RcMeshTransport::post_message(const rc::SendWr& send, int32_t send_buffer, uint32_t granted, const void* header,
                                 size_t header_bytes, const void* payload, size_t payload_bytes) {
  const size_t bytes = rc::kEagerHeaderBytes + header_bytes + payload_bytes;
  uint8_t staging[kRequestedInline];  // inline sends: the flow control keeps them within kRequestedInline
  uint8_t* out = send_buffer < 0 ? staging : &send_slab_[static_cast<size_t>(send_buffer) * slot_bytes()];
  const rc::EagerHeader eager{granted, 0};
  std::memcpy(out, &eager, rc::kEagerHeaderBytes);
  if (header_bytes != 0) std::memcpy(out + rc::kEagerHeaderBytes, header, header_bytes);
  if (payload_bytes != 0) std::memcpy(out + rc::kEagerHeaderBytes + header_bytes, payload, payload_bytes);

  ibv_sge sge{reinterpret_cast<uintptr_t>(out), static_cast<uint32_t>(bytes), send_mr_->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = (send_buffer < 0 ? IBV_SEND_INLINE : 0) | (send.signaled ? IBV_SEND_SIGNALED : 0);
  wr.wr_id = make_wr_id(static_cast<uint64_t>(WrKind::send), send.peer, send.sequence);
  post_send(send.peer, wr, [&] { return concat("ibv_post_send (eager, ", bytes, " bytes, to rank ", send.peer, ")"); });
}

// By an RDMA WRITE into the peer's mailbox: no receive consumed, so credits
// never depend on credits.
void RcMeshTransport::post_credit_write(const rc::SendWr& send, uint32_t granted) {
  const int p = send.peer;
  const RcPeer& peer = peers_[static_cast<size_t>(p)];
  credit_source_[static_cast<size_t>(p)] = granted;
  ibv_sge sge{reinterpret_cast<uintptr_t>(&credit_source_[static_cast<size_t>(p)]), sizeof(uint32_t),
              credit_source_mr_->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.wr.rdma.remote_addr = peer.remote_mailbox;
  wr.wr.rdma.rkey = peer.remote_mailbox_rkey;
  wr.send_flags = (max_inline_ >= sizeof(uint32_t) ? IBV_SEND_INLINE : 0) | (send.signaled ? IBV_SEND_SIGNALED : 0);
  wr.wr_id = make_wr_id(static_cast<uint64_t>(WrKind::credit_write), p, send.sequence);
  post_send(p, wr, [&] { return concat("ibv_post_send (credit RDMA WRITE to rank ", p, ")"); });
}

void RcMeshTransport::post_read_piece(const rc::SendWr& send, const PendingRead& read) {
  ibv_sge sge{};
  ibv_send_wr wr = read_work_request(read, sge);
  const uint32_t op = allocate_read_op(read.job);
  wr.wr_id = make_wr_id(static_cast<uint64_t>(WrKind::read), send.peer, op);
  read_ops_[op].sequence = send.sequence;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(peers_[static_cast<size_t>(send.peer)].qp, &wr, &bad);
  if (rc != 0) {
    free_read_ops_.push_back(op);
    fail_errno(concat("ibv_post_send (RDMA READ of ", read.bytes, " bytes from rank ", send.peer, ")"), rc, send.peer);
  }
}

// Written by the peer's RDMA WRITE, read without a completion: acquire.
uint32_t RcMeshTransport::mailbox(int peer) {
  return __atomic_load_n(&mailbox_[static_cast<size_t>(peer)], __ATOMIC_ACQUIRE);
}

uint32_t RcMeshTransport::allocate_read_op(ReadJob* job) {
  if (free_read_ops_.empty()) {
    read_ops_.emplace_back();
    free_read_ops_.push_back(static_cast<uint32_t>(read_ops_.size() - 1));
  }
  const uint32_t op = free_read_ops_.back();
  free_read_ops_.pop_back();
  read_ops_[op].job = job;
  return op;
}

}  // namespace chorus::transport::verbs
