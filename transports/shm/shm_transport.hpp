// Native shared-memory transport for ranks on one host (docs/transport-shm.md).
//
// Eager messages go through one single-producer/single-consumer byte ring per
// (sender, receiver) pair, kept in the receiver's POSIX shared-memory segment:
// a send is two memcpys and one release store, a receive one acquire load,
// with no lock and no system call (the shape of Open MPI vader's fast boxes).
// Rendezvous reads are one copy from the sender's buffer with
// process_vm_readv (cross-memory attach), so no registration pins anything.
#pragma once

#include "common/config.hpp"
#include "transports/transport.hpp"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace chorus::transport {

struct ShmOptions {
  // The engine's eager limit (the library default); headers are added on top.
  size_t max_eager_bytes = config::default_bytes(config::kVariables, "CHORUS_EAGER_LIMIT");
  size_t ring_bytes = 0;           // per sender; 0: derived from max_eager_bytes
  // The job's rank of each of this transport's ranks, when it joins only
  // the ranks of one host of a larger job (the hybrid transport,
  // transports/hybrid): its calls and its sink take its own indices
  // (0..size-1), its error messages and Error::peer() name job ranks.
  // Empty: the indices are the job's ranks.
  std::vector<int> rank_names;
};

// Whether this kernel lets sibling processes read each other's memory
// (process_vm_readv). Yama's ptrace_scope 2 and 3 forbid it; 0, 1 (after
// PR_SET_PTRACER) and no Yama allow it. Fills `why` when it returns false.
bool shm_cross_memory_attach_allowed(std::string* why);

// The ring per sender when ShmOptions::ring_bytes is 0: four of the largest
// records and at least 256 KiB while a rank's rings (one per rank) fit in
// 16 MiB; past that they share the 16 MiB, down to two of the largest
// records (docs/transport-shm.md, "Ring size").
size_t shm_default_ring_bytes(size_t max_eager_bytes, int ranks);

std::unique_ptr<Transport> make_shm_transport(int rank, int size, const ShmOptions& options);

}  // namespace chorus::transport
