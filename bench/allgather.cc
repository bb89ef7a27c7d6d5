// allgather: every rank ends with every rank's block, in rank order.
// Size is the gathered total; busbw = algbw * (n-1)/n.
#include "bench.hpp"

namespace bench {
const CollectiveBench& allgather_bench() {
  static const CollectiveBench spec{
      Collective::allgather, false, false,
      [](int n) { return static_cast<double>(n - 1) / n; },
      per_rank_block_shape, own_block_offset, no_offset,
      [](chorus::Communicator& comm, const Call& c) { comm.allgather(c.send, c.recv, c.count, c.dtype); },
      [](const CallShape& shape, size_t index, int, int, int, ReduceOp, DataType dtype) {
        int source = static_cast<int>(index / shape.count);
        return as_stored(input_value(source, index % shape.count, ReduceOp::sum), dtype);
      },
      [](const CallShape&, size_t index, int rank, ReduceOp) { return input_value(rank, index, ReduceOp::sum); }};
  return spec;
}
}  // namespace bench
