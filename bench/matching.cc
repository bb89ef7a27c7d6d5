// chorus-matching: the cost of matching one arrival against the posted
// receives (src/p2p/matching.hpp) as the number of outstanding receives
// grows, to show it stays flat: receives are spread over the sources as a
// collective's or many non-blocking operations' are, and messages arrive in
// random source order. A second column shows the case matching.hpp does not
// make flat (every receive from one source, arrivals in reverse post order),
// and a third the unexpected side (receives posted after the messages).
// Each measured match is checked (the slot that matched is the one expected).
#include "p2p/matching.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <random>
#include <vector>

using namespace chorus::p2p;

namespace {

using Clock = std::chrono::steady_clock;

// Nanoseconds per match with `outstanding` receives over `sources` sources.
double spread(int sources, int outstanding, int rounds, bool& ok) {
  std::mt19937 rng(7);
  double total_ns = 0;
  long matches = 0;
  for (int round = 0; round < rounds; ++round) {
    PostedReceives posted(sources);
    std::vector<std::pair<int, Tag>> arrivals;
    for (int i = 0; i < outstanding; ++i) {
      const int source = i % sources;
      const Tag tag = CallTag::collective(0, static_cast<uint64_t>(i / sources)).step(0);
      posted.add(static_cast<uint32_t>(i), source, tag, kExactTag);
      arrivals.emplace_back(source, tag);
    }
    std::shuffle(arrivals.begin(), arrivals.end(), rng);
    // Within a source, messages of consecutive calls arrive in call order.
    std::vector<std::vector<Tag>> per_source(static_cast<size_t>(sources));
    for (int i = 0; i < outstanding; ++i) {
      per_source[static_cast<size_t>(i % sources)].push_back(CallTag::collective(0, static_cast<uint64_t>(i / sources)).step(0));
    }
    std::vector<size_t> next(static_cast<size_t>(sources), 0);
    const auto start = Clock::now();
    for (auto& [source, unused] : arrivals) {
      const Tag tag = per_source[static_cast<size_t>(source)][next[static_cast<size_t>(source)]++];
      auto slot = posted.match(source, tag);
      if (!slot || static_cast<int>(*slot % static_cast<uint32_t>(sources)) != source) ok = false;
    }
    total_ns += std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    matches += outstanding;
  }
  return total_ns / static_cast<double>(matches);
}

// Every receive from source 0, arrivals in reverse post order: a linear scan.
double one_source_reversed(int outstanding, int rounds, bool& ok) {
  double total_ns = 0;
  long matches = 0;
  for (int round = 0; round < rounds; ++round) {
    PostedReceives posted(1);
    for (int i = 0; i < outstanding; ++i) posted.add(static_cast<uint32_t>(i), 0, static_cast<Tag>(i), kExactTag);
    const auto start = Clock::now();
    for (int i = outstanding - 1; i >= 0; --i) {
      auto slot = posted.match(0, static_cast<Tag>(i));
      if (!slot || *slot != static_cast<uint32_t>(i)) ok = false;
    }
    total_ns += std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    matches += outstanding;
  }
  return total_ns / static_cast<double>(matches);
}

// Messages first (unexpected), then one receive per message, spread over sources.
double unexpected_spread(int sources, int outstanding, int rounds, bool& ok) {
  double total_ns = 0;
  long matches = 0;
  for (int round = 0; round < rounds; ++round) {
    UnexpectedMessages<int> unexpected(sources);
    for (int i = 0; i < outstanding; ++i) unexpected.add(i % sources, static_cast<Tag>(i / sources), i);
    const auto start = Clock::now();
    for (int i = 0; i < outstanding; ++i) {
      auto found = unexpected.take(i % sources, static_cast<Tag>(i / sources), kExactTag);
      if (!found || found->second != i) ok = false;
    }
    total_ns += std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    matches += outstanding;
  }
  return total_ns / static_cast<double>(matches);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::printf("Usage: chorus-matching\n\nPrints the cost of one match (ns) against 1..4096 outstanding receives\n"
                "over 64 sources: posted and unexpected, and the one-source reversed worst case.\n");
    return 0;
  }
  if (argc > 1) {
    std::fprintf(stderr, "chorus-matching: unknown argument %s (see --help)\n", argv[1]);
    return 2;
  }
  constexpr int kSources = 64;
  bool ok = true;
  std::printf("# ns per match; %d sources, arrivals in random source order\n", kSources);
  std::printf("%12s %16s %18s %22s\n", "outstanding", "posted, spread", "unexpected, spread", "one source, reversed");
  for (int outstanding : {1, 8, 64, 512, 4096}) {
    const int rounds = std::max(1, 200000 / outstanding);
    const double a = spread(kSources, outstanding, rounds, ok);
    const double b = unexpected_spread(kSources, outstanding, rounds, ok);
    const double c = one_source_reversed(outstanding, std::max(1, rounds / 16), ok);
    std::printf("%12d %16.1f %18.1f %22.1f\n", outstanding, a, b, c);
  }
  std::printf(ok ? "chorus-matching: every match took the expected receive\n"
                 : "chorus-matching: WRONG MATCH\n");
  return ok ? 0 : 1;
}
