// Liveness bounds that hold on a loaded machine and still catch a hang
// (docs/testing.md, "Liveness bounds").
//
// A wall-clock bound ("the wait ends within 5 s") fails on a loaded host: at
// load 20-30 Board.AWaitForAnAbsentRankTimesOutNamingIt took 9.6 s against
// its 5 s, TcpTransport.RankGoneDuringSetupIsNamedWithinAboutASecond 10.8 s
// against 3 s. Raising the bound far enough for any load hides a slow path.
// ProgressWatch measures the process's own progress instead: a thread of
// this process sleeps `tick` (10 ms) in a loop and counts its wake-ups. On a
// loaded machine its wake-ups come late as the tested threads' do, so "the
// wait ended within B of progress" (B / tick wake-ups) stretches with the
// machine's slowness of the moment and stays tight on an idle one. A wait
// that never ends does not stop the count: at `hang_factor` x B of progress
// the watch prints what hung and aborts the process, so a hang fails the
// test in bounded time (well inside ctest's TIMEOUT), with the reason.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace chorus::testing {

class ProgressWatch {
 public:
  using Duration = std::chrono::duration<double>;

  // what: the wait being watched, for the hang message. bound: how long it
  // may take on an idle machine.
  ProgressWatch(std::string what, Duration bound, int hang_factor = 10,
                std::chrono::milliseconds tick = std::chrono::milliseconds(10))
      : what_(std::move(what)), bound_(bound), tick_(tick), start_(std::chrono::steady_clock::now()) {
    const long hang_ticks = static_cast<long>(bound.count() * hang_factor / Duration(tick).count());
    ticker_ = std::thread([this, hang_ticks] {
      while (!stopped_.load()) {
        std::this_thread::sleep_for(tick_);
        if (stopped_.load()) break;
        if (ticks_.fetch_add(1) + 1 >= hang_ticks) {
          std::fprintf(stderr,
                       "ProgressWatch: FAILED: %s has not ended after %.1f s of progress (%.1f s of wall time; "
                       "bound %.1f s): a hang\n",
                       what_.c_str(), progress().count(), wall().count(), bound_.count());
          std::fflush(stderr);
          std::abort();
        }
      }
    });
  }
  ProgressWatch(const ProgressWatch&) = delete;
  ProgressWatch& operator=(const ProgressWatch&) = delete;
  ~ProgressWatch() { stop(); }

  // Ends the count: call when the watched wait has ended.
  void stop() {
    const auto now = std::chrono::steady_clock::now();
    if (stopped_.load()) return;
    ended_ = now;
    stopped_.store(true);
    ticker_.join();
  }

  // Progress the process made while watching: wake-ups x tick (on an idle
  // machine about the wall time; less on a loaded one).
  Duration progress() const { return Duration(tick_) * static_cast<double>(ticks_.load()); }
  Duration wall() const {
    const auto end = stopped_.load() ? ended_ : std::chrono::steady_clock::now();
    return end - start_;
  }
  bool within_bound() const { return progress() < bound_; }
  // For a failed expectation: both measures and the bound.
  std::string describe() const {
    char text[200];
    std::snprintf(text, sizeof text, "%s took %.2f s of progress (%.2f s of wall time); bound %.2f s of progress",
                  what_.c_str(), progress().count(), wall().count(), bound_.count());
    return text;
  }

 private:
  std::string what_;
  Duration bound_;
  std::chrono::milliseconds tick_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point ended_{};
  std::atomic<bool> stopped_{false};
  std::atomic<long> ticks_{0};
  std::thread ticker_;
};

}  // namespace chorus::testing
