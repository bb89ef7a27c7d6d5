// On-demand RC QPs for RDMA READ in the UD mode: the protocol is in
// ud_rc_links.hpp and docs/transport-ud.md.
#include "transports/verbs/ud_rc_links.hpp"

#include "common/log.hpp"

#include <algorithm>
#include <cstring>
#include <random>

namespace chorus::transport::verbs {

// What `request` and `reply` carry; `close` and `closed` use only `op`.
struct RcReadLinks::Control {
  uint8_t op;
  uint8_t max_reads_served;
  uint16_t lid;
  uint32_t qpn;
  uint32_t psn;
  uint8_t gid[16];
};

namespace {
enum Op : uint8_t { kRequest = 1, kReply = 2, kClose = 3, kClosed = 4 };
}

RcReadLinks::RcReadLinks(const Setup& setup, SendControl send_control)
    : setup_(setup), send_control_(std::move(send_control)), read_budget_(setup.max_links * setup.max_reads) {}

RcReadLinks::~RcReadLinks() { links_.clear(); }

void RcReadLinks::enqueue(int peer, const std::vector<PendingRead>& pieces) {
  Link& link = links_[peer];
  link.queued.insert(link.queued.end(), pieces.begin(), pieces.end());
  link.last_used = ++use_clock_;
  service_link(peer, link);
}

void RcReadLinks::on_control(int peer, const void* data, size_t bytes) {
  Control message{};
  if (bytes != sizeof message) {
    log::warn("verbs UD: ignoring a ", bytes, "-byte RC control message from rank ", peer);
    return;
  }
  std::memcpy(&message, data, sizeof message);
  auto it = links_.find(peer);
  switch (message.op) {
    case kRequest:
      return accept(peer, message);
    case kReply:
      // Not connecting: we answered a crossing request and are connected already.
      if (it != links_.end() && it->second.state == State::connecting) connect(peer, it->second, message);
      return;
    case kClose:
      return peer_asks_close(peer);
    case kClosed:
      if (it != links_.end() && it->second.state == State::closing && it->second.reads_in_flight == 0) {
        finish_close(peer, it->second, false);
      }
      return;
    default:
      log::warn("verbs UD: ignoring RC control message ", static_cast<int>(message.op), " from rank ", peer);
  }
}

ReadJob* RcReadLinks::complete(int peer, uint32_t op) {
  ReadJob* job = read_ops_[op];
  free_read_ops_.push_back(op);
  --reads_in_flight_;
  if (--job->pieces_left == 0) finished_.push_back(job);
  auto it = links_.find(peer);
  if (it != links_.end()) --it->second.reads_in_flight;
  needs_service_ = true;
  return job;
}

void RcReadLinks::fail_peer(int peer) {
  auto it = links_.find(peer);
  if (it == links_.end()) return;
  fail_queued(it->second);
  it->second.broken = true;
  if (it->second.reads_in_flight == 0) drop(it);
}

void RcReadLinks::fail_queued(Link& link) {
  for (PendingRead& read : link.queued) {
    read.job->failed = true;
    if (--read.job->pieces_left == 0) finished_.push_back(read.job);
  }
  link.queued.clear();
}

void RcReadLinks::service() {
  if (!needs_service_) return;
  needs_service_ = false;
  // Servicing one link may close or erase another: walk a copy of the keys.
  std::vector<int> peers;
  peers.reserve(links_.size());
  for (const auto& entry : links_) peers.push_back(entry.first);
  for (int peer : peers) {
    auto it = links_.find(peer);
    if (it != links_.end()) service_link(peer, it->second);
  }
  // Over the limit (peers opened QPs towards us): close the idlest.
  if (qp_count_ > setup_.max_links) begin_close_least_recent();
}

void RcReadLinks::service_link(int peer, Link& link) {
  if (link.broken) {
    if (link.reads_in_flight == 0) drop(links_.find(peer));
    return;
  }
  switch (link.state) {
    case State::waiting:
      if (link.queued.empty()) {
        links_.erase(peer);
      } else if (qp_count_ < setup_.max_links) {
        open(peer, link);
      } else {
        begin_close_least_recent();
        needs_service_ = true;  // try again once one has closed
      }
      return;
    case State::connecting:
      return;
    case State::ready:
      start_reads(peer, link);
      return;
    case State::closing:
      if (link.close_asked && link.reads_in_flight == 0) finish_close(peer, link, true);
      return;
  }
}

void RcReadLinks::create_qp(int peer, Link& link) {
  ibv_qp_init_attr attr{};
  attr.send_cq = setup_.cq;
  attr.recv_cq = setup_.cq;
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 1;
  attr.cap.max_send_wr = static_cast<uint32_t>(setup_.max_reads);
  attr.cap.max_recv_wr = 1;  // never posted: the link carries READs only
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  link.qp.reset(check_ptr(ibv_create_qp(setup_.pd, &attr), concat("ibv_create_qp (RC for reads, rank ", peer, ")"), peer));
  ++qp_count_;
  {
    std::lock_guard<std::mutex> lock(owner_mutex_);
    owner_[link.qp->qp_num] = peer;
  }
  rc_to_init(link.qp.get(), setup_.port, peer);
  link.psn = std::random_device{}() & 0xffffff;
  link.max_reads = setup_.max_reads;
}

void RcReadLinks::destroy_qp(Link& link) {
  if (!link.qp) return;
  {
    std::lock_guard<std::mutex> lock(owner_mutex_);
    owner_.erase(link.qp->qp_num);
  }
  link.qp.reset();
  --qp_count_;
}

void RcReadLinks::send(int peer, uint8_t op, const Link* link) {
  Control message{};
  message.op = op;
  if (link != nullptr) {
    message.max_reads_served = static_cast<uint8_t>(setup_.max_reads);
    message.lid = setup_.port.attr.lid;
    message.qpn = link->qp ? link->qp->qp_num : 0;
    message.psn = link->psn;
    std::copy(setup_.port.gid.begin(), setup_.port.gid.end(), message.gid);
  }
  send_control_(peer, &message, sizeof message);
}

void RcReadLinks::open(int peer, Link& link) {
  create_qp(peer, link);
  if (peer == setup_.rank) {
    // Reads from our own memory: the QP connects to itself.
    Control self{kRequest, static_cast<uint8_t>(setup_.max_reads), setup_.port.attr.lid, link.qp->qp_num, link.psn, {}};
    std::copy(setup_.port.gid.begin(), setup_.port.gid.end(), self.gid);
    connect(peer, link, self);
    return;
  }
  link.state = State::connecting;
  send(peer, kRequest, &link);
}

void RcReadLinks::connect(int peer, Link& link, const Control& remote) {
  RcRemote path;
  path.qpn = remote.qpn;
  path.psn = remote.psn;
  path.mtu = setup_.path_mtu;
  path.lid = remote.lid;
  std::copy(remote.gid, remote.gid + 16, path.gid.begin());
  path.max_reads_served = remote.max_reads_served;
  RcLimits limits;
  limits.sq_psn = link.psn;
  limits.qp_timeout = setup_.qp_timeout;
  limits.retry_count = setup_.retry_count;
  limits.max_reads_served = setup_.max_reads;
  limits.max_reads_issued = setup_.max_reads;
  rc_to_rts(link.qp.get(), setup_.port, path, limits, peer);
  link.max_reads = std::max(1, std::min<int>(setup_.max_reads, remote.max_reads_served));
  link.state = State::ready;
  start_reads(peer, link);
}

void RcReadLinks::accept(int peer, const Control& request) {
  Link& link = links_[peer];
  if (link.state == State::waiting) {
    create_qp(peer, link);
  } else if (link.state != State::connecting) {
    // The protocol never lets a peer ask while our side is up; say so and
    // start over rather than keep a QP the peer no longer has.
    log::warn("verbs UD: rank ", peer, " asked for an RC QP while ours was ", state_name(link.state),
              "; replacing it");
    if (link.reads_in_flight != 0) return;  // our reads in flight fail on their own and report
    destroy_qp(link);
    create_qp(peer, link);
  }
  // Only the peer asked, or both at once: either way our QP now meets its QP.
  link.last_used = ++use_clock_;
  send(peer, kReply, &link);
  connect(peer, link, request);
}

void RcReadLinks::start_reads(int peer, Link& link) {
  while (link.state == State::ready && !link.queued.empty() && link.reads_in_flight < link.max_reads &&
         reads_in_flight_ < read_budget_) {
    PendingRead& read = link.queued.front();
    ibv_sge sge{};
    ibv_send_wr wr = read_work_request(read, sge);
    if (free_read_ops_.empty()) {
      read_ops_.push_back(nullptr);
      free_read_ops_.push_back(static_cast<uint32_t>(read_ops_.size() - 1));
    }
    const uint32_t op = free_read_ops_.back();
    read_ops_[op] = read.job;
    wr.wr_id = make_wr_id(setup_.read_wr_kind, peer, op);
    ibv_send_wr* bad = nullptr;
    check_rc(ibv_post_send(link.qp.get(), &wr, &bad),
             [&] { return concat("ibv_post_send (RDMA READ of ", read.bytes, " bytes from rank ", peer, ")"); }, peer);
    free_read_ops_.pop_back();
    ++link.reads_in_flight;
    ++reads_in_flight_;
    link.last_used = ++use_clock_;
    link.queued.pop_front();
  }
}

void RcReadLinks::begin_close_least_recent() {
  // Only an idle link of ours that is up: nothing in flight, nothing queued.
  auto victim = links_.end();
  for (auto it = links_.begin(); it != links_.end(); ++it) {
    const Link& link = it->second;
    if (link.state != State::ready || link.reads_in_flight != 0 || !link.queued.empty()) continue;
    if (victim == links_.end() || link.last_used < victim->second.last_used) victim = it;
  }
  if (victim == links_.end()) return;
  ++closed_for_lru_;
  if (victim->first == setup_.rank) {
    finish_close(setup_.rank, victim->second, false);
    return;
  }
  victim->second.state = State::closing;
  send(victim->first, kClose, nullptr);
}

void RcReadLinks::peer_asks_close(int peer) {
  auto it = links_.find(peer);
  if (it == links_.end() || !it->second.qp) {
    send(peer, kClosed, nullptr);
    return;
  }
  Link& link = it->second;
  link.state = State::closing;
  link.close_asked = true;
  if (link.reads_in_flight == 0) finish_close(peer, link, true);
}

// Our side goes; reads queued meanwhile open the link again.
void RcReadLinks::finish_close(int peer, Link& link, bool answer) {
  destroy_qp(link);
  if (answer) send(peer, kClosed, nullptr);
  if (link.queued.empty()) {
    links_.erase(peer);
    return;
  }
  link.state = State::waiting;
  link.close_asked = false;
  needs_service_ = true;
}

void RcReadLinks::drop(Links::iterator it) {
  if (it == links_.end()) return;
  destroy_qp(it->second);
  links_.erase(it);
}

int RcReadLinks::peer_of_qp(uint32_t qpn) {
  std::lock_guard<std::mutex> lock(owner_mutex_);
  auto it = owner_.find(qpn);
  return it == owner_.end() ? -1 : it->second;
}

const char* RcReadLinks::state_name(State state) {
  switch (state) {
    case State::waiting: return "waiting for a free RC slot";
    case State::connecting: return "connecting";
    case State::ready: return "ready";
    case State::closing: return "closing";
  }
  return "unknown";
}

std::string RcReadLinks::describe(int peer) const {
  auto it = links_.find(peer);
  if (it == links_.end()) return "no RC QP";
  const Link& link = it->second;
  return concat("RC QP ",
                link.qp ? concat("0x", std::hex, link.qp->qp_num, std::dec, " in state ", query_qp_state(link.qp.get()))
                        : std::string("not created"),
                " (", state_name(link.state), "), ", link.reads_in_flight, " RDMA reads in flight and ",
                link.queued.size(), " queued");
}

size_t RcReadLinks::bytes_in_use() const {
  size_t bytes = read_ops_.capacity() * sizeof(ReadJob*) + free_read_ops_.capacity() * sizeof(uint32_t);
  for (const auto& [peer, link] : links_) bytes += sizeof peer + sizeof link + link.queued.size() * sizeof(PendingRead);
  return bytes;
}

}  // namespace chorus::transport::verbs
