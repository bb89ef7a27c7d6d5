// The async-event monitor: a thread that reads ibv_get_async_event, acks
// every event, and turns the fatal ones (QP fatal/access/request errors, CQ
// error, port error, device fatal) into failures the transport reports from
// poll(), waking a blocked rank through an eventfd instead of leaving it hung.
#pragma once

#include "common/error.hpp"
#include "transports/transport.hpp"

#include <infiniband/verbs.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace chorus::transport::verbs {

struct AsyncFailure {
  int peer;  // -1 when the event concerns the whole device/port/CQ
  Error error;
};

class AsyncEventMonitor {
 public:
  // peer_of_qp maps a QP number to the peer rank (-1 if unknown); it must be
  // safe to call from the monitor thread (the transport's map is immutable
  // once the monitor starts).
  AsyncEventMonitor(ibv_context* context, std::function<int(uint32_t qp_num)> peer_of_qp);
  ~AsyncEventMonitor();
  AsyncEventMonitor(const AsyncEventMonitor&) = delete;
  AsyncEventMonitor& operator=(const AsyncEventMonitor&) = delete;

  // Readable while failures are waiting to be taken.
  int event_fd() const { return notify_fd_; }
  bool pending() const { return pending_.load(std::memory_order_acquire); }
  // Hands every failure waiting to `sink` (from poll()): one of a peer in
  // 0..size-1 goes to fail_peer too, any other becomes `fatal`. Returns how
  // many there were.
  int report(Sink& sink, int size, const std::function<void(int peer)>& fail_peer, std::optional<Error>& fatal);
  uint64_t events_seen() const { return events_seen_.load(); }

 private:
  std::vector<AsyncFailure> take();
  void run();
  void handle(const ibv_async_event& event);

  ibv_context* context_;
  std::function<int(uint32_t)> peer_of_qp_;
  int notify_fd_ = -1;  // eventfd: failures waiting
  int stop_fd_ = -1;    // eventfd: shut the thread down
  std::mutex mutex_;
  std::vector<AsyncFailure> failures_;
  std::atomic<bool> pending_{false};
  std::atomic<uint64_t> events_seen_{0};
  std::thread thread_;
};

}  // namespace chorus::transport::verbs
