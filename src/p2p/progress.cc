// The engine's progress (progress.hpp): the loop of every wait, the one way
// progress sleeps, the failure probe and timeouts; the engine's waits
// (wait, progress_until, wait_until, flushing sends before finalize); the
// progress thread. The non-blocking operations: progress_operations.cc.
#include "p2p/progress.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "p2p/engine_impl.hpp"

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

namespace chorus::p2p {

namespace {
using Clock = std::chrono::steady_clock;
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
// On a CPU shared with the application, the longest the thread stays aside
// while the application keeps calling: the most a computation that follows
// the calls waits for the thread to take up their operations.
constexpr auto kLongestAsideNap = std::chrono::microseconds(1000);

// "0,2,3" (this layer does not link the topology's formatter).
std::string cpu_list(const std::vector<unsigned>& cpus) {
  std::string text;
  for (unsigned cpu : cpus) text += (text.empty() ? "" : ",") + std::to_string(cpu);
  return text;
}

// Cores the local ranks can share. A rank pinned to a few CPUs (placement's
// --bind=core, taskset, mpirun --bind-to core; a core may be 2 hardware
// threads) sees fewer CPUs in its own mask than there are local ranks
// although its peers sit on other cores: then the machine's online CPUs are
// what counts. Ranks deliberately pinned to one shared core are not
// detected (rare; placement leaves ranks unbound when they outnumber cores).
unsigned usable_cpus(int local_size) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  const int own = std::max(1, CPU_COUNT(&set));
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (own < local_size && online > own) return static_cast<unsigned>(online);
  return static_cast<unsigned>(own);
}
}  // namespace

Error as_error(const std::exception& e) {
  if (const auto* error = dynamic_cast<const Error*>(&e)) return *error;
  return Error(Status::internal, e.what());
}

ProgressRules ProgressRules::for_host(int local_size) {
  ProgressRules rules;
  rules.waiter_yields = static_cast<unsigned>(local_size) > usable_cpus(local_size);
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  rules.thread_spins = online > 0 && 2L * local_size <= online;
  return rules;
}

Progress::Progress(Engine::Impl& engine, int local_size)
    : engine_(engine), rules_(ProgressRules::for_host(local_size)) {
  if (rules_.waiter_yields) {
    log::info("more local ranks (", local_size, ") than usable cores: progress yields when idle");
  }
}

Progress::~Progress() {
  stop_thread();
  if (wake_fd_ >= 0) close(wake_fd_);
  // Finalize completes every operation first; should one be left, what
  // Progress adopted goes with it (the others are their Requests').
  for (Operation* operation : point_to_point_) {
    operation->listed_at = Operation::kNotListed;
    if (operation->adopted) drop(operation);
  }
}

void Progress::stop_thread() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) {
    log::warn("waking the progress thread to stop failed: ", errno_string(errno));
  }
  thread_.join();
}

void Progress::enable_operations(DriverMutex& mutex, bool thread, ProgressThreadPlace place) {
  mutex_ = &mutex;
  use_thread_ = thread;
  thread_spin_ = rules_.thread_spins ? engine_.settings().spin : std::chrono::microseconds(0);
  place_ = std::move(place);
  between_calls_ = thread && engine_.transport().needs_progress_between_calls();
}

// --- the loop of every wait --------------------------------------------------

int Progress::poll() { return engine_.poll_transport() + advance(); }

// A long wait asks the launcher whether a rank has failed (at most once per
// interval), so survivors learn of a death in about a second, not after
// CHORUS_TIMEOUT.
template <class Describe>
void Progress::probe_for_failures(const Describe& describe, Clock::time_point started, Clock::time_point now,
                                  Clock::time_point& next_probe) {
  if (!failure_probe_ || now < next_probe) return;
  next_probe = ProgressRules::next_stalled_probe(started, now);
  if (std::optional<Error> failure = failure_probe_(/*stalled=*/true)) {
    throw Error(failure->status(),
                concat("rank ", engine_.rank(), " stopped waiting for ", describe().what, ": ", failure->what()),
                failure->peer());
  }
}

// The progress loop of every wait. The clock is read only every few dozen
// empty polls: the first read starts the timeout and the spin window, and a
// later one restarts the spin window if anything happened in between.
template <class Done, class Timeout, class Describe>
void Progress::wait_loop(Done done, const Timeout& timeout, const Describe& describe, bool blocking) {
  Clock::time_point started, deadline, spin_until, next_probe;
  bool clock_started = false;
  int empty_polls = 0;
  bool progressed = false;
  const bool yields = rules_.waiter_yields;
  while (!done()) {
    if (poll() > 0) {
      progressed = true;
      empty_polls = 0;
      continue;
    }
    if (!yields && ++empty_polls < ProgressRules::kEmptyPollsPerClockRead) continue;
    empty_polls = 0;
    const auto now = Clock::now();
    if (!clock_started) {
      clock_started = true;
      started = now;
      deadline = now + engine_.settings().timeout;
      next_probe = now + ProgressRules::kFailureProbeInterval;
      progressed = true;
    }
    if (progressed) {
      spin_until = now + engine_.settings().spin;
      progressed = false;
    }
    if (now >= deadline) throw timeout();
    probe_for_failures(describe, started, now, next_probe);
    // Another thread of the application wants the lock (to post, test or
    // wait): let it in, whatever this wait is for.
    if (mutex_ != nullptr && mutex_->wanted()) {
      mutex_->hand_over();
      progressed = true;  // what it did may be what this wait needs
      continue;
    }
    // Asleep no longer than the next probe: a dead peer is named on time.
    if (yields || now >= spin_until) idle(std::min(deadline, next_probe) - now, blocking);
  }
}

// Nothing to do: block on the transport's fd if it has one, else yield.
void Progress::idle(Clock::duration remaining, bool blocking) {
  const int fd = blocking ? engine_.transport().wait_fd() : -1;
  if (fd >= 0 && engine_.transport().arm()) {
    const auto slice = std::min<Clock::duration>(remaining, ProgressRules::kLongestSleep);
    ++engine_.counters_.blocked_waits;
    int error = 0;
    {
      // Asleep without the lock: other threads call, and the progress
      // thread polls, meanwhile.
      Unlocked unlocked(mutex_);
      if (!sleep_on(fd, -1, std::chrono::ceil<std::chrono::microseconds>(slice))) error = errno;
    }
    if (error != 0) chorus::fail(Status::internal, "poll() on the transport's wait fd failed: ", errno_string(error));
    return;
  }
  sched_yield();
}

bool Progress::sleep_on(int transport_fd, int wake_fd, std::chrono::microseconds limit, bool* woken) {
  pollfd fds[2];
  nfds_t count = 0;
  if (wake_fd >= 0) fds[count++] = pollfd{wake_fd, POLLIN, 0};
  if (transport_fd >= 0) fds[count++] = pollfd{transport_fd, POLLIN, 0};
  timespec timeout{};
  const timespec* timeout_ptr = nullptr;
  if (limit.count() >= 0) {
    timeout.tv_sec = static_cast<time_t>(limit.count() / 1000000);
    timeout.tv_nsec = static_cast<long>(limit.count() % 1000000) * 1000;
    timeout_ptr = &timeout;
  }
  const bool ok = ppoll(fds, count, timeout_ptr, nullptr) >= 0 || errno == EINTR;
  const bool signalled = wake_fd >= 0 && (fds[0].revents & POLLIN) != 0;
  if (signalled) {
    uint64_t drained = 0;
    (void)!read(wake_fd, &drained, sizeof drained);
  }
  if (woken != nullptr) *woken = signalled;
  return ok;
}

void Progress::suspend_until(const Request& request) {
  CollectiveState& operation = *running_->collective;
  // An abort wins over a request that failed meanwhile: finalize's
  // cancellation names each operation, while its requests may have failed
  // with another one's error (the communicator's abandon_all).
  if (operation.abort) throw *operation.abort;
  while (!engine_.finished(request)) {
    if (operation.abort) throw *operation.abort;
    operation.awaited = request;
    operation.awaited_since = Clock::now();
    Fiber::suspend();
    operation.awaited = Request{};
  }
}

// --- the engine's waits --------------------------------------------------------

template <class Done>
void Engine::Impl::progress_until(const Slot& slot, Done done) {
  progress_.wait_loop(
      done, [&] { return timeout_error(slot); },
      [&] { return Waiting{slot.peer, concat(describe_wait(slot), " (", CallTag::describe(slot.tag), ")")}; }, true);
}

void Engine::Impl::wait_until(const std::function<bool()>& done, const std::function<Waiting()>& waiting_for) {
  auto timeout = [&] {
    const Waiting waiting = waiting_for();
    return Error(Status::timeout,
                 concat("rank ", rank_, " timed out after ", std::chrono::duration<double>(settings_.timeout).count(),
                        " s (CHORUS_TIMEOUT) waiting for ", waiting.what,
                        "; the peer may have died, stalled, or called a different collective"),
                 waiting.peer);
  };
  // What is awaited is written to memory, not sent: no transport event wakes
  // a sleeper, so idle only yields.
  progress_.wait_loop(done, timeout, waiting_for, false);
}

Completion Engine::Impl::wait(Request& request) {
  if (!request.finished_send()) {
    Slot& slot = lookup(request);
    if (!finished(slot)) {
      if (progress_.on_operation_fiber()) {
        progress_.suspend_until(request);  // a non-blocking operation's algorithm
      } else {
        progress_until(slot, [&] { return finished(slot); });
      }
    }
  }
  Completion done;
  reap(request, &done);
  return done;
}

void Engine::Impl::wait_all(std::span<Request> requests) {
  for (Request& request : requests) {
    if (request.valid()) wait(request);
  }
}

void Engine::Impl::progress_until(const Request& request, const std::function<bool()>& stop) {
  if (request.finished_send()) return;
  const Slot& slot = lookup(request);
  const uint32_t generation = request.generation;
  progress_until(slot, [&] { return slot.generation != generation || finished(slot) || stop(); });
}

void Engine::Impl::flush_sends(std::chrono::milliseconds linger, std::chrono::milliseconds limit) noexcept {
  const auto start = Clock::now();
  try {
    for (;;) {
      const auto elapsed = Clock::now() - start;
      if (elapsed >= limit || (elapsed >= linger && !transport_.sends_pending())) return;
      if (progress_.poll() == 0) sched_yield();
    }
  } catch (const std::exception&) {
    // A broken peer or endpoint: nothing more can be delivered.
  }
}

std::string Engine::Impl::describe_wait(const Slot& slot) const {
  if (slot.kind == Slot::Kind::send) {
    return slot.state == Slot::State::awaiting_fin
               ? concat("rank ", slot.peer, " to read a ", slot.capacity, "-byte rendezvous send")
               : concat("a send to rank ", slot.peer);
  }
  if (slot.state == Slot::State::reading) {
    return concat("RDMA reads of a ", slot.read_total, "-byte message from rank ", slot.result.source);
  }
  if (slot.peer == kAnySource) return "a message from any rank";
  return concat("a message from rank ", slot.peer);
}

Error Engine::Impl::timeout_error(const Slot& slot) {
  std::string seconds = concat(std::chrono::duration<double>(settings_.timeout).count());
  const int peer = slot.state == Slot::State::reading ? slot.result.source : slot.peer;
  const std::string transport_state = peer >= 0 && peer < size_ ? transport_.describe_peer(peer) : std::string();
  return Error(Status::timeout,
               concat("rank ", rank_, " timed out after ", seconds, " s (CHORUS_TIMEOUT) waiting for ",
                      describe_wait(slot), " (", CallTag::describe(slot.tag),
                      "); the peer may have died, stalled, or called a different collective",
                      transport_state.empty() ? "" : "; transport: ", transport_state),
               slot.peer);
}

void Progress::start_thread() {
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

void Progress::signal_thread() {
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0 && errno != EAGAIN) {
    log::warn("waking the progress thread failed: ", errno_string(errno));
  }
}

void Progress::nap(int transport_fd, std::chrono::microseconds limit) {
  std::atomic<bool>& flag = limit.count() < 0 ? thread_sleeping_ : thread_napping_;
  flag.store(true);
  // Checked after announcing the nap: an operation started from now on
  // wakes the thread, one started before is seen here.
  const bool skip = stop_.load() || (limit.count() < 0 && outstanding_.load() != 0);
  if (!skip && !sleep_on(transport_fd, wake_fd_, limit)) {
    log::warn("the progress thread's ppoll failed: ", errno_string(errno));
  }
  if (!skip) count_wakeup();
  flag.store(false);
}

void Progress::step_aside(std::chrono::microseconds& backoff) {
  if (rules_.thread_spins) {
    // A CPU of its own: a wakeup costs the application nothing, and a large
    // operation the call starts wakes the nap at once (wake_thread).
    nap(-1, backoff);
    backoff = std::min<std::chrono::microseconds>(backoff * 2, kLongestNap);
    return;
  }
  // The application's CPU, shared: each wakeup preempts the call, which
  // polls itself. Longer while the application keeps calling, and only a
  // large collective wakes it (wake_thread): at 1 MiB, naps of 200 us and a
  // wakeup per large send and receive made 10 000 context switches a
  // second and cost a tenth of osu_bw's rate (docs/nonblocking.md, "The
  // progress thread on a shared CPU").
  bool woken = false;
  thread_aside_.store(true, std::memory_order_relaxed);
  if (!stop_.load() && !sleep_on(-1, wake_fd_, aside_nap_, &woken)) {
    log::warn("the progress thread's ppoll failed: ", errno_string(errno));
  }
  thread_aside_.store(false, std::memory_order_relaxed);
  count_wakeup();
  // Woken for a collective, which its caller may overlap with a
  // computation: look again soon.
  aside_nap_ = woken ? kFirstNap : std::min<std::chrono::microseconds>(aside_nap_ * 2, kLongestAsideNap);
}

void Progress::serve_transport() {
  // The application is inside a call, which polls: look again later.
  if (mutex_->wanted() || !mutex_->try_lock_quietly()) {
    nap(-1, in_call_nap_);
    in_call_nap_ = std::min<std::chrono::microseconds>(in_call_nap_ * 2, kLongestInCallNap);
    return;
  }
  in_call_nap_ = kTick;
  int fd = -1;
  bool may_block = false;
  bool application_called = false;
  {
    std::unique_lock lock(*mutex_, std::adopt_lock);
    application_called = mutex_->application_locks() != locks_seen_;
    locks_seen_ = mutex_->application_locks();
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
    mutex_->wake_on_unlock(wake_fd_);
    if (mutex_->application_locks() == locks_seen_) nap(fd, std::chrono::microseconds(-1));
    mutex_->wake_on_unlock(-1);
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
    if (mutex_->wanted() || !mutex_->try_lock_quietly()) {
      step_aside(backoff);
      continue;
    }
    // The call it stepped aside for is over: the next step aside starts
    // short, so that one that starts a computation's operations keeps
    // the thread away for 10 us, not 1 ms.
    aside_nap_ = kFirstNap;
    int events = 0;
    int fd = -1;
    bool may_block = false;
    auto now = Clock::now();
    {
      std::unique_lock lock(*mutex_, std::adopt_lock);
      try {
        events = engine_.progress() + advance();
      } catch (const std::exception& e) {
        fail_all(as_error(e));
      }
      now = Clock::now();
      if (events > 0) {
        last_event = now;
        backoff = kFirstNap;
      } else if (now - last_event > thread_spin_) {
        check_stalled(now);
        fd = engine_.transport().wait_fd();
        may_block = fd < 0 || engine_.transport().arm();
      }
    }
    if (events > 0 || now - last_event <= thread_spin_ || !may_block) continue;
    // Naps stay short even on a wait fd: a provider may need progress calls
    // that no fd event announces (libfabric's rxm protocol steps).
    nap(fd, backoff);
    backoff = std::min<std::chrono::microseconds>(backoff * 2, kLongestNap);
  }
}

}  // namespace chorus::p2p
