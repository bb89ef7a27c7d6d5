// The algorithm table and the selection rules (docs/architecture.md §7).
#include "collectives/algorithms.hpp"

#include "common/config.hpp"
#include "common/error.hpp"

#include <array>
#include <cstdio>

namespace chorus::coll {

namespace {

const std::array<Algorithm, 37> kAlgorithms = {{
    {"ring", Collective::allreduce, allreduce_ring},
    {"tree", Collective::allreduce, allreduce_tree},
    {"recursive_doubling", Collective::allreduce, allreduce_recursive_doubling},
    {"rabenseifner", Collective::allreduce, allreduce_rabenseifner},
    {"board", Collective::allreduce, allreduce_board},
    {"hierarchical", Collective::allreduce, allreduce_hierarchical},
    {"multi_leader", Collective::allreduce, allreduce_multi_leader},
    {"binomial", Collective::broadcast, broadcast_binomial},
    {"pipelined", Collective::broadcast, broadcast_pipelined},
    {"linear", Collective::broadcast, broadcast_linear},
    {"scatter_allgather", Collective::broadcast, broadcast_scatter_allgather},
    {"board", Collective::broadcast, broadcast_board},
    {"hierarchical", Collective::broadcast, broadcast_hierarchical},
    {"dissemination", Collective::barrier, barrier_dissemination},
    {"board", Collective::barrier, barrier_board},
    {"hierarchical", Collective::barrier, barrier_hierarchical},
    {"binomial", Collective::reduce, reduce_binomial},
    {"board", Collective::reduce, reduce_board},
    {"hierarchical", Collective::reduce, reduce_hierarchical},
    {"ring", Collective::allgather, allgather_ring},
    {"bruck", Collective::allgather, allgather_bruck},
    {"hierarchical", Collective::allgather, allgather_hierarchical},
    {"ring", Collective::reduce_scatter, reduce_scatter_ring},
    {"hierarchical", Collective::reduce_scatter, reduce_scatter_hierarchical},
    {"pairwise", Collective::alltoall, alltoall_pairwise},
    {"linear", Collective::gather, gather_linear},
    {"binomial", Collective::gather, gather_binomial},
    {"linear", Collective::gatherv, gatherv_linear},
    {"linear", Collective::scatter, scatter_linear},
    {"binomial", Collective::scatter, scatter_binomial},
    {"linear", Collective::scatterv, scatterv_linear},
    {"ring", Collective::allgatherv, allgatherv_ring},
    {"pairwise", Collective::alltoallv, alltoallv_pairwise},
    {"linear", Collective::scan, scan_linear},
    {"recursive_doubling", Collective::scan, scan_recursive_doubling},
    {"linear", Collective::exscan, exscan_linear},
    {"recursive_doubling", Collective::exscan, exscan_recursive_doubling},
}};

// Crossovers (bytes of the whole payload). Starting points from the alpha-beta
// model of docs/algorithms.md; docs/performance.md records the measurements
// that move them.
constexpr size_t kAllreduceLatencyBound = 16 * 1024;  // below: recursive doubling
constexpr size_t kAllreduceTreeBound = 256 * 1024;    // below: tree; above: ring
constexpr size_t kBroadcastPipelineFrom = 64 * 1024;  // from here: pipelined chain
constexpr size_t kAllgatherRingFrom = 64 * 1024;      // below: Bruck
// Two ranks: a tree is two transfers of the whole vector in a row where
// recursive doubling is one exchange, and a chain has nothing to overlap.
constexpr size_t kPairAllreduceRingFrom = 128 * 1024;  // below: recursive doubling
// Up to 4 ranks the binomial tree is at most two levels and beat the
// pipelined chain at every measured size, 64 KiB to 16 MiB, on shm and tcp
// (docs/performance.md, "Broadcast on 4 ranks").
constexpr int kBroadcastBinomialUpToRanks = 4;
// 3..8 ranks, below 32 KiB: the root sends to everyone (one hop). It beat
// binomial at every size below 32 KiB on 4 and 8 ranks, shm and tcp, by
// 1.3-2.4x (docs/performance.md, "Broadcast on 4 ranks").
constexpr size_t kBroadcastLinearBelow = 32 * 1024;
constexpr int kBroadcastLinearUpToRanks = 8;
// Gather/scatter: up to 8 ranks the root talks to every rank itself (as
// broadcast_linear, which won there); from 9 ranks small payloads take the
// binomial tree's log2(n) hops. Model starting points, not yet measured.
constexpr int kRootedLinearUpToRanks = 8;
constexpr size_t kRootedTreeBelow = 64 * 1024;
// Scan: whole-vector rounds for small vectors, the pipelined chain above.
constexpr size_t kScanChainFrom = 64 * 1024;
constexpr int kAnyRanks = 1 << 30;

struct Rule {
  Collective op;
  size_t min_bytes;  // inclusive
  size_t max_bytes;  // exclusive
  int min_ranks;
  int max_ranks;  // inclusive
  std::string_view algorithm;
};

// The first rule that matches wins.
const std::array<Rule, 29> kRules = {{
    {Collective::allreduce, 0, kPairAllreduceRingFrom, 2, 2, "recursive_doubling"},
    {Collective::allreduce, kPairAllreduceRingFrom, SIZE_MAX, 2, 2, "ring"},
    {Collective::broadcast, 0, kBroadcastLinearBelow, 3, kBroadcastLinearUpToRanks, "linear"},
    {Collective::broadcast, 0, SIZE_MAX, 2, kBroadcastBinomialUpToRanks, "binomial"},
    {Collective::allreduce, 0, kAllreduceLatencyBound, 2, kAnyRanks, "recursive_doubling"},
    {Collective::allreduce, kAllreduceLatencyBound, kAllreduceTreeBound, 2, kAnyRanks, "tree"},
    {Collective::allreduce, kAllreduceTreeBound, SIZE_MAX, 2, kAnyRanks, "ring"},
    {Collective::broadcast, 0, kBroadcastPipelineFrom, 2, kAnyRanks, "binomial"},
    {Collective::broadcast, kBroadcastPipelineFrom, SIZE_MAX, 2, kAnyRanks, "pipelined"},
    {Collective::barrier, 0, SIZE_MAX, 2, kAnyRanks, "dissemination"},
    {Collective::reduce, 0, SIZE_MAX, 2, kAnyRanks, "binomial"},
    {Collective::allgather, 0, kAllgatherRingFrom, 2, kAnyRanks, "bruck"},
    {Collective::allgather, kAllgatherRingFrom, SIZE_MAX, 2, kAnyRanks, "ring"},
    {Collective::reduce_scatter, 0, SIZE_MAX, 2, kAnyRanks, "ring"},
    {Collective::alltoall, 0, SIZE_MAX, 2, kAnyRanks, "pairwise"},
    {Collective::gather, 0, SIZE_MAX, 2, kRootedLinearUpToRanks, "linear"},
    {Collective::gather, 0, kRootedTreeBelow, 2, kAnyRanks, "binomial"},
    {Collective::gather, kRootedTreeBelow, SIZE_MAX, 2, kAnyRanks, "linear"},
    {Collective::scatter, 0, SIZE_MAX, 2, kRootedLinearUpToRanks, "linear"},
    {Collective::scatter, 0, kRootedTreeBelow, 2, kAnyRanks, "binomial"},
    {Collective::scatter, kRootedTreeBelow, SIZE_MAX, 2, kAnyRanks, "linear"},
    {Collective::gatherv, 0, SIZE_MAX, 2, kAnyRanks, "linear"},
    {Collective::scatterv, 0, SIZE_MAX, 2, kAnyRanks, "linear"},
    {Collective::allgatherv, 0, SIZE_MAX, 2, kAnyRanks, "ring"},
    {Collective::alltoallv, 0, SIZE_MAX, 2, kAnyRanks, "pairwise"},
    {Collective::scan, 0, kScanChainFrom, 2, kAnyRanks, "recursive_doubling"},
    {Collective::scan, kScanChainFrom, SIZE_MAX, 2, kAnyRanks, "linear"},
    {Collective::exscan, 0, kScanChainFrom, 2, kAnyRanks, "recursive_doubling"},
    {Collective::exscan, kScanChainFrom, SIZE_MAX, 2, kAnyRanks, "linear"},
}};

std::string rank_text(const Rule& rule) {
  if (rule.max_ranks == kAnyRanks) return ">=" + std::to_string(rule.min_ranks);
  if (rule.max_ranks == rule.min_ranks) return std::to_string(rule.min_ranks);
  return std::to_string(rule.min_ranks) + ".." + std::to_string(rule.max_ranks);
}

std::string byte_text(size_t bytes) {
  if (bytes == SIZE_MAX) return "inf";
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

}  // namespace

std::vector<const Algorithm*> algorithms(Collective op) {
  std::vector<const Algorithm*> found;
  for (const Algorithm& algorithm : kAlgorithms) {
    if (algorithm.op == op) found.push_back(&algorithm);
  }
  return found;
}

const Algorithm* find(Collective op, std::string_view name) {
  for (const Algorithm& algorithm : kAlgorithms) {
    if (algorithm.op == op && algorithm.name == name) return &algorithm;
  }
  return nullptr;
}

namespace {

// The board and the node-aware forms: chosen before the table, by the
// transport and the host layout, so a rule may not name them.
bool chosen_before_table(std::string_view name) {
  return name == "board" || name == "hierarchical" || name == "multi_leader";
}

// "64K" -> 65536; "" -> `open` (an open end).
size_t rule_bytes(std::string_view text, size_t open, std::string_view rule) {
  if (text.empty()) return open;
  const std::optional<uint64_t> bytes = config::parse_bytes(text);
  if (!bytes) fail(Status::config, "rule \"", rule, "\": \"", text, "\" is not a size like 64K or 1M");
  return static_cast<size_t>(*bytes);
}

int rule_ranks(std::string_view text, int open, std::string_view rule) {
  if (text.empty()) return open;
  const std::optional<int64_t> ranks = config::parse_int(text, 1, kAnyRanks);
  if (!ranks) fail(Status::config, "rule \"", rule, "\": \"", text, "\" is not a rank count");
  return static_cast<int>(*ranks);
}

// "a-b" -> {"a", "b"}; "a" -> {"a", "a"} when `single` (ranks), else an error.
std::pair<std::string_view, std::string_view> rule_range(std::string_view text, bool single, std::string_view rule) {
  if (text == "*" || text.empty()) return {"", ""};
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    if (single) return {text, text};
    fail(Status::config, "rule \"", rule, "\": bytes \"", text,
         "\": expected MIN-MAX (either may be left out, e.g. 1M- or -64K) or *");
  }
  return {text.substr(0, dash), text.substr(dash + 1)};
}

}  // namespace

std::vector<SelectionRule> parse_selection_rules(std::string_view text) {
  std::vector<SelectionRule> rules;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view rule = text.substr(start, end - start);
    start = end + 1;
    if (rule.empty()) {
      if (end == text.size()) break;
      continue;
    }
    const size_t equals = rule.find('=');
    const size_t first = rule.find(':');
    const size_t second = first == std::string_view::npos ? first : rule.find(':', first + 1);
    if (equals == std::string_view::npos || first == std::string_view::npos || second == std::string_view::npos ||
        second > equals) {
      fail(Status::config, "rule \"", rule,
           "\": expected OP:BYTES:RANKS=ALGORITHM, e.g. broadcast:1M-:9-=scatter_allgather");
    }
    const std::string_view op_name = rule.substr(0, first);
    std::optional<Collective> op;
    for (int i = 0; i < kNumCollectives; ++i) {
      if (to_string(static_cast<Collective>(i)) == op_name) op = static_cast<Collective>(i);
    }
    if (!op) fail(Status::config, "rule \"", rule, "\": \"", op_name, "\" is not a collective");
    SelectionRule parsed{*op};
    const auto [low, high] = rule_range(rule.substr(first + 1, second - first - 1), false, rule);
    parsed.min_bytes = rule_bytes(low, 0, rule);
    parsed.max_bytes = rule_bytes(high, SIZE_MAX, rule);
    const auto [fewest, most] = rule_range(rule.substr(second + 1, equals - second - 1), true, rule);
    parsed.min_ranks = rule_ranks(fewest, 1, rule);
    parsed.max_ranks = rule_ranks(most, kAnyRanks, rule);
    if (parsed.min_bytes >= parsed.max_bytes || parsed.min_ranks > parsed.max_ranks) {
      fail(Status::config, "rule \"", rule, "\": an empty range");
    }
    const std::string_view name = rule.substr(equals + 1);
    if (chosen_before_table(name)) {
      fail(Status::config, "rule \"", rule, "\": ", name,
           " is chosen before the table, where the transport or host layout allows it (CHORUS_ALGO_",
           "<OP> forces it)");
    }
    parsed.algorithm = find(*op, name);
    if (parsed.algorithm == nullptr) {
      std::string names;
      for (const Algorithm* algorithm : algorithms(*op)) {
        if (chosen_before_table(algorithm->name)) continue;
        names += (names.empty() ? "" : ", ") + std::string(algorithm->name);
      }
      fail(Status::config, "rule \"", rule, "\": \"", name, "\" is not an algorithm of ", op_name,
           " (", names, ")");
    }
    rules.push_back(parsed);
  }
  return rules;
}

const std::vector<SelectionRule>& selection_rules() {
  // Thrown from the initialiser, the parse runs again at the next call.
  static const std::vector<SelectionRule> rules = [] {
    const std::optional<std::string> text = config::get("CHORUS_SELECT_RULES");
    if (!text) return std::vector<SelectionRule>{};
    try {
      return parse_selection_rules(*text);
    } catch (const Error& e) {
      fail(Status::config, "CHORUS_SELECT_RULES=\"", *text, "\": ", e.what());
    }
  }();
  return rules;
}

const Algorithm& select(Collective op, size_t bytes, int ranks) {
  for (const SelectionRule& rule : selection_rules()) {
    if (rule.op == op && bytes >= rule.min_bytes && bytes < rule.max_bytes && ranks >= rule.min_ranks &&
        ranks <= rule.max_ranks) {
      return *rule.algorithm;
    }
  }
  // Every call selects: the rules' names are looked up once, not per call.
  static const std::array<const Algorithm*, kRules.size()> resolved = [] {
    std::array<const Algorithm*, kRules.size()> table{};
    for (size_t i = 0; i < kRules.size(); ++i) table[i] = find(kRules[i].op, kRules[i].algorithm);
    return table;
  }();
  for (size_t i = 0; i < kRules.size(); ++i) {
    const Rule& rule = kRules[i];
    if (rule.op == op && bytes >= rule.min_bytes && bytes < rule.max_bytes && ranks >= rule.min_ranks &&
        ranks <= rule.max_ranks && resolved[i] != nullptr) {
      return *resolved[i];
    }
  }
  // No rule (one rank): the op's first algorithm.
  auto candidates = algorithms(op);
  if (candidates.empty()) fail(Status::internal, "no algorithm for ", to_string(op));
  return *candidates.front();
}

std::string describe_selection_table() {
  std::string text;
  char line[160];
  std::snprintf(line, sizeof line, "  %-15s %-16s %-8s %s\n", "collective", "payload bytes", "ranks", "algorithm");
  text += line;
  for (const SelectionRule& rule : selection_rules()) {
    std::string range = "[" + byte_text(rule.min_bytes) + ", " + byte_text(rule.max_bytes) + ")";
    const Rule shown{rule.op, rule.min_bytes, rule.max_bytes, rule.min_ranks, rule.max_ranks, rule.algorithm->name};
    std::snprintf(line, sizeof line, "  %-15s %-16s %-8s %s (CHORUS_SELECT_RULES)\n",
                  std::string(to_string(rule.op)).c_str(), range.c_str(), rank_text(shown).c_str(),
                  std::string(rule.algorithm->name).c_str());
    text += line;
  }
  for (const Rule& rule : kRules) {
    std::string range = "[" + byte_text(rule.min_bytes) + ", " + byte_text(rule.max_bytes) + ")";
    std::snprintf(line, sizeof line, "  %-15s %-16s %-8s %s\n", std::string(to_string(rule.op)).c_str(),
                  range.c_str(), rank_text(rule).c_str(), std::string(rule.algorithm).c_str());
    text += line;
  }
  return text;
}

}  // namespace chorus::coll
