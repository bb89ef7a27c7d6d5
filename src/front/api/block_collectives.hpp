// What the communicator needs to know about gather, gatherv, scatter,
// scatterv, allgatherv, alltoallv, scan and exscan beyond the rules every
// collective shares (communicator.cc): their per-rank arrays, which of their
// arguments every rank passes alike, and their argument checks.
#pragma once

#include "collectives/collectives.hpp"

#include <numeric>
#include <optional>
#include <span>
#include <vector>

namespace chorus {

// gather .. exscan (the collectives after alltoall in the enum).
inline bool is_block_collective(Collective op) { return op >= Collective::gather && op <= Collective::exscan; }

// The sum of per-rank counts (wraps only where validation rejects it).
inline size_t total_count(std::span<const size_t> counts) {
  return std::accumulate(counts.begin(), counts.end(), size_t{0});
}

// The element count every rank passes alike: `count`, or for allgatherv the
// sum of recv_counts; nullopt where counts are per rank (gatherv, scatterv,
// alltoallv: only the pairs of ranks agree). Goes into the call check.
// Inline: every call's digest asks, and an out-of-line optional return cost
// a store-forwarding stall per call.
inline std::optional<uint64_t> agreed_count(Collective op, const coll::Args& args) {
  switch (op) {
    case Collective::gatherv:
    case Collective::scatterv:
    case Collective::alltoallv: return std::nullopt;
    case Collective::allgatherv: return total_count(args.recv_counts);
    default: return args.count;
  }
}

// Elements the selection table sees (every rank computes the same value).
size_t block_collective_elements(Collective op, const coll::Args& args, int size);

// Checks of a block collective beyond datatype, op, root and count (done by
// the communicator first): array lengths, overflow, this rank's own block,
// null buffers. Throws invalid_argument naming the argument.
void validate_block_collective(Collective op, const coll::Args& args, int rank, int size);

// A v-variant's arguments with omitted displacements (empty spans) filled
// in as packed blocks (displs[r] = counts[0] + ... + counts[r-1]); owns
// the arrays it fills, so it must outlive the call.
// The arguments of the v-collectives as the blocking and non-blocking
// calls of the C++ API pass them on (counts and displacements are elements).
coll::Args gatherv_args(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
                        std::span<const size_t> recv_displs, DataType dtype, int root);
coll::Args scatterv_args(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_displs,
                         void* recv, size_t recv_count, DataType dtype, int root);
coll::Args allgatherv_args(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
                           std::span<const size_t> recv_displs, DataType dtype);
coll::Args alltoallv_args(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_displs,
                          void* recv, std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                          DataType dtype);

class BlockArgs {
 public:
  explicit BlockArgs(const coll::Args& args);
  BlockArgs(const BlockArgs&) = delete;
  BlockArgs& operator=(const BlockArgs&) = delete;
  const coll::Args& args() const { return args_; }

 private:
  coll::Args args_;
  std::vector<size_t> send_displs_, recv_displs_;
};

}  // namespace chorus
