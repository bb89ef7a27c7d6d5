// scan: rank r ends with the reduction of ranks 0..r's inputs; exscan: of
// ranks 0..r-1 (rank 0's buffer is undefined in MPI and not checked).
// busbw = algbw.
#include "bench.hpp"

#include <cmath>

namespace bench {
const CollectiveBench& scan_bench() {
  static const CollectiveBench spec{
      Collective::scan, true, false, [](int) { return 1.0; }, same_count_shape, no_offset, no_offset,
      [](chorus::Communicator& comm, const Call& c) { comm.scan(c.send, c.recv, c.count, c.dtype, c.op); },
      [](const CallShape&, size_t index, int rank, int, int, ReduceOp op, DataType dtype) {
        return reduced_value(rank + 1, index, op, dtype);
      },
      plain_input};
  return spec;
}

const CollectiveBench& exscan_bench() {
  static const CollectiveBench spec{
      Collective::exscan, true, false, [](int) { return 1.0; }, same_count_shape, no_offset, no_offset,
      [](chorus::Communicator& comm, const Call& c) { comm.exscan(c.send, c.recv, c.count, c.dtype, c.op); },
      [](const CallShape&, size_t index, int rank, int, int, ReduceOp op, DataType dtype) -> double {
        return rank == 0 ? NAN : reduced_value(rank, index, op, dtype);
      },
      plain_input};
  return spec;
}
}  // namespace bench
