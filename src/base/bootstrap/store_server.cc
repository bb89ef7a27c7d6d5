// The store server: one thread, poll() over the listening socket, a wake-up
// eventfd and every client; non-blocking sockets with per-connection buffers,
// so one slow or hostile client never holds up the others.
// Requests, once a frame is complete: store_server_frames.cc.
#include "bootstrap/store_server_impl.hpp"

#include "common/log.hpp"

#include <algorithm>
#include <cerrno>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace chorus::bootstrap {

namespace {

std::string peer_name(const sockaddr_storage& address) {
  char host[NI_MAXHOST] = "?";
  char service[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&address), sizeof address, host, sizeof host, service, sizeof service,
              NI_NUMERICHOST | NI_NUMERICSERV);
  return concat(host, ":", service);
}

long long milliseconds(std::chrono::milliseconds duration) { return static_cast<long long>(duration.count()); }

}  // namespace

StoreServer::Impl::Impl(const std::string& bind_address, uint16_t port, std::string secret,
                        std::chrono::milliseconds stall_timeout)
    : secret_(std::move(secret)),
      stall_timeout_(stall_timeout),
      close_grace_(std::min<std::chrono::milliseconds>(stall_timeout, kMaxCloseGrace)) {
  if (stall_timeout <= std::chrono::milliseconds(0)) {
    fail(Status::invalid_argument, "the store's stall timeout must be positive, got ", milliseconds(stall_timeout),
         " ms");
  }
  listener_ = net::listen_on(bind_address, port);
  port_ = net::local_port(listener_.get());
  address_ = net::format_address(bind_address, port_);
  wake_ = net::Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_) fail(Status::bootstrap, "eventfd() for the store at ", address_, " failed: ", errno_string(errno));
  thread_ = std::thread([this] { run(); });
  log::debug("bootstrap store listening on ", address_);
}

StoreServer::Impl::~Impl() {
  stopping_ = true;
  try {
    signal_wake();
  } catch (const Error& e) {
    log::warn(e.what());  // the loop still notices stopping_ at its next wake-up
  }
  thread_.join();
}

void StoreServer::Impl::set(const std::string& key, const Bytes& value) {
  // Reject here (by encoding it) what a client could never have stored, so
  // every later reply carrying this value encodes too.
  (void)frame::encode(Frame::set(0, key, value));
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    store_[key] = value;
    externally_set_.push_back(key);
  }
  signal_wake();
}

int64_t StoreServer::Impl::add(const std::string& key, int64_t delta) {
  std::string problem;
  int64_t total = 0;
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    total = add_locked(key, delta, problem);
    if (problem.empty()) externally_set_.push_back(key);  // its waiters wake in the store's thread
  }
  if (!problem.empty()) fail(Status::invalid_argument, "bootstrap store at ", address_, ": ", problem);
  signal_wake();
  return total;
}

std::optional<Bytes> StoreServer::Impl::get(const std::string& key) const {
  std::lock_guard<std::mutex> lock(store_mutex_);
  auto found = store_.find(key);
  if (found == store_.end()) return std::nullopt;
  return found->second;
}

ServerStats StoreServer::Impl::stats() const {
  return ServerStats{accepted_.load(), refused_.load(), rejected_.load(), evicted_.load()};
}

void StoreServer::Impl::signal_wake() {
  uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the loop will wake anyway.
  if (::write(wake_.get(), &one, sizeof one) < 0 && errno != EAGAIN) {
    fail(Status::bootstrap, "waking the store thread at ", address_, " failed: ", errno_string(errno));
  }
}

void StoreServer::Impl::drain_wake() {
  uint64_t count = 0;
  if (::read(wake_.get(), &count, sizeof count) < 0 && errno != EAGAIN) {
    fail(Status::bootstrap, "reading the store's wake-up eventfd failed: ", errno_string(errno));
  }
  std::vector<std::string> keys;
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    keys.swap(externally_set_);
  }
  for (const auto& key : keys) wake_waiters(key);
}

void StoreServer::Impl::run() {
  try {
    while (!stopping_) serve_once();
  } catch (const std::exception& e) {
    // Clients see their connections close and fail with the store's address.
    log::error("bootstrap store at ", address_, " stopped: ", e.what());
  }
  connections_.clear();
}

void StoreServer::Impl::serve_once() {
  const auto now = Clock::now();
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  fds.push_back({wake_.get(), POLLIN, 0});
  fds.push_back({now >= accept_paused_until_ ? listener_.get() : -1, POLLIN, 0});  // poll skips fd -1
  for (auto& [id, c] : connections_) {
    short events = c->unsent() < kBackpressureBytes ? POLLIN : 0;
    if (c->unsent() > 0) events |= POLLOUT;
    fds.push_back({c->fd.get(), events, 0});
    ids.push_back(id);
  }
  int ready = ::poll(fds.data(), fds.size(), next_timeout_ms(now));
  if (ready < 0 && errno == EINTR) return;
  if (ready < 0) fail(Status::bootstrap, "poll() in the store at ", address_, " failed: ", errno_string(errno));
  if (fds[0].revents != 0) drain_wake();
  if (fds[1].revents != 0) accept_all();
  for (size_t i = 0; i < ids.size(); ++i) {
    Connection* c = find(ids[i]);
    if (c != nullptr && fds[i + 2].revents != 0) serve_connection(*c, fds[i + 2].revents);
  }
  enforce_deadlines(Clock::now());
  report_unlogged_refusals(Clock::now());
  sweep();
}

int StoreServer::Impl::next_timeout_ms(Clock::time_point now) const {
  Clock::time_point next = now + stall_timeout_;  // periodic check even when idle
  if (now < accept_paused_until_) next = std::min(next, accept_paused_until_);
  if (refusal_log_.unlogged != 0) next = std::min(next, refusal_log_.logged_at + kRefusalLogInterval);
  for (const auto& [id, c] : connections_) {
    if (c->closing) {
      next = std::min(next, c->close_by);
    } else if (!c->authenticated) {
      next = std::min(next, c->accepted_at + stall_timeout_);
    } else if (c->decoder.mid_frame()) {
      next = std::min(next, c->frame_started + stall_timeout_);
    }
  }
  return net::poll_timeout_ms(next);
}

void StoreServer::Impl::accept_all() {
  for (;;) {
    if (!admit_one_more(Clock::now())) return;
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    int fd = ::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&address), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: leave the backlog queued and retry shortly instead of spinning.
        log::warn("bootstrap store at ", address_, " cannot accept connections: ", errno_string(errno));
        accept_paused_until_ = Clock::now() + kAcceptPause;
        return;
      }
      fail(Status::bootstrap, "accept() on the store at ", address_, " failed: ", errno_string(errno));
    }
    auto c = std::make_unique<Connection>();
    c->id = next_connection_id_++;
    c->fd = net::Fd(fd);
    c->peer = peer_name(address);
    c->accepted_at = c->last_input = Clock::now();
    int one = 1;
    if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
      log::debug("TCP_NODELAY for store client ", c->peer, " failed: ", errno_string(errno));
    }
    ++accepted_;
    ++unauthenticated_;
    connections_.emplace(c->id, std::move(c));
  }
}

// At most kMaxUnauthenticated connections wait to present the secret: beyond
// that the oldest is closed if it has had its chance (kMaxHelloGrace), else
// accepting pauses (the backlog stays queued).
bool StoreServer::Impl::admit_one_more(Clock::time_point now) {
  if (unauthenticated_ < kMaxUnauthenticated) return true;
  Connection* oldest = nullptr;
  for (auto& [id, c] : connections_) {
    if (!c->authenticated && !c->closing && !c->dead) {
      oldest = c.get();
      break;  // ids grow with acceptance: the first is the oldest
    }
  }
  const auto grace = std::min<Clock::duration>(stall_timeout_ / 2, kMaxHelloGrace);
  const bool evict = oldest != nullptr && now - oldest->accepted_at >= grace;
  if (evict) {
    ++evicted_;
    ++crowd_evictions_;
    close_with_error(*oldest, concat("closed to admit newer connections: ", kMaxUnauthenticated,
                                     " connections were waiting to present the job secret"));
  } else {
    accept_paused_until_ = now + kAcceptPause;
  }
  if (now - crowd_logged_at_ >= kCrowdLogInterval) {
    crowd_logged_at_ = now;
    log::warn("bootstrap store at ", address_, ": ", kMaxUnauthenticated,
              " connections have not presented the job secret; ", crowd_evictions_,
              " closed to admit newer ones (is something other than this job's ranks connecting?)");
    crowd_evictions_ = 0;
  }
  return evict;
}

void StoreServer::Impl::serve_connection(Connection& c, short revents) {
  if (revents & POLLOUT) flush(c);
  if (!c.dead && (revents & (POLLIN | POLLHUP | POLLERR))) read_from(c);
  if (!c.dead && (revents & POLLNVAL)) c.dead = true;
}

void StoreServer::Impl::read_from(Connection& c) {
  for (int round = 0; round < kReadsPerWakeup && !c.dead; ++round) {
    ssize_t got = ::recv(c.fd.get(), read_buffer_.data(), read_buffer_.size(), 0);
    if (got > 0) {
      c.last_input = Clock::now();
      if (c.closing) continue;  // draining what a rejected client still sends
      const bool was_mid_frame = c.decoder.mid_frame();
      c.decoder.feed({read_buffer_.data(), static_cast<size_t>(got)});
      if (!c.authenticated) {
        if (std::string problem = check_unauthenticated(c); !problem.empty()) return refuse(c, problem);
      }
      const bool completed_frames = process_frames(c);
      // The stall timeout bounds a whole frame, not the gap between bytes.
      if (c.decoder.mid_frame() && (!was_mid_frame || completed_frames)) c.frame_started = c.last_input;
      if (c.unsent() >= kBackpressureBytes) return;
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got == 0 && c.decoder.mid_frame() && !c.closing) {
      ++rejected_;
      log::debug("store client ", c.peer, " closed the connection mid-frame after ", c.decoder.progress());
    }
    c.dead = true;  // orderly close, or a reset that leaves nothing to answer
  }
}

void StoreServer::Impl::flush(Connection& c) {
  while (c.unsent() > 0) {
    ssize_t sent = ::send(c.fd.get(), c.out.data() + c.out_sent, c.unsent(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (sent < 0) {
      log::debug("store client ", c.peer, " went away: ", errno_string(errno));
      c.dead = true;
      return;
    }
    c.out_sent += static_cast<size_t>(sent);
  }
  c.out.clear();
  c.out_sent = 0;
  if (c.closing && !c.write_shut) {
    // Half-close after the ERROR so the client reads it, then sees EOF.
    ::shutdown(c.fd.get(), SHUT_WR);
    c.write_shut = true;
  }
}

void StoreServer::Impl::enforce_deadlines(Clock::time_point now) {
  for (auto& [id, c] : connections_) {
    if (c->dead) continue;
    if (c->closing) {
      if (now >= c->close_by) c->dead = true;
    } else if (!c->authenticated && now - c->accepted_at >= stall_timeout_) {
      // The whole HELLO, however it trickles in, is due within the stall timeout.
      if (c->decoder.mid_frame()) {
        reject(*c, concat("connection stalled mid-frame: received ", c->decoder.progress(), " and no complete HELLO within ",
                          milliseconds(stall_timeout_), " ms of connecting"));
      } else {
        log::debug("store client ", c->peer, " sent no HELLO within ", milliseconds(stall_timeout_), " ms");
        close_with_error(*c, concat("no HELLO within ", milliseconds(stall_timeout_), " ms of connecting"));
      }
    } else if (c->decoder.mid_frame() && c->unsent() < kBackpressureBytes && now - c->frame_started >= stall_timeout_) {
      auto since = std::chrono::duration_cast<std::chrono::milliseconds>(now - c->frame_started);
      reject(*c, concat("connection stalled mid-frame: received ", c->decoder.progress(), " in the ", milliseconds(since),
                        " ms since the frame's first byte (a frame must complete within the stall timeout, ",
                        milliseconds(stall_timeout_), " ms)"));
    }
  }
}

void StoreServer::Impl::sweep() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    Connection& c = *it->second;
    if (!c.dead) {
      ++it;
      continue;
    }
    if (!c.authenticated && !c.closing) --unauthenticated_;
    if (c.authenticated) clients_.fetch_sub(1);
    for (const auto& key : c.parked_keys) {
      auto parked = parked_.find(key);
      if (parked == parked_.end()) continue;
      std::erase_if(parked->second, [&](const Waiter& w) { return w.connection == c.id; });
      if (parked->second.empty()) parked_.erase(parked);
    }
    it = connections_.erase(it);
  }
}

StoreServer::Impl::Connection* StoreServer::Impl::find(uint64_t id) {
  auto it = connections_.find(id);
  return it == connections_.end() || it->second->dead ? nullptr : it->second.get();
}

// --- StoreServer ---------------------------------------------------------------

StoreServer::StoreServer(const std::string& bind_address, uint16_t port, std::string secret,
                         std::chrono::milliseconds stall_timeout)
    : impl_(std::make_unique<Impl>(bind_address, port, std::move(secret), stall_timeout)) {}
StoreServer::~StoreServer() = default;
uint16_t StoreServer::port() const { return impl_->port(); }
void StoreServer::set(const std::string& key, const Bytes& value) { impl_->set(key, value); }
std::optional<Bytes> StoreServer::get(const std::string& key) const { return impl_->get(key); }
int64_t StoreServer::add(const std::string& key, int64_t delta) { return impl_->add(key, delta); }
size_t StoreServer::clients() const { return impl_->clients(); }
ServerStats StoreServer::stats() const { return impl_->stats(); }

}  // namespace chorus::bootstrap
