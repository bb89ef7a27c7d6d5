// Node-aware ("hierarchical") allreduce, broadcast, reduce and barrier: built from
// the host layout, each a sequence of flat algorithms over parts of the
// communicator (Context::part), so that a host's ranks talk to each other
// over shared memory and only one rank per host crosses the network.
//
// Leader form (docs/algorithms.md, "Hierarchical"), H hosts, N bytes:
//   allreduce: reduce to each host's leader (binomial, inside the host),
//              allreduce among the H leaders (the flat table's choice for
//              H ranks), broadcast from the leader inside each host.
//              Network bytes per host: what the leaders' allreduce sends,
//              2(H-1)/H x N with the ring; latency 2 log2(M) + that of H.
//   broadcast: the root is its host's leader; broadcast among the leaders,
//              then inside each host. Network bytes per host: N in, at most.
//   reduce:    reduce inside each host to its leader (the root on its
//              host), then among the leaders to the root. N out per host.
//   barrier:   a barrier inside each host, one among the leaders, one
//              inside each host again: log2(H) rounds cross the network
//              instead of most of the flat dissemination's log2(P).
// Any placement works (block, round-robin, uneven hosts): a host's leader
// is its lowest rank (the root, on the root's host), the hosts are ordered
// by their lowest rank.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"

#include <algorithm>
#include <vector>

namespace chorus::coll {

namespace {

// Steps of each part (CallTag::kMaxStep is 65535): the flat algorithms use
// far fewer than 16384 steps.
constexpr uint32_t kHostStep = 0;
constexpr uint32_t kLeadersStep = 16384;
constexpr uint32_t kHostAgainStep = 32768;

struct HostGroups {
  std::vector<int> host_ranks;  // engine ranks of this rank's host, by rank
  int host_index = 0;           // this rank among them
  int host_leader = 0;          // the leader among them
  std::vector<int> leaders;     // engine ranks of every host's leader, hosts by their lowest rank
  int leader_index = -1;        // this rank among the leaders, -1 if it is none
  int root_leader = 0;          // the root's host's leader among the leaders
};

// `root`: a rank that leads its host (broadcast and reduce), or -1.
HostGroups layout_of(const Context& ctx, int root) {
  const int n = ctx.size();
  HostGroups layout;
  std::vector<int> host_order;  // hosts by their lowest rank
  std::vector<int> leader_rank;
  for (int r = 0; r < n; ++r) {
    const int host = ctx.host_of(r);
    auto at = std::find(host_order.begin(), host_order.end(), host);
    if (at == host_order.end()) {
      host_order.push_back(host);
      leader_rank.push_back(r);
    } else if (r == root) {
      leader_rank[static_cast<size_t>(at - host_order.begin())] = r;
    }
  }
  const int my_host = ctx.host_of(ctx.rank());
  for (size_t h = 0; h < host_order.size(); ++h) {
    const int leader = leader_rank[h];
    if (leader == ctx.rank()) layout.leader_index = static_cast<int>(h);
    if (root >= 0 && host_order[h] == ctx.host_of(root)) layout.root_leader = static_cast<int>(h);
    layout.leaders.push_back(ctx.engine_rank(leader));
    if (host_order[h] != my_host) continue;
    for (int r = 0; r < n; ++r) {
      if (ctx.host_of(r) != my_host) continue;
      if (r == ctx.rank()) layout.host_index = static_cast<int>(layout.host_ranks.size());
      if (r == leader) layout.host_leader = static_cast<int>(layout.host_ranks.size());
      layout.host_ranks.push_back(ctx.engine_rank(r));
    }
  }
  return layout;
}

size_t bytes_of(const Args& args) { return args.count * element_size(args.dtype); }

// Inside the host, from its leader: the flat table's broadcast for its ranks.
void broadcast_in_host(const Context& ctx, const HostGroups& layout, const Args& args, uint32_t first_step) {
  if (layout.host_ranks.size() < 2) return;
  Context host = ctx.part(layout.host_ranks, layout.host_index, first_step);
  Args part = args;
  part.send = args.recv;
  part.root = layout.host_leader;
  select(Collective::broadcast, bytes_of(args), static_cast<int>(layout.host_ranks.size())).run(host, part);
}

}  // namespace

void allreduce_hierarchical(Context& ctx, const Args& args) {
  const HostGroups layout = layout_of(ctx, -1);
  const size_t bytes = bytes_of(args);
  // 1. Inside the host, to its leader (into recv; the others keep recv untouched).
  if (layout.host_ranks.size() > 1) {
    Context host = ctx.part(layout.host_ranks, layout.host_index, kHostStep);
    Args part = args;
    part.root = layout.host_leader;
    reduce_binomial(host, part);
  } else {
    copy_unless_same(args.recv, args.send, bytes);
  }
  // 2. Among the leaders, in place.
  if (layout.leader_index >= 0 && layout.leaders.size() > 1) {
    Context leaders = ctx.part(layout.leaders, layout.leader_index, kLeadersStep);
    Args part = args;
    part.send = args.recv;
    select(Collective::allreduce, bytes, static_cast<int>(layout.leaders.size())).run(leaders, part);
  }
  // 3. Inside the host, from its leader.
  broadcast_in_host(ctx, layout, args, kHostAgainStep);
}

void broadcast_hierarchical(Context& ctx, const Args& args) {
  const HostGroups layout = layout_of(ctx, args.root);
  if (layout.leader_index >= 0 && layout.leaders.size() > 1) {
    Context leaders = ctx.part(layout.leaders, layout.leader_index, kLeadersStep);
    Args part = args;
    part.send = args.recv;
    part.root = layout.root_leader;
    select(Collective::broadcast, bytes_of(args), static_cast<int>(layout.leaders.size())).run(leaders, part);
  }
  broadcast_in_host(ctx, layout, args, kHostAgainStep);
}

void reduce_hierarchical(Context& ctx, const Args& args) {
  const HostGroups layout = layout_of(ctx, args.root);
  const size_t bytes = bytes_of(args);
  const bool root = ctx.rank() == args.root;
  // A leader that is not the root keeps its host's sum in scratch (slot 2:
  // the binomial reduce uses 0 and 1), never in a receive buffer MPI says is
  // not the root's to touch.
  void* partial = root ? args.recv : layout.leader_index >= 0 ? ctx.scratch(2, bytes) : args.recv;
  const void* contribution = args.send;
  if (layout.host_ranks.size() > 1) {
    Context host = ctx.part(layout.host_ranks, layout.host_index, kHostStep);
    Args part = args;
    part.recv = partial;
    part.root = layout.host_leader;
    reduce_binomial(host, part);
    contribution = partial;
  }
  if (layout.leader_index >= 0 && layout.leaders.size() > 1) {
    Context leaders = ctx.part(layout.leaders, layout.leader_index, kLeadersStep);
    Args part = args;
    part.send = contribution;
    part.recv = root ? args.recv : partial;
    part.root = layout.root_leader;
    reduce_binomial(leaders, part);
  } else if (root) {
    copy_unless_same(args.recv, contribution, bytes);
  }
}

void barrier_hierarchical(Context& ctx, const Args& args) {
  const HostGroups layout = layout_of(ctx, -1);
  auto in_host = [&](uint32_t first_step) {
    if (layout.host_ranks.size() < 2) return;
    Context host = ctx.part(layout.host_ranks, layout.host_index, first_step);
    select(Collective::barrier, 0, static_cast<int>(layout.host_ranks.size())).run(host, args);
  };
  // Leaving the last barrier means this rank's leader left the leaders'
  // barrier, so every leader had left its first host barrier, which every
  // rank of its host had entered: every rank of the communicator arrived.
  in_host(kHostStep);
  if (layout.leader_index >= 0 && layout.leaders.size() > 1) {
    Context leaders = ctx.part(layout.leaders, layout.leader_index, kLeadersStep);
    select(Collective::barrier, 0, static_cast<int>(layout.leaders.size())).run(leaders, args);
  }
  in_host(kHostAgainStep);
}

}  // namespace chorus::coll
