// Double binary tree allreduce, pipelined.
//
// Two binary trees over the ranks: tree A in heap order (parent of i is
// (i-1)/2) and tree B the same shape over the reversed ranks (i -> n-1-i).
// The leaves of A (the upper half of the ranks) are inner nodes of B, so the
// two trees load every rank's links about evenly. Tree A reduces and then
// broadcasts the first half of the vector, tree B the second half, chunk by
// chunk: a node reduces chunk k from its children and passes it up while
// chunk k+1 is still arriving; the root turns each finished chunk around and
// it flows back down the same way.
// Bytes sent per rank: about 2 * S/2 per tree it is inside (S in total).
// Cost: 2 log2(n) alpha + ~2S beta with pipelining; logarithmic latency with
//   near-ring bandwidth: wins for medium messages and for many ranks.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"

#include <vector>

namespace chorus::coll {

namespace {

struct TreeNode {
  int parent = -1;
  std::vector<int> children;
};

// Heap-ordered binary tree over positions, mapped to ranks by `to_rank`.
template <class ToRank>
TreeNode heap_node(int position, int n, ToRank to_rank) {
  TreeNode node;
  if (position > 0) node.parent = to_rank((position - 1) / 2);
  for (int child : {2 * position + 1, 2 * position + 2}) {
    if (child < n) node.children.push_back(to_rank(child));
  }
  return node;
}

// One tree's share of the work: a range of elements, pipelined in chunks.
struct TreeHalf {
  TreeNode node;
  uint8_t* data;          // the range inside the receive buffer
  size_t elements;
  uint8_t* child_buffer;  // scratch: one range-sized area per child
  uint32_t up_step, down_step;
  std::vector<std::vector<p2p::Request>> from_children;  // [child][chunk]
  std::vector<p2p::Request> from_parent;                  // [chunk]
};

}  // namespace

void allreduce_tree(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t es = element_size(args.dtype);
  copy_unless_same(args.recv, args.send, args.count * es);

  Blocks halves{args.count, 2};
  TreeHalf trees[2];
  trees[0].node = heap_node(rank, n, [](int position) { return position; });
  trees[1].node = heap_node(n - 1 - rank, n, [n](int position) { return n - 1 - position; });
  uint8_t* scratch = static_cast<uint8_t*>(ctx.scratch(0, 2 * halves.largest() * es * 2 + 64));
  for (int t = 0; t < 2; ++t) {
    trees[t].data = at(args.recv, halves.offset(static_cast<size_t>(t)), es);
    trees[t].elements = halves.size(static_cast<size_t>(t));
    trees[t].child_buffer = scratch + static_cast<size_t>(t) * 2 * halves.largest() * es;
    trees[t].up_step = static_cast<uint32_t>(2 * t);
    trees[t].down_step = static_cast<uint32_t>(2 * t + 1);
  }
  const size_t chunk = chunk_elements(ctx, es);

  // Post every receive first: children's chunks into scratch, the parent's
  // results straight into place.
  for (TreeHalf& tree : trees) {
    Chunks ch{tree.elements, chunk};
    for (size_t c = 0; c < tree.node.children.size(); ++c) {
      std::vector<p2p::Request> chunks;
      uint8_t* area = tree.child_buffer + c * halves.largest() * es;
      for (size_t k = 0; k < ch.count(); ++k) {
        chunks.push_back(ctx.irecv(tree.node.children[c], tree.up_step, at(area, ch.offset(k), es), ch.size(k) * es));
      }
      tree.from_children.push_back(std::move(chunks));
    }
    if (tree.node.parent >= 0) {
      for (size_t k = 0; k < ch.count(); ++k) {
        tree.from_parent.push_back(ctx.irecv(tree.node.parent, tree.down_step, at(tree.data, ch.offset(k), es), ch.size(k) * es));
      }
    }
  }

  std::vector<p2p::Request> sends;
  const size_t most_chunks = Chunks{halves.largest(), chunk}.count();
  // Up: reduce each chunk from the children, pass it to the parent (or, at
  // the root, start it down). Both trees advance chunk by chunk together.
  for (size_t k = 0; k < most_chunks; ++k) {
    for (TreeHalf& tree : trees) {
      Chunks ch{tree.elements, chunk};
      if (k >= ch.count()) continue;
      for (size_t c = 0; c < tree.node.children.size(); ++c) {
        ctx.wait(tree.from_children[c][k]);
        uint8_t* area = tree.child_buffer + c * halves.largest() * es;
        reduce_inplace(at(tree.data, ch.offset(k), es), at(area, ch.offset(k), es), ch.size(k), args.dtype, args.op);
      }
      if (tree.node.parent >= 0) {
        sends.push_back(ctx.isend(tree.node.parent, tree.up_step, at(tree.data, ch.offset(k), es), ch.size(k) * es));
      } else {
        for (int child : tree.node.children) {
          sends.push_back(ctx.isend(child, tree.down_step, at(tree.data, ch.offset(k), es), ch.size(k) * es));
        }
      }
    }
  }
  // Down: forward each finished chunk from the parent to the children.
  for (size_t k = 0; k < most_chunks; ++k) {
    for (TreeHalf& tree : trees) {
      Chunks ch{tree.elements, chunk};
      if (tree.node.parent < 0 || k >= ch.count()) continue;
      ctx.wait(tree.from_parent[k]);
      for (int child : tree.node.children) {
        sends.push_back(ctx.isend(child, tree.down_step, at(tree.data, ch.offset(k), es), ch.size(k) * es));
      }
    }
  }
  ctx.wait_all(sends);
}

}  // namespace chorus::coll
