// Fibers (src/p2p/fiber.hpp): suspend and resume, resumption from
// another thread, exceptions kept for the owner, nesting.
#include "p2p/fiber.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <thread>
#include <vector>

using chorus::p2p::Fiber;

TEST(Fiber, SuspendsAndResumesWhereItLeft) {
  std::vector<int> trace;
  Fiber fiber([&] {
    trace.push_back(1);
    Fiber::suspend();
    trace.push_back(3);
    Fiber::suspend();
    trace.push_back(5);
  }, 64 * 1024);
  fiber.resume();
  trace.push_back(2);
  fiber.resume();
  trace.push_back(4);
  EXPECT_FALSE(fiber.finished());
  fiber.resume();
  EXPECT_TRUE(fiber.finished());
  EXPECT_EQ(trace, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(Fiber::current(), nullptr);
}

TEST(Fiber, ResumesOnAnotherThread) {
  int stage = 0;
  Fiber fiber([&] {
    stage = 1;
    Fiber::suspend();
    stage = 2;
  }, 64 * 1024);
  fiber.resume();
  std::thread other([&] { fiber.resume(); });
  other.join();
  EXPECT_EQ(stage, 2);
  EXPECT_TRUE(fiber.finished());
}

TEST(Fiber, ExceptionIsKeptForTheOwner) {
  Fiber fiber([] {
    Fiber::suspend();
    throw std::runtime_error("from the fiber");
  }, 64 * 1024);
  fiber.resume();
  fiber.resume();
  ASSERT_TRUE(fiber.finished());
  EXPECT_THROW(fiber.rethrow_if_failed(), std::runtime_error);
}

TEST(Fiber, CurrentNamesTheRunningFiberAndNests) {
  Fiber* seen_outer = nullptr;
  Fiber* seen_inner = nullptr;
  Fiber* outer_ptr = nullptr;
  Fiber outer([&] {
    seen_outer = Fiber::current();
    Fiber inner([&] { seen_inner = Fiber::current(); }, 64 * 1024);
    inner.resume();
    EXPECT_EQ(Fiber::current(), outer_ptr);
  }, 128 * 1024);
  outer_ptr = &outer;
  outer.resume();
  EXPECT_EQ(seen_outer, &outer);
  EXPECT_NE(seen_inner, nullptr);
  EXPECT_NE(seen_inner, &outer);
  EXPECT_TRUE(outer.finished());
}

TEST(Fiber, SuspendOutsideAFiberIsAnError) { EXPECT_THROW(Fiber::suspend(), std::exception); }
