// One rank alone: gather..exscan reduce to local copies (no messages).
#include "collectives/algo_util.hpp"
#include "collectives/algorithms.hpp"

namespace chorus::coll {

void run_alone(Collective op, const Args& args) {
  const size_t es = element_size(args.dtype);
  auto first = [&](std::span<const size_t> displs) { return displs.empty() ? 0 : displs[0]; };
  switch (op) {
    case Collective::gather:
    case Collective::scatter:
    case Collective::scan:
      return copy_unless_same(args.recv, args.send, args.count * es);
    case Collective::gatherv:
    case Collective::allgatherv:
      return copy_unless_same(at(args.recv, first(args.recv_displs), es), args.send, args.count * es);
    case Collective::scatterv:
      return copy_unless_same(args.recv, at(args.send, first(args.send_displs), es), args.count * es);
    case Collective::alltoallv:
      if (args.send == args.recv || args.recv_counts.empty()) return;
      return copy_unless_same(at(args.recv, first(args.recv_displs), es), at(args.send, first(args.send_displs), es),
                              args.recv_counts[0] * es);
    default:
      return;  // exscan: rank 0's receive buffer is left as it was
  }
}

}  // namespace chorus::coll
