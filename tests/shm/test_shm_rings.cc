// The ring per sender (docs/transport-shm.md, "Ring size"): 256 KiB with the
// default eager limit up to 64 local ranks, then a rank's rings share 16 MiB,
// never below two of the largest records. Each case makes rank 0's transport
// for real (its segment in /dev/shm) and reads the ring it chose.
#include "transports/shm/shm_transport.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

namespace {

using chorus::transport::make_shm_transport;
using chorus::transport::shm_default_ring_bytes;
using chorus::transport::ShmOptions;

constexpr size_t KiB = 1024, MiB = 1024 * KiB;

// "inbound ring 262144 B and its tail ..." -> 262144
size_t ring_of(int ranks, const ShmOptions& options = {}) {
  auto transport = make_shm_transport(0, ranks, options);
  const std::string detail = transport->memory_use().detail;
  std::smatch match;
  if (!std::regex_search(detail, match, std::regex("inbound ring ([0-9]+) B"))) {
    ADD_FAILURE() << "no ring size in \"" << detail << "\"";
    return 0;
  }
  return std::stoul(match[1]);
}

TEST(ShmRings, DefaultRingIs256KiBUpTo64RanksThenTheyShare16MiB) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  EXPECT_EQ(ring_of(2), 256 * KiB);
  EXPECT_EQ(ring_of(8), 256 * KiB);
  EXPECT_EQ(ring_of(64), 256 * KiB);
  EXPECT_EQ(ring_of(65), 128 * KiB);  // 16 MiB / 65 rounded down to a power of two
  EXPECT_EQ(ring_of(128), 128 * KiB);
  EXPECT_EQ(ring_of(256), 64 * KiB);
}

TEST(ShmRings, NeverBelowTwoOfTheLargestRecords) {
  // 16 KiB eager (+ the engine's header and the record's): two records need
  // more than 32 KiB, so 64 KiB however many ranks.
  const size_t eager16k = 16 * KiB + 64;
  EXPECT_EQ(shm_default_ring_bytes(eager16k, 512), 64 * KiB);
  EXPECT_EQ(shm_default_ring_bytes(eager16k, 4096), 64 * KiB);
  // A 1 MiB eager limit: 8 MiB rings (four records) while they fit, 4 MiB
  // (two) as the floor.
  EXPECT_EQ(shm_default_ring_bytes(1 * MiB, 2), 8 * MiB);
  EXPECT_EQ(shm_default_ring_bytes(1 * MiB, 16), 4 * MiB);
  // A ring given by the caller is kept as it is.
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  ShmOptions options;
  options.ring_bytes = 512 * KiB;
  EXPECT_EQ(ring_of(256, options), 512 * KiB);
}

}  // namespace
