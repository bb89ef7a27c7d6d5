#include "bootstrap/secret.hpp"

#include <algorithm>

namespace chorus::bootstrap {

bool secrets_match(std::span<const uint8_t> presented, std::string_view expected) {
  const size_t length = std::max(presented.size(), expected.size());
  uint8_t difference = presented.size() == expected.size() ? 0 : 1;
  // Every pass makes the same loads whichever side is shorter (past its end a
  // side reads its byte 0 and masks it out): the time then follows only the
  // longer length, also under instrumentation that charges per load (tsan).
  static const uint8_t kNothing = 0;
  const uint8_t* a_bytes = presented.empty() ? &kNothing : presented.data();
  const auto* b_bytes = expected.empty() ? &kNothing : reinterpret_cast<const uint8_t*>(expected.data());
  for (size_t i = 0; i < length; ++i) {
    const bool in_a = i < presented.size(), in_b = i < expected.size();
    uint8_t a = a_bytes[in_a ? i : 0];
    uint8_t b = b_bytes[in_b ? i : 0];
    a = static_cast<uint8_t>(a & -static_cast<uint8_t>(in_a));
    b = static_cast<uint8_t>(b & -static_cast<uint8_t>(in_b));
    difference = static_cast<uint8_t>(difference | (a ^ b));
    // Keeps the optimiser from ending the loop once `difference` is known
    // non-zero (an early exit is exactly the timing leak this avoids).
    asm volatile("" : "+r"(difference));
  }
  return difference == 0;
}

}  // namespace chorus::bootstrap
