// RC QPs made on demand for rendezvous RDMA READs in the UD mode
// (docs/transport-ud.md). A link to a peer is negotiated with control
// messages over the reliable UD channel (no bootstrap round trip): `request`
// carries our QP number, PSN, LID and GID, `reply` the peer's. At most
// `max_links` QPs are kept; the least recently used idle one is closed with
// `close` / `closed`, so neither side destroys a QP the other still reads
// through.
#pragma once

#include "transports/verbs/verbs_common.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace chorus::transport::verbs {

class RcReadLinks {
 public:
  struct Setup {
    int rank = 0;
    ibv_pd* pd = nullptr;
    ibv_cq* cq = nullptr;
    PortChoice port;
    ibv_mtu path_mtu = IBV_MTU_1024;
    int max_reads = 1;        // READs in flight per QP (and served per QP)
    int max_links = 16;       // CHORUS_UD_RC_MAX
    int qp_timeout = kDefaultQpTimeout;    // CHORUS_VERBS_QP_TIMEOUT
    int retry_count = kDefaultRetryCount;  // CHORUS_VERBS_RETRY_COUNT
    uint64_t read_wr_kind = 0;  // the wr_id kind of READs (verbs_common.hpp make_wr_id)
  };
  // Sends a control message to `peer` over the reliable UD channel.
  using SendControl = std::function<void(int peer, const void* message, size_t bytes)>;

  RcReadLinks(const Setup& setup, SendControl send_control);
  ~RcReadLinks();
  RcReadLinks(const RcReadLinks&) = delete;
  RcReadLinks& operator=(const RcReadLinks&) = delete;

  // Queues pieces of reads from `peer`; they start once its link is ready.
  void enqueue(int peer, const std::vector<PendingRead>& pieces);
  // A control message from `peer` (what SendControl sent on its side).
  void on_control(int peer, const void* data, size_t bytes);
  // A READ completion, successful or not: `op` is the wr_id value.
  ReadJob* complete(int peer, uint32_t op);
  // `peer` failed: its queued reads fail, its QP goes once drained.
  void fail_peer(int peer);
  // Starts reads, opens waiting links, closes links over the limit.
  void service();
  bool needs_service() const { return needs_service_; }
  // Jobs whose every piece ended since the last call (failed ones marked).
  std::vector<ReadJob*>& finished() { return finished_; }

  // Called from the async-event thread: which peer an RC QP number belongs to.
  int peer_of_qp(uint32_t qpn);
  std::string describe(int peer) const;
  int qp_count() const { return qp_count_; }
  uint64_t closed_for_lru() const { return closed_for_lru_; }
  // Bytes of user-space state for the links now (QP rings not included).
  size_t bytes_in_use() const;
  // What one link adds, without its QP's provider heap (the owner measures that).
  static constexpr size_t bytes_per_link() { return sizeof(int) + sizeof(Link) + 2 * sizeof(void*); }

 private:
  enum class State { waiting, connecting, ready, closing };
  struct Link {
    QpPtr qp;
    State state = State::waiting;
    bool close_asked = false;  // the peer asked to close: answer `closed` once our reads drain
    bool broken = false;       // a read failed: drain, then forget the link
    uint32_t psn = 0;
    int reads_in_flight = 0;
    int max_reads = 1;
    uint64_t last_used = 0;
    std::deque<PendingRead> queued;
  };
  struct Control;
  using Links = std::unordered_map<int, Link>;

  static const char* state_name(State state);
  void service_link(int peer, Link& link);
  void create_qp(int peer, Link& link);
  void destroy_qp(Link& link);
  void send(int peer, uint8_t op, const Link* link);
  void open(int peer, Link& link);
  void connect(int peer, Link& link, const Control& remote);
  void accept(int peer, const Control& request);
  void start_reads(int peer, Link& link);
  void begin_close_least_recent();
  void peer_asks_close(int peer);
  void finish_close(int peer, Link& link, bool answer);
  void fail_queued(Link& link);
  void drop(Links::iterator it);

  Setup setup_;
  SendControl send_control_;
  Links links_;
  int qp_count_ = 0;
  int reads_in_flight_ = 0;
  int read_budget_;          // READs in flight over all links: the CQ is sized for it
  uint64_t use_clock_ = 0;
  uint64_t closed_for_lru_ = 0;
  bool needs_service_ = false;
  std::vector<ReadJob*> read_ops_;  // wr_id value -> job
  std::vector<uint32_t> free_read_ops_;
  std::vector<ReadJob*> finished_;
  std::mutex owner_mutex_;
  std::unordered_map<uint32_t, int> owner_;  // RC QP number -> peer, for async events
};

}  // namespace chorus::transport::verbs
