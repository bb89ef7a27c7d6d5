// Binomial-tree reduce.
//
// Ranks relative to the root (v = rank - root). Round k: ranks with bit k
// set send their partial result to v - 2^k and drop out; the others receive
// from v + 2^k (if it exists) and reduce. ceil(log2 n) rounds; the root ends
// with the result. Bytes sent per rank: S once. Cost: log2(n) (alpha + S beta
// + reduction). Non-roots accumulate in scratch: their receive buffer is not
// theirs to write (MPI: significant only at the root). Transfers move in
// pipeline chunks, reduced as they land.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"

#include <vector>

namespace chorus::coll {

void reduce_binomial(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int relative = mod(ctx.rank() - args.root, n);
  const size_t es = element_size(args.dtype);
  const size_t bytes = args.count * es;
  auto real = [&](int v) { return mod(v + args.root, n); };
  // Each transfer moves in pipeline chunks, each reduced as it lands (still
  // in cache, and on a network while the next chunk is in flight).
  const Chunks ch{args.count, chunk_elements(ctx, es)};
  void* accumulator = relative == 0 ? args.recv : ctx.scratch(1, bytes);
  // Until its first reduction a rank's partial result is its send buffer
  // itself: no copy into the accumulator (a leaf sends straight from it).
  const void* current = args.send;
  void* incoming = ctx.scratch(0, bytes);
  std::vector<p2p::Request> requests;
  for (int mask = 1; mask < n; mask <<= 1) {
    if (relative & mask) {
      for (size_t k = 0; k < ch.count(); ++k) {
        requests.push_back(ctx.isend(real(relative - mask), 0, at(current, ch.offset(k), es), ch.size(k) * es));
      }
      ctx.wait_all(requests);
      return;
    }
    if (relative + mask < n) {
      requests.clear();
      for (size_t k = 0; k < ch.count(); ++k) {
        requests.push_back(ctx.irecv(real(relative + mask), 0, at(incoming, ch.offset(k), es), ch.size(k) * es));
      }
      for (size_t k = 0; k < ch.count(); ++k) {
        ctx.wait(requests[k]);
        reduce_into(at(accumulator, ch.offset(k), es), at(current, ch.offset(k), es), at(incoming, ch.offset(k), es),
                    ch.size(k), args.dtype, args.op);
      }
      current = accumulator;
    }
  }
  // The root of a one-rank tree never reduced: its result is its input.
  copy_unless_same(accumulator, current, bytes);
}

}  // namespace chorus::coll
