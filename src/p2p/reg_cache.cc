#include "p2p/reg_cache.hpp"

#include <unistd.h>

#include <algorithm>

namespace chorus::p2p {

namespace {
uintptr_t page_size() {
  static const uintptr_t size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  return size;
}
}  // namespace

RegCache::RegCache(transport::Transport& transport, uint64_t max_bytes, bool leave_pinned)
    : transport_(transport), max_bytes_(max_bytes), pinning_(transport.registration_pins_pages() && !leave_pinned) {}

std::shared_ptr<transport::MemoryRegion> RegCache::acquire(const void* base, size_t bytes) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t end = start + bytes;
  ++clock_;
  // The candidate is the last entry starting at or before `start`.
  auto it = entries_.upper_bound(start);
  if (it != entries_.begin()) {
    --it;
    const auto& region = *it->second.region;
    uintptr_t region_end = it->first + region.length();
    if (region_end >= end) {
      it->second.last_use = clock_;
      ++hits_;
      return it->second.region;
    }
  }
  ++misses_;
  auto region = register_pages(base, bytes);
  if (!pinning_) insert(region, false);  // pinning: held by the operation only
  return region;
}

void RegCache::add_persistent(const void* base, size_t bytes) {
  ++clock_;
  insert(register_pages(base, bytes), true);
}

void RegCache::forget(const void* base, size_t bytes) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t end = start + std::max<size_t>(bytes, 1);
  for (auto it = entries_.begin(); it != entries_.end();) {
    const uintptr_t entry_end = it->first + it->second.region->length();
    if (it->first < end && start < entry_end) {
      registered_bytes_ -= it->second.region->length();
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

void RegCache::withdraw(const std::shared_ptr<transport::MemoryRegion>& region) {
  if (!region) return;
  auto entry = entries_.find(reinterpret_cast<uintptr_t>(region->base()));
  if (entry == entries_.end() || entry->second.region != region || entry->second.persistent) return;
  registered_bytes_ -= region->length();
  entries_.erase(entry);
}

// Whole pages: neighbouring buffers on the same pages then share an entry.
std::shared_ptr<transport::MemoryRegion> RegCache::register_pages(const void* base, size_t bytes) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(base);
  const uintptr_t page = page_size();
  uintptr_t aligned_start = start & ~(page - 1);
  uintptr_t aligned_end = (start + bytes + page - 1) & ~(page - 1);
  if (aligned_end == aligned_start) aligned_end += page;
  return transport_.register_memory(reinterpret_cast<void*>(aligned_start), aligned_end - aligned_start);
}

void RegCache::insert(std::shared_ptr<transport::MemoryRegion> region, bool persistent) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(region->base());
  // An older, smaller entry at the same start is replaced (its users keep it alive).
  auto existing = entries_.find(start);
  if (existing != entries_.end()) {
    registered_bytes_ -= existing->second.region->length();
    entries_.erase(existing);
  }
  registered_bytes_ += region->length();
  entries_[start] = Entry{std::move(region), clock_, persistent};
  evict_unused();
}

void RegCache::evict_unused() {
  while (registered_bytes_ > max_bytes_) {
    // Least recently used entry that nobody outside the cache holds.
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.region.use_count() == 1 &&
          (victim == entries_.end() || it->second.last_use < victim->second.last_use)) {
        victim = it;
      }
    }
    if (victim == entries_.end()) return;  // everything in use: over the bound until released
    registered_bytes_ -= victim->second.region->length();
    entries_.erase(victim);
  }
}

}  // namespace chorus::p2p
