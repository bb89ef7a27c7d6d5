// Registration cache: keeps transport registrations of user buffers alive
// across calls so a rendezvous on the same buffer (the common case in a
// training loop) costs no registration. Entries cover whole pages; an entry
// is reused for any range inside it. Bounded by bytes: unused entries are
// evicted least-recently-used first once the bound is exceeded.
//
// A cached registration outlives free() of its memory. That is harmless on
// transports that do not pin pages (libfabric tcp/shm). On pinning transports
// (verbs) a reused address would be served by a registration of the old
// pages, so there only memory chorus owns is cached: add_persistent() when it
// is allocated, forget() before it is freed; every other buffer is registered
// for the one operation that uses it (docs/p2p.md, "Registration").
#pragma once

#include "transports/transport.hpp"

#include <cstdint>
#include <map>
#include <memory>

namespace chorus::p2p {

class RegCache {
 public:
  // leave_pinned: cache application memory even on pinning transports
  // (CHORUS_LEAVE_PINNED; the application promises not to free it).
  RegCache(transport::Transport& transport, uint64_t max_bytes, bool leave_pinned = false);

  // Memory whose lifetime chorus controls (collective scratch): registered
  // now and served from the cache until forget().
  void add_persistent(const void* base, size_t bytes);
  // Drops every entry overlapping the range (operations in flight keep theirs).
  void forget(const void* base, size_t bytes);

  // An operation that exposed `region` failed: its buffer goes back to the
  // application, so the cache must not keep it readable (or writable) for a
  // peer that still acts on the old operation. Memory chorus owns stays.
  void withdraw(const std::shared_ptr<transport::MemoryRegion>& region);

  // A registration covering [base, base+bytes), alive while the handle is held.
  std::shared_ptr<transport::MemoryRegion> acquire(const void* base, size_t bytes);

  uint64_t registered_bytes() const { return registered_bytes_; }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  bool caches_user_memory() const { return !pinning_; }

 private:
  struct Entry {
    std::shared_ptr<transport::MemoryRegion> region;
    uint64_t last_use = 0;
    bool persistent = false;  // chorus' own memory (add_persistent)
  };
  void evict_unused();
  std::shared_ptr<transport::MemoryRegion> register_pages(const void* base, size_t bytes);
  void insert(std::shared_ptr<transport::MemoryRegion> region, bool persistent);

  transport::Transport& transport_;
  uint64_t max_bytes_;
  bool pinning_;
  uint64_t registered_bytes_ = 0;
  uint64_t clock_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  std::map<uintptr_t, Entry> entries_;  // keyed by start address
};

}  // namespace chorus::p2p
