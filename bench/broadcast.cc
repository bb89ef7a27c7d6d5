// broadcast: the root's buffer reaches every rank. busbw = algbw.
#include "bench.hpp"

namespace bench {
const CollectiveBench& broadcast_bench() {
  static const CollectiveBench spec{
      Collective::broadcast, false, true,
      [](int) { return 1.0; },
      same_count_shape, no_offset, no_offset,
      [](chorus::Communicator& comm, const Call& c) { comm.broadcast(c.recv, c.count, c.dtype, c.root); },
      [](const CallShape&, size_t index, int, int, int root, ReduceOp, DataType dtype) {
        return as_stored(input_value(root, index, ReduceOp::sum), dtype);
      },
      // Only the root's input matters; the others start from a sentinel.
      [](const CallShape&, size_t index, int rank, ReduceOp) { return input_value(rank, index, ReduceOp::sum); },
      true};
  return spec;
}
}  // namespace bench
