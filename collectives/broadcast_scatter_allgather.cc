// Scatter-allgather broadcast (van de Geijn).
//
// Steps: the buffer in n blocks (uneven or empty where count < n or n does
//   not divide it), block b for the rank b places after the root (v = rank -
//   root). A binomial scatter (as scatter_binomial: v receives its subtree's
//   blocks [v, v + subtree) in one message from v minus its lowest set bit
//   and forwards each child's range, largest first), then a ring allgather
//   over v -> v + 1: step t = 0..n-2 sends block v - t, chunk by chunk, each
//   chunk forwarded as soon as it lands. A rank is sent only the blocks it
//   does not hold yet (its scatter range), so the root receives nothing and
//   its buffer is only read.
// Bytes per rank: every non-root receives exactly S (S·subtree/n in the
//   scatter, the rest in the ring); rank v sends (subtree(v) - 1 + n -
//   subtree(v + 1))/n · S, at most about 2S (the root: (n-1)/n·S in each
//   phase). The deepest path carries about 2S where binomial's carries
//   log2(n)·S.
// Cost: (ceil(log2 n) + n - 1) alpha + about 2 (n-1)/n · S beta: large S on
//   many ranks, where binomial is log2(n)·S·beta.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"

#include <vector>

namespace chorus::coll {

void broadcast_scatter_allgather(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int v = mod(ctx.rank() - args.root, n);
  const size_t es = element_size(args.dtype);
  const Blocks blocks{args.count, static_cast<size_t>(n)};
  auto real = [&](int relative) { return mod(relative + args.root, n); };
  auto start_of = [&](int block) { return at(args.recv, blocks.offset(static_cast<size_t>(block)), es); };
  // Bytes of blocks [first, first + number): relative order is buffer order.
  auto range_bytes = [&](int first, int number) {
    return (blocks.offset(static_cast<size_t>(first + number)) - blocks.offset(static_cast<size_t>(first))) * es;
  };
  // Whether relative rank r holds block b after the scatter: its subtree's.
  auto holds = [&](int r, int b) { return mod(b - r, n) < subtree_size(r, n); };
  std::vector<p2p::Request> sends;

  // Scatter (step 0). Empty ranges are skipped on both sides alike.
  int mask = 1;
  while (mask < n && (v & mask) == 0) mask <<= 1;  // v's lowest set bit; the root: past n
  if (v != 0) {
    const size_t bytes = range_bytes(v, subtree_size(v, n));
    if (bytes != 0) {
      auto request = ctx.irecv(real(v - mask), 0, start_of(v), bytes);
      ctx.wait(request);
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    const int child = v + mask;
    if (child >= n) continue;
    const size_t bytes = range_bytes(child, subtree_size(child, n));
    if (bytes != 0) sends.push_back(ctx.isend(real(child), 0, start_of(child), bytes));
  }

  // Ring allgather (steps 1..n-1). Every block lands in its own place: post
  // every receive first.
  const int next = mod(v + 1, n);
  const size_t chunk = chunk_elements(ctx, es);
  auto chunks = [&](int block) { return Chunks{blocks.size(static_cast<size_t>(block)), chunk}; };
  std::vector<std::vector<p2p::Request>> recvs(static_cast<size_t>(n > 1 ? n - 1 : 0));
  for (int t = 0; t + 1 < n; ++t) {
    const int block = mod(v - t - 1, n);
    if (holds(v, block)) continue;  // the previous rank skips it too
    const Chunks ch = chunks(block);
    for (size_t k = 0; k < ch.count(); ++k) {
      recvs[static_cast<size_t>(t)].push_back(ctx.irecv(real(mod(v - 1, n)), 1 + static_cast<uint32_t>(t),
                                                        at(start_of(block), ch.offset(k), es), ch.size(k) * es));
    }
  }
  for (int t = 0; t + 1 < n; ++t) {
    const int block = mod(v - t, n);
    if (holds(next, block)) continue;
    // Held since the scatter, or it arrived at step t - 1 (t >= 1: v holds block v).
    const bool arriving = !holds(v, block);
    const Chunks ch = chunks(block);
    for (size_t k = 0; k < ch.count(); ++k) {
      if (arriving) ctx.wait(recvs[static_cast<size_t>(t - 1)][k]);
      sends.push_back(ctx.isend(real(next), 1 + static_cast<uint32_t>(t), at(start_of(block), ch.offset(k), es),
                                ch.size(k) * es));
    }
  }
  for (auto& step : recvs) ctx.wait_all(step);
  ctx.wait_all(sends);
}

}  // namespace chorus::coll
