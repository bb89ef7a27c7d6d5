#include "bootstrap/secret.hpp"

#include <algorithm>

namespace chorus::bootstrap {

bool secrets_match(std::span<const uint8_t> presented, std::string_view expected) {
  const size_t length = std::max(presented.size(), expected.size());
  uint8_t difference = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < length; ++i) {
    uint8_t a = i < presented.size() ? presented[i] : 0;
    uint8_t b = i < expected.size() ? static_cast<uint8_t>(expected[i]) : 0;
    difference = static_cast<uint8_t>(difference | (a ^ b));
    // Keeps the optimiser from ending the loop once `difference` is known
    // non-zero (an early exit is exactly the timing leak this avoids).
    asm volatile("" : "+r"(difference));
  }
  return difference == 0;
}

}  // namespace chorus::bootstrap
