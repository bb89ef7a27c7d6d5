#include "common/copy.hpp"

namespace chorus::copy_detail {

void copy_in_vector_moves(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  size_t i = 0;
  // A fixed-size memcpy compiles to vector loads and stores, never rep movsb.
  for (; i + 64 <= bytes; i += 64) __builtin_memcpy(d + i, s + i, 64);
  if (i < bytes) std::memcpy(d + i, s + i, bytes - i);  // under 64 bytes: no rep movsb
}

}  // namespace chorus::copy_detail
