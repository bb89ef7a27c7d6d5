// Recursive doubling allreduce.
//
// Steps: with p = the largest power of two <= n and r = n - p, the first 2r
//   ranks pair up (even sends its vector to odd, odd reduces) so p ranks
//   remain; they exchange whole vectors with partners at distance 1, 2, 4, ...
//   and reduce; finally each odd rank of the first 2r returns the result to
//   its even partner.
// Each exchange reduces the lower rank's vector with the higher's, in that
//   order on both partners: every rank ends with the same bits, also where
//   the op's result depends on the order (min/max with a NaN).
// Bytes sent per rank: log2(p) * S (plus S for the folded ranks).
// Cost: (log2(p) + 2) alpha + log2(p) * S * beta. Fewest rounds: wins for
//   small messages, where latency dominates.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"

namespace chorus::coll {

void allreduce_recursive_doubling(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t bytes = args.count * element_size(args.dtype);
  copy_unless_same(args.recv, args.send, bytes);
  void* incoming = ctx.scratch(0, bytes);

  int p = 1;
  while (p * 2 <= n) p *= 2;
  const int extra = n - p;  // ranks 0..2*extra-1 fold in pairs

  // Fold: even ranks of the first 2*extra hand their data to the next rank.
  int virtual_rank;
  if (rank < 2 * extra) {
    if (rank % 2 == 0) {
      auto request = ctx.isend(rank + 1, 0, args.recv, bytes);
      ctx.wait(request);
      virtual_rank = -1;  // sits out the exchange
    } else {
      auto request = ctx.irecv(rank - 1, 0, incoming, bytes);
      ctx.wait(request);
      reduce_inplace(args.recv, incoming, args.count, args.dtype, args.op);
      virtual_rank = rank / 2;
    }
  } else {
    virtual_rank = rank - extra;
  }

  if (virtual_rank >= 0) {
    auto real_rank = [&](int v) { return v < extra ? v * 2 + 1 : v + extra; };
    uint32_t step = 1;
    for (int distance = 1; distance < p; distance *= 2, ++step) {
      int partner = real_rank(virtual_rank ^ distance);
      ctx.sendrecv(partner, args.recv, bytes, partner, incoming, bytes, step);
      // Both partners put the lower rank's vector first, so both compute
      // the same bits: min(NaN, 1) is 1 but min(1, NaN) is NaN.
      if (partner < rank) {
        reduce_into(args.recv, incoming, args.recv, args.count, args.dtype, args.op);
      } else {
        reduce_inplace(args.recv, incoming, args.count, args.dtype, args.op);
      }
    }
  }

  // Unfold: return the result to the ranks that sat out.
  unfold_to_even_partners(ctx, extra, 64, args.recv, bytes);
}

}  // namespace chorus::coll
