// The store server: one thread, poll() over the listening socket, a wake-up
// eventfd and every client; non-blocking sockets with per-connection buffers,
// so one slow or hostile client never holds up the others.
#include "bootstrap/frame.hpp"
#include "bootstrap/secret.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"
#include "common/log.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <map>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <optional>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>

namespace chorus::bootstrap {

using frame::Frame;
using frame::Type;
using net::Clock;

namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr int kReadsPerWakeup = 16;                       // fairness: at most 1 MiB per client per round
constexpr size_t kBackpressureBytes = 8 << 20;            // stop reading a client that does not read its replies
constexpr auto kMaxCloseGrace = std::chrono::seconds(1);  // time to flush an ERROR before closing
constexpr auto kAcceptPause = std::chrono::milliseconds(100);
constexpr size_t kMaxErrorMessage = 1024;
// Before a connection has presented the job secret it may hold no more than a
// HELLO (a secret of up to 4 KiB), and only so many may be pending at once:
// strangers cannot make the store hold memory (docs/bootstrap.md).
constexpr size_t kMaxHelloPayload = 4096;
constexpr size_t kMaxUnauthenticated = 256;
// A connection this old without HELLO may be closed to admit a new one; a
// real rank sends HELLO right after connecting.
constexpr auto kMaxHelloGrace = std::chrono::seconds(1);
constexpr auto kCrowdLogInterval = std::chrono::seconds(5);

std::string peer_name(const sockaddr_storage& address) {
  char host[NI_MAXHOST] = "?";
  char service[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&address), sizeof address, host, sizeof host, service, sizeof service,
              NI_NUMERICHOST | NI_NUMERICSERV);
  return concat(host, ":", service);
}

std::optional<int64_t> parse_counter(const Bytes& value) {
  int64_t number = 0;
  const char* begin = reinterpret_cast<const char*>(value.data());
  auto [end, ec] = std::from_chars(begin, begin + value.size(), number);
  if (ec != std::errc() || end != begin + value.size() || value.empty()) return std::nullopt;
  return number;
}

Bytes counter_bytes(int64_t number) {
  std::string text = std::to_string(number);
  return Bytes(text.begin(), text.end());
}

long long milliseconds(std::chrono::milliseconds duration) { return static_cast<long long>(duration.count()); }

}  // namespace

class StoreServer::Impl {
 public:
  Impl(const std::string& bind_address, uint16_t port, std::string secret, std::chrono::milliseconds stall_timeout);
  ~Impl();

  uint16_t port() const { return port_; }
  void set(const std::string& key, const Bytes& value);
  std::optional<Bytes> get(const std::string& key) const;
  ServerStats stats() const;

 private:
  struct Waiter {
    uint64_t connection;
    uint32_t request_id;
  };
  struct Connection {
    uint64_t id = 0;
    net::Fd fd;
    std::string peer;
    frame::Decoder decoder;
    Bytes out;
    size_t out_sent = 0;
    bool authenticated = false;
    bool closing = false;    // a fatal ERROR is queued: flush it, drain input, close
    bool write_shut = false; // closing and flushed: SHUT_WR sent
    bool dead = false;       // swept at the end of the round
    Clock::time_point accepted_at;
    Clock::time_point last_input;
    Clock::time_point frame_started;  // first byte of the unfinished frame
    Clock::time_point close_by;
    std::vector<std::string> parked_keys;

    size_t unsent() const { return out.size() - out_sent; }
  };

  void run();
  void serve_once();
  int next_timeout_ms(Clock::time_point now) const;
  void drain_wake();
  void signal_wake();
  void accept_all();
  void serve_connection(Connection& c, short revents);
  void read_from(Connection& c);
  void flush(Connection& c);
  bool process_frames(Connection& c);  // true if a frame was completed
  void handle(Connection& c, const Frame& request);
  void authenticate(Connection& c, const Frame& request);
  void handle_request(Connection& c, const Frame& request);
  void handle_get(Connection& c, const Frame& request);
  void handle_add(Connection& c, const Frame& request);
  void wake_waiters(const std::string& key);
  void reply(Connection& c, const Frame& response);
  void refuse(Connection& c, const std::string& why);
  void reject(Connection& c, const std::string& why);
  void close_with_error(Connection& c, const std::string& why);
  void enforce_deadlines(Clock::time_point now);
  bool admit_one_more(Clock::time_point now);
  std::string check_unauthenticated(const Connection& c) const;
  void sweep();
  Connection* find(uint64_t id);

  const std::string secret_;
  const std::chrono::milliseconds stall_timeout_;
  const std::chrono::milliseconds close_grace_;
  net::Fd listener_;
  net::Fd wake_;
  uint16_t port_ = 0;
  std::string address_;

  // Shared with set() from the owning process; everything else below belongs
  // to the server thread alone.
  mutable std::mutex store_mutex_;
  std::unordered_map<std::string, Bytes> store_;
  std::vector<std::string> externally_set_;

  std::map<uint64_t, std::unique_ptr<Connection>> connections_;
  std::unordered_map<std::string, std::vector<Waiter>> parked_;
  uint64_t next_connection_id_ = 1;
  Clock::time_point accept_paused_until_{};
  size_t unauthenticated_ = 0;        // open connections that have not presented the secret
  uint64_t crowd_evictions_ = 0;      // closed to admit newer ones, since the last log line
  Clock::time_point crowd_logged_at_{};
  Bytes read_buffer_ = Bytes(kReadChunk);

  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> evicted_{0};
  std::thread thread_;
};

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
  sweep();
}

int StoreServer::Impl::next_timeout_ms(Clock::time_point now) const {
  Clock::time_point next = now + stall_timeout_;  // periodic check even when idle
  if (now < accept_paused_until_) next = std::min(next, accept_paused_until_);
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

bool StoreServer::Impl::process_frames(Connection& c) {
  bool completed = false;
  while (!c.closing && !c.dead) {
    frame::Decoded decoded = c.decoder.next();
    if (decoded.status == frame::DecodeStatus::need_more) return completed;
    if (decoded.status == frame::DecodeStatus::error) {
      reject(c, decoded.error);
      return completed;
    }
    completed = true;
    handle(c, decoded.frame);
  }
  return completed;
}

// What a connection that has not presented the secret may not do: announce
// anything but a HELLO, or a HELLO larger than a secret needs. Checked as
// soon as the header is in, before its payload is held.
std::string StoreServer::Impl::check_unauthenticated(const Connection& c) const {
  const std::optional<frame::Header> header = c.decoder.pending_header();
  if (!header || !frame::check_header(*header).empty()) return {};  // the decoder names a malformed header
  if (header->type != static_cast<uint8_t>(Type::hello)) {
    return concat("expected HELLO with the job secret as the first frame, got ", frame::type_name(header->type));
  }
  if (header->payload_bytes > kMaxHelloPayload) {
    return concat("HELLO payload of ", header->payload_bytes, " bytes exceeds the ", kMaxHelloPayload,
                  "-byte limit for a connection that has not presented the job secret");
  }
  return {};
}

void StoreServer::Impl::handle(Connection& c, const Frame& request) {
  if (!c.authenticated) return authenticate(c, request);
  if (request.type == Type::hello) return reject(c, "duplicate HELLO on an authenticated connection");
  if (!frame::is_request(request.type)) {
    return reject(c, concat("unexpected ", frame::type_name(request.type), " frame: clients send requests only"));
  }
  handle_request(c, request);
}

void StoreServer::Impl::authenticate(Connection& c, const Frame& request) {
  if (request.type != Type::hello) {
    return refuse(c, concat("expected HELLO with the job secret as the first frame, got ",
                            frame::type_name(request.type)));
  }
  if (!secrets_match(request.blob, secret_)) return refuse(c, "wrong job secret");
  c.authenticated = true;
  --unauthenticated_;
  reply(c, Frame::ok(request.request_id));
}

void StoreServer::Impl::handle_request(Connection& c, const Frame& request) {
  switch (request.type) {
    case Type::set: {
      {
        std::lock_guard<std::mutex> lock(store_mutex_);
        store_[request.key] = request.blob;
      }
      reply(c, Frame::ok(request.request_id));
      wake_waiters(request.key);
      return;
    }
    case Type::get: return handle_get(c, request);
    case Type::add: return handle_add(c, request);
    case Type::check: {
      bool exists = false;
      {
        std::lock_guard<std::mutex> lock(store_mutex_);
        exists = store_.contains(request.key);
      }
      return reply(c, Frame::exists_reply(request.request_id, exists));
    }
    default: return reject(c, concat("unexpected ", frame::type_name(request.type), " frame"));
  }
}

void StoreServer::Impl::handle_get(Connection& c, const Frame& request) {
  std::optional<Bytes> value;
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    if (auto found = store_.find(request.key); found != store_.end()) value = found->second;
  }
  if (value) return reply(c, Frame::value(request.request_id, *value));
  if (!request.wait) {
    // Not a protocol error: answer and keep the connection.
    return reply(c, Frame::error(request.request_id, concat("key \"", request.key, "\" is not set")));
  }
  // Parked until a SET or ADD of this key (wake_waiters), never polled.
  parked_[request.key].push_back(Waiter{c.id, request.request_id});
  c.parked_keys.push_back(request.key);
}

void StoreServer::Impl::handle_add(Connection& c, const Frame& request) {
  std::string problem;
  int64_t total = 0;
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    auto stored = store_.find(request.key);
    std::optional<int64_t> current = stored == store_.end() ? std::optional<int64_t>(0) : parse_counter(stored->second);
    if (!current) {
      problem = concat("ADD to key \"", request.key, "\" whose value (", stored->second.size(),
                       " bytes) is not a decimal integer");
    } else if (__builtin_add_overflow(*current, request.number, &total)) {
      problem = concat("ADD of ", request.number, " to key \"", request.key, "\" (", *current,
                       ") overflows a 64-bit integer");
    } else {
      store_[request.key] = counter_bytes(total);
    }
  }
  if (!problem.empty()) return reply(c, Frame::error(request.request_id, problem));
  reply(c, Frame::counter(request.request_id, total));
  wake_waiters(request.key);
}

void StoreServer::Impl::wake_waiters(const std::string& key) {
  auto parked = parked_.find(key);
  if (parked == parked_.end()) return;
  std::vector<Waiter> waiters = std::move(parked->second);
  parked_.erase(parked);
  Bytes value;
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    value = store_.at(key);
  }
  for (const Waiter& waiter : waiters) {
    Connection* c = find(waiter.connection);
    if (c == nullptr || c->closing) continue;
    if (auto it = std::find(c->parked_keys.begin(), c->parked_keys.end(), key); it != c->parked_keys.end()) {
      c->parked_keys.erase(it);
    }
    reply(*c, Frame::value(waiter.request_id, value));
  }
}

void StoreServer::Impl::reply(Connection& c, const Frame& response) {
  frame::encode_into(c.out, response);
  flush(c);
}

void StoreServer::Impl::refuse(Connection& c, const std::string& why) {
  ++refused_;
  log::warn("bootstrap store at ", address_, " refused a connection from ", c.peer, ": ", why);
  close_with_error(c, why);
}

void StoreServer::Impl::reject(Connection& c, const std::string& why) {
  ++rejected_;
  log::warn("bootstrap store at ", address_, " closed the connection from ", c.peer, ": ", why);
  close_with_error(c, why);
}

void StoreServer::Impl::close_with_error(Connection& c, const std::string& why) {
  // Clients match replies by request id; 0 marks an error about the connection itself.
  reply(c, Frame::error(0, why.substr(0, kMaxErrorMessage)));
  if (!c.closing && !c.authenticated) --unauthenticated_;
  c.closing = true;
  c.decoder = frame::Decoder();  // what it held is never read
  c.close_by = Clock::now() + close_grace_;
  if (!c.dead && c.unsent() == 0) flush(c);  // nothing left to send: half-close now
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
ServerStats StoreServer::stats() const { return impl_->stats(); }

}  // namespace chorus::bootstrap
