// The board collectives (collectives/board.cc) over the in-process
// transport's boards: long runs of mixed calls (every slot reused many
// times, roots changing) with every element checked and no message sent;
// payloads above a slot falling back to messages; and the two ways ranks
// can disagree: a different call on the board (digest), and a rank that
// runs the call with messages while this one is on the board. Real
// processes over shm: the chorus-matrix tests (tests/integration).
#include "collectives/collectives.hpp"
#include "tests/collectives/test_values.hpp"
#include "tests/harness.hpp"
#include "tests/liveness.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <array>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace chorus;
using namespace chorus::testing;

namespace {

const coll::Algorithm& board(Collective op) {
  const coll::Algorithm* algorithm = coll::find(op, "board");
  if (algorithm == nullptr) throw std::runtime_error("no board algorithm");
  return *algorithm;
}

std::vector<int> identity(int n) {
  std::vector<int> ranks(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ranks[static_cast<size_t>(i)] = i;
  return ranks;
}

// Mixed calls in a row; returns the wrong elements this rank saw.
size_t run_mixed_calls(p2p::Engine& engine, int rank, int n, DataType dtype, ReduceOp redop, size_t count,
                       int calls) {
  const std::vector<int> ranks = identity(n);
  coll::Scratch scratch;
  coll::Tuning tuning;
  const Typed t{dtype};
  const size_t es = datatype_size(dtype);
  std::vector<uint8_t> send(count * es + 8), recv(count * es + 8);
  size_t wrong = 0;
  for (int call = 0; call < calls; ++call) {
    const auto op = static_cast<Collective>(
        std::array{Collective::allreduce, Collective::broadcast, Collective::reduce, Collective::barrier}[call % 4]);
    const int root = (call / 4) % n;
    const bool in_place = call % 3 == 0;
    void* in = in_place ? recv.data() : send.data();
    for (size_t i = 0; i < count; ++i) {
      t.set(in, i, op == Collective::broadcast && rank != root ? 99 : input(rank, i + static_cast<size_t>(call), redop));
      if (!in_place) t.set(recv.data(), i, 99);
    }
    coll::Context ctx(engine, ranks, rank, p2p::CallTag::collective(0, static_cast<uint64_t>(call + 1)), scratch,
                      tuning, /*call_check=*/static_cast<uint32_t>(op) + 1);
    void* out = op == Collective::broadcast ? in : recv.data();
    board(op).run(ctx, coll::Args{in, out, count, dtype, redop, root});
    for (size_t i = 0; i < count && op != Collective::barrier; ++i) {
      const size_t index = i + static_cast<size_t>(call);
      double expected = 0;
      if (op == Collective::allreduce || (op == Collective::reduce && rank == root)) {
        expected = reduced(n, index, redop);
      } else if (op == Collective::broadcast) {
        expected = input(root, index, redop);
      } else {
        continue;  // reduce: nothing promised off the root
      }
      if (t.get(out, i) != expected) ++wrong;
    }
  }
  return wrong;
}

TEST(Board, MixedCallsAreRightAndSendNoMessage) {
  for (int n : {2, 3, 5, 8}) {
    for (auto [dtype, redop] : {std::pair{DataType::float32, ReduceOp::sum}, std::pair{DataType::int32, ReduceOp::max},
                                std::pair{DataType::uint8, ReduceOp::min}, std::pair{DataType::float64, ReduceOp::prod}}) {
      for (size_t count : {size_t{1}, size_t{7}, transport::kBoardDataBytes / datatype_size(dtype)}) {
        SCOPED_TRACE(std::to_string(n) + " ranks, " + std::string(to_string(dtype)) + " " +
                     std::string(to_string(redop)) + ", count " + std::to_string(count));
        run_ranks(n, [&](p2p::Engine& engine, int rank) {
          EXPECT_EQ(run_mixed_calls(engine, rank, n, dtype, redop, count, 40), 0u) << "rank " << rank;
          EXPECT_EQ(engine.counters().eager_sent, 0u) << "rank " << rank << " sent messages";
        });
      }
    }
  }
}

TEST(Board, LargerPayloadsRunByMessages) {
  const size_t count = transport::kBoardDataBytes / 4 + 1;  // one float more than a slot holds
  run_ranks(3, [&](p2p::Engine& engine, int rank) {
    EXPECT_EQ(run_mixed_calls(engine, rank, 3, DataType::float32, ReduceOp::sum, count, 8), 0u);
    EXPECT_GT(engine.counters().eager_sent + engine.counters().rendezvous_sent, 0u);
  });
}

TEST(Board, LearnsWhichRanksShareTheCpuTheyArePinnedTo) {
  struct Case {
    std::vector<int> cpus;
    bool shared;
  };
  for (const Case& c : {Case{{0, 1, 0, 1}, true}, Case{{0, 1, 2}, false}, Case{{-1, -1, 0}, false},
                        Case{{3, -1, 3}, true}, Case{{5}, false}}) {
    std::vector<std::vector<uint8_t>> memory;
    transport::Boards boards;
    for (int cpu : c.cpus) {
      memory.emplace_back(transport::kBoardAreaBytes + transport::kBoardLine);
      uint8_t* area = memory.back().data();
      area += (transport::kBoardLine - reinterpret_cast<uintptr_t>(area) % transport::kBoardLine) % transport::kBoardLine;
      transport::board_tail(area)->pinned_cpu = cpu;
      boards.areas.push_back(area);
    }
    boards.learn_pinned_cpus();
    EXPECT_EQ(boards.pinned_cpu, c.cpus);
    EXPECT_EQ(boards.shared_cpus, c.shared) << ::testing::PrintToString(c.cpus);
  }
}

// Ranks pinned two or three to a CPU, as bench/compare-openmpi's shm-np4 path
// pins them: the board's waits keep the CPU in places (board.cc,
// keep_cpu_for), and every result must stay right. The threads are not
// pinned here; what the board decides comes from the pinning it is told.
// Real processes pinned so: integration.native_shm.shared_cpus.np5.
// More threads than online CPUs, so the engine counts the ranks as
// oversubscribed on any machine (3 and 5 on CI's 2 cores).
TEST(Board, RanksSharingCpusGetTheSameResults) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int n : {cores + 1, cores + 3}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    run_ranks(n, [&](p2p::Engine& engine, int rank) {
      ASSERT_TRUE(engine.oversubscribed());  // else the board never asks
      transport::Boards& boards = *engine.transport().boards();
      for (int peer = 0; peer < n; ++peer) boards.pinned_cpu.push_back(peer % 2);
      boards.shared_cpus = true;
      EXPECT_EQ(run_mixed_calls(engine, rank, n, DataType::int32, ReduceOp::sum, 5, 200), 0u) << "rank " << rank;
      EXPECT_EQ(engine.counters().eager_sent, 0u) << "rank " << rank << " sent messages";
    });
  }
}

// Runs `body` on every rank and returns each rank's error text ("" if none).
std::vector<std::string> errors_of(int n, const std::function<void(p2p::Engine&, int)>& body,
                                   std::chrono::milliseconds timeout) {
  std::vector<std::string> errors(static_cast<size_t>(n));
  config::Settings settings = chorus::testing::test_settings();
  settings.timeout = timeout;
  run_ranks(
      n,
      [&](p2p::Engine& engine, int rank) {
        try {
          body(engine, rank);
        } catch (const Error& e) {
          errors[static_cast<size_t>(rank)] = e.what();
        }
      },
      settings);
  return errors;
}

TEST(Board, ADifferentCallIsNamedByTheRanksThatReadIt) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> errors = errors_of(
      3,
      [](p2p::Engine& engine, int rank) {
        const std::vector<int> ranks = identity(3);
        coll::Scratch scratch;
        coll::Tuning tuning;
        float value = 1, result = 0;
        // Rank 2's digest differs, as when it passes another count or op.
        coll::Context ctx(engine, ranks, rank, p2p::CallTag::collective(0, 1), scratch, tuning, rank == 2 ? 7 : 5);
        board(Collective::allreduce).run(ctx, coll::Args{&value, &result, 1, DataType::float32, ReduceOp::sum, 0});
      },
      std::chrono::milliseconds(20000));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  for (int rank : {0, 1}) {
    EXPECT_NE(errors[static_cast<size_t>(rank)].find("rank 2 made a different call in allreduce"), std::string::npos)
        << "rank " << rank << ": " << errors[static_cast<size_t>(rank)];
  }
  EXPECT_NE(errors[2].find("made a different call in allreduce"), std::string::npos) << errors[2];
}

TEST(Board, ARankRunningTheCallByMessagesIsNamed) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> errors = errors_of(
      2,
      [](p2p::Engine& engine, int rank) {
        const std::vector<int> ranks = identity(2);
        coll::Scratch scratch;
        coll::Tuning tuning;
        float value[4] = {1, 2, 3, 4}, result[4] = {};
        coll::Context ctx(engine, ranks, rank, p2p::CallTag::collective(0, 1), scratch, tuning, 5);
        // Rank 1 takes the message path for the same call (as with a count
        // above the board's limit, or the non-blocking collective).
        const coll::Algorithm& algorithm =
            rank == 0 ? board(Collective::allreduce) : *coll::find(Collective::allreduce, "recursive_doubling");
        algorithm.run(ctx, coll::Args{value, result, 4, DataType::float32, ReduceOp::sum, 0});
      },
      std::chrono::milliseconds(20000));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(errors[0].find("received from rank 1 a message of a collective call with other arguments"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("while running allreduce on the shared-memory board"), std::string::npos) << errors[0];
  // Rank 0's answer carries the board call's digest: rank 1 fails at once too.
  EXPECT_NE(errors[1].find("received from rank 0 a message of a collective call with other arguments"),
            std::string::npos)
      << errors[1];
}

}  // namespace

namespace {

// A rank that never comes: the board wait ends at the timeout naming it
// (a rank that died is named sooner, by the failure probe, as in every wait).
// Not before the timeout (0.3 s of wall time: the library's own clock), and
// within 5 s of this process's progress (tests/liveness.hpp), not of wall
// time: at load 20-30 the wall time reached 9.6 s. A wait that never ends
// fails after 50 s of progress instead of at ctest's timeout.
TEST(Board, AWaitForAnAbsentRankTimesOutNamingIt) {
  ProgressWatch watch("the board wait for an absent rank", std::chrono::seconds(5));
  const std::vector<std::string> errors = errors_of(
      2,
      [](p2p::Engine& engine, int rank) {
        if (rank == 1) return;
        const std::vector<int> ranks = identity(2);
        coll::Scratch scratch;
        coll::Tuning tuning;
        coll::Context ctx(engine, ranks, rank, p2p::CallTag::collective(0, 1), scratch, tuning, 5);
        board(Collective::barrier).run(ctx, coll::Args{});
      },
      std::chrono::milliseconds(300));
  watch.stop();
  std::printf("%s\n", watch.describe().c_str());
  EXPECT_TRUE(watch.within_bound()) << watch.describe();
  EXPECT_GE(watch.wall(), std::chrono::milliseconds(300)) << "ended before its timeout: " << watch.describe();
  EXPECT_NE(errors[0].find("timed out after 0.3 s (CHORUS_TIMEOUT) waiting for rank 1 on the shared-memory board "
                           "(barrier #1 on context 0)"),
            std::string::npos)
      << errors[0];
  EXPECT_EQ(errors[1], "");
}

}  // namespace
