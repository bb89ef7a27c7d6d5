// Escape from a provider call that never returns.
//
// libfabric 1.17's shm provider guards each process' shared-memory region
// with a spinlock that other processes take. A rank killed while holding it
// leaves every rank that touches that region spinning inside fi_send or
// fi_cq_read forever: no chorus timeout can run, the job hangs. Data-path
// provider calls are non-blocking, so one that burns seconds of CPU is stuck.
//
// StallEscape::run() makes each such call interruptible: a watch thread
// samples the calling thread's CPU clock and, once a single call has used
// `cpu_limit`, sends it a signal whose handler jumps back into run(), which
// returns "stalled". The provider's state is unknown from then on, so the
// transport must never call into it again (nor close it). See docs/errors.md.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

namespace chorus::transport::ofi {

namespace stall_detail {
// Per thread: where the handler jumps, and whether it may (only while that
// thread is inside run()). initial-exec: no allocation when read from the
// signal handler.
struct EscapePoint {
  sigjmp_buf where;
  volatile sig_atomic_t armed = 0;
};
extern thread_local EscapePoint escape_point __attribute__((tls_model("initial-exec")));
pid_t this_thread_id();
}  // namespace stall_detail

class StallEscape {
 public:
  // cpu_limit: CPU time one call may use before it is abandoned.
  explicit StallEscape(std::chrono::milliseconds cpu_limit);
  ~StallEscape();
  StallEscape(const StallEscape&) = delete;
  StallEscape& operator=(const StallEscape&) = delete;

  // False when the escape signal already belongs to the application: calls
  // then run unguarded (and a stuck provider hangs as before).
  bool enabled() const { return enabled_; }
  std::chrono::milliseconds cpu_limit() const { return cpu_limit_; }

  // The call's result, or nullopt if it was abandoned as stuck.
  template <class Call>
  std::optional<ssize_t> run(Call&& call) {
    if (!enabled_) return static_cast<ssize_t>(call());
    auto& point = stall_detail::escape_point;
    caller_.store(stall_detail::this_thread_id(), std::memory_order_relaxed);
    active_.store(++serial_, std::memory_order_release);
    if (sigsetjmp(point.where, 0) != 0) {
      active_.store(0, std::memory_order_release);
      return std::nullopt;
    }
    point.armed = 1;
    const ssize_t result = static_cast<ssize_t>(call());
    point.armed = 0;
    active_.store(0, std::memory_order_release);
    return result;
  }

 private:
  void watch();

  std::chrono::milliseconds cpu_limit_;
  bool enabled_ = false;
  uint64_t serial_ = 0;                // written by the calling thread only
  std::atomic<uint64_t> active_{0};    // serial of the call in progress, 0 = none
  std::atomic<pid_t> caller_{0};       // kernel thread id of the caller
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread watcher_;
};

// The signal the escape uses (documented in docs/errors.md).
int stall_escape_signal();

}  // namespace chorus::transport::ofi
