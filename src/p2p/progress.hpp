// The progress engine of one process (docs/p2p.md, "Progress"; UCX's worker,
// Open MPI's opal_progress): the one owner of progress for blocking and
// non-blocking calls alike. It polls the transport and resumes the
// outstanding non-blocking operations in one step (poll()); it runs the loop
// of every wait (spin, then sleep on the transport's fd, the timeout, the
// failure probe, the CPU-oversubscription rule: wait_loop()); and, with
// CHORUS_PROGRESS=thread, the progress thread, which sleeps the same way.
//
// A blocking call starts its requests and waits on them here. A
// non-blocking collective runs its (blocking-style) algorithm on a Fiber:
// the algorithm's Engine::wait on a request that is not done suspends the
// fiber (suspend_until), and whoever drives progress resumes it once the
// request has finished. A point-to-point operation is just an engine
// request. Everything here runs under the session lock (DriverMutex),
// except wait/test/wait_any, which take it.
#pragma once

#include "common/config.hpp"
#include "common/futex_lock.hpp"
#include "p2p/engine.hpp"
#include "p2p/fiber.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace chorus::p2p {

struct Slot;  // an engine request's slot (engine_impl.hpp)

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The session lock. The progress thread steps aside while an application
// thread waits for it, so a blocking call never queues behind background
// progress.
class DriverMutex {
 public:
  // Spins a little before sleeping: the progress thread holds the lock for
  // one poll at a time and, seeing a waiter, does not take it again, so the
  // lock is usually free within a microsecond. Sleeping on the futex instead
  // costs a wakeup through the scheduler (tens of microseconds in a VM).
  void lock() {
    // Free (the common case): take it without announcing a waiter.
    if (mutex_.try_lock()) {
      count_application_lock();
      return;
    }
    waiting_.fetch_add(1, std::memory_order_relaxed);
    for (int spin = 0; spin < kSpinsBeforeSleep; ++spin) {
      if (mutex_.try_lock()) {
        waiting_.fetch_sub(1, std::memory_order_relaxed);
        count_application_lock();
        return;
      }
      cpu_relax();
    }
    mutex_.lock();
    waiting_.fetch_sub(1, std::memory_order_relaxed);
    count_application_lock();
  }
  void unlock() {
    // A progress thread asleep between calls relies on its transport's
    // timer, which this call may have made stale (UD: acks it now owes):
    // wake it, once. Only a sleeping thread asks for this. Looked at after
    // the release: its exchange (a locked instruction on x86, store-release
    // then load-acquire on Arm) orders this call's count of
    // application_locks_ before this load, as the thread's store of the fd
    // comes before its look at the count (Progress::thread_main); so
    // either it sees the count and stays awake, or this sees the fd.
    mutex_.unlock();
    const int fd = wake_on_unlock_.load();
    if (fd >= 0 && wake_on_unlock_.exchange(-1) == fd) signal(fd);
  }
  // For a thread that holds the lock while it waits (a wait's loop): lets
  // the application threads that want it (wanted()) take it, then takes it
  // back, so a waiting thread never keeps another from posting, testing or
  // waiting (docs/api.md, "Threads").
  void hand_over() {
    const uint64_t taken = application_locks();
    mutex_.unlock();
    // Until one of them has it: they spin for it, so a few microseconds.
    for (int spin = 0; spin < kSpinsBeforeSleep && application_locks() == taken && wanted(); ++spin) cpu_relax();
    lock();
  }
  // For the progress thread: takes the lock without counting as a waiter.
  void lock_quietly() { mutex_.lock(); }
  bool try_lock_quietly() { return mutex_.try_lock(); }
  bool wanted() const { return waiting_.load(std::memory_order_relaxed) > 0; }
  // How often an application thread took the lock: the progress thread
  // tells from it whether a call ran since it last looked.
  uint64_t application_locks() const { return application_locks_.load(); }
  // The progress thread, before it sleeps (fd: its eventfd) and after (-1).
  // Sequentially consistent, before the thread reads the count: a call that
  // the sleeping thread's last look missed either shows in the count it
  // reads after this, or finds the fd at its unlock (see unlock()).
  void wake_on_unlock(int fd) { wake_on_unlock_.store(fd); }

 private:
  static constexpr int kSpinsBeforeSleep = 4000;
  // Under the lock: no read-modify-write needed, and no fence: unlock()'s
  // exchange orders it before the look at wake_on_unlock_ (a sequentially
  // consistent store here was an xchg, a locked instruction every call).
  void count_application_lock() {
    application_locks_.store(application_locks_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
  static void signal(int eventfd);
  FutexLock mutex_;  // not std::mutex: a call takes it, see futex_lock.hpp
  std::atomic<int> waiting_{0};
  std::atomic<uint64_t> application_locks_{0};
  std::atomic<int> wake_on_unlock_{-1};
};

// Releases a held DriverMutex for a scope (a sleep), taking it back at the
// scope's end, also when an exception leaves it. Does nothing for nullptr.
class Unlocked {
 public:
  explicit Unlocked(DriverMutex* mutex) : mutex_(mutex) {
    if (mutex_ != nullptr) mutex_->unlock();
  }
  ~Unlocked() {
    if (mutex_ != nullptr) mutex_->lock();
  }
  Unlocked(const Unlocked&) = delete;
  Unlocked& operator=(const Unlocked&) = delete;

 private:
  DriverMutex* mutex_;
};

// A collective operation's own state (null in a point-to-point one).
struct CollectiveState {
  std::unique_ptr<Fiber> fiber;  // its algorithm; gone once it finished
  p2p::Request awaited;          // the request its algorithm waits on now
  std::chrono::steady_clock::time_point awaited_since{};
  std::optional<Error> abort;    // thrown at the algorithm's next wait
  uint64_t call = 0;             // its call number on its communicator (finalize's report)
  // What the operation's owner keeps alive until it completes (its
  // scratch, handed back to its communicator by on_complete).
  std::shared_ptr<void> resources;
};

// An operation counts its owners itself (OperationRef below), so that
// Progress can name a point-to-point operation by a plain pointer while its
// Request owns it alone, and take a reference from that pointer when it
// needs one (a failure note, finalize): a std::shared_ptr in Progress' list
// cost every request two locked instructions (its copy and its release),
// and a shared_ptr cannot be made again from a plain pointer. No weak
// references. A point-to-point operation's whole state, with RequestState's,
// is three cache lines (recycled on a line of their own): a window of
// requests touches each in several passes, each after the window's others,
// and every line is a miss a pass (docs/performance.md).
struct Operation {
  explicit Operation(const char* what) : name(what) {}
  Operation(const char* what, void (*complete)(Operation&)) : name(what), on_complete(complete) {}
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  const char* name;  // "iallreduce", "isend", ... for messages
  std::atomic<bool> complete{false};
  // Set once a wait or test has thrown `error` to the application.
  std::atomic<bool> error_reported{false};
  // Its owners (OperationRef). Atomic: the application's thread drops its
  // request's reference without the lock once the operation is complete.
  std::atomic<uint32_t> references{1};
  // Never counted nor freed (the one completed state every eager send shares).
  bool immortal = false;
  // Under the lock: a listed point-to-point operation whose Request was
  // dropped while it was outstanding; Progress took over that reference
  // and drops it when the operation completes (Progress::detach).
  bool adopted = false;
  void* owner = nullptr;  // the communicator that started it
  // Runs under the lock when the operation completes (returns scratch,
  // records a sticky error, translates ranks); `owner` is its context.
  // Must not throw. A function pointer, not a std::function: 24 bytes
  // less, and no manager call to destroy it.
  void (*on_complete)(Operation&) = nullptr;
  // How the last reference frees it (its type and allocator are its maker's).
  void (*destroy)(Operation*) = nullptr;
  std::optional<Error> error;  // written before `complete` is set

  // Point-to-point: the engine request and, once done, what it moved.
  p2p::Request request;
  uint32_t listed_at = kNotListed;  // its place in Progress' point-to-point list
  static constexpr uint32_t kNotListed = static_cast<uint32_t>(-1);
  // What it is, for finalize's report of what it cancelled: a
  // point-to-point operation's peer (the communicator's rank, -1: any),
  // user tag (-1: any) and bytes.
  int peer = -1;
  uint64_t sequence = 0;  // the order operations were started in (finalize's report)
  p2p::Completion completion;
  Received received;  // in the communicator's ranks (set by on_complete)
  int tag = -1;
  size_t bytes = 0;

  std::unique_ptr<CollectiveState> collective;
  // A collective whose algorithm has not finished.
  Fiber* fiber() const { return collective ? collective->fiber.get() : nullptr; }
};

// Another owner of `operation`.
inline void retain(Operation* operation) {
  if (!operation->immortal) operation->references.fetch_add(1, std::memory_order_relaxed);
}
// One owner fewer; the last frees it. A sole owner needs no locked
// instruction: nobody else can take a reference then (Progress takes them
// only from the outstanding operations it lists, and their owners drop
// them under the lock: Progress::detach), as libstdc++ frees a sole
// shared_ptr.
inline void drop(Operation* operation) noexcept {
  if (operation->immortal) return;
  if (operation->references.load(std::memory_order_acquire) == 1 ||
      operation->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    operation->destroy(operation);
  }
}

// An owning pointer to an Operation or a type derived from it, as
// std::shared_ptr with the count in the object.
template <class T>
class Ref {
 public:
  Ref() = default;
  // Takes over a reference the caller holds (a new operation's first).
  static Ref adopt(T* object) {
    Ref ref;
    ref.object_ = object;
    return ref;
  }
  // Another reference to `object`.
  static Ref share(T* object) {
    if (object != nullptr) retain(object);
    return adopt(object);
  }
  Ref(const Ref& other) : object_(other.object_) {
    if (object_ != nullptr) retain(object_);
  }
  Ref(Ref&& other) noexcept : object_(std::exchange(other.object_, nullptr)) {}
  template <class U>
  Ref(Ref<U>&& other) noexcept : object_(other.release()) {}  // NOLINT: converts as shared_ptr does
  template <class U>
  Ref(const Ref<U>& other) : object_(other.get()) {  // NOLINT
    if (object_ != nullptr) retain(object_);
  }
  Ref& operator=(Ref other) noexcept {
    std::swap(object_, other.object_);
    return *this;
  }
  ~Ref() {
    if (object_ != nullptr) drop(object_);
  }
  T* get() const { return object_; }
  T* operator->() const { return object_; }
  T& operator*() const { return *object_; }
  explicit operator bool() const { return object_ != nullptr; }
  // Gives up the reference without dropping it.
  T* release() { return std::exchange(object_, nullptr); }
  friend bool operator==(const Ref& a, const Ref& b) { return a.object_ == b.object_; }

 private:
  T* object_ = nullptr;
};
using OperationRef = Ref<Operation>;
// A new plain Operation (the tests'), freed with delete.
inline OperationRef make_operation(const char* what) {
  auto* operation = new Operation(what);
  operation->destroy = [](Operation* done) { delete done; };
  return OperationRef::adopt(operation);
}

// Where the progress thread runs (placement's plan; docs/placement.md).
struct ProgressThreadPlace {
  std::vector<unsigned> cpus;  // empty: not bound (it inherits the process' CPUs)
  bool report = false;         // --report-bindings: say where it runs
  int rank = 0;                // for that line
};

// The rules of progress, each defined once.
// An exception as chorus' Error (an Error as it is, anything else internal).
Error as_error(const std::exception& e);

struct ProgressRules {
  // A long wait asks the launcher whether a rank failed at most this often,
  // so survivors learn of a death in about a second, not after the timeout.
  static constexpr auto kFailureProbeInterval = std::chrono::seconds(1);
  // After its first probe, a wait that is still stalled probes this often
  // until it is kFastProbesUntil old, then once a kFailureProbeInterval: the
  // probe also compares the ranks' calls through the store, and a rank that
  // finds them different tells the others there, who must learn it within
  // a fraction of a second (docs/errors.md, "How every rank learns of a
  // disagreement"). Such a probe costs one store request; the launcher and
  // departure questions stay at one a second (Session::peer_failure).
  static constexpr auto kStalledProbeInterval = std::chrono::milliseconds(100);
  static constexpr auto kFastProbesUntil = std::chrono::seconds(3);
  // When a stalled wait that began at `started` probes next, having probed at `now`.
  template <class TimePoint>
  static TimePoint next_stalled_probe(TimePoint started, TimePoint now) {
    return now + (now - started < kFastProbesUntil
                      ? std::chrono::duration_cast<typename TimePoint::duration>(kStalledProbeInterval)
                      : std::chrono::duration_cast<typename TimePoint::duration>(kFailureProbeInterval));
  }
  // Reading the clock costs as much as an empty poll of shared memory (more
  // in a VM): a wait reads it only every this many empty polls.
  static constexpr int kEmptyPollsPerClockRead = 32;
  // A sleep on the transport's fd lasts at most this long, so the timeout
  // check and stray wakeups stay cheap.
  static constexpr auto kLongestSleep = std::chrono::milliseconds(100);

  // From the number of ranks on this host and the CPUs they can use:
  // - waiter_yields: more local ranks than cores: a spinning rank steals
  //   the core of the peer it waits for, so a waiter gives its core away as
  //   soon as a poll is empty;
  // - thread_spins: every local rank's application thread and progress
  //   thread have a CPU each; on fewer, the thread's spinning takes the CPU
  //   from the application it should overlap with, so it naps at once.
  bool waiter_yields = false;
  bool thread_spins = false;
  static ProgressRules for_host(int local_size);
};

class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  // Made by the engine it drives.
  Progress(Engine::Impl& engine, int local_size);
  ~Progress();  // stops the thread: call stop_thread() first, without the lock
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // --- the loop of every wait ---

  // Polls the transport once and resumes what can move on: how many events.
  int poll();
  // Progresses until `done()`: spins for CHORUS_SPIN_US after the last
  // event, then sleeps (on the transport's fd when `blocking`, the awaited
  // event arriving through the transport; else it yields), probes for
  // failed ranks about once a second, and throws timeout() after
  // CHORUS_TIMEOUT without progress.
  template <class Done, class Timeout, class Describe>
  void wait_loop(Done done, const Timeout& timeout, const Describe& describe, bool blocking);
  // On the fiber of an operation being resumed: gives the thread back until
  // `request` has finished (the operation's algorithm waits here).
  void suspend_until(const Request& request);
  // Whether this thread runs an operation's fiber (its waits suspend).
  bool on_operation_fiber() const { return running_ != nullptr && Fiber::current() != nullptr; }
  bool waiter_yields() const { return rules_.waiter_yields; }
  // `stalled`: asked by a wait (or for an operation) that has made no
  // progress for kFailureProbeInterval, not by the progress thread's routine
  // round while operations move on.
  void set_failure_probe(std::function<std::optional<Error>(bool stalled)> probe) { failure_probe_ = std::move(probe); }
  // Told, under the lock, of every operation that completes with an error,
  // after its on_complete (chorus' session keeps them, so finalize reports
  // an error nobody was told of).
  void set_failure_note(std::function<void(const OperationRef&)> note) { failure_note_ = std::move(note); }
  std::optional<Error> probe_failure(bool stalled = true) { return failure_probe_ ? failure_probe_(stalled) : std::nullopt; }

  // --- non-blocking operations ---

  // Once, by the session, before its first call: `mutex` is its lock, held
  // around every call, which a wait hands over to other threads that want
  // it and releases while it sleeps. `thread`: start a progress thread with
  // the first operation.
  void enable_operations(DriverMutex& mutex, bool thread, ProgressThreadPlace place = {});
  bool operations_enabled() const { return mutex_ != nullptr; }
  // Without the lock (the thread may be waiting for it); before teardown.
  void stop_thread();

  // Under the lock. A collective runs `body` on a fiber right away, until its
  // first wait; a point-to-point operation brings its engine request.
  // `large`: worth waking a napping progress thread for at once (a small
  // operation waits for its next tick, or for the caller's wait: a wakeup
  // costs the application a context switch, more than a small one takes).
  // The list of collectives takes a reference of its own; a
  // point-to-point operation is listed without a reference: its owner
  // (a Request) keeps it, and hands its reference to Progress if it goes
  // before the operation completes (detach).
  void start_collective(Operation& operation, std::function<void()> body, bool large);
  void start_point_to_point(Operation& operation, bool large);
  // Without the lock: the owner's reference to `operation` goes. One still
  // outstanding and listed as a point-to-point operation is adopted:
  // Progress drops that reference when it completes.
  void detach(Operation& operation) noexcept;

  // Under the lock: withdraws a listed point-to-point receive that no
  // message has matched yet (MPI_Cancel). True: it is complete, with no
  // error and nothing received, and its on_complete did not run; false (a
  // send, a collective, a receive that matched): it goes on as before.
  bool withdraw_receive(Operation& operation);

  // Without the lock: drive progress until `operation` completes (wait) or
  // once (test). Throw the operation's error, if any.
  void wait(Operation& operation);
  bool test(Operation& operation);
  // Without the lock: the index of the first of `operations` to complete.
  size_t wait_any(const std::vector<Operation*>& operations);

  // Under the lock: completes every operation of `owner` (nullptr: all),
  // failing them after the timeout. Errors stay on the operations.
  void complete_all(std::unique_lock<DriverMutex>& lock, const void* owner);

  // Under the lock (finalize): polls and resumes until no operation is
  // outstanding or none has moved for `quiet`. Errors stay on the operations.
  void settle(std::chrono::milliseconds quiet);
  // Under the lock (finalize): fails every outstanding operation with the
  // error `why` gives it; they are complete on return.
  void cancel_all(const std::function<Error(const Operation&)>& why);
  // Every outstanding operation, in the order they were started.
  std::vector<OperationRef> outstanding_operations() const;

  // Under the lock: resumes what can move on.
  int advance();
  // Under the lock, from inside a poll: the engine has just delivered an
  // eager message into the request of `waiter` (a listed point-to-point
  // operation), which finished without error. Completes it now, while its
  // slot and the operation are in cache, instead of naming it for the next
  // advance() (a second pass over a window's requests, each evicted by the
  // window's others: a cache miss or more per object).
  // The engine has already freed the request's slot (it read the slot's
  // outcome into `done` first): the slot is not looked up again.
  void complete_delivered(void* waiter, const Completion& done) noexcept;
  // Under the lock: for a transport that needs progress between calls (UD):
  // starts the progress thread now, not with the first non-blocking call.
  void serve_between_calls();
  size_t outstanding() const { return operations_.size() + point_to_point_.size(); }
  // How often the progress thread woke from a nap or from stepping aside
  // (the tests of its schedule, docs/nonblocking.md).
  uint64_t thread_wakeups() const { return thread_wakeups_.load(std::memory_order_relaxed); }

 private:
  enum class Step { waiting, advanced, completed };
  void add(Operation& operation, bool large);
  // `pending`: the slot of its request, which has not finished.
  void add_point_to_point(Operation& operation, Slot& pending, bool large);
  // Takes it out of point_to_point_ (the last one takes its place).
  void unlist(Operation& operation);
  // A listed point-to-point operation has just been unlisted: completes it
  // and, if Progress had adopted it, drops that reference.
  void finish_point_to_point(Operation& operation) noexcept;
  // The point-to-point operations whose requests the engine says finished.
  int complete_finished_point_to_point();
  Step step(Operation& operation);
  void remove(Operation& operation);
  // The last that touches `operation` unless the caller owns a reference:
  // its owner may free it as soon as `complete` is set.
  void finish(Operation& operation) noexcept;
  void fail(Operation& operation, const Error& error);
  void fail_all(const Error& error);
  // One round of the caller's progress towards `operation`: returns true
  // when it completed.
  bool drive(Operation& operation);
  // Timeouts of the operations nobody waits on, and the failure probe.
  void check_stalled(Clock::time_point now);
  // The failure probe, at most once per interval: throws what it found.
  template <class Describe>
  void probe_for_failures(const Describe& describe, Clock::time_point started, Clock::time_point now,
                          Clock::time_point& next_probe);
  // Nothing to do for a waiter: sleep on the transport's fd if it has one
  // (`blocking`), else yield.
  void idle(Clock::duration remaining, bool blocking);
  // The one way progress sleeps: until the transport's fd (>= 0) or the
  // thread's wake fd (>= 0) is readable, at most `limit` (negative: no
  // limit). Returns false if the poll itself failed.
  // `woken`, if given: whether the wake fd ended the sleep.
  bool sleep_on(int transport_fd, int wake_fd, std::chrono::microseconds limit, bool* woken = nullptr);
  // With every operation started: inline, as their common case (the thread
  // runs, or there is none, and it does not sleep) is two loads.
  void ensure_thread() {
    if (use_thread_ && !thread_.joinable()) start_thread();
  }
  void start_thread();
  void thread_main();
  void place_thread();
  void wake_thread(bool large, bool collective = false) {
    // Paired with the thread's store of thread_sleeping_ before it re-checks
    // outstanding_ (both sequentially consistent): no wakeup is lost. A thread
    // in a timed nap is woken only for a large operation; it sees a small one
    // at its next tick. One stepping aside on a shared CPU (step_aside) is
    // woken for a large collective only: the computation it overlaps may
    // follow this call, while a large send or receive is usually followed
    // by the next call (docs/nonblocking.md, "The progress thread on a
    // shared CPU").
    if (thread_.joinable() &&
        (thread_sleeping_.load() ||
         (large && (thread_napping_.load() || (collective && thread_aside_.load(std::memory_order_relaxed)))))) {
      signal_thread();
    }
  }
  void signal_thread();
  // The thread's nap: until the transport's fd (>= 0) or the wake fd is
  // readable, at most `limit` (negative: no limit; an operation started
  // meanwhile wakes it).
  void nap(int transport_fd, std::chrono::microseconds limit);
  // While an application thread is inside a call (which polls) or waits
  // for the lock: out of its way for a while (`backoff`: the thread's nap).
  void step_aside(std::chrono::microseconds& backoff);
  // With nothing outstanding: one round of the transport's own duties
  // between calls (UD: acks, retransmissions), then a nap on its fd.
  void serve_transport();

  Engine::Impl& engine_;
  const ProgressRules rules_;
  std::function<std::optional<Error>(bool stalled)> failure_probe_;
  std::function<void(const OperationRef&)> failure_note_;
  Operation* running_ = nullptr;  // the operation whose fiber step() resumed

  // Non-blocking operations (enable_operations).
  DriverMutex* mutex_ = nullptr;
  bool use_thread_ = false;
  std::chrono::microseconds thread_spin_{0};
  ProgressThreadPlace place_;
  bool between_calls_ = false;  // the transport needs progress between calls
  // Collectives (fibers), in the order started: advance() walks them.
  std::vector<OperationRef> operations_;
  // Point-to-point operations, in no order: each knows its place, and the
  // engine names those whose requests finished, so completing one costs the
  // same however many are outstanding (a window of 64 irecvs walked all 64
  // at each completion, and erased each from the middle of the list).
  // Not owned: their Requests own them (or Progress, once adopted).
  std::vector<Operation*> point_to_point_;
  std::vector<void*> finished_batch_;  // the engine's finished_waiters() being completed
  uint64_t next_sequence_ = 0;
  bool advancing_ = false;
  // advance() walks the operations only when an engine request has finished
  // since its last walk (an operation moves on only then) or `walk_again_`
  // says an operation may move without one (an abort, a fiber that ran):
  // a wait polls in a loop, and each empty poll walked them all.
  uint64_t finished_seen_ = 0;
  bool walk_again_ = false;
  Clock::time_point next_probe_{};
  // The thread's own (it reads application_locks() under the lock).
  uint64_t locks_seen_ = 0;
  // Stepping aside on a shared CPU (step_aside): how long, next time.
  std::chrono::microseconds aside_nap_{10};  // kFirstNap
  // Written by the thread alone: a load and a store, no locked instruction.
  std::atomic<uint64_t> thread_wakeups_{0};
  void count_wakeup() {
    thread_wakeups_.store(thread_wakeups_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
  std::chrono::microseconds in_call_nap_{1000};
  bool transport_error_logged_ = false;

  std::thread thread_;
  int wake_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<bool> thread_sleeping_{false};  // asleep until woken (no operation for a while)
  std::atomic<bool> thread_napping_{false};   // a timed nap: a tick or a backoff
  std::atomic<bool> thread_aside_{false};     // stepping aside on a shared CPU
  std::atomic<size_t> outstanding_{0};
  // Under the lock, as every change of outstanding_ is: a plain store. Only
  // an increment pairs with the thread's sleep (wake_thread), so only it
  // takes a locked instruction.
  void drop_outstanding() { outstanding_.store(outstanding_.load(std::memory_order_relaxed) - 1, std::memory_order_release); }
};

}  // namespace chorus::p2p
