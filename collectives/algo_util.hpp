// Small helpers shared by the algorithm files: byte arithmetic on typed
// buffers, splitting `count` elements into `parts` near-equal blocks, and
// splitting a block into pipeline chunks every rank computes identically.
#pragma once

#include "collectives/collectives.hpp"
#include "common/copy.hpp"

#include <algorithm>
#include <cstring>
#include <span>

namespace chorus::coll {

inline uint8_t* at(void* base, size_t elements, size_t element_size) {
  return static_cast<uint8_t*>(base) + elements * element_size;
}
inline const uint8_t* at(const void* base, size_t elements, size_t element_size) {
  return static_cast<const uint8_t*>(base) + elements * element_size;
}

inline void copy_unless_same(void* dst, const void* src, size_t bytes) {
  if (dst != src && bytes != 0) move_bytes(dst, src, bytes);
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

// Where rank r's block lies in a buffer of per-rank blocks (elements): blocks
// of `uniform` elements one after another (gather/scatter), or the caller's
// counts and displacements (the v-variants).
struct Layout {
  std::span<const size_t> counts;
  std::span<const size_t> displs;
  size_t uniform = 0;
  size_t count(int rank) const { return counts.empty() ? uniform : counts[static_cast<size_t>(rank)]; }
  size_t offset(int rank) const {
    return displs.empty() ? static_cast<size_t>(rank) * uniform : displs[static_cast<size_t>(rank)];
  }
  // Elements from the buffer's start to the end of its last block.
  size_t extent(int ranks) const {
    size_t end = 0;
    for (int r = 0; r < ranks; ++r) end = std::max(end, offset(r) + count(r));
    return end;
  }
};

// Binomial trees over ranks relative to the root (v = rank - root mod n):
// v's parent is v minus its lowest set bit, its children v + 2^k for 2^k
// below that bit, and its subtree the ranks [v, v + subtree_size(v, n)).
inline int lowest_bit(int v) { return v & -v; }
inline int subtree_size(int v, int n) { return v == 0 ? n : std::min(lowest_bit(v), n - v); }

// The unfold of recursive doubling and halving: of the first 2 * extra
// ranks, which folded in pairs, each odd one returns the result in `recv`
// to its even partner, which sat out.
inline void unfold_to_even_partners(Context& ctx, int extra, uint32_t step, void* recv, size_t bytes) {
  const int rank = ctx.rank();
  if (rank >= 2 * extra) return;
  auto request = rank % 2 == 1 ? ctx.isend(rank - 1, step, recv, bytes) : ctx.irecv(rank + 1, step, recv, bytes);
  ctx.wait(request);
}

}  // namespace chorus::coll
