// Gather and gatherv: every rank's block ends at the root, block r at its
// place in the root's receive buffer.
//
// linear (gather, gatherv): the root posts a receive per rank straight into
//   that rank's place in its buffer; every other rank sends its block once.
//   The root receives (n-1) messages: alpha + (n-1) (o + S/n beta), o = the
//   cost of handling one message at the root (S = the gathered bytes).
//   Wins for large blocks (no block travels twice) and few ranks. gatherv's
//   counts are known only at the root, so it has no tree: every block goes
//   straight to the root, zero-sized ones as empty messages (a rank that
//   sends more than the root expects fails with `truncated`, not a hang).
// binomial (gather): relative ranks v = rank - root; in round k a rank with
//   bit k set sends everything it holds (its subtree's blocks, contiguous
//   in relative order) to v - 2^k. ceil(log2 n) rounds; the root receives
//   log2(n) messages; each block moves up to log2(n) times. Cost:
//   ceil(log2 n) alpha + (n-1)/n S beta at the root. Wins for small blocks
//   and many ranks.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "common/copy.hpp"

#include <vector>

namespace chorus::coll {

namespace {

void gather_straight_to_root(Context& ctx, const Args& args, const Layout& layout) {
  const size_t es = element_size(args.dtype);
  if (ctx.rank() != args.root) {
    auto request = ctx.isend(args.root, 0, args.send, args.count * es);
    ctx.wait(request);
    return;
  }
  std::vector<p2p::Request> receives;
  receives.reserve(static_cast<size_t>(ctx.size()));
  for (int r = 0; r < ctx.size(); ++r) {
    if (r != args.root) receives.push_back(ctx.irecv(r, 0, at(args.recv, layout.offset(r), es), layout.count(r) * es));
  }
  // In place the root's block is already there (send == its place in recv).
  copy_unless_same(at(args.recv, layout.offset(args.root), es), args.send, args.count * es);
  ctx.wait_all(receives);
}

}  // namespace

void gather_linear(Context& ctx, const Args& args) { gather_straight_to_root(ctx, args, Layout{{}, {}, args.count}); }

void gatherv_linear(Context& ctx, const Args& args) {
  gather_straight_to_root(ctx, args, Layout{args.recv_counts, args.recv_displs});
}

void gather_binomial(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int v = mod(ctx.rank() - args.root, n);
  const size_t block = args.count * element_size(args.dtype);
  auto real = [&](int relative) { return mod(relative + args.root, n); };
  const int subtree = subtree_size(v, n);
  if (subtree == 1) {  // a leaf sends straight from its send buffer
    auto request = ctx.isend(real(v - lowest_bit(v)), 0, args.send, block);
    ctx.wait(request);
    return;
  }
  // The subtree's blocks in relative order; at root 0 that is the rank order.
  auto* held = static_cast<uint8_t*>(v == 0 && args.root == 0 ? args.recv
                                                               : ctx.scratch(0, block * static_cast<size_t>(subtree)));
  std::vector<p2p::Request> receives;
  for (int mask = 1; mask < subtree; mask <<= 1) {
    const auto child_blocks = static_cast<size_t>(std::min(mask, n - v - mask));
    receives.push_back(ctx.irecv(real(v + mask), 0, held + static_cast<size_t>(mask) * block, child_blocks * block));
  }
  copy_unless_same(held, args.send, block);
  ctx.wait_all(receives);
  if (v != 0) {
    auto request = ctx.isend(real(v - lowest_bit(v)), 0, held, static_cast<size_t>(subtree) * block);
    ctx.wait(request);
    return;
  }
  if (held == args.recv) return;
  // Relative block j belongs to rank (j + root) mod n: two runs.
  const auto root = static_cast<size_t>(args.root);
  const auto ranks = static_cast<size_t>(n);
  copy_bytes(static_cast<uint8_t*>(args.recv) + root * block, held, (ranks - root) * block);
  copy_bytes(args.recv, held + (ranks - root) * block, root * block);
}

}  // namespace chorus::coll
