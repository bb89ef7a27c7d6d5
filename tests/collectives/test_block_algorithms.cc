// Every algorithm of gather, gatherv, scatter, scatterv, allgatherv,
// alltoallv, scan and exscan over the in-process transport: rank counts that
// are not powers of two, every root, per-rank counts that differ (some zero)
// with gaps between the blocks, eager and rendezvous sizes, in place and out
// of place; every element checked, gaps and undefined outputs untouched, send
// buffers unmodified.
#include "collectives/collectives.hpp"
#include "tests/collectives/test_values.hpp"
#include "tests/harness.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

using namespace chorus;
using namespace chorus::testing;

namespace {

constexpr double kSentinel = 99;  // never an input or a result here

using Case = AlgorithmCase;  // count: gather/scatter/scan: per rank; v-variants: the base of the per-rank counts

// gatherv/scatterv/allgatherv: rank r's block; every third rank has none.
size_t block_count(size_t base, int r) { return r % 3 == 1 ? 0 : base + static_cast<size_t>(r); }
// alltoallv: elements between ranks i and j (symmetric, so in place works).
size_t pair_count(size_t base, int i, int j) {
  return (i + j) % 4 == 3 ? 0 : base + static_cast<size_t>((i * j) % 3);
}
// alltoallv: input element k of the block rank i sends to rank j.
double pair_value(int i, int j, size_t k) { return input(i, 5 * static_cast<size_t>(j) + k, ReduceOp::sum); }

// Blocks with a one-element gap after each, in rank order.
struct Layout {
  std::vector<size_t> counts, displs;
  size_t extent = 0;
  explicit Layout(std::vector<size_t> block_counts) : counts(std::move(block_counts)), displs(counts.size()) {
    for (size_t r = 0; r < counts.size(); ++r) {
      displs[r] = extent;
      extent += counts[r] + 1;
    }
  }
};

double prefix(int ranks_included, size_t index, ReduceOp op) {
  return ranks_included == 0 ? kSentinel : chorus::testing::reduced(ranks_included, index, op);
}

void run_case(const Case& c) {
  SCOPED_TRACE(name_of(c));
  const coll::Algorithm* algorithm = coll::find(c.op, c.algorithm);
  ASSERT_NE(algorithm, nullptr);
  const bool rooted = c.op == Collective::gather || c.op == Collective::gatherv || c.op == Collective::scatter ||
                      c.op == Collective::scatterv;
  const int roots = !rooted ? 1 : c.ranks <= 8 ? c.ranks : 2;
  const Typed t{c.dtype};
  const size_t es = datatype_size(c.dtype);
  const auto n = static_cast<size_t>(c.ranks);
  std::vector<size_t> blocks(n);
  for (int r = 0; r < c.ranks; ++r) blocks[static_cast<size_t>(r)] = block_count(c.count, r);
  const Layout varied(blocks);
  run_ranks(c.ranks, [&](p2p::Engine& engine, int rank) {
    std::vector<int> engine_ranks(n);
    std::iota(engine_ranks.begin(), engine_ranks.end(), 0);
    coll::Scratch scratch;
    coll::Tuning tuning;
    tuning.pipeline_chunk_bytes = 4096;  // many chunks: exercises the scan chain's pipelining
    std::vector<size_t> to_me(n), from_me(n);
    for (int r = 0; r < c.ranks; ++r) {
      to_me[static_cast<size_t>(r)] = pair_count(c.count, r, rank);
      from_me[static_cast<size_t>(r)] = pair_count(c.count, rank, r);
    }
    const Layout received(to_me), sent(from_me);
    for (int root_index = 0; root_index < roots; ++root_index) {
      const int root = roots == 2 && root_index == 1 ? c.ranks - 1 : root_index;
      const bool is_root = rank == root;
      // Receive and send buffer sizes (elements) and each side's inputs.
      size_t recv_elems = 0, send_elems = 0;
      coll::Args args{nullptr, nullptr, c.count, c.dtype, c.redop, root};
      switch (c.op) {
        case Collective::gather: recv_elems = c.count * n; send_elems = c.count; break;
        case Collective::scatter: recv_elems = c.count; send_elems = c.count * n; break;
        case Collective::gatherv:
        case Collective::allgatherv:
          recv_elems = varied.extent;
          send_elems = args.count = blocks[static_cast<size_t>(rank)];
          args.recv_counts = varied.counts;
          args.recv_displs = varied.displs;
          break;
        case Collective::scatterv:
          recv_elems = args.count = blocks[static_cast<size_t>(rank)];
          send_elems = varied.extent;
          args.send_counts = varied.counts;
          args.send_displs = varied.displs;
          break;
        case Collective::alltoallv:
          recv_elems = received.extent;
          send_elems = c.in_place ? received.extent : sent.extent;
          args.send_counts = c.in_place ? received.counts : sent.counts;
          args.send_displs = c.in_place ? received.displs : sent.displs;
          args.recv_counts = received.counts;
          args.recv_displs = received.displs;
          break;
        default: recv_elems = send_elems = c.count;  // scan, exscan
      }
      std::vector<uint64_t> send_store((send_elems + recv_elems) * es / 8 + 2);
      std::vector<uint64_t> recv_store((send_elems + recv_elems) * es / 8 + 2);
      void* send = send_store.data();
      void* recv = recv_store.data();
      for (size_t i = 0; i < recv_elems; ++i) t.set(recv, i, kSentinel);
      for (size_t i = 0; i < send_elems; ++i) t.set(send, i, kSentinel);
      // In place the input sits inside the other buffer, per the API's rules.
      if (c.in_place) {
        const auto me = static_cast<size_t>(rank);
        switch (c.op) {
          case Collective::gather: if (is_root) send = static_cast<uint8_t*>(recv) + me * c.count * es; break;
          case Collective::gatherv: if (is_root) send = static_cast<uint8_t*>(recv) + varied.displs[me] * es; break;
          case Collective::allgatherv: send = static_cast<uint8_t*>(recv) + varied.displs[me] * es; break;
          case Collective::scatter: if (is_root) recv = static_cast<uint8_t*>(send) + me * c.count * es; break;
          case Collective::scatterv: if (is_root) recv = static_cast<uint8_t*>(send) + varied.displs[me] * es; break;
          default: send = recv;  // alltoallv, scan, exscan
        }
      }
      // Inputs: element i of this rank's block (gather side) / of the root's buffer (scatter side).
      const bool scatters = c.op == Collective::scatter || c.op == Collective::scatterv;
      if (c.op == Collective::alltoallv) {
        for (int j = 0; j < c.ranks; ++j) {
          const auto jj = static_cast<size_t>(j);
          for (size_t k = 0; k < args.send_counts[jj]; ++k) t.set(send, args.send_displs[jj] + k, pair_value(rank, j, k));
        }
      } else if (!scatters || is_root) {
        for (size_t i = 0; i < send_elems; ++i) t.set(send, i, input(scatters ? root : rank, i, c.redop));
      }
      std::vector<uint8_t> send_before(static_cast<uint8_t*>(send), static_cast<uint8_t*>(send) + send_elems * es);
      args.send = send;
      args.recv = recv;
      coll::Context ctx(engine, engine_ranks, rank, p2p::CallTag::collective(0, static_cast<uint64_t>(root_index + 1)), scratch, tuning);
      algorithm->run(ctx, args);

      // What each receive element must hold (NaN: not checked).
      auto expected = [&](size_t i) -> double {
        switch (c.op) {
          case Collective::gather:
            return is_root ? input(static_cast<int>(i / c.count), i % c.count, c.redop) : NAN;
          case Collective::scatter:
            return input(root, static_cast<size_t>(rank) * c.count + i, c.redop);
          case Collective::scatterv:
            return input(root, varied.displs[static_cast<size_t>(rank)] + i, c.redop);
          case Collective::gatherv:
          case Collective::allgatherv:
          case Collective::alltoallv: {
            if (c.op == Collective::gatherv && !is_root) return NAN;
            const Layout& layout = c.op == Collective::alltoallv ? received : varied;
            for (size_t r = 0; r < n; ++r) {
              if (i < layout.displs[r] || i >= layout.displs[r] + layout.counts[r]) continue;
              const size_t k = i - layout.displs[r];
              return c.op == Collective::alltoallv ? pair_value(static_cast<int>(r), rank, k)
                                                   : input(static_cast<int>(r), k, c.redop);
            }
            return kSentinel;  // a gap: untouched
          }
          case Collective::scan: return prefix(rank + 1, i, c.redop);
          case Collective::exscan:
            return rank > 0 ? prefix(rank, i, c.redop) : c.in_place ? input(0, i, c.redop) : kSentinel;
          default: return NAN;
        }
      };
      size_t wrong = 0;
      for (size_t i = 0; i < recv_elems; ++i) {
        const double want = expected(i);
        if (std::isnan(want)) continue;
        const double got = t.get(recv, i);
        if (got != want && ++wrong <= 3) {
          ADD_FAILURE() << "rank " << rank << " root " << root << " element " << i << ": got " << got
                        << ", expected " << want;
        }
      }
      EXPECT_EQ(wrong, 0u) << "rank " << rank;
      if (!c.in_place && !send_before.empty()) {
        EXPECT_EQ(0, std::memcmp(send_before.data(), send, send_before.size())) << "send buffer modified on rank " << rank;
      }
    }
  });
}

const Collective kBlockOps[] = {Collective::gather,     Collective::gatherv,   Collective::scatter,
                                Collective::scatterv,   Collective::allgatherv, Collective::alltoallv,
                                Collective::scan,       Collective::exscan};

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (Collective op : kBlockOps) {
    for (const coll::Algorithm* algorithm : coll::algorithms(op)) {
      // One process per case in ctest: few enough to stay cheap in CI.
      for (int ranks : {2, 3, 5, 8, 13}) {
        std::vector<size_t> counts = {1, static_cast<size_t>(ranks + 1), 700};
        // Above the 16 KiB eager limit: rendezvous reads.
        if (ranks <= 8) counts.push_back(op == Collective::scan || op == Collective::exscan ? 20000 : 5000);
        for (size_t count : counts) {
          for (bool in_place : {false, true}) cases.push_back({op, std::string(algorithm->name), ranks, count, in_place});
        }
      }
    }
  }
  return cases;
}

}  // namespace

class BlockAlgorithms : public ::testing::TestWithParam<Case> {};
TEST_P(BlockAlgorithms, EveryElementCorrect) { run_case(GetParam()); }
INSTANTIATE_TEST_SUITE_P(GatherScatterScan, BlockAlgorithms, ::testing::ValuesIn(all_cases()), CaseName());

// Every dtype family and op through scan and exscan, 5 ranks.
CHORUS_EVERY_DTYPE_AND_OP(ScanOps, Collective::scan, Collective::exscan);

TEST(BlockSelection, EveryRowNamesAnAlgorithm) {
  for (Collective op : kBlockOps) {
    for (int ranks : {2, 5, 8, 9, 64}) {
      for (size_t bytes : {size_t{0}, size_t{1} << 10, size_t{1} << 20}) EXPECT_EQ(coll::select(op, bytes, ranks).op, op);
    }
  }
  EXPECT_EQ(coll::select(Collective::gather, 1024, 8).name, "linear");
  EXPECT_EQ(coll::select(Collective::gather, 1024, 9).name, "binomial");
  EXPECT_EQ(coll::select(Collective::scatter, 1 << 20, 64).name, "linear");
  EXPECT_EQ(coll::select(Collective::scan, 1024, 4).name, "recursive_doubling");
  EXPECT_EQ(coll::select(Collective::exscan, 1 << 20, 4).name, "linear");
  EXPECT_NE(coll::describe_selection_table().find("alltoallv"), std::string::npos);
}
