#include "nonblocking/progress.hpp"

#include "common/error.hpp"
#include "common/log.hpp"

#include <pthread.h>
#include <sched.h>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <system_error>

namespace chorus::nb {

namespace {
using Clock = std::chrono::steady_clock;
// Room for an algorithm, the reduction kernels, an exception's unwinding and
// a sanitizer's red zones; mapped lazily, so unused pages cost nothing.
constexpr size_t kFiberStackBytes = 256 * 1024;
constexpr auto kFailureProbeInterval = std::chrono::seconds(1);
// The longest the progress thread naps while operations are outstanding
// and nothing happens (shared memory has no wait fd; others may miss events).
constexpr auto kLongestNap = std::chrono::microseconds(200);
constexpr auto kFirstNap = std::chrono::microseconds(10);
// With nothing outstanding, the thread ticks this often for a while after
// the last operation, then sleeps until woken.
constexpr auto kTick = std::chrono::microseconds(1000);
constexpr auto kTickWindow = std::chrono::seconds(1);
// Between calls, while the application is inside a call (which polls), the
// thread looks again after 1 ms, doubling up to this: below UD's first
// retransmission timeout, so a call's end leaves its duties waiting no
// longer than a lost ack would.
constexpr auto kLongestInCallNap = std::chrono::microseconds(4000);

// "0,2,3" (this layer does not link the topology's formatter).
std::string cpu_list(const std::vector<unsigned>& cpus) {
  std::string text;
  for (unsigned cpu : cpus) text += (text.empty() ? "" : ",") + std::to_string(cpu);
  return text;
}

Error as_error(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) return *error;
  return Error(Status::internal, e.what());
}
}  // namespace

void FiberSuspender::wait(p2p::Engine& engine, p2p::Request& request) {
  while (!engine.finished(request)) {
    if (operation_.abort) throw *operation_.abort;
    operation_.awaited = request;
    operation_.awaited_since = Clock::now();
    Fiber::suspend();
    operation_.awaited = p2p::Request{};
  }
  engine.wait(request);  // reaps it: returns at once, or throws its error
}

Progress::Progress(p2p::Engine& engine, DriverMutex& mutex, bool thread, std::chrono::microseconds spin,
                   std::chrono::milliseconds timeout, ProgressThreadPlace place)
    : engine_(engine),
      mutex_(mutex),
      use_thread_(thread),
      spin_(spin),
      timeout_(timeout),
      place_(std::move(place)),
      between_calls_(thread && engine.transport().needs_progress_between_calls()) {
  // Blocking calls drive the engine themselves; through the hook they move
  // the outstanding operations along too (MPI's progress rule).
  engine_.set_progress_hook([this] { return advance(); });
}

Progress::~Progress() {
  // Without the session lock: the thread may be waiting for it.
  if (thread_.joinable()) {
    stop_.store(true);
    const uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof one) < 0) {
      log::warn("waking the progress thread to stop failed: ", errno_string(errno));
    }
    thread_.join();
  }
  if (wake_fd_ >= 0) close(wake_fd_);
  engine_.set_progress_hook(nullptr);
}

void DriverMutex::signal(int eventfd) {
  const uint64_t one = 1;
  if (write(eventfd, &one, sizeof one) < 0 && errno != EAGAIN) {
    log::warn("waking the progress thread after a call failed: ", errno_string(errno));
  }
}

void Progress::serve_between_calls() {
  if (between_calls_) ensure_thread();
}

void Progress::add(const std::shared_ptr<Operation>& operation, bool large) {
  operations_.push_back(operation);
  outstanding_.fetch_add(1);
  ensure_thread();
  wake_thread(large);
}

void Progress::remove(Operation& operation) {
  auto it = std::find_if(operations_.begin(), operations_.end(),
                         [&](const std::shared_ptr<Operation>& candidate) { return candidate.get() == &operation; });
  if (it == operations_.end()) return;
  std::shared_ptr<Operation> keep = *it;  // alive through finish()
  operations_.erase(it);
  outstanding_.fetch_sub(1);
  finish(*keep);
}

void Progress::start_collective(const std::shared_ptr<Operation>& operation, std::function<void()> body,
                                bool large) {
  operation->fiber = std::make_unique<Fiber>(std::move(body), kFiberStackBytes);
  add(operation, large);
  // Run it to its first wait now: its first messages leave before the
  // caller goes back to computing.
  if (step(*operation) == Step::completed) remove(*operation);
}

void Progress::start_point_to_point(const std::shared_ptr<Operation>& operation, bool large) {
  // One already complete (an eager send the transport copied, a receive
  // whose message had arrived) never joins the list, nor wakes the thread.
  if (step(*operation) == Step::completed) return finish(*operation);
  add(operation, large);
}

Progress::Step Progress::step(Operation& operation) {
  if (!operation.fiber) {
    if (!engine_.finished(operation.request)) return Step::waiting;
    try {
      operation.completion = engine_.wait(operation.request);
    } catch (const std::exception& e) {
      operation.error = as_error(e);
    }
    return Step::completed;
  }
  if (operation.awaited.valid() && !operation.abort && !engine_.finished(operation.awaited)) return Step::waiting;
  operation.fiber->resume();
  if (!operation.fiber->finished()) return Step::advanced;
  try {
    operation.fiber->rethrow_if_failed();
  } catch (const std::exception& e) {
    operation.error = as_error(e);
  }
  operation.fiber.reset();  // its stack goes now, not with the last Request
  return Step::completed;
}

void Progress::finish(Operation& operation) noexcept {
  if (operation.on_complete) {
    try {
      operation.on_complete(operation);
    } catch (const std::exception& e) {
      if (!operation.error) operation.error = as_error(e);
    }
  }
  operation.complete.store(true, std::memory_order_release);
}

int Progress::advance() {
  // Not re-entered, and never from inside an operation's own fiber.
  if (advancing_ || operations_.empty() || Fiber::current() != nullptr) return 0;
  advancing_ = true;
  int moved = 0;
  size_t i = 0;
  try {
    while (i < operations_.size()) {
      std::shared_ptr<Operation> operation = operations_[i];
      const Step result = step(*operation);
      if (result == Step::completed) {
        operations_.erase(operations_.begin() + static_cast<std::ptrdiff_t>(i));
        outstanding_.fetch_sub(1);
        finish(*operation);
        ++moved;
        continue;
      }
      if (result == Step::advanced) ++moved;
      ++i;
    }
  } catch (...) {
    advancing_ = false;
    throw;
  }
  advancing_ = false;
  return moved;
}

void Progress::fail(Operation& operation, const Error& error) {
  if (operation.complete.load(std::memory_order_relaxed)) return;
  if (operation.fiber) {
    // The algorithm throws at its wait and unwinds on its own stack.
    operation.abort = error;
    if (step(operation) != Step::completed) return;
  } else if (!operation.error) {
    operation.error = error;
  }
  remove(operation);
}

void Progress::fail_all(const Error& error) {
  // A copy: failing an operation removes it from the list.
  for (auto& operation : std::vector<std::shared_ptr<Operation>>(operations_)) fail(*operation, error);
}

bool Progress::drive(Operation& operation) {
  if (operation.complete.load(std::memory_order_acquire)) return true;
  const p2p::Request pending = operation.fiber ? operation.awaited : operation.request;
  try {
    if (pending.valid()) {
      engine_.progress_until(pending, [&] { return operation.complete.load(std::memory_order_relaxed); });
    } else {
      engine_.progress();
    }
    advance();
  } catch (const std::exception& e) {
    // A timeout or a failure the probe reported while waiting for this
    // operation's request: it belongs to this operation.
    fail(operation, as_error(e));
  }
  return operation.complete.load(std::memory_order_acquire);
}

void Progress::wait(Operation& operation) {
  if (!operation.complete.load(std::memory_order_acquire)) {
    std::unique_lock lock(mutex_);
    while (!drive(operation)) {
    }
  }
  if (operation.error) throw *operation.error;
}

bool Progress::test(Operation& operation) {
  if (!operation.complete.load(std::memory_order_acquire)) {
    std::unique_lock lock(mutex_);
    try {
      engine_.progress();
      advance();
    } catch (const std::exception& e) {
      fail_all(as_error(e));
    }
    if (!operation.complete.load(std::memory_order_acquire)) {
      check_stalled(Clock::now());
      if (!operation.complete.load(std::memory_order_acquire)) return false;
    }
  }
  if (operation.error) throw *operation.error;
  return true;
}

size_t Progress::wait_any(const std::vector<Operation*>& operations) {
  auto first_complete = [&]() -> std::optional<size_t> {
    for (size_t i = 0; i < operations.size(); ++i) {
      if (operations[i]->complete.load(std::memory_order_acquire)) return i;
    }
    return std::nullopt;
  };
  if (auto done = first_complete()) return *done;
  std::unique_lock lock(mutex_);
  for (;;) {
    // Look again under the lock: the progress thread completes operations
    // under it, so the last incomplete one may have finished while this
    // thread waited for the lock, leaving no target below.
    if (auto done = first_complete()) return *done;
    // Progress towards one incomplete operation, stopping as soon as any completes.
    Operation* target = nullptr;
    for (Operation* operation : operations) {
      if (!operation->complete.load(std::memory_order_relaxed)) {
        target = operation;
        break;
      }
    }
    if (target == nullptr) continue;  // all completed since the look above: it returns now
    const p2p::Request pending = target->fiber ? target->awaited : target->request;
    try {
      if (pending.valid()) {
        engine_.progress_until(pending, [&] { return first_complete().has_value(); });
      } else {
        engine_.progress();
      }
      advance();
    } catch (const std::exception& e) {
      fail(*target, as_error(e));
    }
  }
}

void Progress::complete_all(std::unique_lock<DriverMutex>& lock, const void* owner) {
  (void)lock;  // held by the caller
  for (;;) {
    std::shared_ptr<Operation> next;
    for (const auto& operation : operations_) {
      if (owner == nullptr || operation->owner == owner) {
        next = operation;
        break;
      }
    }
    if (!next) return;
    while (!drive(*next)) {
    }
  }
}

void Progress::check_stalled(Clock::time_point now) {
  if (operations_.empty()) return;
  if (now >= next_probe_) {
    next_probe_ = now + kFailureProbeInterval;
    if (std::optional<Error> failure = engine_.probe_failure()) {
      fail_all(*failure);
      return;
    }
  }
  for (auto& operation : std::vector<std::shared_ptr<Operation>>(operations_)) {
    if (operation->fiber && operation->awaited.valid() && now - operation->awaited_since >= timeout_) {
      fail(*operation, engine_.timeout_error(operation->awaited));
    }
  }
}

void Progress::ensure_thread() {
  if (!use_thread_ || thread_.joinable()) return;
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    chorus::fail(Status::internal, "eventfd for the progress thread failed: ", errno_string(errno));
  }
  try {
    thread_ = std::thread([this] { thread_main(); });
  } catch (const std::system_error& e) {
    close(wake_fd_);
    wake_fd_ = -1;
    chorus::fail(Status::internal, "starting the progress thread failed: ", e.what(),
                 " (CHORUS_PROGRESS=caller avoids the thread)");
  }
}

void Progress::wake_thread(bool large) {
  // Paired with the thread's store of thread_sleeping_ before it re-checks
  // outstanding_ (both sequentially consistent): no wakeup is lost. A thread
  // in a timed nap is woken only for a large operation; it sees a small one
  // at its next tick.
  if (thread_.joinable() && (thread_sleeping_.load() || (large && thread_napping_.load()))) {
    const uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof one) < 0 && errno != EAGAIN) {
      log::warn("waking the progress thread failed: ", errno_string(errno));
    }
  }
}

void Progress::nap(int transport_fd, std::chrono::microseconds limit) {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {transport_fd, POLLIN, 0}};
  const nfds_t count = transport_fd >= 0 ? 2 : 1;
  timespec timeout{};
  const timespec* timeout_ptr = nullptr;
  if (limit.count() >= 0) {
    timeout.tv_sec = static_cast<time_t>(limit.count() / 1000000);
    timeout.tv_nsec = static_cast<long>(limit.count() % 1000000) * 1000;
    timeout_ptr = &timeout;
  }
  std::atomic<bool>& flag = limit.count() < 0 ? thread_sleeping_ : thread_napping_;
  flag.store(true);
  // Checked after announcing the nap: an operation started from now on
  // wakes the thread, one started before is seen here.
  const bool skip = stop_.load() || (limit.count() < 0 && outstanding_.load() != 0);
  if (!skip) {
    if (ppoll(fds, count, timeout_ptr, nullptr) < 0 && errno != EINTR) {
      log::warn("the progress thread's ppoll failed: ", errno_string(errno));
    }
  }
  flag.store(false);
  if ((fds[0].revents & POLLIN) != 0) {
    uint64_t drained = 0;
    (void)!read(wake_fd_, &drained, sizeof drained);
  }
}

void Progress::serve_transport() {
  // The application is inside a call, which polls: look again later.
  if (mutex_.wanted() || !mutex_.try_lock_quietly()) {
    nap(-1, in_call_nap_);
    in_call_nap_ = std::min<std::chrono::microseconds>(in_call_nap_ * 2, kLongestInCallNap);
    return;
  }
  in_call_nap_ = kTick;
  int fd = -1;
  bool may_block = false;
  bool application_called = false;
  {
    std::unique_lock lock(mutex_, std::adopt_lock);
    application_called = mutex_.application_locks() != locks_seen_;
    locks_seen_ = mutex_.application_locks();
    try {
      engine_.progress();
    } catch (const std::exception& e) {
      // Nothing is outstanding to fail: the transport keeps its failure
      // (a failed peer, a broken QP) and the next call reports it.
      if (!transport_error_logged_) log::warn("progress between calls: ", e.what());
      transport_error_logged_ = true;
    }
    fd = engine_.transport().wait_fd();
    may_block = fd >= 0 && engine_.transport().arm();
  }
  if (fd < 0) {
    nap(-1, kTick);
  } else if (!may_block) {
    return;  // work arrived while arming: poll again
  } else if (application_called) {
    // A call may leave duties its own arm() did not put on the transport's
    // timer (it arms only when it blocks): look again a tick later, until
    // a look finds no call since the last one.
    nap(fd, kTick);
  } else {
    // Asleep until an arrival, the transport's timer, an operation, or the
    // end of the next call.
    mutex_.wake_on_unlock(wake_fd_);
    if (mutex_.application_locks() == locks_seen_) nap(fd, std::chrono::microseconds(-1));
    mutex_.wake_on_unlock(-1);
  }
}

void Progress::place_thread() {
  std::string where = "not bound (the process' CPUs)";
  if (!place_.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (unsigned cpu : place_.cpus) {
      if (cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
    }
    const int error = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (error != 0) {
      log::warn("binding the progress thread to CPUs ", cpu_list(place_.cpus),
                " failed: ", errno_string(error), "; it runs unbound");
    } else {
      where = "bound to CPUs " + cpu_list(place_.cpus);
    }
  }
  if (place_.report) std::fprintf(stderr, "chorus: rank %d: progress thread %s\n", place_.rank, where.c_str());
}

void Progress::thread_main() {
  place_thread();
  // Naps of tens of microseconds must not stretch to the default 50 us slack.
  if (prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL) != 0) {
    log::debug("prctl(PR_SET_TIMERSLACK) for the progress thread failed: ", errno_string(errno));
  }
  auto last_event = Clock::now();
  auto backoff = kFirstNap;
  while (!stop_.load()) {
    if (outstanding_.load() == 0 && between_calls_) {
      serve_transport();
      backoff = kFirstNap;
      continue;
    }
    if (outstanding_.load() == 0) {
      // Within a second of the last operation, tick: a small operation
      // started now is seen within a tick without a wakeup. After that,
      // sleep until an operation starts (no CPU time while idle).
      if (Clock::now() - last_event < kTickWindow) {
        nap(-1, kTick);
      } else {
        nap(-1, std::chrono::microseconds(-1));
        last_event = Clock::now();
      }
      backoff = kFirstNap;
      continue;
    }
    // An application thread drives now (it waits for the lock, or holds it):
    // step aside without queueing on the lock, which would cost it a wakeup.
    if (mutex_.wanted() || !mutex_.try_lock_quietly()) {
      nap(-1, backoff);
      backoff = std::min<std::chrono::microseconds>(backoff * 2, kLongestNap);
      continue;
    }
    int events = 0;
    int fd = -1;
    bool may_block = false;
    auto now = Clock::now();
    {
      std::unique_lock lock(mutex_, std::adopt_lock);
      try {
        events = engine_.progress() + advance();
      } catch (const std::exception& e) {
        fail_all(as_error(e));
      }
      now = Clock::now();
      if (events > 0) {
        last_event = now;
        backoff = kFirstNap;
      } else if (now - last_event > spin_) {
        check_stalled(now);
        fd = engine_.transport().wait_fd();
        may_block = fd < 0 || engine_.transport().arm();
      }
    }
    if (events > 0 || now - last_event <= spin_ || !may_block) continue;
    // Naps stay short even on a wait fd: a provider may need progress calls
    // that no fd event announces (libfabric's rxm protocol steps).
    nap(fd, backoff);
    backoff = std::min<std::chrono::microseconds>(backoff * 2, kLongestNap);
  }
}

}  // namespace chorus::nb
