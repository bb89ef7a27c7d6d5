// alltoallv: rank i sends pair_count(i, j) elements to rank j, at gapped
// displacements on both sides (the counts are symmetric, so the send and
// receive layouts coincide and in place works). Size is each rank's whole
// buffer for uniform blocks; busbw = algbw * (n-1)/n.
#include "bench.hpp"

#include <cmath>

namespace bench {
namespace {
// Rank `rank`'s layout: its counts towards every rank, gapped.
void pair_layout(CallShape& shape, int rank, int ranks) {
  shape.send_counts.clear();
  for (int j = 0; j < ranks; ++j) shape.send_counts.push_back(pair_count(shape.count, rank, j));
  shape.send_elems = shape.recv_elems = gapped_displs(shape.send_counts, shape.send_displs);
  shape.recv_counts = shape.send_counts;
  shape.recv_displs = shape.send_displs;
}
}  // namespace

const CollectiveBench& alltoallv_bench() {
  static const CollectiveBench spec{
      Collective::alltoallv, false, false, per_rank_bus_factor, per_rank_block_shape, no_offset, no_offset,
      [](chorus::Communicator& comm, const Call& c) {
        comm.alltoallv(c.send, c.shape->send_counts, c.shape->send_displs, c.recv, c.shape->recv_counts,
                       c.shape->recv_displs, c.dtype);
      },
      [](const CallShape& shape, size_t index, int rank, int ranks, int, ReduceOp, DataType dtype) -> double {
        size_t offset = 0;
        const int source = block_of(shape.recv_counts, shape.recv_displs, index, offset);
        if (source < 0) return NAN;  // a gap: in place it holds this rank's input
        CallShape sender{shape.count};
        pair_layout(sender, source, ranks);
        const size_t sent_index = sender.send_displs[static_cast<size_t>(rank)] + offset;
        return as_stored(input_value(source, sent_index, ReduceOp::sum), dtype);
      },
      [](const CallShape&, size_t index, int rank, ReduceOp) { return input_value(rank, index, ReduceOp::sum); },
      false, pair_layout};
  return spec;
}
}  // namespace bench
