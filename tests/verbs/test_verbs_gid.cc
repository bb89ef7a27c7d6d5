// GID choice on RoCE ports: pure function, no hardware needed.
#include "transports/verbs/verbs_device.hpp"

#include <gtest/gtest.h>

using chorus::transport::verbs::choose_gid;
using chorus::transport::verbs::GidCandidate;

namespace {
GidCandidate gid(int index, std::array<uint8_t, 16> raw, bool v2) { return GidCandidate{index, raw, v2}; }
constexpr std::array<uint8_t, 16> kLinkLocal{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
constexpr std::array<uint8_t, 16> kIpv4{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 77, 0, 1};
constexpr std::array<uint8_t, 16> kGlobalV6{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
constexpr std::array<uint8_t, 16> kEmpty{};
}  // namespace

TEST(ChooseGid, PrefersRoceV2WithIpv4OverLinkLocal) {
  // The soft-RoCE lab's table: 0 link-local, 1 IPv4-mapped, both RoCE v2.
  EXPECT_EQ(choose_gid({gid(0, kLinkLocal, true), gid(1, kIpv4, true)}), 1);
}

TEST(ChooseGid, MellanoxStyleTableWithV1AndV2Pairs) {
  // mlx5 lists each address twice: RoCE v1 then v2.
  EXPECT_EQ(choose_gid({gid(0, kLinkLocal, false), gid(1, kLinkLocal, true), gid(2, kIpv4, false), gid(3, kIpv4, true)}),
            3);
}

TEST(ChooseGid, Ipv6GlobalWhenNoIpv4) {
  EXPECT_EQ(choose_gid({gid(0, kLinkLocal, true), gid(1, kGlobalV6, true)}), 1);
  EXPECT_EQ(choose_gid({gid(0, kGlobalV6, true), gid(1, kIpv4, false)}), 0) << "v2 beats v1";
}

TEST(ChooseGid, SkipsEmptyAndLinkLocalEntries) {
  EXPECT_EQ(choose_gid({gid(0, kEmpty, true), gid(1, kLinkLocal, true)}), -1);
  EXPECT_EQ(choose_gid({}), -1);
}

TEST(ChooseGid, LowestIndexWinsATie) {
  std::array<uint8_t, 16> other = kIpv4;
  other[15] = 2;
  EXPECT_EQ(choose_gid({gid(4, kIpv4, true), gid(2, other, true)}), 2);
}
