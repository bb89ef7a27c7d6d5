// Node-aware ("hierarchical") allreduce, broadcast, reduce, barrier, allgather
// and reduce_scatter: built from
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
//   allreduce, multi-leader form ("multi_leader", large S): with L the
//              smallest host's rank count and the vector in L slices, a
//              ring reduce-scatter inside each host leaves slice j summed
//              over the host on its rank j; rank j of every host allreduces
//              slice j across the hosts (L groups at once); a ring
//              allgatherv inside each host. Network bytes per host: L x
//              2(H-1)/H x S/L, the same as the leader form, but spread over
//              L ranks (their cores, their reductions, their connections).
//   broadcast: the root is its host's leader; broadcast among the leaders,
//              then inside each host. Network bytes per host: N in, at most.
//   reduce:    reduce inside each host to its leader (the root on its
//              host), then among the leaders to the root. N out per host.
//   barrier:   a barrier inside each host, one among the leaders, one
//              inside each host again: log2(H) rounds cross the network
//              instead of most of the flat dissemination's log2(P).
//   allgather: gather inside each host to its leader (its host's "bundle"
//              of blocks), ring allgatherv of the bundles among the
//              leaders, the leader puts the blocks in rank order, broadcast
//              inside the host. Network bytes per host: N minus one bundle
//              out and in (N = the whole gathered vector).
//   reduce_scatter: reduce of the whole vector inside each host to its
//              leader, the leader orders it by bundles, a ring
//              reduce-scatter of the bundles among the leaders (each ends
//              with its host's bundle summed over every host), scatter
//              inside the host. Network bytes per host: N minus one bundle.
// Any placement works (block, round-robin, uneven hosts): a host's leader
// is its lowest rank (the root, on the root's host), the hosts are ordered
// by their lowest rank.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"
#include "common/copy.hpp"

#include <algorithm>
#include <cstring>
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
  std::vector<std::vector<int>> members;  // every host's ranks (ascending), hosts in the leaders' order
};

// `root`: a rank that leads its host (broadcast and reduce), or -1.
HostGroups layout_of(const Context& ctx, int root) {
  HostGroups layout;
  std::vector<int> host_order;  // hosts by their lowest rank
  std::vector<int> leader_rank;
  for (int r = 0; r < ctx.size(); ++r) {
    const int host = ctx.host_of(r);
    auto at = std::find(host_order.begin(), host_order.end(), host);
    if (at == host_order.end()) {
      host_order.push_back(host);
      leader_rank.push_back(r);
      layout.members.push_back({r});
    } else {
      const auto h = static_cast<size_t>(at - host_order.begin());
      if (r == root) leader_rank[h] = r;
      layout.members[h].push_back(r);
    }
  }
  const int my_host = ctx.host_of(ctx.rank());
  for (size_t h = 0; h < host_order.size(); ++h) {
    const int leader = leader_rank[h];
    if (leader == ctx.rank()) layout.leader_index = static_cast<int>(h);
    if (root >= 0 && host_order[h] == ctx.host_of(root)) layout.root_leader = static_cast<int>(h);
    layout.leaders.push_back(ctx.engine_rank(leader));
    if (host_order[h] != my_host) continue;
    for (int r : layout.members[h]) {
      if (r == ctx.rank()) layout.host_index = static_cast<int>(layout.host_ranks.size());
      if (r == leader) layout.host_leader = static_cast<int>(layout.host_ranks.size());
      layout.host_ranks.push_back(ctx.engine_rank(r));
    }
  }
  return layout;
}

size_t bytes_of(const Args& args) { return args.count * element_size(args.dtype); }

// Each host's blocks of `count` elements as one contiguous bundle, hosts
// in order: elements per bundle and where it starts.
struct Bundles {
  std::vector<size_t> counts, displs;
  Bundles(const std::vector<std::vector<int>>& members, size_t count) {
    for (const auto& host : members) counts.push_back(host.size() * count);
    place();
  }
  explicit Bundles(std::vector<size_t> sizes) : counts(std::move(sizes)) { place(); }

 private:
  void place() {
    size_t offset = 0;
    for (size_t c : counts) {
      displs.push_back(offset);
      offset += c;
    }
  }
};

// Copies every block between rank order (block r is rank r's) and bundle
// order (host by host, each host's blocks by rank): `count` elements of
// `element_size` bytes a block.
void reorder(const std::vector<std::vector<int>>& members, const Bundles& bundles, size_t count, size_t element_size,
             uint8_t* rank_order, uint8_t* bundle_order, bool to_bundles) {
  const size_t block = count * element_size;
  if (block == 0) return;
  for (size_t h = 0; h < members.size(); ++h) {
    for (size_t i = 0; i < members[h].size(); ++i) {
      uint8_t* by_rank = rank_order + static_cast<size_t>(members[h][i]) * block;
      uint8_t* by_bundle = bundle_order + bundles.displs[h] * element_size + i * block;
      if (to_bundles) {
        copy_bytes(by_bundle, by_rank, block);
      } else {
        copy_bytes(by_rank, by_bundle, block);
      }
    }
  }
}

// Ring reduce-scatter of bundles of different sizes (`data` in bundle
// order): step s sends bundle (i - s - 1) to the right and adds the one from
// the left, bundle (i - s - 2), into its own copy; after n - 1 steps bundle
// i is summed over every rank. Sends every bundle but its own once.
void reduce_scatter_bundles(Context& ctx, uint8_t* data, const Bundles& bundles, DataType dtype, ReduceOp op) {
  const int n = ctx.size();
  const int i = ctx.rank();
  const size_t es = element_size(dtype);
  void* incoming = ctx.scratch(0, *std::max_element(bundles.counts.begin(), bundles.counts.end()) * es);
  for (int s = 0; s <= n - 2; ++s) {
    const auto out = static_cast<size_t>(mod(i - s - 1, n));
    const auto in = static_cast<size_t>(mod(i - s - 2, n));
    ctx.sendrecv(mod(i + 1, n), data + bundles.displs[out] * es, bundles.counts[out] * es, mod(i - 1, n), incoming,
                 bundles.counts[in] * es, static_cast<uint32_t>(s));
    uint8_t* mine = data + bundles.displs[in] * es;
    reduce_into(mine, mine, incoming, bundles.counts[in], dtype, op);
  }
}

// The flat table's gather or scatter of `part` (args.count elements a rank)
// inside the host, rooted at its leader.
void rooted_in_host(const Context& ctx, const HostGroups& layout, Collective op, Args part, uint32_t first_step) {
  Context host = ctx.part(layout.host_ranks, layout.host_index, first_step);
  part.root = layout.host_leader;
  const size_t ranks = layout.host_ranks.size();
  select(op, bytes_of(part) * ranks, static_cast<int>(ranks)).run(host, part);
}

// What allgather and reduce_scatter share: the host groups, every host's
// bundle, and the leader's buffer for the whole vector (slot 3: the flat
// algorithms they run use slots 0-2).
struct BundleCall {
  HostGroups layout;
  Bundles bundles;
  size_t es;                 // bytes per element
  size_t total;              // bytes of the whole vector
  uint8_t* whole = nullptr;  // the leader's; nullptr on the others
  BundleCall(Context& ctx, const Args& args)
      : layout(layout_of(ctx, -1)),
        bundles(layout.members, args.count),
        es(element_size(args.dtype)),
        total(args.count * static_cast<size_t>(ctx.size()) * es) {
    if (leader()) whole = static_cast<uint8_t*>(ctx.scratch(3, total));
  }
  bool leader() const { return layout.leader_index >= 0; }
  // This leader's host's bundle in a buffer in bundle order.
  uint8_t* own_bundle(uint8_t* bundle_order) const {
    return bundle_order + bundles.displs[static_cast<size_t>(layout.leader_index)] * es;
  }
};

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

void allreduce_multi_leader(Context& ctx, const Args& args) {
  const HostGroups layout = layout_of(ctx, -1);
  size_t slices = layout.members.front().size();
  for (const auto& host : layout.members) slices = std::min(slices, host.size());
  // One rank on some host: it alone would carry the whole vector across the
  // network, which is the leader form.
  if (slices < 2 || layout.members.size() < 2) return allreduce_hierarchical(ctx, args);
  const size_t es = element_size(args.dtype);
  auto* data = static_cast<uint8_t*>(args.recv);
  copy_unless_same(data, args.send, bytes_of(args));
  // Slice j (j < slices) is host rank j's; host ranks from `slices` on hold
  // none but add and pass the others' along the host's ring.
  std::vector<size_t> part_counts(layout.host_ranks.size(), 0);
  for (size_t j = 0; j < slices; ++j) part_counts[j] = args.count / slices + (j < args.count % slices ? 1 : 0);
  const Bundles parts(std::move(part_counts));
  const auto mine = static_cast<size_t>(layout.host_index);
  // 1. Inside the host: slice j summed over the host, on host rank j.
  Context host = ctx.part(layout.host_ranks, layout.host_index, kHostStep);
  reduce_scatter_bundles(host, data, parts, args.dtype, args.op);
  // 2. Host rank j of every host: slice j summed over every host, the
  //    `slices` groups at once, each over its own links.
  if (mine < slices) {
    std::vector<int> group;
    int my_host = 0;
    for (size_t h = 0; h < layout.members.size(); ++h) {
      const int peer = layout.members[h][mine];
      if (peer == ctx.rank()) my_host = static_cast<int>(h);
      group.push_back(ctx.engine_rank(peer));
    }
    Context across = ctx.part(group, my_host, kLeadersStep);
    Args part = args;
    part.send = part.recv = data + parts.displs[mine] * es;
    part.count = parts.counts[mine];
    select(Collective::allreduce, part.count * es, static_cast<int>(group.size())).run(across, part);
  }
  // 3. Inside the host: every slice to every rank.
  Context host_again = ctx.part(layout.host_ranks, layout.host_index, kHostAgainStep);
  Args part = args;
  part.send = data + parts.displs[mine] * es;
  part.recv = data;
  part.count = parts.counts[mine];
  part.recv_counts = parts.counts;
  part.recv_displs = parts.displs;
  select(Collective::allgatherv, bytes_of(args), static_cast<int>(layout.host_ranks.size())).run(host_again, part);
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

void allgather_hierarchical(Context& ctx, const Args& args) {
  const BundleCall call(ctx, args);
  const HostGroups& layout = call.layout;
  uint8_t* gathered = call.whole;  // the bundles, host by host
  uint8_t* own_bundle = call.leader() ? call.own_bundle(gathered) : nullptr;
  // 1. Inside the host, every block to its leader, into its host's bundle.
  if (layout.host_ranks.size() > 1) {
    Args part = args;
    part.recv = own_bundle;
    rooted_in_host(ctx, layout, Collective::gather, part, kHostStep);
  } else if (call.leader()) {
    copy_unless_same(own_bundle, args.send, bytes_of(args));
  }
  // 2. Among the leaders, every bundle to every leader.
  if (call.leader() && layout.leaders.size() > 1) {
    Context leaders = ctx.part(layout.leaders, layout.leader_index, kLeadersStep);
    Args part = args;
    part.send = own_bundle;
    part.recv = gathered;
    part.count = call.bundles.counts[static_cast<size_t>(layout.leader_index)];
    part.recv_counts = call.bundles.counts;
    part.recv_displs = call.bundles.displs;
    select(Collective::allgatherv, call.total, static_cast<int>(layout.leaders.size())).run(leaders, part);
  }
  // 3. The leader puts the blocks in rank order; 4. inside the host, from it.
  if (call.leader()) {
    reorder(call.layout.members, call.bundles, args.count, call.es, static_cast<uint8_t*>(args.recv), gathered, false);
  }
  Args whole = args;
  whole.count = args.count * static_cast<size_t>(ctx.size());
  broadcast_in_host(ctx, layout, whole, kHostAgainStep);
}

void reduce_scatter_hierarchical(Context& ctx, const Args& args) {
  const BundleCall call(ctx, args);
  const HostGroups& layout = call.layout;
  // The leader's sum over its host in rank order (slot 3), then in bundle
  // order (slot 2); the binomial reduce inside uses slots 0 and 1, the
  // leaders' ring slot 0. The send buffer is only read.
  uint8_t* summed = call.whole;
  // 1. Inside the host, the whole vector to its leader.
  if (layout.host_ranks.size() > 1) {
    Context host = ctx.part(layout.host_ranks, layout.host_index, kHostStep);
    Args part = args;
    part.count = args.count * static_cast<size_t>(ctx.size());
    part.recv = summed;  // read by the leader only
    part.root = layout.host_leader;
    reduce_binomial(host, part);
  } else if (call.leader()) {
    copy_unless_same(summed, args.send, call.total);
  }
  const uint8_t* own_bundle = nullptr;
  if (call.leader()) {
    // 2. In bundle order; 3. among the leaders, each host's bundle summed over every host.
    auto* ordered = static_cast<uint8_t*>(ctx.scratch(2, call.total));
    reorder(call.layout.members, call.bundles, args.count, call.es, summed, ordered, true);
    if (layout.leaders.size() > 1) {
      Context leaders = ctx.part(layout.leaders, layout.leader_index, kLeadersStep);
      reduce_scatter_bundles(leaders, ordered, call.bundles, args.dtype, args.op);
    }
    own_bundle = call.own_bundle(ordered);
  }
  // 4. Inside the host, from the leader's bundle, each rank its block.
  if (layout.host_ranks.size() > 1) {
    Args part = args;
    part.send = own_bundle;
    rooted_in_host(ctx, layout, Collective::scatter, part, kHostAgainStep);
  } else {
    copy_unless_same(args.recv, own_bundle, bytes_of(args));
  }
}

}  // namespace chorus::coll
