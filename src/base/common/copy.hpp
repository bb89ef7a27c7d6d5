// copy_bytes: memcpy without glibc's slow case on AMD Zen.
//
// glibc 2.36 (Debian 12) copies from 2 KiB up with `rep movsb` on CPUs with
// ERMS/FSRM. On AMD Zen that instruction runs 10-25x slower when the
// destination starts 1..31 bytes after the source modulo 4 KiB (measured on
// the project's VM, AMD EPYC: 4 KiB in 2.1 us instead of 0.09, 16 KiB in 8.9
// instead of 0.31; docs/performance.md "Copies that rep movsb makes slow").
// Which buffers meet in that window depends on where malloc put them, so a
// message size ran 2-3x slower or not from one program to the next.
// copy_bytes takes memcpy's path except in that window, where it copies in
// 64-byte moves (about 1.3x the good memcpy's time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace chorus {

namespace copy_detail {
// 2 KiB: glibc's rep_movsb_threshold, below which it does not use rep movsb.
constexpr size_t kRepMovsbFrom = 2048;
constexpr uintptr_t kSlowWindow = 32;  // destination 1..31 bytes past the source, modulo 4 KiB
void copy_in_vector_moves(void* dst, const void* src, size_t bytes);
}  // namespace copy_detail

// As std::memcpy: the ranges must not overlap.
inline void copy_bytes(void* dst, const void* src, size_t bytes) {
  const uintptr_t distance = (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  if (bytes < copy_detail::kRepMovsbFrom || distance == 0 || distance >= copy_detail::kSlowWindow) {
    std::memcpy(dst, src, bytes);
    return;
  }
  copy_detail::copy_in_vector_moves(dst, src, bytes);
}

// As std::memmove: overlapping ranges take memmove (it copies backwards
// where it must); others copy_bytes.
inline void move_bytes(void* dst, const void* src, size_t bytes) {
  const auto d = reinterpret_cast<uintptr_t>(dst), s = reinterpret_cast<uintptr_t>(src);
  if ((d < s ? s - d : d - s) < bytes) {
    std::memmove(dst, src, bytes);
    return;
  }
  copy_bytes(dst, src, bytes);
}

}  // namespace chorus
