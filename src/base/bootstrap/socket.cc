#include "bootstrap/socket.hpp"

#include "common/error.hpp"

#include <cerrno>
#include <charconv>
#include <climits>
#include <fcntl.h>
#include <memory>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace chorus::bootstrap::net {

namespace {

using AddrInfoList = std::unique_ptr<addrinfo, decltype(&freeaddrinfo)>;

// Resolves host:port for TCP; on failure returns null and sets `why`.
AddrInfoList resolve(const std::string& host, uint16_t port, bool passive, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* list = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
  if (rc != 0) {
    why = concat("cannot resolve \"", host, "\": ",
                 rc == EAI_SYSTEM ? errno_string(errno) : std::string(gai_strerror(rc)));
    return AddrInfoList(nullptr, freeaddrinfo);
  }
  return AddrInfoList(list, freeaddrinfo);
}

Fd make_socket(const addrinfo& address) {
  int fd = ::socket(address.ai_family, address.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, address.ai_protocol);
  if (fd < 0) fail(Status::bootstrap, "socket() for the bootstrap store failed: ", errno_string(errno));
  return Fd(fd);
}

void set_int_option(int fd, int level, int option, const char* name, int value) {
  if (::setsockopt(fd, level, option, &value, sizeof value) != 0) {
    fail(Status::bootstrap, "setsockopt(", name, ") on a bootstrap store socket failed: ", errno_string(errno));
  }
}

// Waits for a non-blocking connect() to finish; returns 0 or the errno it failed with.
int finish_connect(int fd, Clock::time_point deadline) {
  pollfd entry{fd, POLLOUT, 0};
  for (;;) {
    int ready = ::poll(&entry, 1, poll_timeout_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail(Status::bootstrap, "poll() while connecting to the bootstrap store failed: ", errno_string(errno));
    if (ready == 0) return ETIMEDOUT;
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
    return error;
  }
}

}  // namespace

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void Fd::reset() {
  // close() errors on a socket leave nothing to recover; the fd is gone either way.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::optional<HostPort> parse_host_port(std::string_view text) {
  std::string_view host;
  std::string_view port_text;
  if (text.starts_with('[')) {
    auto close = text.find("]:");
    if (close == std::string_view::npos) return std::nullopt;
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return std::nullopt;  // unbracketed IPv6
  }
  if (host.empty() || port_text.empty()) return std::nullopt;
  // Brackets only ever enclose the host; one inside it ("[[0]:1") is no
  // host, and format_address() could not give it back in parseable form.
  if (host.find_first_of("[]") != std::string_view::npos) return std::nullopt;
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535) {
    return std::nullopt;
  }
  return HostPort{std::string(host), static_cast<uint16_t>(port)};
}

std::string format_address(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return concat("[", host, "]:", port);
  return concat(host, ":", port);
}

Fd listen_on(const std::string& host, uint16_t port) {
  std::string why;
  auto list = resolve(host, port, true, why);
  if (!list) fail(Status::bootstrap, "cannot listen for the bootstrap store on ", format_address(host, port), ": ", why);
  Fd fd = make_socket(*list);
  set_int_option(fd.get(), SOL_SOCKET, SO_REUSEADDR, "SO_REUSEADDR", 1);
  if (::bind(fd.get(), list->ai_addr, list->ai_addrlen) != 0) {
    fail(Status::bootstrap, "cannot bind the bootstrap store to ", format_address(host, port), ": ",
         errno_string(errno));
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    fail(Status::bootstrap, "listen() on ", format_address(host, port), " failed: ", errno_string(errno));
  }
  return fd;
}

uint16_t local_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    fail(Status::bootstrap, "getsockname() on the bootstrap store socket failed: ", errno_string(errno));
  }
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

Fd try_connect(const std::string& host, uint16_t port, Clock::time_point deadline, std::string& why) {
  auto list = resolve(host, port, false, why);
  if (!list) return Fd();
  for (const addrinfo* address = list.get(); address != nullptr; address = address->ai_next) {
    Fd fd = make_socket(*address);
    int error = 0;
    if (::connect(fd.get(), address->ai_addr, address->ai_addrlen) != 0) {
      error = errno == EINPROGRESS ? finish_connect(fd.get(), deadline) : errno;
    }
    if (error == 0) {
      set_int_option(fd.get(), IPPROTO_TCP, TCP_NODELAY, "TCP_NODELAY", 1);
      return fd;
    }
    why = concat("connect() failed: ", errno_string(error));
  }
  return Fd();
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    fail(Status::bootstrap, "fcntl(O_NONBLOCK) on a bootstrap store socket failed: ", errno_string(errno));
  }
}

int poll_timeout_ms(Clock::time_point deadline) {
  auto now = Clock::now();
  if (deadline <= now) return 0;
  auto remaining = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
  return remaining > INT_MAX ? INT_MAX : static_cast<int>(remaining);
}

}  // namespace chorus::bootstrap::net
