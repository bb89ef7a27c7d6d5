// Small POSIX socket helpers shared by the store server, the store client and
// job detection. Every system call is checked; failures throw
// Error(Status::bootstrap) naming the address and the system message.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace chorus::bootstrap::net {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;
  uint16_t port = 0;
};

// "host:port" or "[ipv6]:port" with a non-empty host (no brackets in it) and
// a decimal port in 1..65535; nullopt for anything else. What it accepts,
// format_address() turns back into text it accepts (the fuzzer checks).
std::optional<HostPort> parse_host_port(std::string_view text);
// "host:port", bracketing IPv6 literals.
std::string format_address(const std::string& host, uint16_t port);

// A listening, non-blocking socket with SO_REUSEADDR bound to host:port
// (port 0 picks a free port).
Fd listen_on(const std::string& host, uint16_t port);
// The port a bound socket got.
uint16_t local_port(int fd);

// One connection attempt that ends by `deadline`. Returns a connected,
// non-blocking socket with TCP_NODELAY, or an empty Fd with `why` set when the
// attempt failed in a way worth retrying (refused, unreachable, name not
// resolvable yet).
Fd try_connect(const std::string& host, uint16_t port, Clock::time_point deadline, std::string& why);

void set_nonblocking(int fd);

// Milliseconds until `deadline` for poll(), rounded up, never negative.
int poll_timeout_ms(Clock::time_point deadline);

}  // namespace chorus::bootstrap::net
