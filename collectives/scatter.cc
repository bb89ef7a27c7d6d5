// Scatter and scatterv: block r of the root's send buffer goes to rank r.
//
// linear (scatter, scatterv): the root sends each rank its block straight
//   from its buffer, all sends posted at once. alpha + (n-1) (o + S/n beta),
//   o = the root's cost of posting one send (S = the scattered bytes). Wins
//   for large blocks (no block travels twice) and few ranks. scatterv's
//   counts are known only at the root, so it has no tree; zero-sized blocks
//   travel as empty messages (a rank expecting less than the root sends
//   fails with `truncated`, not a hang).
// binomial (scatter): the reverse of gather's tree: relative ranks v = rank
//   - root; a rank receives its whole subtree's blocks (contiguous in
//   relative order) from v minus its lowest set bit, keeps its own and
//   forwards to v + 2^k the blocks of that child's subtree, largest first.
//   ceil(log2 n) rounds; the root sends log2(n) messages. Cost: ceil(log2 n)
//   alpha + (n-1)/n S beta at the root. Wins for small blocks, many ranks.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "common/copy.hpp"

#include <vector>

namespace chorus::coll {

namespace {

void scatter_straight_from_root(Context& ctx, const Args& args, const Layout& layout) {
  const size_t es = element_size(args.dtype);
  if (ctx.rank() != args.root) {
    auto request = ctx.irecv(args.root, 0, args.recv, args.count * es);
    ctx.wait(request);
    return;
  }
  std::vector<p2p::Request> sends;
  sends.reserve(static_cast<size_t>(ctx.size()));
  // Nearest ranks first, as broadcast_linear.
  for (int distance = 1; distance < ctx.size(); ++distance) {
    const int to = mod(args.root + distance, ctx.size());
    sends.push_back(ctx.isend(to, 0, at(args.send, layout.offset(to), es), layout.count(to) * es));
  }
  // In place the root's block stays where it is (recv == its place in send).
  copy_unless_same(args.recv, at(args.send, layout.offset(args.root), es), args.count * es);
  ctx.wait_all(sends);
}

}  // namespace

void scatter_linear(Context& ctx, const Args& args) { scatter_straight_from_root(ctx, args, Layout{{}, {}, args.count}); }

void scatterv_linear(Context& ctx, const Args& args) {
  scatter_straight_from_root(ctx, args, Layout{args.send_counts, args.send_displs});
}

void scatter_binomial(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int v = mod(ctx.rank() - args.root, n);
  const size_t block = args.count * element_size(args.dtype);
  const auto ranks = static_cast<size_t>(n);
  auto real = [&](int relative) { return mod(relative + args.root, n); };
  const int subtree = subtree_size(v, n);
  if (subtree == 1) {  // a leaf receives straight into its receive buffer
    auto request = ctx.irecv(real(v - lowest_bit(v)), 0, args.recv, block);
    ctx.wait(request);
    return;
  }
  // The subtree's blocks in relative order; at root 0 that is the send buffer itself.
  const uint8_t* held = static_cast<const uint8_t*>(args.send);
  if (v != 0) {
    auto* buffer = static_cast<uint8_t*>(ctx.scratch(0, block * static_cast<size_t>(subtree)));
    auto request = ctx.irecv(real(v - lowest_bit(v)), 0, buffer, block * static_cast<size_t>(subtree));
    ctx.wait(request);
    held = buffer;
  } else if (args.root != 0) {
    // Relative block j is rank (j + root) mod n's: rotate into scratch.
    auto* buffer = static_cast<uint8_t*>(ctx.scratch(0, block * ranks));
    const auto root = static_cast<size_t>(args.root);
    copy_bytes(buffer, static_cast<const uint8_t*>(args.send) + root * block, (ranks - root) * block);
    copy_bytes(buffer + (ranks - root) * block, args.send, root * block);
    held = buffer;
  }
  std::vector<p2p::Request> sends;
  int top = 1;
  while (top * 2 < subtree) top *= 2;
  for (int mask = top; mask > 0; mask >>= 1) {
    if (v + mask >= n || mask >= subtree) continue;
    const auto child_blocks = static_cast<size_t>(std::min(mask, n - v - mask));
    sends.push_back(ctx.isend(real(v + mask), 0, held + static_cast<size_t>(mask) * block, child_blocks * block));
  }
  copy_unless_same(args.recv, held, block);
  ctx.wait_all(sends);
}

}  // namespace chorus::coll
