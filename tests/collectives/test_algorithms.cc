// Every algorithm of every collective over the in-process transport: rank
// counts that are not powers of two, counts that do not divide evenly (and
// smaller than the rank count), eager and rendezvous sizes, in-place and
// out-of-place, every root; every element checked. Inputs are small integers
// so float sums are exact in any order. The ranks are spread over up to 3
// made-up hosts of uneven sizes, neither in blocks nor round-robin (what the
// hierarchical algorithms split by; the flat ones ignore it).
#include "collectives/collectives.hpp"
#include "tests/collectives/test_values.hpp"
#include "tests/harness.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace chorus;
using namespace chorus::testing;

namespace {

using Case = AlgorithmCase;

// Runs one case on every rank (and, for rooted ops, every root) and checks all elements.
void run_case(const Case& c) {
  SCOPED_TRACE(name_of(c));
  const coll::Algorithm* algorithm = coll::find(c.op, c.algorithm);
  ASSERT_NE(algorithm, nullptr);
  const bool rooted = c.op == Collective::broadcast || c.op == Collective::reduce;
  const int roots = rooted ? (c.count > 5000 ? 2 : c.ranks) : 1;
  const Typed t{c.dtype};
  const size_t es = datatype_size(c.dtype);
  const size_t n = static_cast<size_t>(c.ranks);
  run_ranks(c.ranks, [&](p2p::Engine& engine, int rank) {
    std::vector<int> engine_ranks(n);
    for (size_t i = 0; i < n; ++i) engine_ranks[i] = static_cast<int>(i);
    std::vector<int> host_of(n);
    for (size_t i = 0; i < n; ++i) host_of[i] = static_cast<int>((i * 5 + i / 3) % std::min<size_t>(n, 3));
    coll::Scratch scratch;
    coll::Tuning tuning;
    tuning.pipeline_chunk_bytes = 4096;  // many chunks: exercises pipelining
    for (int root_index = 0; root_index < roots; ++root_index) {
      const int root = root_index == 1 && roots == 2 ? c.ranks - 1 : root_index;
      const bool blocks = c.op == Collective::allgather || c.op == Collective::reduce_scatter || c.op == Collective::alltoall;
      const size_t send_elems = (c.op == Collective::allgather) ? c.count : blocks ? c.count * n : c.count;
      const size_t recv_elems = (c.op == Collective::reduce_scatter) ? c.count : blocks ? c.count * n : c.count;
      std::vector<uint64_t> send_store(send_elems * es / 8 + 2), recv_store(std::max(send_elems, recv_elems) * es / 8 + 2);
      void* send = send_store.data();
      void* recv = recv_store.data();
      for (size_t i = 0; i < recv_elems; ++i) t.set(recv, i, 99);
      if (c.in_place) {
        // The send data lives inside the receive buffer, per the API's conventions.
        if (c.op == Collective::allgather) {
          send = static_cast<uint8_t*>(recv) + static_cast<size_t>(rank) * c.count * es;
        } else {
          send = recv;
        }
      }
      for (size_t i = 0; i < send_elems; ++i) {
        bool is_input = c.op != Collective::broadcast || rank == root;
        t.set(send, i, is_input ? input(rank, i, c.redop) : 99);
      }
      std::vector<uint8_t> send_before(static_cast<uint8_t*>(send), static_cast<uint8_t*>(send) + send_elems * es);
      void* result = recv;
      if (c.in_place && c.op == Collective::reduce_scatter) result = static_cast<uint8_t*>(recv) + static_cast<size_t>(rank) * c.count * es;
      if (c.op == Collective::broadcast) result = send;
      coll::Context ctx(engine, engine_ranks, rank, p2p::CallTag::collective(0, static_cast<uint64_t>(root_index + 1)), scratch, tuning);
      ctx.set_hosts(host_of);
      coll::Args args{send, result, c.count, c.dtype, c.redop, root};
      algorithm->run(ctx, args);
      // Check every element this rank must hold.
      size_t wrong = 0;
      for (size_t i = 0; i < recv_elems; ++i) {
        double expected = NAN;
        switch (c.op) {
          case Collective::allreduce: expected = reduced(c.ranks, i, c.redop); break;
          case Collective::reduce: expected = rank == root ? reduced(c.ranks, i, c.redop) : NAN; break;
          case Collective::broadcast: expected = input(root, i, c.redop); break;
          case Collective::allgather: expected = input(static_cast<int>(i / c.count), i % c.count, c.redop); break;
          case Collective::reduce_scatter: expected = reduced(c.ranks, static_cast<size_t>(rank) * c.count + i, c.redop); break;
          case Collective::alltoall:
            expected = input(static_cast<int>(i / c.count), static_cast<size_t>(rank) * c.count + i % c.count, c.redop);
            break;
          default: break;  // barrier; gather..exscan: test_block_algorithms.cc
        }
        if (std::isnan(expected)) continue;
        double got = t.get(result, i);
        if (got != expected && ++wrong <= 3) {
          ADD_FAILURE() << "rank " << rank << " root " << root << " element " << i << ": got " << got << ", expected " << expected;
        }
      }
      EXPECT_EQ(wrong, 0u) << "rank " << rank;
      if (!c.in_place && c.op != Collective::broadcast) {
        EXPECT_EQ(0, std::memcmp(send_before.data(), send, send_before.size())) << "send buffer modified on rank " << rank;
      }
    }
  });
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const Collective data_ops[] = {Collective::allreduce, Collective::broadcast, Collective::reduce,
                                 Collective::allgather, Collective::reduce_scatter, Collective::alltoall};
  for (Collective op : data_ops) {
    for (const coll::Algorithm* algorithm : coll::algorithms(op)) {
      for (int ranks : {2, 3, 4, 5, 7, 8, 13, 16}) {
        std::vector<size_t> counts = {1, 2, 3, static_cast<size_t>(ranks - 1), static_cast<size_t>(ranks + 1), 1000};
        bool per_rank = op == Collective::allgather || op == Collective::reduce_scatter || op == Collective::alltoall;
        // Above the 16 KiB eager limit: rendezvous reads. Per-rank ops scale with n.
        if (ranks <= 8) counts.push_back(per_rank ? 9000 : 70000);
        for (size_t count : counts) {
          if (count == 0) continue;
          for (bool in_place : {false, true}) {
            if (op == Collective::broadcast && in_place) continue;  // one buffer anyway
            cases.push_back({op, std::string(algorithm->name), ranks, count, in_place});
          }
        }
      }
    }
  }
  return cases;
}

}  // namespace

class Algorithms : public ::testing::TestWithParam<Case> {};
TEST_P(Algorithms, EveryElementCorrect) { run_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(AllCollectives, Algorithms, ::testing::ValuesIn(all_cases()), CaseName());

// Every dtype family and op through each reducing collective, 5 ranks.
CHORUS_EVERY_DTYPE_AND_OP(ReductionOps, Collective::allreduce, Collective::reduce, Collective::reduce_scatter);

TEST(Barrier, EveryRankCountCompletes) {
  for (int ranks : {2, 3, 5, 8, 13}) {
    run_ranks(ranks, [&](p2p::Engine& engine, int rank) {
      std::vector<int> engine_ranks(static_cast<size_t>(ranks));
      for (int i = 0; i < ranks; ++i) engine_ranks[static_cast<size_t>(i)] = i;
      coll::Scratch scratch;
      coll::Tuning tuning;
      for (uint64_t call = 1; call <= 3; ++call) {
        coll::Context ctx(engine, engine_ranks, rank, p2p::CallTag::collective(0, call), scratch, tuning);
        coll::find(Collective::barrier, "dissemination")->run(ctx, {});
      }
    });
  }
}

TEST(Selection, TableCoversEveryCollective) {
  for (int i = 0; i < kNumCollectives; ++i) {
    auto op = static_cast<Collective>(i);
    EXPECT_FALSE(coll::algorithms(op).empty()) << to_string(op);
    for (size_t bytes : {size_t{0}, size_t{8}, size_t{1} << 14, size_t{1} << 20, size_t{1} << 30}) {
      for (int ranks : {2, 3, 64}) EXPECT_EQ(coll::select(op, bytes, ranks).op, op);
    }
  }
  EXPECT_EQ(coll::select(Collective::allreduce, 8, 4).name, "recursive_doubling");
  EXPECT_EQ(coll::select(Collective::allreduce, 64 * 1024, 4).name, "tree");
  EXPECT_EQ(coll::select(Collective::allreduce, 4 << 20, 4).name, "ring");
  EXPECT_EQ(coll::select(Collective::broadcast, 8, 4).name, "linear");  // measured: 3..8 ranks below 32 KiB
  EXPECT_EQ(coll::select(Collective::broadcast, 32 * 1024 - 1, 8).name, "linear");
  EXPECT_EQ(coll::select(Collective::broadcast, 32 * 1024, 4).name, "binomial");
  EXPECT_EQ(coll::select(Collective::broadcast, 8, 9).name, "binomial");
  EXPECT_EQ(coll::select(Collective::broadcast, 8, 2).name, "binomial");
  EXPECT_EQ(coll::select(Collective::broadcast, 4 << 20, 4).name, "binomial");  // measured: up to 4 ranks
  EXPECT_EQ(coll::select(Collective::broadcast, 4 << 20, 5).name, "pipelined");
  // Two ranks have their own rows (measured, docs/performance.md): no tree, no chain.
  EXPECT_EQ(coll::select(Collective::allreduce, 64 * 1024, 2).name, "recursive_doubling");
  EXPECT_EQ(coll::select(Collective::allreduce, 128 * 1024 - 1, 2).name, "recursive_doubling");
  EXPECT_EQ(coll::select(Collective::allreduce, 128 * 1024, 2).name, "ring");
  EXPECT_EQ(coll::select(Collective::allreduce, 64 * 1024, 3).name, "tree");
  EXPECT_EQ(coll::select(Collective::broadcast, 4 << 20, 2).name, "binomial");
  EXPECT_EQ(coll::select(Collective::broadcast, 4 << 20, 3).name, "binomial");
  EXPECT_EQ(coll::select(Collective::allgather, 4 << 20, 2).name, "ring");
  EXPECT_EQ(coll::find(Collective::allreduce, "nonsense"), nullptr);
  EXPECT_EQ(coll::find(Collective::broadcast, "ring"), nullptr);  // names are per collective
  const std::string table = coll::describe_selection_table();
  EXPECT_NE(table.find("recursive_doubling"), std::string::npos);
  EXPECT_NE(table.find("[128K, inf)      2        ring"), std::string::npos) << table;
  EXPECT_NE(table.find("[0, inf)         2..4     binomial"), std::string::npos) << table;
  EXPECT_NE(table.find("[64K, inf)       >=2      pipelined"), std::string::npos) << table;
}

// Float sums depend on the order of the additions: every allreduce must
// still leave identical bits on every rank (each element reduced in one
// order, the same everywhere). Inputs of many magnitudes, so a different
// order gives different bits; uneven block sizes, rank counts not powers of
// two. min and max with a NaN on some ranks: min(NaN, 1) is 1 and min(1,
// NaN) is NaN, so two partners that each put their own value first end
// with different results (recursive doubling did, before it ordered the
// operands by rank).
void expect_identical_bits_on_every_rank(const coll::Algorithm& algorithm, ReduceOp op, DataType dtype, int ranks) {
  const size_t count = 1237;
  const size_t es = datatype_size(dtype);
  std::vector<std::vector<uint8_t>> results(static_cast<size_t>(ranks));
  run_ranks(ranks, [&](p2p::Engine& engine, int rank) {
    std::vector<int> engine_ranks(static_cast<size_t>(ranks));
    for (int i = 0; i < ranks; ++i) engine_ranks[static_cast<size_t>(i)] = i;
    coll::Scratch scratch;
    coll::Tuning tuning;
    tuning.pipeline_chunk_bytes = 1024;
    std::vector<uint8_t> send(count * es), recv(count * es);
    for (size_t i = 0; i < count; ++i) {
      double value = std::ldexp(1.0 + 0.1234567 * static_cast<double>((rank * 7919 + i * 104729) % 1000),
                                static_cast<int>((rank * 13 + i) % 40) - 20);
      if (op != ReduceOp::sum && i % 7 == static_cast<size_t>(rank) % 7) value = std::nan("");
      if (dtype == DataType::float32) {
        reinterpret_cast<float*>(send.data())[i] = static_cast<float>(value);
      } else {
        reinterpret_cast<double*>(send.data())[i] = value;
      }
    }
    coll::Context ctx(engine, engine_ranks, rank, p2p::CallTag::collective(0, 1), scratch, tuning);
    algorithm.run(ctx, coll::Args{send.data(), recv.data(), count, dtype, op, 0});
    results[static_cast<size_t>(rank)] = std::move(recv);
  });
  for (int r = 1; r < ranks; ++r) {
    EXPECT_EQ(results[0], results[static_cast<size_t>(r)])
        << algorithm.name << " " << to_string(op) << " " << to_string(dtype) << " n=" << ranks << ": rank " << r
        << " differs from rank 0";
  }
}

TEST(Allreduce, IdenticalBitsOnEveryRank) {
  for (const coll::Algorithm* algorithm : coll::algorithms(Collective::allreduce)) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::min, ReduceOp::max}) {
      for (DataType dtype : {DataType::float32, DataType::float64}) {
        for (int ranks : {3, 5, 6, 8, 13}) expect_identical_bits_on_every_rank(*algorithm, op, dtype, ranks);
      }
    }
  }
}
