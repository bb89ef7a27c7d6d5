// copy_bytes and move_bytes (common/copy.hpp): every byte right at every
// distance modulo 4 KiB (the window where they avoid rep movsb and the rest),
// sizes around the 2 KiB switch and odd tails, and move_bytes on overlaps.
#include "common/copy.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return v;
}

TEST(Copy, EveryDistanceModulo4KiBAndSize) {
  const std::vector<uint8_t> source = pattern(3 * 4096 + 128, 3);
  std::vector<uint8_t> arena(6 * 4096 + 256);
  const auto base = reinterpret_cast<uintptr_t>(arena.data());
  const auto src = reinterpret_cast<uintptr_t>(source.data());
  size_t checked = 0;
  for (size_t bytes : {0u, 1u, 63u, 64u, 65u, 2047u, 2048u, 2049u, 3000u, 4096u, 8192u + 37u}) {
    for (uintptr_t distance = 0; distance < 4096; distance += (distance < 80 || distance > 4000 ? 1 : 97)) {
      // Destination `distance` bytes past the source modulo 4 KiB, inside the arena.
      const uintptr_t first = (base + 4095) & ~uintptr_t{4095};
      auto* dst = reinterpret_cast<uint8_t*>(first + ((src + distance) & 4095));
      std::fill(arena.begin(), arena.end(), 0xEE);
      chorus::copy_bytes(dst, source.data(), bytes);
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(dst[i], source[i]) << bytes << " bytes, distance " << distance << ", byte " << i;
      // Nothing outside the destination was written.
      const size_t before = static_cast<size_t>(dst - arena.data());
      for (size_t i = 0; i < before; ++i) ASSERT_EQ(arena[i], 0xEE) << "byte " << i << " before the destination";
      for (size_t i = before + bytes; i < arena.size(); ++i) ASSERT_EQ(arena[i], 0xEE) << "byte after the destination";
      ++checked;
    }
  }
  EXPECT_GT(checked, 11u * 150u);
}

TEST(Copy, MoveBytesHandlesOverlapBothWays) {
  for (size_t bytes : {100u, 3000u, 9000u}) {
    for (ptrdiff_t shift : {-65, -16, -1, 1, 16, 65}) {
      std::vector<uint8_t> buffer = pattern(bytes + 200, 11);
      const std::vector<uint8_t> original = buffer;
      uint8_t* src = buffer.data() + 100;
      chorus::move_bytes(src + shift, src, bytes);
      for (size_t i = 0; i < bytes; ++i) {
        ASSERT_EQ(buffer[100 + shift + static_cast<ptrdiff_t>(i)], original[100 + i]) << bytes << " bytes, shift " << shift;
      }
    }
  }
}

}  // namespace
