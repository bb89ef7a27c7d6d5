// Helpers for the bootstrap tests: raw loopback sockets that speak (or
// mangle) the store protocol byte by byte, environment scoping, timing.
#pragma once

#include "bootstrap/frame.hpp"
#include "bootstrap/socket.hpp"
#include "common/error.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstdlib>
#include <map>
#include <netinet/in.h>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace chorus::bootstrap::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline milliseconds elapsed_since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

inline frame::Bytes bytes_of(const std::string& text) { return frame::Bytes(text.begin(), text.end()); }
inline std::string text_of(const frame::Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

// A loopback port nobody listens on right now (bound, then released).
inline uint16_t unused_port() {
  net::Fd fd = net::listen_on("127.0.0.1", 0);
  return net::local_port(fd.get());
}

// A client that writes whatever bytes a test wants and reads raw replies.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) {
    std::string why;
    fd_ = net::try_connect("127.0.0.1", port, Clock::now() + milliseconds(2000), why);
    if (!fd_) throw Error(Status::bootstrap, "raw test connection failed: " + why);
  }

  void send(const frame::Bytes& bytes) {
    size_t sent = 0;
    const auto deadline = Clock::now() + milliseconds(2000);
    while (sent < bytes.size()) {
      ssize_t n = ::send(fd_.get(), bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EINTR) throw Error(Status::bootstrap, "raw send failed");
      pollfd entry{fd_.get(), POLLOUT, 0};
      if (::poll(&entry, 1, net::poll_timeout_ms(deadline)) == 0) throw Error(Status::timeout, "raw send timed out");
    }
  }
  void send(const frame::Frame& f) { send(frame::encode(f)); }

  // The next whole frame, or nullopt if the connection ended or `timeout` passed.
  std::optional<frame::Frame> read_frame(milliseconds timeout = milliseconds(3000)) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      auto decoded = decoder_.next();
      if (decoded.status == frame::DecodeStatus::frame) return decoded.frame;
      if (decoded.status == frame::DecodeStatus::error) {
        ADD_FAILURE() << "server sent a malformed frame: " << decoded.error;
        return std::nullopt;
      }
      if (receive(deadline) <= 0) return std::nullopt;
    }
  }

  // True if the server closes the connection (EOF or reset) before `timeout`.
  bool closed_by_server(milliseconds timeout = milliseconds(3000)) {
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      ssize_t n = receive(deadline);
      if (n == 0 || (n < 0 && errno != ETIMEDOUT)) return true;
      if (n < 0) return false;
    }
  }

  // Sends HELLO and expects OK.
  void authenticate(const std::string& secret) {
    send(frame::Frame::hello(1, secret));
    auto reply = read_frame();
    ASSERT_TRUE(reply.has_value());
    ASSERT_EQ(reply->type, frame::Type::ok);
  }

 private:
  // Bytes received (fed to the decoder), 0 on EOF, -1 with errno on error/timeout.
  ssize_t receive(Clock::time_point deadline) {
    uint8_t buffer[4096];
    for (;;) {
      ssize_t n = ::recv(fd_.get(), buffer, sizeof buffer, 0);
      if (n > 0) decoder_.feed({buffer, static_cast<size_t>(n)});
      if (n >= 0) return n;
      if (errno != EAGAIN && errno != EINTR) return -1;
      pollfd entry{fd_.get(), POLLIN, 0};
      if (::poll(&entry, 1, net::poll_timeout_ms(deadline)) == 0) {
        errno = ETIMEDOUT;
        return -1;
      }
    }
  }

  net::Fd fd_;
  frame::Decoder decoder_;
};

// Every launcher variable detect_job() reads; cleared around each job test so
// the environment the tests run in cannot leak in.
inline const std::vector<const char*>& launcher_variables() {
  static const std::vector<const char*> names = {
      "CHORUS_RANK", "CHORUS_SIZE", "CHORUS_LOCAL_RANK", "CHORUS_LOCAL_SIZE", "CHORUS_STORE_ADDR",
      "CHORUS_JOB_SECRET", "CHORUS_JOB_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
      "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE",
      "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_TASKS_PER_NODE",
      "SLURM_TASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
      "MPI_LOCALNRANKS", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
      "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE"};
  return names;
}

// Clears the launcher variables, sets the given ones, restores all on exit.
class ScopedJobEnv {
 public:
  explicit ScopedJobEnv(const std::map<std::string, std::string>& values = {}) {
    for (const char* name : launcher_variables()) {
      if (const char* old = std::getenv(name)) saved_[name] = old;
      ::unsetenv(name);
    }
    for (const auto& [name, value] : values) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedJobEnv() {
    for (const char* name : launcher_variables()) ::unsetenv(name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }
  ScopedJobEnv(const ScopedJobEnv&) = delete;
  ScopedJobEnv& operator=(const ScopedJobEnv&) = delete;

 private:
  std::map<std::string, std::string> saved_;
};

}  // namespace chorus::bootstrap::testing
