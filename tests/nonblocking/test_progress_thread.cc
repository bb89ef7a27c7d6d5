// The progress thread's schedule between calls, for a transport that needs
// it (UD; docs/nonblocking.md, "Progress between calls"): when it polls and
// when it sleeps, with a fake transport whose wait fd the test makes
// readable. What it moves on a real UD QP is tested in the lab
// (tests/verbs: verbs.nonblocking.ud_between_calls.*).
#include "p2p/progress.hpp"

#include <gtest/gtest.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using namespace chorus;
using namespace std::chrono_literals;

namespace {

// Polls are counted; the wait fd is an eventfd the test signals ("a
// datagram arrived" or "the retransmission timer expired"), drained by poll().
class DutyTransport final : public transport::Transport {
 public:
  explicit DutyTransport(bool needs_progress) : needs_progress_(needs_progress) {
    fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    EXPECT_GE(fd_, 0);
  }
  ~DutyTransport() override { close(fd_); }

  void signal() {
    const uint64_t one = 1;
    EXPECT_EQ(write(fd_, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  }
  int polls() const { return polls_.load(); }

  std::string name() const override { return "duty"; }
  transport::Blob address() override { return {}; }
  void connect(const std::vector<transport::Blob>&) override {}
  size_t max_eager_bytes() const override { return 4096; }
  void post_eager(int, const void*, size_t, const void*, size_t) override {}
  std::unique_ptr<transport::MemoryRegion> register_memory(void*, size_t) override { return nullptr; }
  void post_read(int, transport::RemoteBuffer, transport::MemoryRegion&, size_t, size_t, uint64_t) override {}
  int poll(transport::Sink&) override {
    polls_.fetch_add(1);
    uint64_t drained = 0;
    return read(fd_, &drained, sizeof drained) == static_cast<ssize_t>(sizeof drained) ? 1 : 0;
  }
  int wait_fd() override { return fd_; }
  bool arm() override { return true; }
  bool needs_progress_between_calls() const override { return needs_progress_; }

 private:
  bool needs_progress_;
  int fd_ = -1;
  std::atomic<int> polls_{0};
};

config::Settings settings() {
  config::Settings settings;
  settings.spin = std::chrono::microseconds(0);
  return settings;
}

// Polls seen within `limit` after `start` polls (returns as soon as more came).
int polls_after(const DutyTransport& transport, int start, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (transport.polls() == start && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  return transport.polls();
}

// Waits until the thread stops polling (two looks without a call, then
// asleep). Its ticks are 1 ms apart: 150 ms of quiet is sleep, even on a
// loaded machine.
int settled(const DutyTransport& transport) {
  int last = transport.polls();
  for (;;) {
    std::this_thread::sleep_for(150ms);
    if (transport.polls() == last) return last;
    last = transport.polls();
  }
}

struct Fixture {
  explicit Fixture(bool needs_progress, bool thread = true)
      : transport(needs_progress), engine(transport, 0, 1, 1, settings()), progress(&engine.progress_engine()) {
    std::lock_guard lock(mutex);  // as the session does after connect
    progress->enable_operations(mutex, thread);
    progress->serve_between_calls();
  }
  ~Fixture() { progress->stop_thread(); }
  p2p::DriverMutex mutex;
  DutyTransport transport;
  p2p::Engine engine;
  p2p::Progress* progress;
};

}  // namespace

TEST(ProgressBetweenCalls, IdleThreadSleepsAndWakesOnlyForArrivalsAndCalls) {
  Fixture f(true);
  const int start = polls_after(f.transport, 0, 2000ms);
  EXPECT_GT(start, 0) << "the thread looks at the transport once started";
  const int quiet = settled(f.transport);
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(f.transport.polls(), quiet) << "nothing readable, no call: no polls (no spinning, no ticks)";

  // An arrival (or the transport's timer) wakes it.
  f.transport.signal();
  EXPECT_GT(polls_after(f.transport, quiet, 2000ms), quiet);
  const int after_arrival = settled(f.transport);

  // The end of a call wakes it: the call may have left duties the
  // transport's timer does not know of.
  { std::lock_guard lock(f.mutex); }
  EXPECT_GT(polls_after(f.transport, after_arrival, 2000ms), after_arrival);
  const int after_call = settled(f.transport);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(f.transport.polls(), after_call);
}

TEST(ProgressBetweenCalls, ThreadStaysOutWhileTheApplicationIsInACall) {
  Fixture f(true);
  polls_after(f.transport, 0, 2000ms);
  settled(f.transport);
  int during = 0;
  {
    std::lock_guard lock(f.mutex);  // a long blocking call: it polls itself
    const int before = f.transport.polls();
    f.transport.signal();  // an arrival during the call wakes the thread, which must not take over
    std::this_thread::sleep_for(100ms);
    during = f.transport.polls() - before;
  }
  EXPECT_EQ(during, 0);
  EXPECT_GT(polls_after(f.transport, f.transport.polls(), 2000ms), 0);
}

TEST(ProgressBetweenCalls, NoThreadForOtherTransportsOrCallerProgress) {
  for (const auto& [needs_progress, thread] : {std::pair{false, true}, std::pair{true, false}}) {
    Fixture f(needs_progress, thread);
    f.transport.signal();
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(f.transport.polls(), 0) << "needs progress " << needs_progress << ", thread " << thread;
  }
}

// wait_any looks at its operations before it takes the lock, then under it
// picks one to progress. One that completes in between (the progress thread
// completes operations under the lock) must end the wait. It once left the
// wait without a target and crashed (verbs.nonblocking.ud.np4 in the lab, a
// SIGSEGV in Progress::wait_any; docs/nonblocking.md, "Ordering and
// concurrency").
TEST(ProgressWaitAny, AnOperationCompletedWhileWaitingForTheLockEndsTheWait) {
  Fixture f(false, false);
  p2p::Operation operation("irecv");
  std::atomic<bool> holding{false};
  std::thread completer([&] {
    std::lock_guard lock(f.mutex);
    holding = true;
    std::this_thread::sleep_for(200ms);  // wait_any has looked by now and waits for the lock
    operation.complete.store(true, std::memory_order_release);
  });
  while (!holding) std::this_thread::yield();
  EXPECT_EQ(f.progress->wait_any({&operation}), 0u);
  completer.join();
}

// On a CPU it shares with the application (more threads than this host's
// CPUs: the rules of ProgressRules::for_host), the thread stays out of a
// call's way: every wakeup would preempt the call, which polls itself.
// Naps of at most 1 ms while the call lasts, not 200 us, and the large
// operations the call starts do not wake it (docs/nonblocking.md, "The
// progress thread on a shared CPU"). Once the application stops calling,
// the thread takes the operations up again. A loaded host makes the naps
// longer, so fewer wakeups: the bound cannot fail from load.
TEST(ProgressThread, StaysAsideWhileTheApplicationCallsOnASharedCpu) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  ASSERT_GT(cpus, 0);
  DutyTransport transport(false);
  // As many local ranks as CPUs: two threads each, one CPU.
  p2p::Engine engine(transport, 0, 1, static_cast<int>(cpus), settings());
  p2p::Progress& progress = engine.progress_engine();
  p2p::DriverMutex mutex;
  std::vector<p2p::OperationRef> operations;
  std::array<uint64_t, 4> buffers{};
  auto post = [&](p2p::Tag tag) {  // under the lock: a receive nobody sends to
    p2p::OperationRef operation = p2p::make_operation("irecv");
    operation->request = engine.irecv(0, tag, &buffers[tag], sizeof(uint64_t));
    progress.start_point_to_point(*operation, /*large=*/true);
    operations.push_back(std::move(operation));
  };
  {
    std::lock_guard lock(mutex);
    progress.enable_operations(mutex, /*thread=*/true);
    post(0);
  }
  // The thread polls while the operation is outstanding and nobody calls.
  EXPECT_GT(polls_after(transport, 0, 2000ms), 0);

  constexpr auto kCall = 300ms;
  uint64_t woke = 0;
  int polled = 0;
  {
    std::lock_guard lock(mutex);  // a long call, which starts large operations
    const uint64_t wakeups_before = progress.thread_wakeups();
    const int polls_before = transport.polls();
    for (p2p::Tag tag = 1; tag < 4; ++tag) {
      post(tag);
      std::this_thread::sleep_for(kCall / 3);
    }
    woke = progress.thread_wakeups() - wakeups_before;
    polled = transport.polls() - polls_before;
  }
  EXPECT_EQ(polled, 0) << "the thread does not poll while a call holds the lock";
  // 1 ms naps (after 10, 20, ... 640 us): about 300 in 300 ms; naps of
  // 200 us and a wakeup per large operation made 1 500 and more.
  EXPECT_LE(woke, 300u + 20u) << "wakeups of the progress thread during a " << kCall.count() << " ms call";

  // The call is over and the application computes: the thread polls again.
  const int at_end = transport.polls();
  EXPECT_GT(polls_after(transport, at_end, 2000ms), at_end);
  {
    std::lock_guard lock(mutex);
    progress.cancel_all([](const p2p::Operation&) { return Error(Status::internal, "test over"); });
  }
  progress.stop_thread();
}
