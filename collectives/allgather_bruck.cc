// Bruck allgather.
//
// Work buffer starts with this rank's block. Round k: send the first
// min(2^k, n - 2^k) blocks to rank - 2^k and append as many received from
// rank + 2^k. After ceil(log2 n) rounds the buffer holds blocks rank,
// rank+1, ..., which are rotated into place. Works for any n.
// Bytes sent per rank: (n-1)/n * S. Cost: ceil(log2 n) alpha + (n-1)/n S beta
// (+ one local rotation): wins over the ring for small blocks.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "common/copy.hpp"

namespace chorus::coll {

void allgather_bruck(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t block = args.count * element_size(args.dtype);
  auto* work = static_cast<uint8_t*>(ctx.scratch(0, block * static_cast<size_t>(n)));
  copy_bytes(work, args.send, block);
  uint32_t round = 0;
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    const size_t blocks = static_cast<size_t>(std::min(distance, n - distance));
    ctx.sendrecv(mod(rank - distance, n), work, blocks * block, mod(rank + distance, n),
                 work + static_cast<size_t>(distance) * block, blocks * block, round);
  }
  // work[i] is the block of rank (rank + i) mod n.
  for (int i = 0; i < n; ++i) {
    copy_bytes(at(args.recv, static_cast<size_t>(mod(rank + i, n)) * args.count, element_size(args.dtype)),
                work + static_cast<size_t>(i) * block, block);
  }
}

}  // namespace chorus::coll
