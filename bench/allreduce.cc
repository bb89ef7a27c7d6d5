// allreduce: every rank ends with the reduction of all inputs.
// busbw = algbw * 2(n-1)/n: each byte is reduced and then distributed.
#include "bench.hpp"

#include <cmath>

namespace bench {
const CollectiveBench& allreduce_bench() {
  static const CollectiveBench spec{
      Collective::allreduce, true, false,
      [](int n) { return 2.0 * (n - 1) / n; },
      same_count_shape, no_offset, no_offset,
      [](chorus::Communicator& comm, const Call& c) { comm.allreduce(c.send, c.recv, c.count, c.dtype, c.op); },
      [](const CallShape&, size_t index, int, int ranks, int, ReduceOp op, DataType dtype) {
        return reduced_value(ranks, index, op, dtype);
      },
      plain_input};
  return spec;
}
}  // namespace bench
