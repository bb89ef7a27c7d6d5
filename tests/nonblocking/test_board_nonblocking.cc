// Non-blocking board calls (collectives/board.cc run on a fiber,
// docs/nonblocking.md): over the in-process transport's boards every rank
// posts many small non-blocking allreduce, broadcast, reduce and barrier
// calls (each takes its board ticket when posted, in call order), with
// blocking board calls between them, then waits for them in an order that
// differs per rank; every element is checked and no message is sent. With
// the progress thread and without it. And a non-blocking board call waiting
// for a rank that never comes ends at the timeout naming that rank. Real
// processes over shm: the nonblocking.native_shm.* tests (tests/nonblocking).
#include "collectives/collectives.hpp"
#include "nonblocking/progress.hpp"
#include "tests/collectives/board_algorithm.hpp"
#include "tests/collectives/test_values.hpp"
#include "tests/harness.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

using namespace chorus;
using chorus::testing::board;
using chorus::testing::input;
using chorus::testing::reduced;
using chorus::testing::run_ranks;
using chorus::testing::Typed;

namespace {

// One rank's side of the test: its engine's progress, its calls' order.
class Rank {
 public:
  Rank(p2p::Engine& engine, int rank, int size, bool thread,
       std::chrono::milliseconds timeout = std::chrono::milliseconds(30000))
      : engine_(engine), rank_(rank), ranks_(static_cast<size_t>(size)),
        progress_(engine, mutex_, thread, std::chrono::microseconds(0), timeout) {
    for (int r = 0; r < size; ++r) ranks_[static_cast<size_t>(r)] = r;
  }
  ~Rank() {
    std::unique_lock lock(mutex_);
    progress_.complete_all(lock, nullptr);
  }

  struct Call {
    Collective op{};
    int root = 0;
    size_t first = 0;  // index of the first input value
    std::vector<uint8_t> in, out;
    std::shared_ptr<nb::Operation> operation;  // null: a blocking call
  };

  // Starts call number `index` (its kind, root and values follow from it);
  // non-blocking unless `blocking`.
  std::unique_ptr<Call> start(int index, DataType dtype, ReduceOp redop, size_t count, bool blocking) {
    auto call = std::make_unique<Call>();
    call->op = std::array{Collective::allreduce, Collective::broadcast, Collective::reduce,
                          Collective::barrier}[static_cast<size_t>(index) % 4];
    call->root = (index / 4) % size();
    call->first = static_cast<size_t>(index);
    const Typed t{dtype};
    call->in.resize(count * datatype_size(dtype) + 8);
    call->out.resize(call->in.size());
    for (size_t i = 0; i < count; ++i) {
      const bool not_root = call->op == Collective::broadcast && rank_ != call->root;
      t.set(call->in.data(), i, not_root ? 99 : input(rank_, call->first + i, redop));
      t.set(call->out.data(), i, 99);
    }
    void* out = call->op == Collective::broadcast ? call->in.data() : call->out.data();
    const coll::Args args{call->in.data(), out, count, dtype, redop, call->root};
    const coll::Algorithm& algorithm = board(call->op);
    const p2p::CallTag tag = p2p::CallTag::collective(0, static_cast<uint64_t>(index + 1));
    const uint32_t digest = static_cast<uint32_t>(call->op) + 1;
    std::lock_guard lock(mutex_);
    // Posted in call order, as CommunicatorImpl::prepare takes it.
    const transport::BoardTicket ticket = engine_.transport().boards()->reserve(0, digest);
    if (blocking) {
      coll::Context ctx(engine_, ranks_, rank_, tag, scratch_, tuning_, digest);
      ctx.set_board_ticket(ticket);
      algorithm.run(ctx, args);
      return call;
    }
    call->operation = std::make_shared<nb::Operation>("iboard");
    call->operation->scratch = std::make_unique<coll::Scratch>();
    nb::Operation* raw = call->operation.get();
    progress_.start_collective(
        call->operation,
        [this, raw, tag, digest, ticket, args, &algorithm] {
          nb::FiberSuspender suspender(*raw);
          coll::Context ctx(engine_, ranks_, rank_, tag, *raw->scratch, tuning_, digest, &suspender);
          ctx.set_board_ticket(ticket);
          algorithm.run(ctx, args);
        },
        false);
    return call;
  }

  void wait(Call& call) {
    if (call.operation) progress_.wait(*call.operation);
  }

  // Wrong elements of a finished call.
  size_t wrong(const Call& call, DataType dtype, ReduceOp redop, size_t count) const {
    const Typed t{dtype};
    const void* out = call.op == Collective::broadcast ? call.in.data() : call.out.data();
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      double expected = 0;
      if (call.op == Collective::allreduce || (call.op == Collective::reduce && rank_ == call.root)) {
        expected = reduced(size(), call.first + i, redop);
      } else if (call.op == Collective::broadcast) {
        expected = input(call.root, call.first + i, redop);
      } else {
        continue;  // barrier; reduce off the root: nothing promised
      }
      if (t.get(out, i) != expected) ++wrong;
    }
    return wrong;
  }

  int size() const { return static_cast<int>(ranks_.size()); }

 private:
  p2p::Engine& engine_;
  int rank_;
  std::vector<int> ranks_;
  nb::DriverMutex mutex_;
  nb::Progress progress_;
  coll::Scratch scratch_;
  coll::Tuning tuning_;
};

void outstanding_board_calls(bool thread) {
  for (int n : {2, 3, 5}) {
    for (auto [dtype, redop] : {std::pair{DataType::float32, ReduceOp::sum}, std::pair{DataType::int32, ReduceOp::max}}) {
      for (size_t count : {size_t{1}, size_t{7}, size_t{100}}) {
        SCOPED_TRACE(std::to_string(n) + " ranks, " + std::string(to_string(dtype)) + ", count " +
                     std::to_string(count) + (thread ? ", progress thread" : ", caller progress"));
        run_ranks(n, [&](p2p::Engine& engine, int rank) {
          Rank me(engine, rank, n, thread);
          std::vector<std::unique_ptr<Rank::Call>> calls;
          size_t wrong = 0;
          constexpr int kCalls = 48;
          for (int index = 0; index < kCalls; ++index) {
            // Every seventh call blocks: it must wait for this rank's
            // outstanding board calls before it, and drives them.
            const bool blocking = index % 7 == 6;
            calls.push_back(me.start(index, dtype, redop, count, blocking));
            if (blocking) wrong += me.wrong(*calls.back(), dtype, redop, count);
          }
          // Waited in an order that differs per rank.
          std::vector<size_t> order(calls.size());
          for (size_t i = 0; i < order.size(); ++i) order[i] = i;
          std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(17 + rank * 31)));
          for (size_t i : order) {
            me.wait(*calls[i]);
            wrong += me.wrong(*calls[i], dtype, redop, count);
          }
          EXPECT_EQ(wrong, 0u) << "rank " << rank;
          EXPECT_EQ(engine.counters().eager_sent + engine.counters().rendezvous_sent, 0u)
              << "rank " << rank << " sent messages";
        });
      }
    }
  }
}

TEST(BoardNonBlocking, OutstandingCallsWithTheProgressThreadAreRight) { outstanding_board_calls(true); }
TEST(BoardNonBlocking, OutstandingCallsWithCallerProgressAreRight) { outstanding_board_calls(false); }

// A rank that never comes: the non-blocking call's wait ends at the timeout
// naming it, as a blocking board call's does.
TEST(BoardNonBlocking, AWaitForAnAbsentRankTimesOutNamingIt) {
  config::Settings settings = chorus::testing::test_settings();
  settings.timeout = std::chrono::milliseconds(300);
  std::string error;
  const auto start = std::chrono::steady_clock::now();
  run_ranks(
      2,
      [&](p2p::Engine& engine, int rank) {
        if (rank == 1) return;
        Rank me(engine, rank, 2, false, settings.timeout);
        auto call = me.start(3, DataType::float32, ReduceOp::sum, 0, false);  // index 3: a barrier
        try {
          me.wait(*call);
        } catch (const Error& e) {
          error = e.what();
        }
      },
      settings);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(error.find("timed out after 0.3 s (CHORUS_TIMEOUT) waiting for rank 1 on the shared-memory board "
                       "(barrier #1 on context 0)"),
            std::string::npos)
      << error;
}

}  // namespace
