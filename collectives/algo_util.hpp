// Small helpers shared by the algorithm files: byte arithmetic on typed
// buffers, splitting `count` elements into `parts` near-equal blocks, and
// splitting a block into pipeline chunks every rank computes identically.
#pragma once

#include "collectives/collectives.hpp"

#include <algorithm>
#include <cstring>

namespace chorus::coll {

inline uint8_t* at(void* base, size_t elements, size_t element_size) {
  return static_cast<uint8_t*>(base) + elements * element_size;
}
inline const uint8_t* at(const void* base, size_t elements, size_t element_size) {
  return static_cast<const uint8_t*>(base) + elements * element_size;
}

inline void copy_unless_same(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes != 0) std::memmove(dst, src, bytes);
}

// `count` elements in `parts` blocks; the first count % parts blocks hold one more.
struct Blocks {
  size_t count;
  size_t parts;
  size_t size(size_t block) const { return count / parts + (block < count % parts ? 1 : 0); }
  size_t offset(size_t block) const { return block * (count / parts) + std::min(block, count % parts); }
  size_t largest() const { return count / parts + (count % parts != 0 ? 1 : 0); }
};

// Chunks of at most `chunk_elements` of a block of `block_elements`; every
// rank splits a given block the same way, so chunk k on both sides matches.
struct Chunks {
  size_t block_elements;
  size_t chunk_elements;
  size_t count() const {
    return block_elements == 0 ? 0 : (block_elements + chunk_elements - 1) / chunk_elements;
  }
  size_t offset(size_t chunk) const { return chunk * chunk_elements; }
  size_t size(size_t chunk) const { return std::min(chunk_elements, block_elements - offset(chunk)); }
};

inline size_t chunk_elements(const Context& ctx, size_t element_size) {
  return std::max<size_t>(1, ctx.tuning().pipeline_chunk_bytes / element_size);
}

inline int mod(int value, int n) { return ((value % n) + n) % n; }

}  // namespace chorus::coll
