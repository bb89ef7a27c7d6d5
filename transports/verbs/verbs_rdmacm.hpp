// Connection setup through rdma_cm (CHORUS_VERBS_CONNECT=rdmacm): each rank
// listens on the IPv4 address of its GID; the lower rank of each pair
// resolves the peer's address and route and connects, the higher accepts.
// Every CM event is acked; teardown disconnects each connection in order.
// The loopback QP of a rank to itself is made with plain verbs (rdma_cm
// would give it two QPs).
#pragma once

#include "transports/verbs/verbs_settings.hpp"
#include "transports/verbs/verbs_device.hpp"

#include <rdma/rdma_cma.h>

#include <chrono>
#include <functional>
#include <map>
#include <vector>

namespace chorus::transport::verbs {

struct CmPeer {
  uint32_t ipv4 = 0;  // network order
  uint16_t port = 0;  // network order
  int initiator_depth = 1;
  int responder_resources = 1;
};

class CmConnector {
 public:
  CmConnector(const PortChoice& port, int rank, const Settings& settings);
  ~CmConnector();
  CmConnector(const CmConnector&) = delete;
  CmConnector& operator=(const CmConnector&) = delete;

  // rdma_cm's context for the chosen device: PD, CQ and QPs must use it.
  ibv_context* context() const { return listener_->verbs; }
  uint32_t listen_ipv4() const { return ipv4_; }
  uint16_t listen_port() const { return port_; }

  // Connects to every peer but `rank` itself. make_attr gives the QP's
  // creation attributes, attach receives each QP (to post its receives)
  // before the connection is accepted or requested.
  void connect_all(const std::vector<CmPeer>& peers, ibv_pd* pd, const std::function<ibv_qp_init_attr(int)>& make_attr,
                   const std::function<void(int, ibv_qp*)>& attach, std::chrono::milliseconds timeout);

  // Orderly disconnect: rdma_disconnect on each connection, wait (briefly)
  // for the DISCONNECTED events, destroy QPs and ids. The listener (which
  // holds the device context) stays until destruction.
  void disconnect_all();

 private:
  rdma_cm_event* next_event(std::chrono::steady_clock::time_point deadline, const char* waiting_for);
  void create_qp(rdma_cm_id* id, int peer, ibv_pd* pd, const std::function<ibv_qp_init_attr(int)>& make_attr,
                 const std::function<void(int, ibv_qp*)>& attach);
  rdma_conn_param connection_parameters(const CmPeer& peer) const;

  int rank_;
  Settings settings_;
  rdma_event_channel* channel_ = nullptr;
  rdma_cm_id* listener_ = nullptr;
  uint32_t ipv4_ = 0;
  uint16_t port_ = 0;
  std::map<int, rdma_cm_id*> connections_;  // peer rank -> id with its QP
  uint32_t rank_wire_ = 0;                  // private data: our rank
};

}  // namespace chorus::transport::verbs
