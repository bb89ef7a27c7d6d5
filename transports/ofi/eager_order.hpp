// The order of a peer's eager messages over libfabric: the header that
// numbers them and the receiver's reordering (docs/transport-ofi.md).
#pragma once

#include "transports/transport.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace chorus::transport::ofi {

// Before every eager message: the sender's rank and a per-destination
// sequence number. Some providers (tcp;ofi_rxm past its eager buffer size)
// deliver a peer's messages out of order; the receiver restores the order
// the contract promises.
struct EagerHeader {
  uint32_t source;
  uint32_t sequence;
};

// Hands messages to the sink in each peer's send order; early arrivals wait
// (copied) until the gap before them fills.
class EagerOrder {
 public:
  // Forgets everything: `peers` sources, each expected to start at 0.
  void reset(size_t peers) {
    expected_.assign(peers, 0);
    early_.assign(peers, {});
  }
  void deliver(Sink& sink, const EagerHeader& header, const uint8_t* data, size_t bytes);

 private:
  std::vector<uint32_t> expected_;                               // per source: the next sequence number
  std::vector<std::map<uint32_t, std::vector<uint8_t>>> early_;  // per source: arrived ahead of order
};

}  // namespace chorus::transport::ofi
