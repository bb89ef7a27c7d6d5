// The matching queues (src/p2p/matching.hpp) without a transport: MPI's
// order rules between per-source and wildcard receives, masks, and the
// unexpected queue's arrival order across sources.
#include "p2p/matching.hpp"

#include <gtest/gtest.h>

using namespace chorus::p2p;

TEST(PostedReceives, SpecificReceivesMatchInPostOrder) {
  PostedReceives posted(3);
  posted.add(10, 1, 7, kExactTag);
  posted.add(11, 1, 7, kExactTag);
  posted.add(12, 2, 7, kExactTag);
  EXPECT_EQ(posted.match(1, 7), 10u);
  EXPECT_EQ(posted.match(2, 7), 12u);
  EXPECT_EQ(posted.match(1, 7), 11u);
  EXPECT_EQ(posted.match(1, 7), std::nullopt);
  EXPECT_EQ(posted.size(), 0u);
}

TEST(PostedReceives, OtherTagsAndSourcesDoNotMatch) {
  PostedReceives posted(3);
  posted.add(1, 0, 5, kExactTag);
  EXPECT_EQ(posted.match(1, 5), std::nullopt);
  EXPECT_EQ(posted.match(0, 6), std::nullopt);
  EXPECT_EQ(posted.match(0, 5), 1u);
}

TEST(PostedReceives, EarliestOfWildcardAndSpecificWins) {
  PostedReceives posted(2);
  posted.add(1, kAnySource, 9, kExactTag);  // posted first
  posted.add(2, 1, 9, kExactTag);
  EXPECT_EQ(posted.match(1, 9), 1u);  // the wildcard was earlier
  EXPECT_EQ(posted.match(1, 9), 2u);
  posted.add(3, 0, 9, kExactTag);  // posted first this time
  posted.add(4, kAnySource, 9, kExactTag);
  EXPECT_EQ(posted.match(0, 9), 3u);
  EXPECT_EQ(posted.match(0, 9), 4u);
}

TEST(PostedReceives, MaskedReceiveTakesAnyTagOnTheMaskedBits) {
  PostedReceives posted(2);
  const Tag base = CallTag::point_to_point(3, 0);
  posted.add(1, 1, base, CallTag::kAnyUserTagMask);
  EXPECT_EQ(posted.match(1, CallTag::point_to_point(4, 17)), std::nullopt);  // another communicator
  EXPECT_EQ(posted.match(1, CallTag::point_to_point(3, 17)), 1u);
}

TEST(PostedReceives, RemovedReceiveNeverMatches) {
  PostedReceives posted(2);
  posted.add(1, 1, 4, kExactTag);
  posted.add(2, kAnySource, 4, kExactTag);
  posted.remove(1, 1);
  posted.remove(2, kAnySource);
  EXPECT_EQ(posted.size(), 0u);
  EXPECT_EQ(posted.match(1, 4), std::nullopt);
}

TEST(UnexpectedMessages, WildcardTakesTheEarliestArrivalOfAllSources) {
  UnexpectedMessages<int> unexpected(3);
  unexpected.add(2, 8, 100);
  unexpected.add(1, 8, 200);
  unexpected.add(2, 8, 300);
  auto first = unexpected.take(kAnySource, 8, kExactTag);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->first, 2);
  EXPECT_EQ(first->second, 100);
  auto from_one = unexpected.take(1, 8, kExactTag);
  ASSERT_TRUE(from_one);
  EXPECT_EQ(from_one->second, 200);
  auto last = unexpected.take(kAnySource, 8, kExactTag);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->second, 300);
  EXPECT_EQ(unexpected.size(), 0u);
}

TEST(UnexpectedMessages, SameTagFromOneSourceIsTakenInArrivalOrder) {
  UnexpectedMessages<int> unexpected(2);
  for (int i = 0; i < 5; ++i) unexpected.add(1, 3, i);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(unexpected.take(1, 3, kExactTag)->second, i);
  EXPECT_FALSE(unexpected.take(1, 3, kExactTag));
}

TEST(UnexpectedMessages, AnyFromLooksAtOneSourceOnly) {
  UnexpectedMessages<int> unexpected(3);
  unexpected.add(0, 1, 10);
  EXPECT_TRUE(unexpected.any_from(0, [](Tag, int value) { return value == 10; }));
  EXPECT_FALSE(unexpected.any_from(2, [](Tag, int) { return true; }));
}

TEST(CallTag, LayoutFieldsRoundTrip) {
  const CallTag call = CallTag::collective(CallTag::kMaxContext, 0x1234567890ull);  // sequence wraps at 2^32
  const Tag tag = call.step(CallTag::kMaxStep);
  EXPECT_FALSE(CallTag::is_point_to_point(tag));
  EXPECT_EQ(CallTag::context_of(tag), CallTag::kMaxContext);
  EXPECT_EQ(CallTag::sequence_of(tag), 0x34567890u);
  EXPECT_EQ(CallTag::step_of(tag), CallTag::kMaxStep);
  EXPECT_EQ(tag & CallTag::kCallMask, call.base());
  const Tag p2p = CallTag::point_to_point(5, CallTag::kMaxUserTag);
  EXPECT_TRUE(CallTag::is_point_to_point(p2p));
  EXPECT_EQ(CallTag::context_of(p2p), 5u);
  EXPECT_EQ(CallTag::user_tag_of(p2p), CallTag::kMaxUserTag);
  EXPECT_NE(CallTag::describe(tag).find("step 65535"), std::string::npos);
}

TEST(CallTag, OutOfRangeFieldsThrowInsteadOfWrapping) {
  const CallTag call = CallTag::collective(0, 1);
  EXPECT_THROW((void)call.step(CallTag::kMaxStep + 1), chorus::Error);
  EXPECT_THROW((void)CallTag::collective(CallTag::kMaxContext + 1, 0), chorus::Error);
  EXPECT_THROW((void)CallTag::point_to_point(0, -1), chorus::Error);
  try {
    (void)call.step(70000);
  } catch (const chorus::Error& e) {
    EXPECT_EQ(e.status(), chorus::Status::internal);
    EXPECT_NE(std::string(e.what()).find("step 70000"), std::string::npos);
  }
}
