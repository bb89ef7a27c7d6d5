// The verbs UD scalable mode (CHORUS_VERBS_MODE=ud; docs/transport-ud.md):
// one UD QP and one SRQ per process, an address handle per peer, datagrams
// made reliable by ud::Reliability, and RC QPs made on demand, over the
// reliable datagrams themselves, only for peers we RDMA READ from.
// Internal to transports/verbs; the class is split by phase:
//   ud_init.cc          device, SRQ, UD QP, address blob, address handles, memory use
//   ud_p2p.cc           eager sends and READs, datagrams (ud::Link), completions, errors
//   ud_reliability.*    the go-back-N state machine (pure; unit tested)
//   ud_rc_links.*       the RC QPs for rendezvous READs
#pragma once

#include "transports/verbs/ud_rc_links.hpp"
#include "transports/verbs/ud_reliability.hpp"
#include "transports/verbs/verbs_async.hpp"
#include "transports/verbs/verbs_common.hpp"
#include "transports/verbs/verbs_transport.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <unordered_set>

namespace chorus::transport::verbs {

// The blob each rank publishes: the same size at any job size.
struct UdWireAddress : AddressHeader {
  static constexpr uint32_t kMagic = 0x55564843;  // "CHVU"
  static constexpr uint16_t kVersion = 1;
  static constexpr AddressKind kKind{"verbs UD", "UD", "CHORUS_VERBS_MODE=ud", "do all ranks run CHORUS_VERBS_MODE=ud?",
                                     true};
  uint32_t qpn;
  uint32_t qkey;
  uint8_t active_mtu;  // ibv_mtu
  uint8_t roce;
  uint16_t reserved;
};
static_assert(sizeof(UdWireAddress) == 36, "the UD address's wire format (v1)");

// The kind in each wr_id (verbs_common.hpp make_wr_id).
enum class UdWrKind : uint64_t { fragment = 1, ack = 2, recv = 3, read = 4 };

inline size_t mtu_bytes(ibv_mtu mtu) { return size_t{128} << static_cast<int>(mtu); }

// The reliability layer's clock.
inline uint64_t now_ns() {
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

class UdTransport final : public VerbsTransportBase, private ud::Link {
 public:
  static constexpr size_t kGrhBytes = 40;  // every UD receive buffer starts with room for the GRH
  static constexpr uint32_t kReceiveBuffers = 512;
  static constexpr uint32_t kRequestedInline = 64;
  static constexpr uint8_t kEngineChannel = 0;
  static constexpr uint8_t kControlChannel = 1;

  UdTransport(int rank, int size, const VerbsOptions& options);
  ~UdTransport() override;

  // Transport (ud_init.cc)
  std::string name() const override { return "verbs:ud"; }
  MemoryUse memory_use() const override;
  Blob address() override;
  void connect(const std::vector<Blob>& blobs) override;
  std::unique_ptr<MemoryRegion> register_memory(void* base, size_t length) override;
  // (ud_p2p.cc)
  // Until acknowledged, a datagram may have to be sent again by this process.
  bool sends_pending() const override { return reliability_ && reliability_->sends_pending(); }
  void post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                  size_t payload_bytes) override;
  void post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                 uint64_t context) override;
  int poll(Sink& sink) override;
  std::string describe_peer(int peer) override;
  int wait_fd() override { return cq_->epoll_fd(); }
  // arm() sets the timerfd behind wait_fd() to the next ack or retransmission.
  bool arm() override;
  // Nobody else acks or retransmits: the progress thread does it while the
  // application computes (docs/transport-ud.md, "Progress between calls").
  bool needs_progress_between_calls() const override { return true; }

  // Called by Deliveries.
  void on_control(int peer, const void* data, size_t bytes) { links_->on_control(peer, data, bytes); }
  void on_peer_failed(int peer);

 private:
  // setup (ud_init.cc)
  void create_receive_buffers();
  void create_ud_qp(uint32_t send_queue);
  void create_address_handle(int p, const UdWireAddress& remote);
  // data path (ud_p2p.cc)
  void check_usable(int p);
  void transmit(int peer, int slot, const void* frame, size_t bytes) override;  // ud::Link
  void post_receive(uint32_t slot);
  void set_timer(uint64_t deadline_ns);
  void complete(const ibv_wc& wc, Deliveries& deliveries);
  void receive(const ibv_wc& wc, Deliveries& deliveries);
  void complete_with_error(const ibv_wc& wc, Deliveries& deliveries);
  int report_async_failures(Sink& sink);

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
  uint64_t data_fragments_posted_ = 0;  // first transmissions and retransmissions
  uint64_t drop_fragment_ = UINT64_MAX; // CHORUS_TEST_UD_DROP on this rank: lose this one

  std::unique_ptr<RcReadLinks> links_;
  int max_reads_ = 1;
  int read_budget_ = 0;             // RDMA READs in flight over all links (sizes the CQ)

  ReadJobs reads_;
  std::unordered_set<int> failed_;
  std::unique_ptr<AsyncEventMonitor> monitor_;
  std::optional<Error> fatal_;
  bool connected_ = false;
};

}  // namespace chorus::transport::verbs
