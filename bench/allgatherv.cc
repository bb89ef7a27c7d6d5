// allgatherv: every rank ends with rank r's varied_count block at its gapped
// displacement (gaps untouched). Size is the gathered total; busbw = algbw *
// (n-1)/n. In place the rank's input is its own block of the receive buffer.
#include "bench.hpp"

namespace bench {
const CollectiveBench& allgatherv_bench() {
  static const CollectiveBench spec{
      Collective::allgatherv, false, false, per_rank_bus_factor,
      [](size_t bytes, size_t element_size, int ranks) { return varied_shape(bytes, element_size, ranks, true); },
      [](const CallShape& shape, int rank) { return shape.recv_displs[static_cast<size_t>(rank)]; }, no_offset,
      [](chorus::Communicator& comm, const Call& c) {
        comm.allgatherv(c.send, c.count, c.recv, c.shape->recv_counts, c.shape->recv_displs, c.dtype);
      },
      [](const CallShape& shape, size_t index, int, int, int, ReduceOp, DataType dtype) {
        return varied_gathered(shape, index, dtype);
      },
      [](const CallShape&, size_t index, int rank, ReduceOp) { return input_value(rank, index, ReduceOp::sum); },
      false,
      [](CallShape& shape, int rank, int) { shape.count = shape.send_elems = shape.recv_counts[static_cast<size_t>(rank)]; }};
  return spec;
}
}  // namespace bench
