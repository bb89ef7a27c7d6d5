// chorus-bench: one driver (main.cc) and one small file per collective, as
// in nccl-tests. Each collective describes its buffer layout, bus bandwidth
// factor, how to call it and which value every output element must hold.
//
// Inputs are small integers so every sum is exact in any order for every
// dtype (including float16/bfloat16): element j of rank r is ((r + j) % 8) + 1;
// for prod the inputs are 1 or 2 so products stay exact powers of two.
#pragma once

#include <chorus/chorus.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bench {

using chorus::Collective;
using chorus::DataType;
using chorus::ReduceOp;

// Element access through double; exact for the small integers used here.
double load(const void* buffer, size_t index, DataType dtype);
void store(void* buffer, size_t index, DataType dtype, double value);
// What storing `value` into `dtype` and reading it back gives (integer wrap).
double as_stored(double value, DataType dtype);

// The input value of element `index` on `rank`.
double input_value(int rank, size_t index, ReduceOp op);
// The reduction over ranks 0..ranks-1 of input_value(r, index), as stored in dtype.
double reduced_value(int ranks, size_t index, ReduceOp op, DataType dtype);

// The algorithms of `op` worth running on `comm` (chorus-bench --algo all,
// chorus-matrix): every one, but the hierarchical ones (they split the
// ranks by host) only where chorus' own choice takes them, ranks on several
// hosts with several on some (elsewhere they would run only their flat
// parts, which are in the list anyway), and multi_leader only where every
// host has 2 ranks or more (elsewhere it is `hierarchical`). Collective:
// every rank of `comm` calls it.
std::vector<std::string> algorithms_that_apply(chorus::Communicator& comm, Collective op);
// False where algorithms_that_apply leaves the hierarchical ones out.
bool ranks_split_by_host(chorus::Communicator& comm);

struct CallShape {
  size_t count = 0;        // the `count` argument of the call
  size_t send_elems = 0;   // elements in the send buffer
  size_t recv_elems = 0;   // elements in the receive buffer
  // v-variants: per-rank counts and displacements of this rank's call.
  std::vector<size_t> send_counts = {}, send_displs = {}, recv_counts = {}, recv_displs = {};
};

struct Call {
  const void* send;
  void* recv;
  size_t count;
  DataType dtype;
  ReduceOp op;
  int root;
  const CallShape* shape;  // the v-variants' arrays
};

struct CollectiveBench {
  Collective op;
  bool reduces;  // takes a ReduceOp
  bool rooted;   // takes a root
  // nccl-tests' bus bandwidth factor for n ranks.
  double (*bus_factor)(int ranks);
  // Shape of one call moving `bytes` (the table's size column).
  CallShape (*shape)(size_t bytes, size_t element_size, int ranks);
  // In-place runs use one buffer of max(send, recv) elements; these give
  // where the send and receive pointers start in it (elements).
  size_t (*in_place_send_offset)(const CallShape& shape, int rank);
  size_t (*in_place_recv_offset)(const CallShape& shape, int rank);
  void (*run)(chorus::Communicator& comm, const Call& call);
  // Expected value of receive element `index` on `rank` (NaN: not checked).
  double (*expected)(const CallShape& shape, size_t index, int rank, int ranks, int root, ReduceOp op,
                     DataType dtype);
  // Input value of send element `index` on `rank`.
  double (*input)(const CallShape& shape, size_t index, int rank, ReduceOp op);
  // Broadcast has one buffer: it always runs in place.
  bool always_in_place = false;
  // v-variants: completes `shape` for `rank` (its own counts and arrays).
  void (*for_rank)(CallShape& shape, int rank, int ranks) = nullptr;
};

const CollectiveBench& allreduce_bench();
const CollectiveBench& broadcast_bench();
const CollectiveBench& barrier_bench();
const CollectiveBench& reduce_bench();
const CollectiveBench& allgather_bench();
const CollectiveBench& reduce_scatter_bench();
const CollectiveBench& alltoall_bench();
const CollectiveBench& gather_bench();
const CollectiveBench& gatherv_bench();
const CollectiveBench& scatter_bench();
const CollectiveBench& scatterv_bench();
const CollectiveBench& allgatherv_bench();
const CollectiveBench& alltoallv_bench();
const CollectiveBench& scan_bench();
const CollectiveBench& exscan_bench();

// Shapes shared by several collectives.
CallShape same_count_shape(size_t bytes, size_t element_size, int ranks);
CallShape per_rank_block_shape(size_t bytes, size_t element_size, int ranks);  // allgather
size_t no_offset(const CallShape& shape, int rank);
size_t own_block_offset(const CallShape& shape, int rank);  // rank * count
double plain_input(const CallShape& shape, size_t index, int rank, ReduceOp op);
double per_rank_bus_factor(int ranks);  // (n-1)/n

// v-variants. Rank r's block when a uniform call would have `base`
// elements per rank: none on every third rank, base + r on the others.
size_t varied_count(size_t base, int rank);
// alltoallv: elements between ranks i and j (symmetric, so in place works).
size_t pair_count(size_t base, int i, int j);
// Displacements of `counts` with a one-element gap after each block (gaps
// must stay untouched); returns the extent.
size_t gapped_displs(const std::vector<size_t>& counts, std::vector<size_t>& displs);
// The shape of gatherv/allgatherv (recv_*) or scatterv (send_*): varied
// counts over `ranks`, gapped; `bytes` as for allgather.
CallShape varied_shape(size_t bytes, size_t element_size, int ranks, bool receive_side);
// Which block of `counts`/`displs` holds element `index`: the rank, or -1
// in a gap; `offset` is the element's index in its block.
int block_of(const std::vector<size_t>& counts, const std::vector<size_t>& displs, size_t index, size_t& offset);
// gatherv/allgatherv result element `index`: the sender's input, or the
// sentinel in a gap.
double varied_gathered(const CallShape& shape, size_t index, DataType dtype);
inline constexpr double kSentinel = 99;  // never a valid result for these inputs

}  // namespace bench
