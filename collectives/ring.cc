// Ring algorithms: allreduce = reduce-scatter + allgather; reduce_scatter and
// allgather are one phase each.
//
// Steps (n ranks, data split into n blocks, each block into pipeline chunks):
//   reduce-scatter, step s = 0..n-2: send block (rank - s) to the right
//     neighbour, receive block (rank - s - 1) from the left and reduce it in;
//     each reduced chunk is forwarded at once (step s+1), so chunks of
//     consecutive steps overlap on the wire.
//   allgather, step t = 0..n-2: forward the block received last step.
// Bytes sent per rank: allreduce 2(n-1)/n * S, reduce_scatter and allgather
//   (n-1)/n * S (S = the whole buffer).
// Cost: allreduce 2(n-1) alpha + 2(n-1)/n * S * beta (+ reduction),
//   bandwidth-optimal; latency grows with n, so it wins for large messages.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"

#include <vector>

namespace chorus::coll {

namespace {

struct Ring {
  Context& ctx;
  void* data;          // the whole buffer, blocks laid out by `blocks`
  const void* source;  // this rank's input, laid out alike (== data when in place)
  Blocks blocks;
  size_t element_size;
  std::vector<p2p::Request>& sends;  // waited for by the caller

  int n() const { return ctx.size(); }
  int right() const { return mod(ctx.rank() + 1, n()); }
  int left() const { return mod(ctx.rank() - 1, n()); }
  Chunks chunks(int block) const { return {blocks.size(static_cast<size_t>(block)), chunk_elements(ctx, element_size)}; }
  // Chunk k of `block` in a buffer laid out like `data` (data or source).
  const uint8_t* chunk_in(const void* base, int block, const Chunks& ch, size_t k) const {
    return at(base, blocks.offset(static_cast<size_t>(block)) + ch.offset(k), element_size);
  }
  uint8_t* chunk_at(int block, const Chunks& ch, size_t k) const {
    return const_cast<uint8_t*>(chunk_in(data, block, ch, k));
  }
  void send_block(const void* base, int block, uint32_t step) {
    Chunks ch = chunks(block);
    for (size_t k = 0; k < ch.count(); ++k) {
      sends.push_back(ctx.isend(right(), step, chunk_in(base, block, ch, k), ch.size(k) * element_size));
    }
  }

  // Afterwards block (rank + 1 + rotation) mod n holds the reduction over all ranks.
  void reduce_scatter(DataType dtype, ReduceOp op, int rotation, uint32_t step_base) {
    const int rank = ctx.rank();
    auto recv_block = [&](int s) { return mod(rank - s - 1 + rotation, n()); };
    std::vector<p2p::Request> recvs[2];
    // Receives land in two alternating scratch buffers: step s+1's are posted
    // while step s is being reduced.
    auto post_receives = [&](int s) {
      Chunks ch = chunks(recv_block(s));
      void* buffer = ctx.scratch(s % 2, blocks.largest() * element_size);
      recvs[s % 2].clear();
      for (size_t k = 0; k < ch.count(); ++k) {
        recvs[s % 2].push_back(ctx.irecv(left(), step_base + static_cast<uint32_t>(s), at(buffer, ch.offset(k), element_size),
                                         ch.size(k) * element_size));
      }
    };
    post_receives(0);
    // Each block is sent or reduced by this rank once, so its input comes
    // straight from `source`: out of place there is no copy into `data` first.
    send_block(source, mod(rank + rotation, n()), step_base);
    for (int s = 0; s <= n() - 2; ++s) {
      if (s + 1 <= n() - 2) post_receives(s + 1);
      const int block = recv_block(s);
      Chunks ch = chunks(block);
      void* buffer = ctx.scratch(s % 2, blocks.largest() * element_size);
      for (size_t k = 0; k < ch.count(); ++k) {
        ctx.wait(recvs[s % 2][k]);
        reduce_into(chunk_at(block, ch, k), chunk_in(source, block, ch, k), at(buffer, ch.offset(k), element_size),
                    ch.size(k), dtype, op);
        if (s + 1 <= n() - 2) {
          sends.push_back(ctx.isend(right(), step_base + static_cast<uint32_t>(s + 1), chunk_at(block, ch, k),
                                    ch.size(k) * element_size));
        }
      }
    }
  }

  // Block (rank + 1 + rotation) mod n is this rank's; afterwards every block is everyone's.
  void allgather(int rotation, uint32_t step_base) {
    const int rank = ctx.rank();
    auto recv_block = [&](int t) { return mod(rank + rotation - t, n()); };
    // Every block lands in its own place: post all receives up front.
    std::vector<std::vector<p2p::Request>> recvs(static_cast<size_t>(n() - 1));
    for (int t = 0; t <= n() - 2; ++t) {
      Chunks ch = chunks(recv_block(t));
      for (size_t k = 0; k < ch.count(); ++k) {
        recvs[static_cast<size_t>(t)].push_back(ctx.irecv(left(), step_base + static_cast<uint32_t>(t),
                                                          chunk_at(recv_block(t), ch, k), ch.size(k) * element_size));
      }
    }
    send_block(data, mod(rank + 1 + rotation, n()), step_base);
    for (int t = 0; t <= n() - 2; ++t) {
      const int block = recv_block(t);
      Chunks ch = chunks(block);
      for (size_t k = 0; k < ch.count(); ++k) {
        ctx.wait(recvs[static_cast<size_t>(t)][k]);
        if (t + 1 <= n() - 2) {
          sends.push_back(ctx.isend(right(), step_base + static_cast<uint32_t>(t + 1), chunk_at(block, ch, k),
                                    ch.size(k) * element_size));
        }
      }
    }
  }
};

}  // namespace

void allreduce_ring(Context& ctx, const Args& args) {
  const size_t es = element_size(args.dtype);
  std::vector<p2p::Request> sends;
  const size_t n = static_cast<size_t>(ctx.size());
  // Every block of recv is written (reduced into, or received) before it is read.
  Ring ring{ctx, args.recv, args.send, Blocks{args.count, n}, es, sends};
  ring.reduce_scatter(args.dtype, args.op, 0, 0);
  ring.allgather(0, static_cast<uint32_t>(n - 1));
  ctx.wait_all(sends);
}

void reduce_scatter_ring(Context& ctx, const Args& args) {
  const size_t es = element_size(args.dtype);
  const size_t n = static_cast<size_t>(ctx.size());
  // Reductions land in scratch (the send buffer is never modified); each
  // block's input is read from the send buffer itself.
  void* work = ctx.scratch(2, args.count * n * es);
  std::vector<p2p::Request> sends;
  Ring ring{ctx, work, args.send, Blocks{args.count * n, n}, es, sends};
  ring.reduce_scatter(args.dtype, args.op, -1, 0);  // rotation -1: rank ends with block `rank`
  ctx.wait_all(sends);
  copy_unless_same(args.recv, at(work, static_cast<size_t>(ctx.rank()) * args.count, es), args.count * es);
}

void allgather_ring(Context& ctx, const Args& args) {
  const size_t es = element_size(args.dtype);
  const size_t n = static_cast<size_t>(ctx.size());
  copy_unless_same(at(args.recv, static_cast<size_t>(ctx.rank()) * args.count, es), args.send, args.count * es);
  std::vector<p2p::Request> sends;
  Ring ring{ctx, args.recv, args.recv, Blocks{args.count * n, n}, es, sends};
  ring.allgather(-1, 0);  // rotation -1: rank starts with block `rank`
  ctx.wait_all(sends);
}

}  // namespace chorus::coll
