#include "topology/cpu_list.hpp"

#include "common/config.hpp"

#include <algorithm>
#include <iterator>

namespace chorus::topology {

std::string format_cpu_list(const CpuSet& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t end = i;
    while (end + 1 < cpus.size() && cpus[end + 1] == cpus[end] + 1) ++end;
    if (!text.empty()) text += ',';
    text += std::to_string(cpus[i]);
    if (end > i) text += '-' + std::to_string(cpus[end]);
    i = end + 1;
  }
  return text;
}

std::optional<CpuSet> parse_cpu_list(std::string_view text) {
  constexpr int64_t kMaxCpu = 1 << 20;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  CpuSet cpus;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view range = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const size_t dash = range.find('-');
    auto first = config::parse_int(range.substr(0, dash), 0, kMaxCpu);
    auto last = dash == std::string_view::npos ? first : config::parse_int(range.substr(dash + 1), 0, kMaxCpu);
    if (!first || !last || *last < *first) return std::nullopt;
    for (int64_t cpu = *first; cpu <= *last; ++cpu) cpus.push_back(static_cast<unsigned>(cpu));
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

bool intersects(const CpuSet& a, const CpuSet& b) {
  auto i = a.begin();
  auto j = b.begin();
  while (i != a.end() && j != b.end()) {
    if (*i == *j) return true;
    if (*i < *j) ++i; else ++j;
  }
  return false;
}

bool contains_all(const CpuSet& outer, const CpuSet& inner) {
  return std::includes(outer.begin(), outer.end(), inner.begin(), inner.end());
}

CpuSet set_union(const CpuSet& a, const CpuSet& b) {
  CpuSet result;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(result));
  return result;
}

}  // namespace chorus::topology
