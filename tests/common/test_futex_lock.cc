// FutexLock (src/base/common/futex_lock.hpp), the session's lock: mutual
// exclusion under contention, with holders that keep it long enough that
// waiters take the futex sleep, and try_lock's answer.
#include "common/futex_lock.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using chorus::FutexLock;

TEST(FutexLock, TryLockFailsWhileHeldAndSucceedsAfter) {
  FutexLock lock;
  ASSERT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

// More threads than this machine has cores, each incrementing a plain
// counter under the lock; a lost increment means two held it at once.
// Every 64th hold sleeps a little, so the others find it taken, sleep on the
// futex and must be woken by the unlock.
TEST(FutexLock, ThreadsNeverHoldItTogetherAndSleepersAreWoken) {
  FutexLock lock;
  uint64_t counter = 0;
  int inside = 0;
  int overlaps = 0;
  constexpr int kThreads = 6, kRounds = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        std::lock_guard hold(lock);
        if (++inside != 1) ++overlaps;
        ++counter;
        if (round % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
        --inside;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(overlaps, 0);
  EXPECT_EQ(counter, uint64_t{kThreads} * kRounds);
}
