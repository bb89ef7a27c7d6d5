// Registration cache: keeps transport registrations of user buffers alive
// across calls so a rendezvous on the same buffer (the common case in a
// training loop) costs no registration. Entries cover whole pages; an entry
// is reused for any range inside it. Bounded by bytes: unused entries are
// evicted least-recently-used first once the bound is exceeded.
//
// Caveat (documented in docs/p2p.md): a cached registration outlives free()
// of its memory. That is harmless for libfabric tcp/shm (no pinning); pinning
// transports must hook memory release before trusting the cache.
#pragma once

#include "transports/transport.hpp"

#include <cstdint>
#include <map>
#include <memory>

namespace chorus::p2p {

class RegCache {
 public:
  RegCache(transport::Transport& transport, uint64_t max_bytes);

  // A registration covering [base, base+bytes), alive while the handle is held.
  std::shared_ptr<transport::MemoryRegion> acquire(const void* base, size_t bytes);

  uint64_t registered_bytes() const { return registered_bytes_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Entry {
    std::shared_ptr<transport::MemoryRegion> region;
    uint64_t last_use = 0;
  };
  void evict_unused();

  transport::Transport& transport_;
  uint64_t max_bytes_;
  uint64_t registered_bytes_ = 0;
  uint64_t clock_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  std::map<uintptr_t, Entry> entries_;  // keyed by start address
};

}  // namespace chorus::p2p
