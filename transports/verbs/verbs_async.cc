#include "transports/verbs/verbs_async.hpp"

#include "common/log.hpp"
#include "transports/verbs/verbs_resources.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

namespace chorus::transport::verbs {

AsyncEventMonitor::AsyncEventMonitor(ibv_context* context, std::function<int(uint32_t)> peer_of_qp)
    : context_(context), peer_of_qp_(std::move(peer_of_qp)) {
  // Non-blocking so the thread can wait on the fd together with its stop fd.
  int flags = fcntl(context_->async_fd, F_GETFL);
  if (flags < 0 || fcntl(context_->async_fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    fail_errno("fcntl(O_NONBLOCK) on the device's async event fd", errno);
  }
  notify_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (notify_fd_ < 0) fail_errno("eventfd (async failures)", errno);
  stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    close(notify_fd_);
    fail_errno("eventfd (monitor stop)", errno);
  }
  thread_ = std::thread([this] { run(); });
}

AsyncEventMonitor::~AsyncEventMonitor() {
  uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof one) < 0) log::warn("verbs: could not signal the async event thread to stop");
  if (thread_.joinable()) thread_.join();
  close(stop_fd_);
  close(notify_fd_);
}

int AsyncEventMonitor::report(Sink& sink, int size, const std::function<void(int peer)>& fail_peer,
                              std::optional<Error>& fatal) {
  if (!pending()) return 0;
  int events = 0;
  for (AsyncFailure& failure : take()) {
    if (failure.peer >= 0 && failure.peer < size) {
      fail_peer(failure.peer);
    } else {
      fatal = failure.error;
    }
    sink.on_error(0, failure.peer, failure.error);
    ++events;
  }
  return events;
}

std::vector<AsyncFailure> AsyncEventMonitor::take() {
  std::lock_guard lock(mutex_);
  std::vector<AsyncFailure> out;
  out.swap(failures_);
  pending_.store(false, std::memory_order_release);
  uint64_t drained = 0;
  if (read(notify_fd_, &drained, sizeof drained) < 0 && errno != EAGAIN) {
    log::warn("verbs: reading the async failure eventfd failed: ", std::strerror(errno));
  }
  return out;
}

void AsyncEventMonitor::run() {
  pollfd fds[2] = {{context_->async_fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      log::error("verbs: poll() on the async event fd failed: ", std::strerror(errno), "; async events are no longer watched");
      return;
    }
    if (fds[1].revents != 0) return;
    ibv_async_event event{};
    while (ibv_get_async_event(context_, &event) == 0) {
      ++events_seen_;
      handle(event);
      ibv_ack_async_event(&event);  // every event is acked, or destroying its object blocks
    }
  }
}

void AsyncEventMonitor::handle(const ibv_async_event& event) {
  const char* name = ibv_event_type_str(event.event_type);
  int peer = -1;
  std::string what;
  bool fatal = true;
  switch (event.event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
      peer = peer_of_qp_(event.element.qp->qp_num);
      what = concat("verbs: async event ", name, " on the QP to rank ", peer, " (QP 0x", std::hex,
                    event.element.qp->qp_num, std::dec, "): the connection to that rank is broken");
      break;
    case IBV_EVENT_CQ_ERR:
      what = concat("verbs: async event ", name, ": the completion queue overran or failed; every operation is lost");
      break;
    case IBV_EVENT_PORT_ERR:
      what = concat("verbs: async event ", name, " on port ", event.element.port_num, ": the link went down");
      break;
    case IBV_EVENT_DEVICE_FATAL:
      what = concat("verbs: async event ", name, ": the device failed and must be reset");
      break;
    default:
      // Informational (COMM_EST, PORT_ACTIVE, LID/GID change, SRQ limit, ...).
      fatal = false;
      log::info("verbs: async event ", name);
      break;
  }
  if (!fatal) return;
  log::warn(what);
  {
    std::lock_guard lock(mutex_);
    failures_.push_back(AsyncFailure{peer, Error(Status::transport, what, peer)});
    pending_.store(true, std::memory_order_release);
  }
  uint64_t one = 1;
  if (write(notify_fd_, &one, sizeof one) < 0) log::warn("verbs: could not wake the rank for an async failure");
}

}  // namespace chorus::transport::verbs
