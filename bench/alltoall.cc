// alltoall: block j of rank i lands in block i of rank j.
// Size is each rank's whole buffer; busbw = algbw * (n-1)/n.
#include "bench.hpp"

namespace bench {
const CollectiveBench& alltoall_bench() {
  static const CollectiveBench spec{
      Collective::alltoall, false, false,
      [](int n) { return static_cast<double>(n - 1) / n; },
      [](size_t bytes, size_t element_size, int ranks) {
        size_t count = bytes / element_size / static_cast<size_t>(ranks);
        return CallShape{count, count * static_cast<size_t>(ranks), count * static_cast<size_t>(ranks)};
      },
      no_offset, no_offset,
      [](chorus::Communicator& comm, const Call& c) { comm.alltoall(c.send, c.recv, c.count, c.dtype); },
      [](const CallShape& shape, size_t index, int rank, int, int, ReduceOp, DataType dtype) {
        int source = static_cast<int>(index / shape.count);
        size_t sent_index = static_cast<size_t>(rank) * shape.count + index % shape.count;
        return as_stored(input_value(source, sent_index, ReduceOp::sum), dtype);
      },
      [](const CallShape&, size_t index, int rank, ReduceOp) { return input_value(rank, index, ReduceOp::sum); }};
  return spec;
}
}  // namespace bench
