// reduce: the root ends with the reduction of all inputs. busbw = algbw.
#include "bench.hpp"

#include <cmath>

namespace bench {
const CollectiveBench& reduce_bench() {
  static const CollectiveBench spec{
      Collective::reduce, true, true,
      [](int) { return 1.0; },
      same_count_shape, no_offset, no_offset,
      [](chorus::Communicator& comm, const Call& c) { comm.reduce(c.send, c.recv, c.count, c.dtype, c.op, c.root); },
      [](const CallShape&, size_t index, int rank, int ranks, int root, ReduceOp op, DataType dtype) -> double {
        return rank == root ? reduced_value(ranks, index, op, dtype) : NAN;  // non-roots: undefined
      },
      plain_input};
  return spec;
}
}  // namespace bench
