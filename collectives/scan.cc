// Scan (inclusive prefix reduction) and exscan (exclusive): rank r ends with
// the reduction of the inputs of ranks 0..r (scan) or 0..r-1 (exscan; rank
// 0's receive buffer is left as it was, as MPI leaves it undefined).
//
// linear: a chain 0 -> 1 -> ... -> n-1; rank r receives the prefix of ranks
//   0..r-1, combines its input and forwards the prefix of 0..r. The vector
//   moves in pipeline chunks and each chunk is forwarded as soon as it is
//   combined, so the chain's n-1 hops overlap. Bytes sent per rank: S.
//   Cost: (n - 2 + S/c) (alpha + c (beta + gamma)), c = chunk: about
//   S (beta + gamma) for large S; wins for large vectors.
// recursive_doubling (Hillis-Steele): round k sends the partial reduction
//   of the 2^k ranks ending at this one to rank + 2^k and combines the one
//   from rank - 2^k. ceil(log2 n) rounds of the whole vector. Cost:
//   ceil(log2 n) (alpha + S (beta + gamma)); wins for small vectors.
// Ops combine the lower ranks' part on the left (chorus' ops commute, so
// only float rounding could tell the order; the test inputs are exact).
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"
#include "collectives/reduce_kernels.hpp"
#include "common/copy.hpp"

#include <vector>

namespace chorus::coll {

namespace {

void scan_chain(Context& ctx, const Args& args, bool exclusive) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t es = element_size(args.dtype);
  const size_t bytes = args.count * es;
  const Chunks ch{args.count, chunk_elements(ctx, es)};
  const bool has_next = rank + 1 < n;
  std::vector<p2p::Request> sends;
  if (rank == 0) {
    if (!exclusive) copy_unless_same(args.recv, args.send, bytes);
    for (size_t k = 0; has_next && k < ch.count(); ++k) {
      sends.push_back(ctx.isend(1, 0, at(args.send, ch.offset(k), es), ch.size(k) * es));
    }
    ctx.wait_all(sends);
    return;
  }
  // The prefix of ranks 0..rank-1 lands in the receive buffer itself unless
  // that buffer is also the input (in place).
  const bool in_place = args.send == args.recv;
  void* incoming = in_place ? ctx.scratch(0, bytes) : args.recv;
  // exscan forwards what it does not keep: prefix op own input.
  void* forward = exclusive && has_next ? ctx.scratch(1, bytes) : args.recv;
  std::vector<p2p::Request> receives;
  for (size_t k = 0; k < ch.count(); ++k) {
    receives.push_back(ctx.irecv(rank - 1, 0, at(incoming, ch.offset(k), es), ch.size(k) * es));
  }
  for (size_t k = 0; k < ch.count(); ++k) {
    ctx.wait(receives[k]);
    const size_t offset = ch.offset(k);
    if (!exclusive || has_next) {
      reduce_into(at(forward, offset, es), at(incoming, offset, es), at(args.send, offset, es), ch.size(k),
                  args.dtype, args.op);
    }
    if (has_next) sends.push_back(ctx.isend(rank + 1, 0, at(forward, offset, es), ch.size(k) * es));
    // After `forward` is computed: in place, the input is the receive buffer.
    if (exclusive) copy_unless_same(at(args.recv, offset, es), at(incoming, offset, es), ch.size(k) * es);
  }
  ctx.wait_all(sends);
}

void scan_doubling(Context& ctx, const Args& args, bool exclusive) {
  const int n = ctx.size();
  const int rank = ctx.rank();
  const size_t es = element_size(args.dtype);
  const size_t bytes = args.count * es;
  // partial: the reduction of the 2^k ranks ending at this one. For scan it
  // is the result, so it lives in the receive buffer.
  void* partial = exclusive ? ctx.scratch(0, bytes) : args.recv;
  copy_unless_same(partial, args.send, bytes);
  void* incoming = ctx.scratch(1, bytes);
  bool have_prefix = false;  // exscan: the receive buffer holds a prefix
  uint32_t round = 0;
  for (int distance = 1; distance < n; distance *= 2, ++round) {
    const int to = rank + distance;
    const int from = rank - distance;
    p2p::Request requests[2];
    size_t posted = 0;
    if (from >= 0) requests[posted++] = ctx.irecv(from, round, incoming, bytes);
    if (to < n) requests[posted++] = ctx.isend(to, round, partial, bytes);
    ctx.wait_all(std::span<p2p::Request>(requests, posted));
    if (from < 0) continue;
    if (exclusive) {
      if (have_prefix) {
        reduce_into(args.recv, incoming, args.recv, args.count, args.dtype, args.op);
      } else {
        copy_bytes(args.recv, incoming, bytes);
        have_prefix = true;
      }
    }
    reduce_into(partial, incoming, partial, args.count, args.dtype, args.op);
  }
}

}  // namespace

void scan_linear(Context& ctx, const Args& args) { scan_chain(ctx, args, false); }
void exscan_linear(Context& ctx, const Args& args) { scan_chain(ctx, args, true); }
void scan_recursive_doubling(Context& ctx, const Args& args) { scan_doubling(ctx, args, false); }
void exscan_recursive_doubling(Context& ctx, const Args& args) { scan_doubling(ctx, args, true); }

}  // namespace chorus::coll
