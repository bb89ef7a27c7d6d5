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
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace chorus::transport::ofi {

namespace stall_detail {
// Per thread: where the handler jumps, and whether it may (only while that
// thread is inside run()). initial-exec: no allocation when read from the
// signal handler.
struct EscapePoint {
  sigjmp_buf where;
  volatile sig_atomic_t armed = 0;
  pid_t thread = 0;  // kernel thread id, filled on first use
};
extern thread_local EscapePoint escape_point __attribute__((tls_model("initial-exec")));
pid_t current_thread_id();
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
    if (point.thread == 0) point.thread = stall_detail::current_thread_id();
    caller_.store(point.thread, std::memory_order_relaxed);
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

// A transport's provider calls under the escape. Once one is abandoned the
// provider may not be called again: every later call throws the same error.
class ProviderGuard {
 public:
  // test_stall_after_calls: CHORUS_TEST_OFI_STALL on this rank, else -1.
  ProviderGuard(std::string provider, std::chrono::milliseconds cpu_limit, int test_stall_after_calls);

  template <class Call>
  ssize_t call(const char* what, int peer, Call&& provider_call) {
    if (abandoned()) fail_abandoned();
    std::optional<ssize_t> result;
    if (test_stall_due(what)) {
      result = escape_.run([]() -> ssize_t {
        for (volatile int spinning = 1; spinning != 0;) {
        }
        return 0;
      });
    } else {
      result = escape_.run(std::forward<Call>(provider_call));
    }
    if (!result) abandon(what, peer);
    return *result;
  }

  bool abandoned() const { return abandoned_->load(); }
  // Shared with the transport's memory regions, which may outlive it.
  std::shared_ptr<const std::atomic<bool>> abandoned_flag() const { return abandoned_; }
  const std::string& why() const { return why_; }
  [[noreturn]] void fail_abandoned() const;
  // The endpoint's address; shm ("fi_shm://<file>"): its queue file is
  // unlinked when the guard abandons the provider (nobody will close it).
  void set_endpoint_address(std::string address) { endpoint_address_ = std::move(address); }

 private:
  bool test_stall_due(const char* what);
  [[noreturn]] void abandon(const char* what, int peer);

  std::string provider_;
  StallEscape escape_;
  int test_stall_after_calls_;
  uint64_t calls_ = 0;
  std::string endpoint_address_;
  std::string why_;  // set when abandoned
  std::shared_ptr<std::atomic<bool>> abandoned_ = std::make_shared<std::atomic<bool>>(false);
};

// Keeps what an abandoned transport leaves open reachable for the life of the
// process: closing it could wait on a lock a dead peer holds, a provider
// thread may still write into its buffers, and a leak checker (LeakSanitizer
// at exit) must neither report it nor walk its innards.
void keep_forever(std::vector<void*> objects, std::vector<std::vector<uint8_t>> buffers = {});

}  // namespace chorus::transport::ofi
