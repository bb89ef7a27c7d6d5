// The store server's state (StoreServer::Impl), shared by its connection
// handling (store_server.cc) and its frame handling (store_server_frames.cc),
// and the limits that keep one slow or hostile client from holding up the others.
#pragma once

#include "bootstrap/frame.hpp"
#include "bootstrap/socket.hpp"
#include "bootstrap/store.hpp"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace chorus::bootstrap {

using frame::Frame;
using frame::Type;
using net::Clock;

constexpr auto kRefusalLogInterval = std::chrono::seconds(1);
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

class StoreServer::Impl {
 public:
  Impl(const std::string& bind_address, uint16_t port, std::string secret, std::chrono::milliseconds stall_timeout);
  ~Impl();

  uint16_t port() const { return port_; }
  void set(const std::string& key, const Bytes& value);
  std::optional<Bytes> get(const std::string& key) const;
  int64_t add(const std::string& key, int64_t delta);
  size_t clients() const { return clients_.load(); }
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
  int64_t add_locked(const std::string& key, int64_t delta, std::string& problem);  // holds store_mutex_
  void wake_waiters(const std::string& key);
  void reply(Connection& c, const Frame& response);
  void refuse(Connection& c, const std::string& why);
  void reject(Connection& c, const std::string& why);
  // Refused and closed connections are logged at most once per
  // kRefusalLogInterval: the first of a burst at once, the ones after it
  // counted and reported with the count when the interval has passed.
  struct RefusalLog {
    Clock::time_point logged_at{};
    uint64_t unlogged = 0;     // since logged_at
    std::string last_reason;   // of the last unlogged one
  };
  void log_refusal(const std::string& what);  // "refused a connection from <peer>: <why>"
  void report_unlogged_refusals(Clock::time_point now);
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
  RefusalLog refusal_log_;
  Bytes read_buffer_ = Bytes(frame::kReadChunk);

  std::atomic<bool> stopping_{false};
  std::atomic<size_t> clients_{0};  // open authenticated connections
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> refused_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> evicted_{0};
  std::thread thread_;
};

}  // namespace chorus::bootstrap
