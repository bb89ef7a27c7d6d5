// UD mode data path (docs/transport-ud.md): eager messages through the
// reliability layer, READs through the RC links, datagrams on the UD QP
// (ud::Link), completions, the retransmission timer, and failures.
#include "common/log.hpp"
#include "transports/verbs/ud_transport.hpp"

#include <sys/timerfd.h>

#include <cstring>
#include <limits>

namespace chorus::transport::verbs {

namespace {

uint64_t wr_id(UdWrKind kind, int peer, uint32_t value) { return make_wr_id(static_cast<uint64_t>(kind), peer, value); }
UdWrKind wr_kind(uint64_t id) { return static_cast<UdWrKind>(wr_kind_bits(id)); }

}  // namespace

void UdTransport::post_eager(int peer, const void* header, size_t header_bytes, const void* payload,
                             size_t payload_bytes) {
  check_usable(peer);
  const size_t bytes = header_bytes + payload_bytes;
  if (bytes > max_eager_) fail(Status::internal, "verbs UD: eager message of ", bytes, " bytes exceeds ", max_eager_);
  reliability_->send(peer, kEngineChannel, header, header_bytes, payload, payload_bytes, *this, now_ns());
}

void UdTransport::post_read(int peer, RemoteBuffer remote, MemoryRegion& local, size_t local_offset, size_t bytes,
                            uint64_t context) {
  check_usable(peer);
  const std::vector<PendingRead> pieces =
      start_read(reads_, context, port_.attr.max_msg_sz, remote, local, local_offset, bytes, "verbs UD");
  if (!pieces.empty()) links_->enqueue(peer, pieces);
}

int UdTransport::poll(Sink& sink) {
  int events = report_async_failures(sink);
  Deliveries deliveries(*this, sink);
  events += cq_->drain([&](const ibv_wc& wc) { complete(wc, deliveries); });
  if (reliability_) reliability_->tick(*this, deliveries, now_ns());
  if (links_) {
    links_->service();
    std::vector<ReadJob*>& finished = links_->finished();
    for (ReadJob* job : finished) reads_.finish(job);
    finished.clear();
  }
  return events + reads_.deliver(sink);
}

std::string UdTransport::describe_peer(int p) {
  if (p < 0 || p >= size_ || !connected_) return {};
  return concat(reliability_->describe(p), ", ", links_->describe(p));
}

bool UdTransport::arm() {
  if (reads_.any_finished() || (links_ && (links_->needs_service() || !links_->finished().empty()))) return false;
  if (monitor_ && monitor_->pending()) return false;
  const uint64_t deadline = reliability_ ? reliability_->next_deadline_ns() : std::numeric_limits<uint64_t>::max();
  if (deadline != std::numeric_limits<uint64_t>::max()) {
    if (deadline <= now_ns()) return false;
    set_timer(deadline);
  } else if (timer_set_) {
    set_timer(0);  // disarmed
  }
  return cq_->arm();
}

void UdTransport::on_peer_failed(int peer) {
  failed_.insert(peer);
  links_->fail_peer(peer);
}

void UdTransport::check_usable(int p) {
  if (p < 0 || p >= size_ || !connected_) {
    fail(Status::invalid_argument, "verbs UD: rank ", p, " is not a connected peer (0..", size_ - 1, ")");
  }
  if (fatal_) throw *fatal_;
  if (failed_.count(p) != 0 || reliability_->peer_failed(p)) {
    throw Error(Status::peer_failed, concat("verbs UD: rank ", p, " failed earlier"), p);
  }
}

void UdTransport::transmit(int peer, int slot, const void* frame, size_t bytes) {
  const UdPeer& to = peers_[static_cast<size_t>(peer)];
  ibv_sge sge{reinterpret_cast<uintptr_t>(frame), static_cast<uint32_t>(bytes), arena_mr_->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = to.ah.get();
  wr.wr.ud.remote_qpn = to.qpn;
  wr.wr.ud.remote_qkey = to.qkey;
  if (slot == ud::Reliability::kAckSlot) {
    wr.wr_id = wr_id(UdWrKind::ack, peer, 0);
    if (bytes <= max_inline_) {
      wr.send_flags |= IBV_SEND_INLINE;
    } else {
      // Acks complete in order and at most ack_slots are outstanding: a ring suffices.
      uint8_t* copy = &ack_ring_[(next_ack_++ % params_.ack_slots) * sizeof(ud::WireHeader)];
      std::memcpy(copy, frame, bytes);
      sge.addr = reinterpret_cast<uintptr_t>(copy);
      sge.lkey = ack_mr_->lkey;
    }
  } else {
    wr.wr_id = wr_id(UdWrKind::fragment, peer, static_cast<uint32_t>(slot));
    if (data_fragments_posted_++ == drop_fragment_) {
      // CHORUS_TEST_UD_DROP: the peer's HCA discards a datagram with a wrong qkey.
      log::warn("verbs UD: test hook: data fragment ", drop_fragment_, " to rank ", peer, " is sent with a wrong qkey (lost)");
      wr.wr.ud.remote_qkey = to.qkey ^ 1u;
    }
  }
  ibv_send_wr* bad = nullptr;
  check_rc(ibv_post_send(ud_qp_.get(), &wr, &bad), [&] {
    return concat("ibv_post_send (UD ", slot == ud::Reliability::kAckSlot ? "ack" : "fragment", " of ", bytes,
                  " bytes to rank ", peer, ")");
  }, peer);
}

void UdTransport::post_receive(uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(&recv_slab_[slot * recv_bytes_]), static_cast<uint32_t>(recv_bytes_),
              recv_mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = wr_id(UdWrKind::recv, 0, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  check_rc(ibv_post_srq_recv(srq_.get(), &wr, &bad), "ibv_post_srq_recv (reposting a UD receive buffer)");
}

// Wakes a blocked engine at the reliability layer's next deadline (0:
// never). Setting it also clears an earlier expiry, so the fd is never
// left readable with nothing to do.
void UdTransport::set_timer(uint64_t deadline_ns) {
  itimerspec when{};
  when.it_value.tv_sec = static_cast<time_t>(deadline_ns / 1'000'000'000);
  when.it_value.tv_nsec = static_cast<long>(deadline_ns % 1'000'000'000);
  if (timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &when, nullptr) != 0) {
    fail_errno("timerfd_settime (UD retransmission timer)", errno);
  }
  timer_set_ = deadline_ns != 0;
}

void UdTransport::complete(const ibv_wc& wc, Deliveries& deliveries) {
  if (wc.status != IBV_WC_SUCCESS) return complete_with_error(wc, deliveries);
  switch (wr_kind(wc.wr_id)) {
    case UdWrKind::fragment: return reliability_->on_sent(static_cast<int>(wr_value(wc.wr_id)));
    case UdWrKind::ack: return reliability_->on_sent(ud::Reliability::kAckSlot);
    case UdWrKind::recv: return receive(wc, deliveries);
    case UdWrKind::read: links_->complete(wr_peer(wc.wr_id), wr_value(wc.wr_id)); return;
  }
}

void UdTransport::receive(const ibv_wc& wc, Deliveries& deliveries) {
  const uint32_t slot = wr_value(wc.wr_id);
  const uint8_t* frame = &recv_slab_[slot * recv_bytes_] + kGrhBytes;
  ud::WireHeader header{};
  if (wc.byte_len >= kGrhBytes + sizeof header) std::memcpy(&header, frame, sizeof header);
  // Only the QP the claimed sender published may speak for it.
  if (!reliability_ || wc.byte_len < kGrhBytes + sizeof header || header.src >= static_cast<uint32_t>(size_) ||
      peers_[header.src].qpn != wc.src_qp) {
    ++stray_datagrams_;
    post_receive(slot);
    return;
  }
  try {
    reliability_->on_frame(frame, wc.byte_len - kGrhBytes, *this, deliveries, now_ns());
  } catch (...) {
    post_receive(slot);  // the SRQ must not shrink when a consumer throws
    throw;
  }
  post_receive(slot);  // after the consumer is done with the bytes
}

// On an error completion only wr_id, status, qp_num and vendor_err are valid.
void UdTransport::complete_with_error(const ibv_wc& wc, Deliveries& deliveries) {
  const UdWrKind kind = wr_kind(wc.wr_id);
  if (kind == UdWrKind::recv) {
    if (wc.status != IBV_WC_WR_FLUSH_ERR) post_receive(wr_value(wc.wr_id));
    return;
  }
  const int p = wr_peer(wc.wr_id);
  const std::string what = concat("verbs UD: ",
                                  kind == UdWrKind::read ? "RDMA READ from" : (kind == UdWrKind::ack ? "ack to" : "datagram to"),
                                  " rank ", p, " failed: ", ibv_wc_status_str(wc.status), " (status ",
                                  static_cast<int>(wc.status), ", vendor_err 0x", std::hex, wc.vendor_err, ", QP 0x",
                                  wc.qp_num, std::dec, ")");
  if (kind == UdWrKind::fragment || kind == UdWrKind::ack) {
    reliability_->on_sent(kind == UdWrKind::ack ? ud::Reliability::kAckSlot : static_cast<int>(wr_value(wc.wr_id)));
    // A UD send fails only locally (the QP or an address handle is broken):
    // nothing more can be sent to anyone.
    if (!fatal_) {
      fatal_ = Error(Status::transport, what, -1);
      log::warn(what);
      deliveries.fail_all(*fatal_);
    }
    return;
  }
  ReadJob* job = links_->complete(p, wr_value(wc.wr_id));
  job->failed = true;
  const Error failure(Status::peer_failed,
                      concat(what, wc.status == IBV_WC_RETRY_EXC_ERR ? "; the peer is unreachable or its process died"
                                                                      : ""),
                      p);
  deliveries.report(job->context, p, failure);
  if (failed_.insert(p).second) {
    log::warn(failure.what());
    deliveries.report(0, p, failure);
  }
  links_->fail_peer(p);
}

int UdTransport::report_async_failures(Sink& sink) {
  if (!monitor_) return 0;
  return monitor_->report(sink, size_, [this](int peer) { failed_.insert(peer); }, fatal_);
}

void Deliveries::on_message(int peer, uint8_t channel, const void* data, size_t bytes) {
  if (channel == UdTransport::kControlChannel) {
    transport_.on_control(peer, data, bytes);
  } else {
    sink_.on_eager(peer, data, bytes);
  }
}

void Deliveries::on_peer_failed(int peer, const Error& error) {
  transport_.on_peer_failed(peer);
  log::warn(error.what());
  sink_.on_error(0, peer, error);
}

}  // namespace chorus::transport::verbs
