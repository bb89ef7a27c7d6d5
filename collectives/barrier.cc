// Dissemination barrier.
//
// Round k = 0, 1, ...: send an empty message to rank + 2^k and wait for one
// from rank - 2^k. After ceil(log2 n) rounds every rank has (transitively)
// heard from every other. Bytes: none (headers only).
// Cost: ceil(log2 n) alpha, for any n (no power-of-two restriction).
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"

namespace chorus::coll {

void barrier_dissemination(Context& ctx, const Args&) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  uint32_t round = 0;
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    ctx.sendrecv(mod(rank + distance, n), nullptr, 0, mod(rank - distance, n), nullptr, 0, round);
  }
}

}  // namespace chorus::coll
