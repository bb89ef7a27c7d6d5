// chorus-bench --roofline's memory model (bench/roofline.cc): the copy-
// equivalent bytes of each algorithm as docs/benchmarking.md's table gives
// them, the tree shapes behind the scatter forms, and which figure decides
// a limit.
#include "roofline.hpp"

#include <gtest/gtest.h>

namespace {

using bench::CopyRate;
using bench::memory_work;
using bench::MemoryWork;
using chorus::Collective;

constexpr size_t kS = size_t{1} << 20;
constexpr double S = static_cast<double>(kS);

TEST(Roofline, RingAllreduceReducesAndCopiesTheOtherRanksShare) {
  auto work = memory_work(Collective::allreduce, "ring", kS, 4);
  ASSERT_TRUE(work);
  EXPECT_DOUBLE_EQ(work->busiest_rank, 2.5 * 3 / 4 * S);
  EXPECT_DOUBLE_EQ(work->chain, work->busiest_rank);
}

TEST(Roofline, RabenseifnerFoldsTheExtraRanksIntoPartners) {
  auto even = memory_work(Collective::allreduce, "rabenseifner", kS, 8);
  ASSERT_TRUE(even);
  EXPECT_DOUBLE_EQ(even->busiest_rank, 2.5 * 7 / 8 * S);
  // 6 ranks: p = 4; a partner reduces a folded rank's whole vector first.
  auto folded = memory_work(Collective::allreduce, "rabenseifner", kS, 6);
  ASSERT_TRUE(folded);
  EXPECT_DOUBLE_EQ(folded->busiest_rank, 1.5 * S + 2.5 * 3 / 4 * S);
  EXPECT_DOUBLE_EQ(folded->chain, folded->busiest_rank + S);
}

TEST(Roofline, BinomialBroadcastChainsTheWholeBufferThroughEveryLevel) {
  auto work = memory_work(Collective::broadcast, "binomial", kS, 9);
  ASSERT_TRUE(work);
  EXPECT_DOUBLE_EQ(work->busiest_rank, S);
  EXPECT_DOUBLE_EQ(work->chain, 4 * S);  // ceil(log2 9)
}

TEST(Roofline, ScatterAllgatherReceivesSOnceAndChainsTheScatterTree) {
  // Every non-root is sent exactly the blocks it lacks: S. The chain: the
  // deepest scatter path, 0 -> 4 -> 6 -> 7 at 8 ranks (4 + 2 + 1 blocks of
  // 8), then the ring's 7 blocks.
  auto eight = memory_work(Collective::broadcast, "scatter_allgather", kS, 8);
  ASSERT_TRUE(eight);
  EXPECT_DOUBLE_EQ(eight->busiest_rank, S);
  EXPECT_DOUBLE_EQ(eight->chain, 7 * S / 8 + 7 * S / 8);
  // 5 ranks: rank 4's subtree is itself alone (min(4, 5 - 4)); the deepest
  // path is 0 -> 2 -> 3 (2 + 1 blocks of 5).
  auto five = memory_work(Collective::broadcast, "scatter_allgather", kS, 5);
  ASSERT_TRUE(five);
  EXPECT_DOUBLE_EQ(five->busiest_rank, S);
  EXPECT_DOUBLE_EQ(five->chain, 3 * S / 5 + 4 * S / 5);
}

TEST(Roofline, UnknownAlgorithmsHaveNoFigure) {
  EXPECT_FALSE(memory_work(Collective::allreduce, "board", kS, 4));
  EXPECT_FALSE(memory_work(Collective::broadcast, "hierarchical", kS, 4));
  EXPECT_FALSE(memory_work(Collective::allgatherv, "ring", kS, 4));
  EXPECT_FALSE(memory_work(Collective::allreduce, "no_such_algorithm", kS, 4));
}

TEST(Roofline, OneRankMovesNothing) {
  auto work = memory_work(Collective::allreduce, "ring", kS, 1);
  ASSERT_TRUE(work);
  EXPECT_EQ(work->busiest_rank, 0);
  EXPECT_EQ(work->chain, 0);
}

TEST(Roofline, TheLimitIsTheLongerOfTheBusiestRankAndTheChain) {
  CopyRate rate;
  rate.all_ranks = 1e9;
  rate.one_rank = 4e9;
  // Busiest 1 GB at 1 GB/s = 1 s; chain 2 GB at 4 GB/s = 0.5 s.
  EXPECT_DOUBLE_EQ(bench::limit_seconds(MemoryWork{1e9, 2e9}, rate), 1.0);
  // Chain 8 GB at 4 GB/s = 2 s wins.
  EXPECT_DOUBLE_EQ(bench::limit_seconds(MemoryWork{1e9, 8e9}, rate), 2.0);
}

TEST(Roofline, TheOpLimitIsTheLeastOverItsAlgorithms) {
  CopyRate rate;
  rate.all_ranks = rate.one_rank = 1e9;
  // 16 ranks, broadcast: binomial's chain is 4 S, linear's and the
  // pipeline's S: the op's limit is S at 1 GB/s.
  auto least = bench::op_limit_seconds(Collective::broadcast, kS, 16, rate);
  ASSERT_TRUE(least);
  EXPECT_DOUBLE_EQ(*least, S / 1e9);
  EXPECT_FALSE(bench::op_limit_seconds(Collective::barrier, 0, 16, rate));
}

}  // namespace
