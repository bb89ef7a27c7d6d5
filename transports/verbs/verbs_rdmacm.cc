#include "transports/verbs/verbs_rdmacm.hpp"

#include "common/log.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <cstring>

namespace chorus::transport::verbs {

namespace {

constexpr int kResolveTimeoutMs = 5000;
constexpr auto kDisconnectWait = std::chrono::seconds(2);

std::string ip_text(uint32_t ipv4, uint16_t port) {
  char text[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &ipv4, text, sizeof text);
  return concat(text, ":", ntohs(port));
}

[[noreturn]] void fail_cm(const std::string& what, int peer = -1) { fail_errno(concat("rdma_cm: ", what), errno, peer); }

}  // namespace

CmConnector::CmConnector(const PortChoice& port, int rank, const Settings& settings)
    : rank_(rank), settings_(settings), rank_wire_(static_cast<uint32_t>(rank)) {
  if (!is_ipv4_mapped(port.gid)) {
    fail(Status::config, "CHORUS_VERBS_CONNECT=\"rdmacm\": ", port.device, " port ", port.port, " GID ",
         port.gid_index, " (", gid_to_string(port.gid),
         ") carries no IPv4 address for rdma_cm to listen on; choose an IPv4 GID with CHORUS_IB_GID_INDEX");
  }
  std::memcpy(&ipv4_, port.gid.data() + 12, 4);
  channel_ = rdma_create_event_channel();
  if (channel_ == nullptr) fail_cm("rdma_create_event_channel");
  int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) < 0) fail_cm("fcntl(O_NONBLOCK) on the event channel");
  if (rdma_create_id(channel_, &listener_, nullptr, RDMA_PS_TCP) != 0) fail_cm("rdma_create_id (listener)");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = ipv4_;
  address.sin_port = 0;
  if (rdma_bind_addr(listener_, reinterpret_cast<sockaddr*>(&address)) != 0) {
    fail_cm(concat("rdma_bind_addr(", ip_text(ipv4_, 0), ")"));
  }
  if (rdma_listen(listener_, 128) != 0) fail_cm("rdma_listen");
  port_ = rdma_get_src_port(listener_);
  if (listener_->verbs == nullptr || port.device != ibv_get_device_name(listener_->verbs->device)) {
    fail(Status::config, "CHORUS_VERBS_CONNECT=\"rdmacm\": address ", ip_text(ipv4_, 0), " belongs to ",
         listener_->verbs ? ibv_get_device_name(listener_->verbs->device) : "no RDMA device", ", not to ", port.device);
  }
  log::info("verbs: rdma_cm listening on ", ip_text(ipv4_, port_));
}

CmConnector::~CmConnector() {
  disconnect_all();
  if (listener_ != nullptr) rdma_destroy_id(listener_);
  if (channel_ != nullptr) rdma_destroy_event_channel(channel_);
}

rdma_cm_event* CmConnector::next_event(std::chrono::steady_clock::time_point deadline, const char* waiting_for) {
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel_, &event) == 0) return event;
    if (errno != EAGAIN && errno != EWOULDBLOCK) fail_cm("rdma_get_cm_event");
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      if (waiting_for == nullptr) return nullptr;
      fail(Status::timeout, "rdma_cm: timed out (CHORUS_TIMEOUT) waiting for ", waiting_for);
    }
    pollfd fd{channel_->fd, POLLIN, 0};
    int ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count());
    if (::poll(&fd, 1, std::min(ms, 1000)) < 0 && errno != EINTR) fail_cm("poll on the event channel");
  }
}

rdma_conn_param CmConnector::connection_parameters(const CmPeer& peer) const {
  rdma_conn_param param{};
  param.private_data = &rank_wire_;
  param.private_data_len = sizeof rank_wire_;
  param.initiator_depth = static_cast<uint8_t>(peer.initiator_depth);
  param.responder_resources = static_cast<uint8_t>(peer.responder_resources);
  param.retry_count = static_cast<uint8_t>(settings_.retry_count);
  param.rnr_retry_count = 7;
  return param;
}

void CmConnector::create_qp(rdma_cm_id* id, int peer, ibv_pd* pd,
                            const std::function<ibv_qp_init_attr(int)>& make_attr,
                            const std::function<void(int, ibv_qp*)>& attach) {
  ibv_qp_init_attr attr = make_attr(peer);
  // Devices that offer less inline data than asked refuse the QP: step down.
  while (rdma_create_qp(id, pd, &attr) != 0) {
    if (errno != EINVAL || attr.cap.max_inline_data == 0) fail_cm(concat("rdma_create_qp (to rank ", peer, ")"), peer);
    attr.cap.max_inline_data /= 4;
  }
  uint8_t timeout = static_cast<uint8_t>(settings_.qp_timeout);
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof timeout) != 0) {
    fail_cm(concat("rdma_set_option(ACK_TIMEOUT) for rank ", peer), peer);
  }
  connections_[peer] = id;
  attach(peer, id->qp);
}

void CmConnector::connect_all(const std::vector<CmPeer>& peers, ibv_pd* pd,
                              const std::function<ibv_qp_init_attr(int)>& make_attr,
                              const std::function<void(int, ibv_qp*)>& attach, std::chrono::milliseconds timeout) {
  const int size = static_cast<int>(peers.size());
  std::map<rdma_cm_id*, int> active;  // ids we created -> peer
  for (int p = rank_ + 1; p < size; ++p) {
    rdma_cm_id* id = nullptr;
    if (rdma_create_id(channel_, &id, nullptr, RDMA_PS_TCP) != 0) fail_cm(concat("rdma_create_id (to rank ", p, ")"), p);
    active[id] = p;
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = peers[static_cast<size_t>(p)].ipv4;
    address.sin_port = peers[static_cast<size_t>(p)].port;
    if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&address), kResolveTimeoutMs) != 0) {
      fail_cm(concat("rdma_resolve_addr(", ip_text(address.sin_addr.s_addr, address.sin_port), ") for rank ", p), p);
    }
  }
  std::map<rdma_cm_id*, int> passive;  // accepted ids -> peer
  int established = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (established < size - 1) {
    rdma_cm_event* event = next_event(deadline, "connections to every rank");
    rdma_cm_id* id = event->id;
    const rdma_cm_event_type type = event->event;
    const int status = event->status;
    int peer = -1;
    if (auto it = active.find(id); it != active.end()) peer = it->second;
    if (auto it = passive.find(id); it != passive.end()) peer = it->second;
    uint32_t requester = UINT32_MAX;
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST && event->param.conn.private_data_len >= sizeof requester) {
      std::memcpy(&requester, event->param.conn.private_data, sizeof requester);
    }
    rdma_ack_cm_event(event);  // nothing below reads the event again

    switch (type) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (rdma_resolve_route(id, kResolveTimeoutMs) != 0) fail_cm(concat("rdma_resolve_route for rank ", peer), peer);
        break;
      case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        create_qp(id, peer, pd, make_attr, attach);
        rdma_conn_param param = connection_parameters(peers[static_cast<size_t>(peer)]);
        if (rdma_connect(id, &param) != 0) fail_cm(concat("rdma_connect to rank ", peer), peer);
        break;
      }
      case RDMA_CM_EVENT_CONNECT_REQUEST: {
        const int from = static_cast<int>(requester);
        if (requester >= static_cast<uint32_t>(rank_) || connections_.count(from) != 0) {
          log::warn("rdma_cm: refusing a connection request from ", requester == UINT32_MAX ? "an unknown process" : concat("rank ", requester),
                    " (only lower ranks connect, once)");
          rdma_reject(id, nullptr, 0);
          rdma_destroy_id(id);
          break;
        }
        passive[id] = from;
        create_qp(id, from, pd, make_attr, attach);
        rdma_conn_param param = connection_parameters(peers[static_cast<size_t>(from)]);
        if (rdma_accept(id, &param) != 0) fail_cm(concat("rdma_accept from rank ", from), from);
        break;
      }
      case RDMA_CM_EVENT_ESTABLISHED:
        ++established;
        break;
      default:
        fail(Status::transport, "rdma_cm: ", rdma_event_str(type), " (status ", status, ") while connecting",
             peer >= 0 ? concat(" to rank ", peer) : std::string(), "; check that every rank's address is reachable");
    }
  }
  log::info("verbs: rdma_cm connected to ", size - 1, " peers");
}

void CmConnector::disconnect_all() {
  if (connections_.empty()) return;
  for (auto& [peer, id] : connections_) rdma_disconnect(id);  // best effort: the peer may be gone
  // Both sides see DISCONNECTED; wait for ours so the ids can go.
  size_t disconnected = 0;
  const auto deadline = std::chrono::steady_clock::now() + kDisconnectWait;
  while (disconnected < connections_.size()) {
    rdma_cm_event* event = nullptr;
    try {
      event = next_event(deadline, nullptr);
    } catch (const std::exception& e) {
      log::warn("rdma_cm: teardown: ", e.what());
      break;
    }
    if (event == nullptr) break;  // timed out: destroy anyway
    if (event->event == RDMA_CM_EVENT_DISCONNECTED) ++disconnected;
    rdma_ack_cm_event(event);
  }
  for (auto& [peer, id] : connections_) {
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
  }
  connections_.clear();
}

}  // namespace chorus::transport::verbs
