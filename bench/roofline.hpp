// chorus-bench --roofline: how far a row is from the machine's memory limit.
//
// On one host a large collective is bound by memory: every byte a rank
// receives is copied at least once into its buffer, and every byte it
// reduces is read twice and written once. The limit of a row is the time
// those copies take at this machine's measured copy rate, nothing else
// counted (docs/benchmarking.md, "Roofline").
#pragma once

#include <chorus/chorus.hpp>

#include <cstddef>
#include <optional>
#include <string>

namespace bench {

// Bytes copied per second by one process: with every rank of the
// communicator copying at once (the rate a rank gets while all move data),
// and with one rank copying while the others wait (the rate of a copy on a
// chain that the other ranks wait for).
struct CopyRate {
  double all_ranks = 0;  // per rank, all copying at once
  double one_rank = 0;   // rank 0 alone
  size_t buffer_bytes = 0;
};

// Collective: every rank of `comm` calls it. Copies `buffer_bytes` from
// one buffer to another and back, about 16 MiB a round (a buffer that fits
// in a cache stays there, as a collective's buffers of that size do), best
// of 3 rounds. 64 MiB: the machine's memory.
CopyRate measure_copy_rate(chorus::Communicator& comm, size_t buffer_bytes = size_t{64} << 20);

// What one call of `algorithm` must copy, in copy-equivalent bytes (a byte
// copied counts 1; a byte reduced into another, read twice and written
// once, counts 1.5): on its busiest rank, and along its longest chain of
// copies that must run one after another. `bytes` is the row's size (for
// the block collectives the whole gathered buffer).
struct MemoryWork {
  double busiest_rank = 0;
  double chain = 0;
};
// Nothing for an algorithm the model does not know (board, hierarchical,
// the v-variants, scans): the row shows "-".
std::optional<MemoryWork> memory_work(chorus::Collective op, const std::string& algorithm, size_t bytes, int ranks);

// The row's limit in seconds: the busiest rank's work at the all-ranks
// rate, or the chain's at the one-rank rate, whichever is longer.
double limit_seconds(const MemoryWork& work, const CopyRate& rate);

// The least limit over the op's algorithms the model knows: what any of
// them would need on this machine (compare-openmpi holds Open MPI's rows
// against it, its algorithm being unknown). Nothing where none applies.
std::optional<double> op_limit_seconds(chorus::Collective op, size_t bytes, int ranks, const CopyRate& rate);

}  // namespace bench
