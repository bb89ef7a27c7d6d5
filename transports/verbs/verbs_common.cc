#include "transports/verbs/verbs_common.hpp"

#include <fcntl.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace chorus::transport::verbs {

ContextPtr open_device(const std::string& name) {
  int count = 0;
  DeviceListPtr list(ibv_get_device_list(&count));
  for (int i = 0; list && i < count; ++i) {
    if (name == ibv_get_device_name(list.get()[i])) {
      return ContextPtr(check_ptr(ibv_open_device(list.get()[i]), concat("ibv_open_device(", name, ")")));
    }
  }
  fail(Status::transport, "verbs: device ", name, " disappeared while opening it");
}

std::vector<PendingRead> read_pieces(ReadJob& job, uint32_t max_message_bytes, RemoteBuffer remote, MemoryRegion& local,
                                     size_t local_offset, size_t bytes, const char* transport) {
  if (local_offset + bytes > local.length()) {
    fail(Status::internal, transport, ": read of ", bytes, " bytes at offset ", local_offset, " overruns a ",
         local.length(), "-byte region");
  }
  const size_t piece = std::clamp<size_t>(max_message_bytes, 4096, size_t{1} << 30);
  const uint64_t base = reinterpret_cast<uintptr_t>(local.base()) + local_offset;
  const uint32_t lkey = static_cast<VerbsRegion&>(local).lkey();
  std::vector<PendingRead> pieces;
  pieces.reserve(bytes == 0 ? 0 : 1 + (bytes - 1) / piece);
  for (size_t done = 0; done < bytes; done += piece) {
    const size_t n = std::min(piece, bytes - done);
    pieces.push_back(PendingRead{&job, base + done, lkey, static_cast<uint32_t>(n), remote.address + done,
                                 static_cast<uint32_t>(remote.key)});
  }
  job.pieces_left = pieces.size();
  return pieces;
}

std::vector<PendingRead> start_read(ReadJobs& jobs, uint64_t context, uint32_t max_message_bytes, RemoteBuffer remote,
                                    MemoryRegion& local, size_t local_offset, size_t bytes, const char* transport) {
  ReadJob& job = jobs.start(context);
  std::vector<PendingRead> pieces = read_pieces(job, max_message_bytes, remote, local, local_offset, bytes, transport);
  if (pieces.empty()) jobs.finish(&job);
  return pieces;
}

void check_same_fabric(const char* transport, int peer, bool peer_roce, const PortChoice& port) {
  if (peer_roce != port.roce) {
    fail(Status::config, transport, ": rank ", peer, " uses ", peer_roce ? "RoCE" : "InfiniBand", " but this rank uses ",
         port.roce ? "RoCE" : "InfiniBand", "; set CHORUS_IB_DEVICE/CHORUS_IB_PORT to ports of one fabric");
  }
}

void fail_address_size(const AddressKind& kind, int peer, size_t blob_bytes, size_t wire_bytes) {
  fail(Status::bootstrap, kind.transport, ": rank ", peer, " published a ", blob_bytes, "-byte address, expected ",
       kind.exact_size ? "" : "at least ", wire_bytes, " (", kind.size_hint, ")");
}

void fail_address_header(const AddressKind& kind, int peer, uint16_t expected_version, uint32_t magic,
                         uint16_t version) {
  fail(Status::bootstrap, kind.transport, ": rank ", peer, "'s address is not a chorus ", kind.name, " v",
       expected_version, " address (magic 0x", std::hex, magic, std::dec, ", version ", version,
       "); all ranks must run the same chorus with ", kind.run_setting);
}

int ReadJobs::deliver(Sink& sink) {
  const int ended = static_cast<int>(finished_.size());
  for (ReadJob* job : finished_) {
    if (!job->failed) sink.on_read_done(job->context);
  }
  finished_.clear();
  while (!jobs_.empty() && jobs_.front().pieces_left == 0) jobs_.pop_front();
  return ended;
}

ibv_send_wr read_work_request(const PendingRead& read, ibv_sge& sge) {
  sge = ibv_sge{read.local_address, read.bytes, read.lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;  // each piece completes its job
  wr.wr.rdma.remote_addr = read.remote_address;
  wr.wr.rdma.rkey = read.rkey;
  return wr;
}

size_t heap_bytes_in_use() { return mallinfo2().uordblks; }

ibv_mr* register_range(ibv_pd* pd, void* base, size_t length, int access) {
  return check_ptr(ibv_reg_mr(pd, base, std::max<size_t>(length, 1), access), concat("ibv_reg_mr of ", length, " bytes"));
}

const char* qp_state_name(ibv_qp_state state) {
  switch (state) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return "UNKNOWN";
  }
}

std::string query_qp_state(ibv_qp* qp) {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  const int rc = ibv_query_qp(qp, &attr, IBV_QP_STATE, &init);
  return rc == 0 ? std::string(qp_state_name(attr.qp_state)) : concat("unknown (ibv_query_qp: ", errno_string(rc), ")");
}

// --- CompletionQueue ---------------------------------------------------------------

namespace {
constexpr unsigned kAckEventsEvery = 64;
}

CompletionQueue::CompletionQueue(ibv_context* context, int entries, int completion_vector) : entries_(entries) {
  channel_.reset(check_ptr(ibv_create_comp_channel(context), "ibv_create_comp_channel"));
  const int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    fail_errno("fcntl(O_NONBLOCK) on the completion channel", errno);
  }
  // A device may have fewer vectors than the planner assumed (another NIC chosen since).
  vector_ = context->num_comp_vectors > 0 ? completion_vector % context->num_comp_vectors : 0;
  cq_.reset(check_ptr(ibv_create_cq(context, entries, nullptr, channel_.get(), vector_),
                      concat("ibv_create_cq(", entries, " entries, completion vector ", vector_, ")")));
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) fail_errno("epoll_create1", errno);
  watch(channel_->fd, "completion channel");
}

CompletionQueue::~CompletionQueue() {
  armed_ = true;
  take_events();  // every event read is acked below; unread ones do not hold the CQ
  if (unacked_events_ != 0) ibv_ack_cq_events(cq_.get(), unacked_events_);
  cq_.reset();
  channel_.reset();
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

void CompletionQueue::watch(int fd, const char* what) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) fail_errno(concat("epoll_ctl(ADD ", what, ")"), errno);
}

void CompletionQueue::take_events() {
  // Only after arming can events be there: spinning polls skip the syscall.
  if (!armed_) return;
  armed_ = false;
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(channel_.get(), &cq, &context) == 0) {
    // Acking takes a lock: batch it (all must be acked before the CQ is destroyed).
    if (++unacked_events_ >= kAckEventsEvery) {
      ibv_ack_cq_events(cq_.get(), unacked_events_);
      unacked_events_ = 0;
    }
  }
}

int CompletionQueue::poll_batch(ibv_wc* batch) {
  const int n = ibv_poll_cq(cq_.get(), kBatch, batch);
  if (n < 0) fail(Status::transport, "verbs: ibv_poll_cq failed (", n, ")");
  return n;
}

bool CompletionQueue::arm() {
  if (!stash_.empty()) return false;
  check_rc(ibv_req_notify_cq(cq_.get(), 0), "ibv_req_notify_cq");
  armed_ = true;
  // A completion that landed before the request would not raise an event.
  ibv_wc found[kBatch];
  const int n = poll_batch(found);
  if (n == 0) return true;
  stash_.assign(found, found + n);
  return false;
}

// --- RC queue pairs -----------------------------------------------------------------

void rc_to_init(ibv_qp* qp, const PortChoice& port, int peer) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(port.port);
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
  check_rc(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
           concat("ibv_modify_qp(INIT) of the QP to rank ", peer), peer);
}

void rc_to_rts(ibv_qp* qp, const PortChoice& port, const RcRemote& remote, const RcLimits& limits, int peer) {
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = std::min(port.attr.active_mtu, remote.mtu);
  rtr.dest_qp_num = remote.qpn;
  rtr.rq_psn = remote.psn;
  rtr.max_dest_rd_atomic = static_cast<uint8_t>(limits.max_reads_served);
  rtr.min_rnr_timer = 12;  // 0.64 ms; credits mean RNR should never happen
  rtr.ah_attr.port_num = static_cast<uint8_t>(port.port);
  if (port.roce) {
    rtr.ah_attr.is_global = 1;
    std::memcpy(rtr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
    rtr.ah_attr.grh.hop_limit = 64;
  } else {
    rtr.ah_attr.dlid = remote.lid;
  }
  check_rc(ibv_modify_qp(qp, &rtr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
           concat("ibv_modify_qp(RTR) of the QP to rank ", peer, " (remote QP 0x", std::hex, remote.qpn, std::dec,
                  ", GID ", gid_to_string(remote.gid), ")"),
           peer);
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.sq_psn = limits.sq_psn;
  rts.timeout = static_cast<uint8_t>(limits.qp_timeout);
  rts.retry_cnt = static_cast<uint8_t>(limits.retry_count);
  rts.rnr_retry = 7;  // never reached with credits; 7 keeps a slow repost from failing a job
  rts.max_rd_atomic = static_cast<uint8_t>(std::max(1, std::min(limits.max_reads_issued, remote.max_reads_served)));
  check_rc(ibv_modify_qp(qp, &rts,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC),
           concat("ibv_modify_qp(RTS) of the QP to rank ", peer), peer);
}

}  // namespace chorus::transport::verbs
