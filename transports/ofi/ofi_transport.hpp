// libfabric transport (docs/architecture.md §5): one FI_EP_RDM endpoint per rank with
// FI_MSG | FI_RMA, an AV table indexed by rank, one CQ. Eager messages travel
// through registered bounce buffers (or fi_inject), reads are fi_read.
#pragma once

#include "common/config.hpp"
#include "transports/transport.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace chorus::transport {

struct OfiOptions {
  std::string provider;              // "" = auto: shm on one host, else tcp;ofi_rxm
  bool all_ranks_on_one_host = true;
  // The largest eager payload the engine sends (the library default).
  size_t max_eager_bytes = config::default_bytes(config::kVariables, "CHORUS_EAGER_LIMIT");
  // CPU time a single data-path provider call may burn before it is taken
  // as stuck and abandoned (stall_escape.hpp).
  std::chrono::milliseconds stall_cpu_limit{std::chrono::seconds(5)};
  int test_stall_after_calls = -1;   // CHORUS_TEST_OFI_STALL on this rank, else -1
};

std::unique_ptr<Transport> make_ofi_transport(int rank, int size, const OfiOptions& options);

}  // namespace chorus::transport
