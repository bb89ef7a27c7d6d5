#include "transports/ofi/stall_escape.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/shm_regions.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <ctime>
#include <mutex>

namespace chorus::transport::ofi {

namespace stall_detail {

thread_local EscapePoint escape_point __attribute__((tls_model("initial-exec")));

pid_t current_thread_id() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

}  // namespace stall_detail

namespace {

// Async-signal-safe: reads this thread's flag and jumps, nothing else.
extern "C" void on_stall_signal(int) {
  auto& point = stall_detail::escape_point;
  if (point.armed != 0) {
    point.armed = 0;
    siglongjmp(point.where, 1);
  }
}

// Installs the handler unless the application owns the signal already.
bool install_handler() {
  static std::once_flag once;
  static bool ours = false;
  std::call_once(once, [] {
    const int signal_number = stall_escape_signal();
    struct sigaction current{};
    if (sigaction(signal_number, nullptr, &current) != 0) return;
    const bool default_action = (current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL;
    if (!default_action) {
      log::info("ofi: signal ", signal_number, " already has a handler; stuck provider calls cannot be escaped");
      return;
    }
    struct sigaction action{};
    action.sa_handler = on_stall_signal;
    sigemptyset(&action.sa_mask);
    // NODEFER: the jump leaves the handler early, and sigsetjmp(.., 0) does
    // not restore the mask, so the signal must not be blocked while in it.
    action.sa_flags = SA_NODEFER | SA_RESTART;
    ours = sigaction(signal_number, &action, nullptr) == 0;
  });
  return ours;
}

// CPU time a thread of this process has used (Linux's per-thread CPU clock
// id, as glibc builds it), or nullopt once the thread is gone.
std::optional<std::chrono::nanoseconds> thread_cpu_time(pid_t thread) {
  const clockid_t clock = static_cast<clockid_t>((~static_cast<unsigned>(thread) << 3) | 6);
  timespec now{};
  if (clock_gettime(clock, &now) != 0) return std::nullopt;
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

}  // namespace

int stall_escape_signal() { return SIGRTMIN + 7; }

StallEscape::StallEscape(std::chrono::milliseconds cpu_limit) : cpu_limit_(cpu_limit) {
  enabled_ = install_handler();
  if (enabled_) watcher_ = std::thread([this] { watch(); });
}

StallEscape::~StallEscape() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void StallEscape::watch() {
  const auto tick = std::clamp(cpu_limit_ / 8, std::chrono::milliseconds(20), std::chrono::milliseconds(250));
  uint64_t watched = 0;  // the call being timed, 0 = none
  std::chrono::nanoseconds cpu_at_start{0};
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, tick, [this] { return stopping_; })) {
    const uint64_t serial = active_.load(std::memory_order_acquire);
    const pid_t thread = caller_.load(std::memory_order_relaxed);
    const auto cpu = serial == 0 ? std::nullopt : thread_cpu_time(thread);
    if (!cpu) {
      watched = 0;
      continue;
    }
    if (serial != watched) {
      watched = serial;
      cpu_at_start = *cpu;
      continue;
    }
    if (*cpu - cpu_at_start >= cpu_limit_) {
      // Not armed any more (returned meanwhile)? The handler does nothing.
      ::syscall(SYS_tgkill, ::getpid(), thread, stall_escape_signal());
      watched = 0;
    }
  }
}

ProviderGuard::ProviderGuard(std::string provider, std::chrono::milliseconds cpu_limit, int test_stall_after_calls)
    : provider_(std::move(provider)), escape_(cpu_limit), test_stall_after_calls_(test_stall_after_calls) {}

bool ProviderGuard::test_stall_due(const char* what) {
  if (test_stall_after_calls_ < 0 || calls_++ != static_cast<uint64_t>(test_stall_after_calls_)) return false;
  log::warn("ofi: CHORUS_TEST_OFI_STALL: ", what, " spins as if on a lock a dead process holds");
  return true;
}

void ProviderGuard::abandon(const char* what, int peer) {
  why_ = concat(what, peer >= 0 ? concat(" (rank ", peer, ")") : std::string(), " did not return after ",
                escape_.cpu_limit().count(), " ms of CPU time inside provider ", provider_,
                ": a process probably died holding one of the provider's locks in shared memory");
  abandoned_->store(true);
  if (!shm_regions::remove_named(endpoint_address_)) log::debug("ofi: no shm region file to remove");
  fail_abandoned();
}

void ProviderGuard::fail_abandoned() const {
  throw Error(Status::peer_failed, concat("libfabric: ", why_, "; this rank's transport is abandoned"));
}

void keep_forever(std::vector<void*> objects, std::vector<std::vector<uint8_t>> buffers) {
  struct Remains {
    std::vector<void*> objects;
    std::vector<std::vector<uint8_t>> buffers;
  };
  static std::mutex mutex;
  static auto* graveyard = new std::vector<Remains>();
  std::lock_guard<std::mutex> lock(mutex);
  graveyard->push_back({std::move(objects), std::move(buffers)});
}

}  // namespace chorus::transport::ofi
