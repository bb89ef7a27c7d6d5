// Broadcast algorithms.
//
// binomial: ranks relative to the root (v = rank - root); in round k the
//   ranks v < 2^k send the whole buffer to v + 2^k. ceil(log2 n) rounds.
//   Bytes sent per rank: up to log2(n) * S. Cost: log2(n) (alpha + S beta).
//   Wins for small messages.
// linear: the root sends the whole buffer to every other rank itself.
//   Bytes sent by the root: (n-1) * S. Cost: alpha + (n-1) * (o + S beta),
//   o = the root's cost to post one send. With small S and few ranks that
//   is one hop where binomial needs log2(n) in a row, and every rank's data
//   comes from the root: with more ranks than cores no rank waits for a
//   forwarder that is not scheduled.
// pipelined: a chain root -> root+1 -> ... -> root-1; the buffer moves in
//   chunks and each rank forwards chunk k as soon as it has it.
//   Bytes sent per rank: S. Cost: (n - 2 + S/chunk) (alpha + chunk beta),
//   about S beta for large S: wins for large messages.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"

#include <vector>

namespace chorus::coll {

void broadcast_binomial(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int relative = mod(ctx.rank() - args.root, n);
  const size_t bytes = args.count * element_size(args.dtype);
  auto real = [&](int v) { return mod(v + args.root, n); };
  // Receive from the rank that differs in our lowest set bit.
  int mask = 1;
  while (mask < n) {
    if (relative & mask) {
      auto request = ctx.irecv(real(relative - mask), 0, args.recv, bytes);
      ctx.wait(request);
      break;
    }
    mask <<= 1;
  }
  // Then send to the ranks below that bit, largest subtree first.
  std::vector<p2p::Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (relative + mask < n) sends.push_back(ctx.isend(real(relative + mask), 0, args.recv, bytes));
  }
  ctx.wait_all(sends);
}

void broadcast_linear(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const size_t bytes = args.count * element_size(args.dtype);
  if (ctx.rank() != args.root) {
    auto request = ctx.irecv(args.root, 0, args.recv, bytes);
    ctx.wait(request);
    return;
  }
  std::vector<p2p::Request> sends;
  sends.reserve(static_cast<size_t>(n - 1));
  // Nearest ranks first: the same order on every call, so receivers see it too.
  for (int distance = 1; distance < n; ++distance) {
    sends.push_back(ctx.isend(mod(args.root + distance, n), 0, args.recv, bytes));
  }
  ctx.wait_all(sends);
}

void broadcast_pipelined(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int relative = mod(ctx.rank() - args.root, n);
  const size_t es = element_size(args.dtype);
  Chunks ch{args.count, chunk_elements(ctx, es)};
  const int previous = mod(ctx.rank() - 1, n);
  const int next = mod(ctx.rank() + 1, n);
  const bool has_next = relative != n - 1;
  std::vector<p2p::Request> receives, sends;
  if (relative != 0) {
    for (size_t k = 0; k < ch.count(); ++k) {
      receives.push_back(ctx.irecv(previous, 0, at(args.recv, ch.offset(k), es), ch.size(k) * es));
    }
  }
  for (size_t k = 0; k < ch.count(); ++k) {
    if (relative != 0) ctx.wait(receives[k]);
    if (has_next) sends.push_back(ctx.isend(next, 0, at(args.recv, ch.offset(k), es), ch.size(k) * es));
  }
  ctx.wait_all(sends);
}

}  // namespace chorus::coll
