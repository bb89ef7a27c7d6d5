// The session's lock underneath p2p::DriverMutex: taking it when free is one
// compare-and-swap and releasing it one exchange, inline. std::mutex takes
// two calls into libc for the same (about 55 instructions, measured with
// bench/count-call-instructions), which a 0.15 µs collective notices. A
// thread that finds it taken sleeps on a futex until the holder's release
// wakes it (the three-state lock of Drepper's "Futexes Are Tricky").
#pragma once

#include <atomic>
#include <cstdint>

namespace chorus {

class FutexLock {
 public:
  bool try_lock() {
    uint32_t free = kFree;
    return state_.compare_exchange_strong(free, kLocked, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void lock() {
    if (try_lock()) return;
    // Say a thread sleeps, then sleep until an unlock wakes this one; a
    // thread that got the lock this way keeps the mark (it cannot tell
    // whether others sleep too), which costs its unlock one wake at most.
    while (state_.exchange(kTakenWithSleepers, std::memory_order_acquire) != kFree) sleep_while_taken();
  }
  // Sequentially consistent (the same instruction on x86): DriverMutex
  // relies on it to order what the holder stored before its later loads.
  void unlock() {
    if (state_.exchange(kFree, std::memory_order_seq_cst) == kTakenWithSleepers) wake_one();
  }

 private:
  enum : uint32_t { kFree = 0, kLocked = 1, kTakenWithSleepers = 2 };
  // FUTEX_WAIT while the word is kTakenWithSleepers. An interrupted or
  // already-changed wait returns: lock() looks again either way.
  void sleep_while_taken();
  void wake_one();
  std::atomic<uint32_t> state_{kFree};
};

}  // namespace chorus
