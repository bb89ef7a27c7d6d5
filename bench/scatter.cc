// scatter: rank r ends with block r of the root's buffer; scatterv: with the
// root's varied_count block r at its gapped displacement. Size is the
// scattered total; busbw = algbw * (n-1)/n. In place (every rank) the
// receive buffer is the rank's own block inside the send buffer.
#include "bench.hpp"

namespace bench {
const CollectiveBench& scatter_bench() {
  static const CollectiveBench spec{
      Collective::scatter, false, true, per_rank_bus_factor,
      [](size_t bytes, size_t element_size, int ranks) {
        size_t count = bytes / element_size / static_cast<size_t>(ranks);
        return CallShape{count, count * static_cast<size_t>(ranks), count};
      },
      no_offset, own_block_offset,
      [](chorus::Communicator& comm, const Call& c) { comm.scatter(c.send, c.recv, c.count, c.dtype, c.root); },
      [](const CallShape& shape, size_t index, int rank, int, int root, ReduceOp, DataType dtype) {
        return as_stored(input_value(root, static_cast<size_t>(rank) * shape.count + index, ReduceOp::sum), dtype);
      },
      [](const CallShape&, size_t index, int rank, ReduceOp) { return input_value(rank, index, ReduceOp::sum); }};
  return spec;
}

const CollectiveBench& scatterv_bench() {
  static const CollectiveBench spec{
      Collective::scatterv, false, true, per_rank_bus_factor,
      [](size_t bytes, size_t element_size, int ranks) { return varied_shape(bytes, element_size, ranks, false); },
      no_offset, [](const CallShape& shape, int rank) { return shape.send_displs[static_cast<size_t>(rank)]; },
      [](chorus::Communicator& comm, const Call& c) {
        comm.scatterv(c.send, c.shape->send_counts, c.shape->send_displs, c.recv, c.count, c.dtype, c.root);
      },
      [](const CallShape& shape, size_t index, int rank, int, int root, ReduceOp, DataType dtype) {
        const size_t sent_index = shape.send_displs[static_cast<size_t>(rank)] + index;
        return as_stored(input_value(root, sent_index, ReduceOp::sum), dtype);
      },
      [](const CallShape&, size_t index, int rank, ReduceOp) { return input_value(rank, index, ReduceOp::sum); },
      false,
      [](CallShape& shape, int rank, int) { shape.count = shape.recv_elems = shape.send_counts[static_cast<size_t>(rank)]; }};
  return spec;
}
}  // namespace bench
