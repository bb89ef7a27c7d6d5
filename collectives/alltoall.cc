// Pairwise-exchange alltoall.
//
// Step i = 1..n-1: send block (rank + i) to that rank and receive block from
// rank - i; step 0 is the local copy. One partner at a time keeps every link
// busy without flooding any receiver. In place, the input is first copied to
// scratch. Bytes sent per rank: (n-1)/n * S. Cost: (n-1) (alpha + S/n beta).
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "common/copy.hpp"

namespace chorus::coll {

void alltoall_pairwise(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t es = element_size(args.dtype);
  const size_t block = args.count * es;
  const void* source = args.send;
  if (args.send == args.recv) {
    void* copy = ctx.scratch(0, block * static_cast<size_t>(n));
    copy_bytes(copy, args.send, block * static_cast<size_t>(n));
    source = copy;
  }
  auto input_block = [&](int index) { return at(source, static_cast<size_t>(index) * args.count, es); };
  auto output_block = [&](int index) { return at(args.recv, static_cast<size_t>(index) * args.count, es); };
  move_bytes(output_block(rank), input_block(rank), block);
  for (int i = 1; i < n; ++i) {
    const int to = mod(rank + i, n);
    const int from = mod(rank - i, n);
    ctx.sendrecv(to, input_block(to), block, from, output_block(from), block, static_cast<uint32_t>(i));
  }
}

}  // namespace chorus::coll
