// Rabenseifner allreduce: reduce-scatter by recursive halving, allgather by
// recursive doubling.
//
// Steps: with p = the largest power of two <= n and r = n - p, the first 2r
//   ranks fold in pairs as in recursive_doubling (even sends its vector to
//   odd, odd reduces), leaving p ranks v = 0..p-1 and the vector in p blocks
//   (uneven or empty where p does not divide the count). Halving, distance
//   d = p/2, p/4, ..., 1: v and v ^ d hold the same range of blocks; each
//   keeps the half its own block is in, sends the other half, and reduces
//   the partner's copy of its half in, chunk by chunk as it lands. Then v
//   holds block v reduced over every rank. Doubling, d = 1, 2, ..., p/2:
//   v and v ^ d exchange their (adjacent) ranges. Finally each odd rank of
//   the first 2r returns the result to its even partner.
// Every element is reduced on one rank only and copied to the others, so
//   every rank ends with identical bits (any op, any float order).
// Bytes sent per rank: 2(p-1)/p * S (plus S for the folded ranks); reduced
//   per rank: (p-1)/p * S (plus S on the odd folded ranks).
// Cost: (2 log2(p) + 2) alpha + 2(p-1)/p * S * beta + (p-1)/p * S * gamma:
//   the ring's bytes in recursive doubling's rounds; medium and large S on
//   many ranks.
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"

#include <vector>

namespace chorus::coll {

namespace {

// One exchange with `partner`: sends `give` elements at `give_from` and
// receives the partner's `keep` elements, reducing each chunk as it lands:
// out = mine op theirs. Both sides split a range into the same chunks (the
// partner gives what this rank keeps), so chunk k matches chunk k.
void give_and_reduce(Context& ctx, const Args& args, int partner, uint32_t step, const void* give_from, size_t give,
                     void* out, const void* mine, size_t keep) {
  const size_t es = element_size(args.dtype);
  const size_t chunk = chunk_elements(ctx, es);
  const Chunks in{keep, chunk}, away{give, chunk};
  void* incoming = keep != 0 ? ctx.scratch(0, keep * es) : nullptr;
  std::vector<p2p::Request> recvs, sends;
  for (size_t k = 0; k < in.count(); ++k) {
    recvs.push_back(ctx.irecv(partner, step, at(incoming, in.offset(k), es), in.size(k) * es));
  }
  for (size_t k = 0; k < away.count(); ++k) {
    sends.push_back(ctx.isend(partner, step, at(give_from, away.offset(k), es), away.size(k) * es));
  }
  for (size_t k = 0; k < in.count(); ++k) {
    ctx.wait(recvs[k]);
    reduce_into(at(out, in.offset(k), es), at(mine, in.offset(k), es), at(incoming, in.offset(k), es), in.size(k),
                args.dtype, args.op);
  }
  // The given range may be received into later (doubling): the send is done first.
  ctx.wait_all(sends);
}

}  // namespace

void allreduce_rabenseifner(Context& ctx, const Args& args) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t es = element_size(args.dtype);
  const size_t bytes = args.count * es;

  int p = 1;
  uint32_t levels = 0;  // log2(p)
  while (p * 2 <= n) {
    p *= 2;
    ++levels;
  }
  const int extra = n - p;  // ranks 0..2*extra-1 fold in pairs

  // This rank's contribution so far: the send buffer until the receive
  // buffer holds a partial result (out of place the send buffer is only read).
  const void* mine = args.send;
  int v;  // rank among the p that halve and double; -1: sits out
  if (rank < 2 * extra) {
    if (rank % 2 == 0) {
      give_and_reduce(ctx, args, rank + 1, 0, args.send, args.count, nullptr, nullptr, 0);
      v = -1;
    } else {
      give_and_reduce(ctx, args, rank - 1, 0, nullptr, 0, args.recv, args.send, args.count);
      mine = args.recv;
      v = rank / 2;
    }
  } else {
    v = rank - extra;
  }

  uint32_t step = 1;
  if (v >= 0) {
    auto real_rank = [&](int w) { return w < extra ? w * 2 + 1 : w + extra; };
    const Blocks blocks{args.count, static_cast<size_t>(p)};
    auto offset = [&](int block) { return blocks.offset(static_cast<size_t>(block)); };
    int lo = 0, hi = p;  // the blocks this rank reduces: [lo, hi)
    for (int d = p / 2; d >= 1; d /= 2, ++step) {
      const int mid = lo + (hi - lo) / 2;
      const bool upper = (v & d) != 0;
      const int keep_lo = upper ? mid : lo, keep_hi = upper ? hi : mid;
      const int give_lo = upper ? lo : mid, give_hi = upper ? mid : hi;
      give_and_reduce(ctx, args, real_rank(v ^ d), step, at(mine, offset(give_lo), es),
                      offset(give_hi) - offset(give_lo), at(args.recv, offset(keep_lo), es),
                      at(mine, offset(keep_lo), es), offset(keep_hi) - offset(keep_lo));
      mine = args.recv;
      lo = keep_lo;
      hi = keep_hi;
    }
    // One rank alone: nothing was reduced, the result is its own input.
    if (mine == args.send) copy_unless_same(args.recv, args.send, bytes);
    // lo == v, hi == v + 1: block v is complete. Doubling: ranges merge.
    for (int d = 1; d < p; d *= 2, ++step) {
      const int partner = v ^ d;
      const int other_lo = (v & d) != 0 ? lo - d : hi;
      const size_t give = offset(hi) - offset(lo), take = offset(other_lo + d) - offset(other_lo);
      p2p::Request requests[2];
      if (take != 0) requests[0] = ctx.irecv(real_rank(partner), step, at(args.recv, offset(other_lo), es), take * es);
      if (give != 0) requests[1] = ctx.isend(real_rank(partner), step, at(args.recv, offset(lo), es), give * es);
      ctx.wait_all(requests);
      lo = std::min(lo, other_lo);
      hi = lo + 2 * d;
    }
  }

  // Unfold: return the result to the ranks that sat out (a step both count alike).
  if (bytes != 0) unfold_to_even_partners(ctx, extra, 1 + 2 * levels, args.recv, bytes);
}

}  // namespace chorus::coll
