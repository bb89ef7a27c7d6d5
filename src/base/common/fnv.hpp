// FNV-1a (64-bit), the one definition of its constants: stable across builds,
// runs and hosts, so every rank derives the same value. Users: the port
// file's name (bootstrap/port_file.cc), the algorithms' name hashes
// (collectives/collectives.hpp, constexpr: computed at compile time) and the
// call digest (api/communicator_calls.cc).
#pragma once

#include <cstdint>
#include <string_view>

namespace chorus::fnv1a {

inline constexpr uint64_t kOffsetBasis = 14695981039346656037ull;
inline constexpr uint64_t kPrime = 1099511628211ull;

// The hash so far with one more value (a byte, or a whole word) mixed in.
constexpr uint64_t mix(uint64_t hash, uint64_t value) { return (hash ^ value) * kPrime; }

// The hash of `text`, byte by byte.
constexpr uint64_t hash(std::string_view text) {
  uint64_t result = kOffsetBasis;
  for (char c : text) result = mix(result, static_cast<unsigned char>(c));
  return result;
}

}  // namespace chorus::fnv1a
