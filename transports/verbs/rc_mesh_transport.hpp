// The RC mesh (docs/transport-verbs.md): one RC QP per peer, eager messages
// through pre-posted receive buffers (per QP or one SRQ) under credit flow
// control, rendezvous by RDMA READ, one CQ with a completion channel, an
// async-event thread, QPs connected through the bootstrap store or rdma_cm.
// Internal to transports/verbs; the class is split by phase:
//   rc_mesh_init.cc          queue plan, buffers, SRQ, QPs, registration, memory use
//   rc_mesh_connect.cc       the address blob, QP bring-up (bootstrap or rdma_cm)
//   rc_mesh_p2p.cc           eager sends, credit writes, READs (the Poster side of the flow control)
//   rc_mesh_completions.cc   poll, completions, receives, errors, async failures
//   rc_mesh_flow_control.*   credits and send-queue accounting (pure; unit tested)
#pragma once

#include "transports/verbs/rc_mesh_flow_control.hpp"
#include "transports/verbs/verbs_async.hpp"
#include "transports/verbs/verbs_common.hpp"
#include "transports/verbs/verbs_rdmacm.hpp"
#include "transports/verbs/verbs_transport.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <unordered_map>

namespace chorus::transport::verbs {

// The blob each rank publishes. Fixed-width fields copied as one struct: all
// ranks of a job share the architecture (little-endian x86-64/aarch64).
struct RcWireAddress : AddressHeader {
  static constexpr uint32_t kMagic = 0x42564843;  // "CHVB"
  static constexpr uint16_t kVersion = 1;
  static constexpr AddressKind kKind{"verbs", "verbs", "CHORUS_TRANSPORT=verbs", "is it running the verbs transport?",
                                     false};
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
static_assert(sizeof(RcWireAddress) == 64, "the RC address's wire format (v1)");

class RcMeshTransport : public VerbsTransportBase, private rc::Poster {
 public:
  static constexpr size_t kSendBuffers = 256;
  static constexpr uint32_t kRequestedInline = 256;
  static constexpr int kSpareSendSlots = 4;  // credit writes and slack per QP

  RcMeshTransport(int rank, int size, const VerbsOptions& options);
  ~RcMeshTransport() override;

  // Transport (rc_mesh_init.cc)
  MemoryUse memory_use() const override;
  std::string name() const override;
  std::unique_ptr<MemoryRegion> register_memory(void* base, size_t length) override;
  // (rc_mesh_connect.cc)
  Blob address() override;
  void connect(const std::vector<Blob>& blobs) override;
  // (rc_mesh_p2p.cc)
  // Posted work requests are the HCA's to finish; only the backlog still
  // needs this process.
  bool sends_pending() const override { return flow_.sends_pending(); }
  void post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                  size_t payload_bytes) override;
  void post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                 uint64_t context) override;
  // (rc_mesh_completions.cc)
  int poll(Sink& sink) override;
  std::string describe_peer(int peer) override;
  int wait_fd() override { return cq_->epoll_fd(); }
  bool arm() override;

 protected:
  // Throws unless `peer` is connected and its connection (and the device) works.
  void check_usable(int peer);
  // Moves the QP to `peer` into the error state, as a broken link would (the
  // CHORUS_TEST_VERBS_QP_ERROR hook, rc_mesh_init.cc).
  void force_qp_error(int peer);

 private:
  // The kind in each wr_id (verbs_common.hpp).
  enum class WrKind : uint64_t { send = 1, credit_write = 2, read = 3, recv = 4 };
  static const char* kind_text(WrKind kind);

  struct RcPeer {
    ibv_qp* qp = nullptr;
    QpPtr owned_qp;  // bootstrap mode; rdma_cm owns its QPs
    uint64_t remote_mailbox = 0;
    uint32_t remote_mailbox_rkey = 0;
    // Receive buffers this peer used and we have not posted again yet
    // (per-QP mode): reposted `repost_batch_` at a time, in one post.
    std::vector<uint32_t> unposted;
  };

  struct ReadOp {
    ReadJob* job = nullptr;
    uint32_t sequence = 0;
  };

  // setup (rc_mesh_init.cc)
  void plan_queues();
  void create_buffers();
  void create_srq();
  ibv_qp_init_attr qp_init_attr(int peer);
  void create_qp(int peer);
  void attach_qp(int peer, ibv_qp* qp);
  ibv_mr* register_range(void* base, size_t length, int access);
  size_t slot_bytes() const { return rc::kEagerHeaderBytes + max_eager_; }
  // connection (rc_mesh_connect.cc)
  // parse_address, then the job's size and the QP `peer` made for this rank.
  RcWireAddress take_address(int peer, const Blob& blob);
  int peer_of_qp(uint32_t qpn) const;
  // rc::Poster (rc_mesh_p2p.cc)
  void post_message(const rc::SendWr& wr, int32_t send_buffer, uint32_t granted, const void* header,
                  size_t header_bytes, const void* payload, size_t payload_bytes) override;
  void post_credit_write(const rc::SendWr& wr, uint32_t granted) override;
  void post_read_piece(const rc::SendWr& wr, const PendingRead& read) override;
  uint32_t mailbox(int peer) override;
  // Nothing is posted on failure: the flow control undoes its accounting.
  // `describe` names the post, called only on failure.
  template <class Describe>
  void post_send(int peer, ibv_send_wr& wr, Describe&& describe) {
    ibv_send_wr* bad = nullptr;
    check_rc(ibv_post_send(peers_[static_cast<size_t>(peer)].qp, &wr, &bad), describe, peer);
  }
  uint32_t allocate_read_op(ReadJob* job);
  // completions (rc_mesh_completions.cc)
  void receive_request(int peer, uint32_t slot, ibv_sge& sge, ibv_recv_wr& wr);
  void post_receive(int peer, uint32_t slot);
  // A used receive buffer goes back to the QP (or SRQ); per QP, batched.
  void repost_receive(int peer, uint32_t slot);
  void post_receive_batch(int peer, std::vector<uint32_t>& slots);
  void complete(Sink& sink, const ibv_wc& wc);
  void finish_read_piece(int peer, uint32_t op_index);
  void receive(Sink& sink, const ibv_wc& wc);
  void complete_with_error(Sink& sink, const ibv_wc& wc);
  int report_async_failures(Sink& sink);

  bool use_cm_;
  int completion_vector_;  // of the CQ (placement's choice)
  PortChoice port_;
  ibv_context* context_ = nullptr;
  ContextPtr owned_context_;
  ibv_device_attr device_attr_{};
  PdPtr pd_;
  std::unique_ptr<CompletionQueue> cq_;
  SrqPtr srq_;

  uint32_t credits_ = 0;
  // Per-QP receives go back in chains of this many (credits / 8, 1..16): one
  // ibv_post_recv (the provider's lock and call) per batch instead of per
  // message. The peer then holds up to batch - 1 fewer credits.
  uint32_t repost_batch_ = 1;
  static constexpr uint32_t kMaxRepostBatch = 16;
  uint32_t srq_buffers_ = 0;
  int sq_capacity_ = 0;
  int cq_entries_ = 0;
  uint32_t inline_request_ = kRequestedInline;
  uint32_t max_inline_ = 0;
  uint32_t psn_ = 0;

  std::vector<uint8_t> send_slab_, recv_slab_;
  MrPtr send_mr_, recv_mr_;
  std::vector<uint32_t> mailbox_;        // mailbox_[p]: receives rank p granted us (written by p)
  std::vector<uint32_t> credit_source_;  // staging for credit writes that cannot be inlined
  MrPtr mailbox_mr_, credit_source_mr_;

  std::vector<RcPeer> peers_;
  rc::FlowControl flow_{rc::FlowParams{}};  // replaced once the queues are planned
  std::vector<uint32_t> remote_qpns_;
  size_t qp_heap_bytes_ = 0;  // provider heap taken by the QPs we created (memory_use)
  int qps_measured_ = 0;
  std::unordered_map<uint32_t, int> qp_to_peer_;

  ReadJobs reads_;
  std::vector<ReadOp> read_ops_;
  std::vector<uint32_t> free_read_ops_;

  std::unique_ptr<CmConnector> cm_;
  std::unique_ptr<AsyncEventMonitor> monitor_;
  std::optional<Error> fatal_;
  bool connected_ = false;
};

}  // namespace chorus::transport::verbs
