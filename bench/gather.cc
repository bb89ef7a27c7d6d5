// gather: the root ends with every rank's block in rank order; gatherv: with
// rank r's varied_count block at its gapped displacement (gaps untouched).
// Size is the gathered total; busbw = algbw * (n-1)/n. In place the root's
// input is its own block of the receive buffer.
#include "bench.hpp"

#include <cmath>

namespace bench {
const CollectiveBench& gather_bench() {
  static const CollectiveBench spec{
      Collective::gather, false, true, per_rank_bus_factor, per_rank_block_shape, own_block_offset, no_offset,
      [](chorus::Communicator& comm, const Call& c) { comm.gather(c.send, c.recv, c.count, c.dtype, c.root); },
      [](const CallShape& shape, size_t index, int rank, int, int root, ReduceOp, DataType dtype) -> double {
        if (rank != root) return NAN;  // significant only at the root
        return as_stored(input_value(static_cast<int>(index / shape.count), index % shape.count, ReduceOp::sum), dtype);
      },
      [](const CallShape&, size_t index, int rank, ReduceOp) { return input_value(rank, index, ReduceOp::sum); }};
  return spec;
}

const CollectiveBench& gatherv_bench() {
  static const CollectiveBench spec{
      Collective::gatherv, false, true, per_rank_bus_factor,
      [](size_t bytes, size_t element_size, int ranks) { return varied_shape(bytes, element_size, ranks, true); },
      [](const CallShape& shape, int rank) { return shape.recv_displs[static_cast<size_t>(rank)]; }, no_offset,
      [](chorus::Communicator& comm, const Call& c) {
        comm.gatherv(c.send, c.count, c.recv, c.shape->recv_counts, c.shape->recv_displs, c.dtype, c.root);
      },
      [](const CallShape& shape, size_t index, int rank, int, int root, ReduceOp, DataType dtype) -> double {
        return rank == root ? varied_gathered(shape, index, dtype) : NAN;
      },
      [](const CallShape&, size_t index, int rank, ReduceOp) { return input_value(rank, index, ReduceOp::sum); },
      false,
      [](CallShape& shape, int rank, int) { shape.count = shape.send_elems = shape.recv_counts[static_cast<size_t>(rank)]; }};
  return spec;
}
}  // namespace bench
