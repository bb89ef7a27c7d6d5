// The HELLO secret check: right answers, and a time that does not depend on
// how much of a guess is right (docs/bootstrap.md, "Security model").
#include "bootstrap/secret.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

using chorus::bootstrap::secrets_match;

namespace {

std::vector<uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

// Fastest of several runs: the least disturbed by other load on the machine.
double fastest_seconds(const std::vector<uint8_t>& guess, const std::string& secret) {
  double best = 1e9;
  for (int run = 0; run < 15; ++run) {
    auto start = std::chrono::steady_clock::now();
    bool match = secrets_match(guess, secret);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_FALSE(match);
    best = std::min(best, seconds);
  }
  return best;
}

}  // namespace

TEST(Secret, MatchesOnlyTheSameBytes) {
  const std::string secret = "0123456789abcdef";
  EXPECT_TRUE(secrets_match(bytes_of(secret), secret));
  EXPECT_TRUE(secrets_match({}, ""));
  EXPECT_FALSE(secrets_match({}, secret));
  EXPECT_FALSE(secrets_match(bytes_of(secret), ""));
  EXPECT_FALSE(secrets_match(bytes_of(secret.substr(0, 15)), secret));  // a prefix
  EXPECT_FALSE(secrets_match(bytes_of(secret + '\0'), secret));          // the secret and a zero byte
  EXPECT_FALSE(secrets_match(bytes_of(secret + "0"), secret));
  for (size_t i = 0; i < secret.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xff}) {
      auto guess = bytes_of(secret);
      guess[i] ^= flip;
      EXPECT_FALSE(secrets_match(guess, secret)) << "byte " << i << " flipped by " << int{flip};
    }
  }
}

// An early-exit comparison (memcmp, ==) returns at the first wrong byte: a
// guess wrong at byte 0 would be thousands of times faster than one wrong only
// at the last byte of a 4 MiB secret. Constant time means about equal.
TEST(Secret, TimeDoesNotDependOnHowMuchOfTheGuessIsRight) {
  const std::string secret(4 << 20, 's');
  auto wrong_first = bytes_of(secret);
  wrong_first.front() = 'x';
  auto wrong_last = bytes_of(secret);
  wrong_last.back() = 'x';
  auto wrong_everywhere = std::vector<uint8_t>(secret.size(), 'x');
  const double first = fastest_seconds(wrong_first, secret);
  const double last = fastest_seconds(wrong_last, secret);
  const double everywhere = fastest_seconds(wrong_everywhere, secret);
  const double slowest = std::max({first, last, everywhere});
  const double quickest = std::min({first, last, everywhere});
  EXPECT_LT(slowest / quickest, 3.0) << "wrong at byte 0: " << first << " s, at the last byte: " << last
                                     << " s, everywhere: " << everywhere << " s";
  // A short guess still costs a pass over the whole secret.
  const double short_guess = fastest_seconds(bytes_of("s"), secret);
  EXPECT_GT(short_guess / last, 1.0 / 3.0) << "1-byte guess: " << short_guess << " s, full-length: " << last << " s";
}
