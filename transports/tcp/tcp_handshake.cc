// connect_all (tcp_connect.hpp): every dial and every accepted connection of
// setup driven by one poll() loop, so no rank waits for another's order.
#include "bootstrap/secret.hpp"
#include "common/error.hpp"
#include "common/log.hpp"
#include "transports/tcp/tcp_connect.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace chorus::transport::tcp {

namespace {

constexpr uint64_t kHandshakeMagic = 0x3148435453524843ull;  // "CHRSTCH1"

struct Hello {
  uint64_t magic;
  uint8_t listener_token[16];  // proves the dialer read the job's store
  uint32_t rank;
  uint32_t stream;
  uint32_t size;
  uint32_t streams;
};

struct Ack {
  uint64_t magic;
  uint8_t dialer_token[16];  // proves the listener read it too
};

using Clock = std::chrono::steady_clock;

// One connection during setup.
struct Pending {
  enum class Step { connecting, awaiting_ack, awaiting_hello };
  Pending(Step first, Fd socket) : step(first), fd(std::move(socket)) {}
  Step step;
  Fd fd;
  int peer = -1;  // dials: the listener's rank; accepts: unknown until the hello
  uint32_t stream = 0;
  std::string from;  // accepted: who connected, for the log
  uint8_t in[sizeof(Hello)] = {};
  size_t received = 0;
  Clock::time_point retry_at{};  // connecting: when a failed dial is tried again
  Clock::time_point refused_since{};  // connecting: refused on every try since then
};

bool tokens_equal(const uint8_t* presented, const Token& expected) {
  return bootstrap::secrets_match(std::span<const uint8_t>(presented, expected.size()),
                                  std::string_view(reinterpret_cast<const char*>(expected.data()), expected.size()));
}

bool send_all_now(int fd, const void* data, size_t bytes) {
  // A fresh socket's buffer takes a few dozen bytes at once.
  return send(fd, data, bytes, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(bytes);
}

class Handshake {
 public:
  Handshake(Fd& listener, const Token& own_token, const std::vector<PeerAddress>& peers, const ConnectOptions& options)
      : listener_(listener), own_token_(own_token), peers_(peers), options_(options),
        result_(static_cast<size_t>(options.size)) {
    for (auto& streams : result_) streams.resize(options.streams);
  }

  std::vector<std::vector<Fd>> run() {
    const Clock::time_point deadline = Clock::now() + options_.timeout;
    for (int peer = 0; peer < options_.rank; ++peer) {
      for (uint32_t stream = 0; stream < options_.streams; ++stream) dial(peer, stream);
    }
    while (missing() != 0) {
      if (Clock::now() >= deadline) fail_missing();
      step(deadline);
    }
    return std::move(result_);
  }

 private:
  void dial(int peer, uint32_t stream) {
    Pending pending(Pending::Step::connecting, Fd());
    pending.peer = peer;
    pending.stream = stream;
    start_dial(pending);
    pending_.push_back(std::move(pending));
  }

  void start_dial(Pending& pending) {
    const SocketAddress& to = peers_[static_cast<size_t>(pending.peer)].address;
    pending.fd = Fd(socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!pending.fd) {
      fail_peer(Status::transport, pending.peer, "tcp: socket() to rank ", pending.peer, " failed: ", errno_string(errno));
    }
    pending.retry_at = {};
    if (::connect(pending.fd.get(), reinterpret_cast<const sockaddr*>(&to.storage), to.length) != 0 &&
        errno != EINPROGRESS) {
      dial_failed(pending, errno);
    }
  }

  // Retried every 50 ms until the timeout, except a refusal that lasts: a
  // rank's listener is open from before its address was published until
  // every peer has connected, so refusals for a second mean it is gone.
  void dial_failed(Pending& pending, int err) {
    const Clock::time_point now = Clock::now();
    log::debug("tcp: connecting to rank ", pending.peer, ": ", errno_string(err), "; retrying");
    pending.retry_at = now + std::chrono::milliseconds(50);
    if (err != ECONNREFUSED) {
      pending.refused_since = {};
      return;
    }
    if (pending.refused_since == Clock::time_point{}) pending.refused_since = now;
    if (now - pending.refused_since >= std::chrono::seconds(1)) {
      fail_peer(Status::peer_failed, pending.peer, "tcp: rank ", pending.peer, " at ",
                peers_[static_cast<size_t>(pending.peer)].address.to_string(),
                " refused every connection for a second: it no longer listens, so it ended during setup "
                "(or that is not its address)");
    }
  }

  size_t missing() const {
    size_t count = 0;
    for (int peer = 0; peer < options_.size; ++peer) {
      if (peer == options_.rank) continue;
      for (const Fd& fd : result_[static_cast<size_t>(peer)]) count += fd ? 0 : 1;
    }
    return count;
  }

  [[noreturn]] void fail_missing() const {
    std::string ranks;
    int first = -1;
    for (int peer = 0; peer < options_.size; ++peer) {
      if (peer == options_.rank) continue;
      const auto& streams = result_[static_cast<size_t>(peer)];
      if (std::all_of(streams.begin(), streams.end(), [](const Fd& fd) { return static_cast<bool>(fd); })) continue;
      if (first < 0) first = peer;
      ranks += concat(ranks.empty() ? "" : ", ", peer, " (", peers_[static_cast<size_t>(peer)].address.to_string(), ")");
    }
    fail_peer(Status::timeout, first, "tcp: rank ", options_.rank, " could not connect to rank ", ranks, " within ",
              options_.timeout.count(), " ms (CHORUS_TIMEOUT); check that the ranks reach each other on the "
              "chosen interface (CHORUS_TCP_IFACE) and that no firewall drops the connections");
  }

  void step(Clock::time_point deadline) {
    std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
    const Clock::time_point now = Clock::now();
    Clock::time_point wake = deadline;
    for (Pending& pending : pending_) {
      if (pending.step == Pending::Step::connecting && pending.retry_at != Clock::time_point{}) {
        if (now >= pending.retry_at) start_dial(pending);
        if (pending.retry_at != Clock::time_point{}) wake = std::min(wake, pending.retry_at);
      }
      const short events = pending.step == Pending::Step::connecting ? POLLOUT : POLLIN;
      fds.push_back({pending.fd.get(), events, 0});
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(wait, 0, 1000)));
    if (ready < 0 && errno != EINTR) fail(Status::transport, "tcp: poll during setup failed: ", errno_string(errno));
    if (ready <= 0) return;
    const size_t before = pending_.size();
    for (size_t i = 0; i < before; ++i) {
      if (fds[i + 1].revents != 0) advance(pending_[i], fds[i + 1].revents);
    }
    if (fds[0].revents != 0) accept_all();
    std::erase_if(pending_, [](const Pending& pending) { return !pending.fd; });
  }

  void accept_all() {
    for (;;) {
      sockaddr_storage from{};
      socklen_t length = sizeof from;
      Fd fd(accept4(listener_.get(), reinterpret_cast<sockaddr*>(&from), &length, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EINTR) return;
        fail(Status::transport, "tcp: accept on the listener failed: ", errno_string(errno));
      }
      SocketAddress who;
      std::memcpy(&who.storage, &from, length);
      who.length = length;
      Pending pending(Pending::Step::awaiting_hello, std::move(fd));
      pending.from = who.to_string();
      pending_.push_back(std::move(pending));
    }
  }

  void advance(Pending& pending, short revents) {
    if (pending.step == Pending::Step::connecting) {
      if (pending.retry_at != Clock::time_point{}) return;
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt(pending.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0 || (revents & (POLLERR | POLLHUP)) != 0) return dial_failed(pending, error != 0 ? error : EIO);
      Hello hello{kHandshakeMagic, {}, static_cast<uint32_t>(options_.rank), pending.stream,
                  static_cast<uint32_t>(options_.size), options_.streams};
      std::memcpy(hello.listener_token, peers_[static_cast<size_t>(pending.peer)].token.data(), 16);
      if (!send_all_now(pending.fd.get(), &hello, sizeof hello)) {
        pending.retry_at = Clock::now() + std::chrono::milliseconds(50);
        return;
      }
      pending.step = Pending::Step::awaiting_ack;
      return;
    }
    const size_t want = pending.step == Pending::Step::awaiting_ack ? sizeof(Ack) : sizeof(Hello);
    const ssize_t got = recv(pending.fd.get(), pending.in + pending.received, want - pending.received, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (got <= 0) {
      if (pending.step == Pending::Step::awaiting_ack) {
        // The listener closed on us: our hello was refused, or it died.
        fail_peer(Status::transport, pending.peer, "tcp: rank ", pending.peer, " at ",
                  peers_[static_cast<size_t>(pending.peer)].address.to_string(),
                  " closed the connection during the handshake (", got == 0 ? "end of stream" : errno_string(errno),
                  "): it refused our hello or ended");
      }
      refuse(pending, "closed before a complete hello");
      return;
    }
    pending.received += static_cast<size_t>(got);
    if (pending.received < want) return;
    if (pending.step == Pending::Step::awaiting_ack) {
      finish_dial(pending);
    } else {
      finish_accept(pending);
    }
  }

  void finish_dial(Pending& pending) {
    Ack ack;
    std::memcpy(&ack, pending.in, sizeof ack);
    if (ack.magic != kHandshakeMagic || !tokens_equal(ack.dialer_token, own_token_)) {
      fail_peer(Status::transport, pending.peer, "tcp: the listener at ",
                peers_[static_cast<size_t>(pending.peer)].address.to_string(), " (rank ", pending.peer,
                ") answered with a wrong token: not this job's rank");
    }
    adopt(pending, pending.peer);
  }

  void finish_accept(Pending& pending) {
    Hello hello;
    std::memcpy(&hello, pending.in, sizeof hello);
    if (hello.magic != kHandshakeMagic) return refuse(pending, "it is not a chorus tcp hello");
    if (!tokens_equal(hello.listener_token, own_token_)) return refuse(pending, "it did not present this job's token");
    const int peer = static_cast<int>(hello.rank);
    if (hello.size != static_cast<uint32_t>(options_.size) || peer <= options_.rank || peer >= options_.size ||
        hello.stream >= options_.streams || hello.streams != options_.streams) {
      return refuse(pending, concat("its hello (rank ", hello.rank, " of ", hello.size, ", stream ", hello.stream,
                                    " of ", hello.streams, ") does not fit this job (", options_.size,
                                    " ranks, CHORUS_TCP_STREAMS=", options_.streams, " on rank ", options_.rank, ")"));
    }
    if (result_[static_cast<size_t>(peer)][hello.stream]) {
      return refuse(pending, concat("rank ", peer, " stream ", hello.stream, " is already connected"));
    }
    Ack ack{kHandshakeMagic, {}};
    std::memcpy(ack.dialer_token, peers_[static_cast<size_t>(peer)].token.data(), 16);
    if (!send_all_now(pending.fd.get(), &ack, sizeof ack)) {
      return refuse(pending, concat("the answer to rank ", peer, " could not be sent: ", errno_string(errno)));
    }
    pending.stream = hello.stream;
    adopt(pending, peer);
  }

  void refuse(Pending& pending, const std::string& why) {
    log::warn("tcp: refused a connection from ", pending.from, " to rank ", options_.rank, ": ", why);
    pending.fd.reset();
  }

  void adopt(Pending& pending, int peer) {
    tune_socket(pending.fd.get(), options_.socket_buffer, peer);
    result_[static_cast<size_t>(peer)][pending.stream] = std::move(pending.fd);
  }

  Fd& listener_;
  const Token& own_token_;
  const std::vector<PeerAddress>& peers_;
  const ConnectOptions& options_;
  std::vector<std::vector<Fd>> result_;
  std::vector<Pending> pending_;
};

}  // namespace

std::vector<std::vector<Fd>> connect_all(Fd& listener, const Token& own_token, const std::vector<PeerAddress>& peers,
                                         const ConnectOptions& options) {
  return Handshake(listener, own_token, peers, options).run();
}

}  // namespace chorus::transport::tcp
