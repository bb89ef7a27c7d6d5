// tests/liveness.hpp: ProgressWatch measures a wait in this process's own
// progress, and a wait that never ends fails by itself, naming the wait.
#include "tests/liveness.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

using chorus::testing::ProgressWatch;

TEST(ProgressWatch, MeasuresAWaitThatEnds) {
  ProgressWatch watch("a 200 ms sleep", std::chrono::seconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  watch.stop();
  EXPECT_GE(watch.wall(), std::chrono::milliseconds(200));
  // Progress is counted in whole ticks, never more than the wall time.
  EXPECT_LE(watch.progress(), watch.wall() + std::chrono::milliseconds(10)) << watch.describe();
  EXPECT_GT(watch.progress().count(), 0) << watch.describe();
  EXPECT_TRUE(watch.within_bound()) << watch.describe();
}

TEST(ProgressWatch, FailsABoundOfProgress) {
  ProgressWatch watch("a 300 ms sleep", std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  watch.stop();
  // 300 ms of sleep gave the ticker more than 50 ms of progress, loaded or not
  // (it needs only 5 of its wake-ups).
  EXPECT_FALSE(watch.within_bound()) << watch.describe();
}

// The hang path: the watched wait never ends; the watch aborts the process
// after hang_factor x bound of progress, saying what hung.
TEST(ProgressWatchDeathTest, AbortsAWaitThatNeverEnds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ProgressWatch watch("a wait that never ends", std::chrono::milliseconds(100), 5);
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      },
      "ProgressWatch: FAILED: a wait that never ends has not ended after 0.5 s of progress .*: a hang");
}
