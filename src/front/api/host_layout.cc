#include "api/host_layout.hpp"

#include <algorithm>
#include <map>

namespace chorus {

std::vector<int> number_hosts(const std::vector<std::string>& host_of_rank) {
  std::map<std::string, int> number;
  std::vector<int> numbered;
  numbered.reserve(host_of_rank.size());
  for (const std::string& host : host_of_rank) {
    numbered.push_back(number.try_emplace(host, static_cast<int>(number.size())).first->second);
  }
  return numbered;
}

HostLayout host_layout(std::span<const int> host_of_rank, int rank) {
  HostLayout layout;
  std::vector<int> ranks_on(host_of_rank.size());
  for (size_t r = 0; r < host_of_rank.size(); ++r) {
    const auto host = static_cast<size_t>(host_of_rank[r]);
    layout.hosts = std::max(layout.hosts, host_of_rank[r] + 1);
    layout.largest_host = std::max(layout.largest_host, ++ranks_on[host]);
    if (host_of_rank[r] == host_of_rank[static_cast<size_t>(rank)]) layout.local_ranks.push_back(static_cast<int>(r));
  }
  return layout;
}

bool spans_shared_hosts(std::span<const int> host_of_rank, std::span<const int> members) {
  if (host_of_rank.empty()) return false;  // no layout learnt (a communicator made without connect)
  std::vector<int> ranks_on(host_of_rank.size());
  int hosts = 0, largest = 0;
  for (const int r : members) {
    const auto host = static_cast<size_t>(host_of_rank[static_cast<size_t>(r)]);
    if (ranks_on[host]++ == 0) ++hosts;
    largest = std::max(largest, ranks_on[host]);
  }
  return hosts > 1 && largest > 1;
}

}  // namespace chorus
