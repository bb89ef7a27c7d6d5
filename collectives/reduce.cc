// Binomial-tree reduce.
//
// Ranks relative to the root (v = rank - root). Round k: ranks with bit k
// set send their partial result to v - 2^k and drop out; the others receive
// from v + 2^k (if it exists) and reduce. ceil(log2 n) rounds; the root ends
// with the result. Bytes sent per rank: S once. Cost: log2(n) (alpha + S beta
// + reduction). Non-roots accumulate in scratch: their receive buffer is not
// theirs to write (MPI: significant only at the root).
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"

namespace chorus::coll {

void reduce_binomial(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int relative = mod(ctx.rank() - args.root, n);
  const size_t bytes = args.count * datatype_size(args.dtype);
  auto real = [&](int v) { return mod(v + args.root, n); };
  void* accumulator = relative == 0 ? args.recv : ctx.scratch(1, bytes);
  copy_unless_same(accumulator, args.send, bytes);
  void* incoming = ctx.scratch(0, bytes);
  for (int mask = 1; mask < n; mask <<= 1) {
    if (relative & mask) {
      auto request = ctx.isend(real(relative - mask), 0, accumulator, bytes);
      ctx.wait(request);
      return;
    }
    if (relative + mask < n) {
      auto request = ctx.irecv(real(relative + mask), 0, incoming, bytes);
      ctx.wait(request);
      reduce_inplace(accumulator, incoming, args.count, args.dtype, args.op);
    }
  }
}

}  // namespace chorus::coll
