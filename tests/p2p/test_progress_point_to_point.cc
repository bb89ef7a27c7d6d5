// Progress' point-to-point operations (docs/nonblocking.md, "Progress"):
// the engine names the operation whose request finished, and Progress
// completes exactly that one, however many are outstanding. A window of
// receives, eager and rendezvous, completed in an order unlike the order
// they were posted or their messages were sent: each completes once, with
// its own message; what is never sent stays outstanding, is listed in the
// order it started, and is cancelled. Over the in-process transport (the
// engine's algorithm test); real transports: tests/nonblocking.
#include "common/error.hpp"
#include "p2p/progress.hpp"
#include "tests/harness.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <numeric>
#include <random>

using namespace chorus;
using chorus::testing::run_ranks;
using chorus::testing::test_settings;

namespace {

constexpr int kSent = 64;      // receives whose message comes
constexpr int kNeverSent = 4;  // receives whose message never comes

size_t bytes_of(int tag) { return tag % 3 == 0 ? 3000 : 8; }  // eager limit 1024: every third one is a rendezvous

uint8_t byte_of(int tag, size_t i) { return static_cast<uint8_t>(tag * 31 + i); }

struct Posted {
  p2p::OperationRef operation;
  std::vector<uint8_t> buffer;
  int completions = 0;
};

}  // namespace

TEST(ProgressPointToPoint, EachFinishedReceiveCompletesOnceWhateverTheOrder) {
  config::Settings settings = test_settings();
  settings.eager_limit = 1024;
  run_ranks(
      2,
      [&](p2p::Engine& engine, int rank) {
        std::vector<int> order(kSent);
        std::iota(order.begin(), order.end(), 0);
        if (rank == 0) {
          std::shuffle(order.begin(), order.end(), std::mt19937(7));
          std::vector<std::vector<uint8_t>> payloads;
          std::vector<p2p::Request> sends;
          for (int tag : order) {
            auto& payload = payloads.emplace_back(bytes_of(tag));
            for (size_t i = 0; i < payload.size(); ++i) payload[i] = byte_of(tag, i);
            sends.push_back(engine.isend(1, static_cast<p2p::Tag>(tag), payload.data(), payload.size()));
          }
          for (auto& send : sends) engine.wait(send);
          return;
        }
        p2p::DriverMutex mutex;
        p2p::Progress& progress = engine.progress_engine();
        std::vector<Posted> posted(kSent + kNeverSent);
        {
          std::lock_guard lock(mutex);
          progress.enable_operations(mutex, /*thread=*/false);
          for (int tag = 0; tag < kSent + kNeverSent; ++tag) {
            Posted& p = posted[static_cast<size_t>(tag)];
            p.buffer.assign(bytes_of(tag) + 8, 0xee);
            p.operation = p2p::make_operation("irecv");
            p.operation->tag = tag;
            p.operation->request = engine.irecv(0, static_cast<p2p::Tag>(tag), p.buffer.data(), p.buffer.size());
            p.operation->owner = &p;
            p.operation->on_complete = [](p2p::Operation& done) { ++static_cast<Posted*>(done.owner)->completions; };
            progress.start_point_to_point(*p.operation, false);
          }
        }
        // Waited for in yet another order: the others complete meanwhile, as the engine names them.
        std::shuffle(order.begin(), order.end(), std::mt19937(11));
        for (int tag : order) {
          Posted& p = posted[static_cast<size_t>(tag)];
          progress.wait(*p.operation);
          ASSERT_TRUE(p.operation->complete.load());
          EXPECT_FALSE(p.operation->error) << "tag " << tag << ": " << p.operation->error->what();
          EXPECT_EQ(p.operation->completion.bytes, bytes_of(tag)) << "tag " << tag;
          EXPECT_EQ(p.operation->completion.tag, static_cast<p2p::Tag>(tag));
          for (size_t i = 0; i < bytes_of(tag); ++i) {
            ASSERT_EQ(p.buffer[i], byte_of(tag, i)) << "tag " << tag << " byte " << i;
          }
          EXPECT_EQ(p.buffer[bytes_of(tag)], 0xee) << "tag " << tag << ": written past the message";
        }
        std::lock_guard lock(mutex);
        EXPECT_EQ(progress.outstanding(), static_cast<size_t>(kNeverSent));
        const auto left = progress.outstanding_operations();
        ASSERT_EQ(left.size(), static_cast<size_t>(kNeverSent));
        for (int i = 0; i < kNeverSent; ++i) EXPECT_EQ(left[static_cast<size_t>(i)]->tag, kSent + i) << "in start order";
        progress.cancel_all([](const p2p::Operation& operation) {
          return Error(Status::invalid_argument, concat("cancelled tag ", operation.tag));
        });
        EXPECT_EQ(progress.outstanding(), 0u);
        for (int tag = 0; tag < kSent + kNeverSent; ++tag) {
          const Posted& p = posted[static_cast<size_t>(tag)];
          EXPECT_EQ(p.completions, 1) << "tag " << tag << " completed " << p.completions << " times";
          if (tag >= kSent) {
            ASSERT_TRUE(p.operation->error) << "tag " << tag;
            EXPECT_NE(std::string(p.operation->error->what()).find(concat("cancelled tag ", tag)), std::string::npos)
                << p.operation->error->what();
          }
        }
      },
      settings);
}

// Progress lists a point-to-point operation without owning it; one whose
// owner goes while it is outstanding (detach) is Progress' to free when it
// completes, and one detached after it completed is freed at once. Counted
// through the operations' own destroy functions (and ASan/LSan in the
// sanitizer job: a use after free or a leak fails it).
TEST(ProgressPointToPoint, DetachedOperationsAreFreedOnceTheyComplete) {
  static std::atomic<int> destroyed{0};
  destroyed = 0;
  run_ranks(
      2,
      [&](p2p::Engine& engine, int rank) {
        if (rank == 0) {
          uint64_t value = 42;
          for (p2p::Tag tag : {1, 2}) {
            p2p::Request send = engine.isend(1, tag, &value, sizeof value);
            engine.wait(send);
          }
          return;
        }
        p2p::DriverMutex mutex;
        p2p::Progress& progress = engine.progress_engine();
        std::array<uint64_t, 2> buffers{};
        auto post = [&](p2p::Tag tag) {
          p2p::OperationRef operation = p2p::make_operation("irecv");
          operation->destroy = [](p2p::Operation* done) {
            ++destroyed;
            delete done;
          };
          operation->request = engine.irecv(0, tag, &buffers[tag - 1], sizeof(uint64_t));
          std::lock_guard lock(mutex);
          progress.start_point_to_point(*operation, false);
          return operation;
        };
        {
          std::lock_guard lock(mutex);
          progress.enable_operations(mutex, /*thread=*/false);
        }
        // Detached while outstanding: adopted, not freed.
        p2p::OperationRef first = post(1);
        progress.detach(*first.release());
        EXPECT_EQ(destroyed.load(), 0);
        // Completed while its owner holds it, then detached: freed at once.
        p2p::OperationRef second = post(2);
        progress.wait(*second);
        EXPECT_FALSE(second->error);
        // The first one's message came before the second's: it completed too.
        {
          std::lock_guard lock(mutex);
          EXPECT_EQ(progress.outstanding(), 0u);
        }
        EXPECT_EQ(destroyed.load(), 1) << "the detached operation is freed when it completes";
        p2p::Operation* raw = second.release();
        progress.detach(*raw);
        EXPECT_EQ(destroyed.load(), 2) << "one detached after it completed is freed at once";
        EXPECT_EQ(buffers[0], 42u);
        EXPECT_EQ(buffers[1], 42u);
      },
      test_settings());
}
