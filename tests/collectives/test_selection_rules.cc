// CHORUS_SELECT_RULES (collectives/registry.cc): rules put before the
// built-in selection table. The parse, each malformed form's error, and the
// environment's rules ahead of the table in select() (this binary sets the
// variable before the first selection; see main below).
#include "collectives/collectives.hpp"
#include "common/error.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace chorus {
namespace {

using coll::parse_selection_rules;

TEST(SelectionRules, ParsesRangesAndAlgorithms) {
  auto rules = parse_selection_rules("broadcast:1M-:9-=scatter_allgather,allreduce:16K-256K:8-16=rabenseifner,"
                                     "reduce:*:*=binomial,allgather:-64K:4=bruck");
  ASSERT_EQ(rules.size(), 4u);
  EXPECT_EQ(rules[0].op, Collective::broadcast);
  EXPECT_EQ(rules[0].min_bytes, size_t{1} << 20);
  EXPECT_EQ(rules[0].max_bytes, SIZE_MAX);
  EXPECT_EQ(rules[0].min_ranks, 9);
  EXPECT_EQ(rules[0].max_ranks, 1 << 30);
  EXPECT_EQ(rules[0].algorithm->name, "scatter_allgather");
  EXPECT_EQ(rules[1].min_bytes, 16u * 1024);
  EXPECT_EQ(rules[1].max_bytes, 256u * 1024);
  EXPECT_EQ(rules[1].min_ranks, 8);
  EXPECT_EQ(rules[1].max_ranks, 16);
  EXPECT_EQ(rules[1].algorithm->name, "rabenseifner");
  EXPECT_EQ(rules[2].min_bytes, 0u);
  EXPECT_EQ(rules[2].max_ranks, 1 << 30);
  EXPECT_EQ(rules[3].max_bytes, 64u * 1024);
  EXPECT_EQ(rules[3].min_ranks, 4);
  EXPECT_EQ(rules[3].max_ranks, 4);
  EXPECT_TRUE(parse_selection_rules("").empty());
}

void expect_refused(const char* text, const char* says) {
  try {
    parse_selection_rules(text);
    ADD_FAILURE() << text << " was taken";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::config) << text;
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << text << ": " << e.what();
  }
}

TEST(SelectionRules, MalformedRulesAreNamed) {
  expect_refused("broadcast=binomial", "expected OP:BYTES:RANKS=ALGORITHM");
  expect_refused("bcast:*:*=binomial", "\"bcast\" is not a collective");
  expect_refused("broadcast:*:*=ring", "\"ring\" is not an algorithm of broadcast (binomial");
  expect_refused("broadcast:1Q-:*=binomial", "\"1Q\" is not a size");
  expect_refused("broadcast:1M:*=binomial", "expected MIN-MAX");
  expect_refused("broadcast:*:0=binomial", "\"0\" is not a rank count");
  expect_refused("broadcast:1M-1M:*=binomial", "an empty range");
  expect_refused("broadcast:*:9-4=binomial", "an empty range");
  expect_refused("allreduce:*:*=board", "board is chosen before the table");
  expect_refused("allreduce:*:*=ring,allreduce:*:*=hierarchical", "rule \"allreduce:*:*=hierarchical\"");
}

TEST(SelectionRules, TheEnvironmentsRulesComeBeforeTheTable) {
  // main set CHORUS_SELECT_RULES="broadcast:1M-:9-=scatter_allgather".
  EXPECT_EQ(coll::select(Collective::broadcast, size_t{1} << 20, 9).name, "scatter_allgather");
  EXPECT_EQ(coll::select(Collective::broadcast, size_t{4} << 20, 16).name, "scatter_allgather");
  // Outside the rule the table decides as before.
  EXPECT_NE(coll::select(Collective::broadcast, (size_t{1} << 20) - 1, 9).name, "scatter_allgather");
  EXPECT_NE(coll::select(Collective::broadcast, size_t{1} << 20, 8).name, "scatter_allgather");
  EXPECT_NE(coll::describe_selection_table().find("scatter_allgather (CHORUS_SELECT_RULES)"), std::string::npos);
}

}  // namespace
}  // namespace chorus

int main(int argc, char** argv) {
  // Before anything selects: the rules are read once per process.
  setenv("CHORUS_SELECT_RULES", "broadcast:1M-:9-=scatter_allgather", 1);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
