// The host layout of a job (docs/transport-hybrid.md): which host each rank
// is on, numbered once from the host identities the ranks exchange, and
// what the transport choice and the collectives' choice read from it.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace chorus {

// Where the job's ranks are, as far as the transport cares.
struct HostLayout {
  std::vector<int> local_ranks;  // the job's ranks on this host, increasing, this rank among them
  int hosts = 1;                 // hosts of the job
  int largest_host = 1;          // ranks on the host with the most
};

// Each rank's host as 0..hosts-1, in the order of the hosts' lowest rank.
std::vector<int> number_hosts(const std::vector<std::string>& host_of_rank);
// The layout seen by `rank`, from number_hosts' result.
HostLayout host_layout(std::span<const int> host_of_rank, int rank);
// Whether `members` (ranks) span hosts with several on some host.
bool spans_shared_hosts(std::span<const int> host_of_rank, std::span<const int> members);

}  // namespace chorus
