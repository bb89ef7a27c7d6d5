// Pairwise-exchange alltoallv: send_counts[j] elements at send_displs[j] go
// to rank j, and recv_counts[i] elements from rank i land at recv_displs[i].
//
// Step i = 1..n-1: exchange with rank + i (send) and rank - i (receive), one
// partner at a time, as alltoall_pairwise; step 0 is the local copy. Counts
// differ per pair (mixture-of-experts routing, embedding exchange): every
// pair still exchanges a (possibly empty) message, so a count one side got
// wrong fails with `truncated` instead of leaving a rank waiting. In place
// (send == recv) the receive layout describes both; the input is copied to
// scratch first. Cost: (n-1) alpha + sum over steps of the larger of the
// bytes sent and received, about (n-1)/n S beta when balanced.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"

namespace chorus::coll {

void alltoallv_pairwise(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t es = element_size(args.dtype);
  const Layout output{args.recv_counts, args.recv_displs};
  Layout input{args.send_counts, args.send_displs};
  const void* source = args.send;
  if (args.send == args.recv) {
    input = output;
    const size_t bytes = output.extent(n) * es;
    void* copy = ctx.scratch(0, bytes);
    copy_unless_same(copy, args.recv, bytes);
    source = copy;
  }
  copy_unless_same(at(args.recv, output.offset(rank), es), at(source, input.offset(rank), es),
                   output.count(rank) * es);
  for (int i = 1; i < n; ++i) {
    const int to = mod(rank + i, n);
    const int from = mod(rank - i, n);
    ctx.sendrecv(to, at(source, input.offset(to), es), input.count(to) * es, from,
                 at(args.recv, output.offset(from), es), output.count(from) * es, static_cast<uint32_t>(i));
  }
}

}  // namespace chorus::coll
