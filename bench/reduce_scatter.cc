// reduce_scatter: rank r ends with the reduction of block r of every input.
// Size is the whole input; busbw = algbw * (n-1)/n.
#include "bench.hpp"

namespace bench {
const CollectiveBench& reduce_scatter_bench() {
  static const CollectiveBench spec{
      Collective::reduce_scatter, true, false,
      [](int n) { return static_cast<double>(n - 1) / n; },
      [](size_t bytes, size_t element_size, int ranks) {
        size_t count = bytes / element_size / static_cast<size_t>(ranks);
        return CallShape{count, count * static_cast<size_t>(ranks), count};
      },
      no_offset, own_block_offset,
      [](chorus::Communicator& comm, const Call& c) {
        comm.reduce_scatter(c.send, c.recv, c.count, c.dtype, c.op);
      },
      [](const CallShape& shape, size_t index, int rank, int ranks, int, ReduceOp op, DataType dtype) {
        return reduced_value(ranks, static_cast<size_t>(rank) * shape.count + index, op, dtype);
      },
      plain_input};
  return spec;
}
}  // namespace bench
