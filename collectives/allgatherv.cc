// Ring allgatherv: every rank ends with every rank's block, block r of
// recv_counts[r] elements at recv_displs[r].
//
// Step s = 0..n-2: send the block received last step (first: this rank's
// own) to rank + 1, receive block rank - s - 1 from rank - 1, straight into
// its place in the receive buffer. Blocks may differ in size (zero-sized
// ones travel as empty messages, so every step pairs up). Bytes sent per
// rank: S - own block. Cost: (n-1) alpha + (n-1)/n S beta for balanced
// counts; with skewed counts the largest block sets the pace of n-1 steps.
// Bandwidth-optimal for large payloads, as allgather_ring.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"

namespace chorus::coll {

void allgatherv_ring(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t es = element_size(args.dtype);
  const Layout layout{args.recv_counts, args.recv_displs};
  auto place = [&](int block) { return at(args.recv, layout.offset(block), es); };
  copy_unless_same(place(rank), args.send, args.count * es);
  const int next = mod(rank + 1, n);
  const int previous = mod(rank - 1, n);
  for (int step = 0; step < n - 1; ++step) {
    const int outgoing = mod(rank - step, n);
    const int incoming = mod(rank - step - 1, n);
    ctx.sendrecv(next, place(outgoing), layout.count(outgoing) * es, previous, place(incoming),
                 layout.count(incoming) * es, static_cast<uint32_t>(step));
  }
}

}  // namespace chorus::coll
