// The job secret check of the store's HELLO (docs/bootstrap.md, "Security
// model"). Its own unit so it is tested and fuzzed directly.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace chorus::bootstrap {

// True if `presented` equals `expected`. Compares every byte of the longer of
// the two whatever the contents, so the time taken says nothing about how much
// of a guess was right (only the lengths, which are not secret, change it).
bool secrets_match(std::span<const uint8_t> presented, std::string_view expected);

}  // namespace chorus::bootstrap
