// gather, gatherv, scatter, scatterv, allgatherv, alltoallv, scan, exscan:
// their argument rules and their chorus::Communicator entry points. They run
// through the same path as every collective (CommunicatorImpl::run:
// validate -> select -> call check -> algorithm).
#include "api/block_collectives.hpp"

#include "api/communicator_impl.hpp"
#include "common/error.hpp"

namespace chorus {

namespace {

std::vector<size_t> packed_displacements(std::span<const size_t> counts) {
  std::vector<size_t> displs(counts.size());
  size_t offset = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    displs[r] = offset;
    offset += counts[r];  // wraps only where validation rejects the total
  }
  return displs;
}

// counts/displs of one side of a v-variant: one entry per rank, every block
// addressable in bytes, and their total too.
void check_layout(std::string_view op, std::string_view side, std::span<const size_t> counts,
                  std::span<const size_t> displs, size_t element_size, int size) {
  const auto ranks = static_cast<size_t>(size);
  if (counts.size() != ranks) {
    fail(Status::invalid_argument, op, ": ", side, "_counts has ", counts.size(), " entries, expected ", ranks,
         " (one per rank)");
  }
  if (displs.size() != ranks) {
    fail(Status::invalid_argument, op, ": ", side, "_displs has ", displs.size(), " entries, expected ", ranks,
         " (one per rank, or none for packed blocks)");
  }
  const size_t limit = SIZE_MAX / element_size;
  size_t sum = 0;
  for (size_t r = 0; r < ranks; ++r) {
    if (counts[r] > limit || displs[r] > limit - counts[r]) {
      fail(Status::invalid_argument, op, ": block ", r, " (", side, "_displs ", displs[r], " + ", side, "_counts ",
           counts[r], ") overflows size_t in bytes");
    }
    if (counts[r] > limit - sum) fail(Status::invalid_argument, op, ": the sum of ", side, "_counts overflows size_t");
    sum += counts[r];
  }
}

void check_own_block(std::string_view op, std::string_view side, size_t count, std::span<const size_t> counts,
                     int rank) {
  if (counts[static_cast<size_t>(rank)] != count) {
    fail(Status::invalid_argument, op, ": rank ", rank, " passes ", count, " elements for its own block but ", side,
         "_counts[", rank, "] is ", counts[static_cast<size_t>(rank)]);
  }
}

void check_buffer(std::string_view op, const void* buffer, std::string_view role, size_t elements) {
  if (buffer == nullptr && elements != 0) fail(Status::invalid_argument, op, ": null ", role, " buffer with ", elements, " elements");
}

}  // namespace


size_t block_collective_elements(Collective op, const coll::Args& args, int size) {
  switch (op) {
    case Collective::gather:
    case Collective::scatter: return args.count * static_cast<size_t>(size);
    case Collective::scan:
    case Collective::exscan: return args.count;
    case Collective::allgatherv: return total_count(args.recv_counts);
    default: return 0;  // per-rank counts: no size every rank agrees on (one algorithm each)
  }
}

void validate_block_collective(Collective op, const coll::Args& args, int rank, int size) {
  const std::string_view name = to_string(op);
  const size_t es = datatype_size(args.dtype);
  const bool root = rank == args.root;
  switch (op) {
    case Collective::gather:
      check_buffer(name, args.send, "send", args.count);
      if (root) check_buffer(name, args.recv, "receive", args.count * static_cast<size_t>(size));
      return;
    case Collective::scatter:
      if (root) check_buffer(name, args.send, "send", args.count * static_cast<size_t>(size));
      check_buffer(name, args.recv, "receive", args.count);
      return;
    case Collective::scan:
    case Collective::exscan:
      check_buffer(name, args.send, "send", args.count);
      check_buffer(name, args.recv, "receive", args.count);
      return;
    case Collective::gatherv:
      check_buffer(name, args.send, "send", args.count);
      if (!root) return;  // the counts are the root's alone
      check_layout(name, "recv", args.recv_counts, args.recv_displs, es, size);
      check_own_block(name, "recv", args.count, args.recv_counts, rank);
      check_buffer(name, args.recv, "receive", total_count(args.recv_counts));
      return;
    case Collective::scatterv:
      check_buffer(name, args.recv, "receive", args.count);
      if (!root) return;
      check_layout(name, "send", args.send_counts, args.send_displs, es, size);
      check_own_block(name, "send", args.count, args.send_counts, rank);
      check_buffer(name, args.send, "send", total_count(args.send_counts));
      return;
    case Collective::allgatherv:
      check_layout(name, "recv", args.recv_counts, args.recv_displs, es, size);
      check_own_block(name, "recv", args.count, args.recv_counts, rank);
      check_buffer(name, args.send, "send", args.count);
      check_buffer(name, args.recv, "receive", total_count(args.recv_counts));
      return;
    case Collective::alltoallv:
      check_layout(name, "recv", args.recv_counts, args.recv_displs, es, size);
      check_buffer(name, args.recv, "receive", total_count(args.recv_counts));
      if (args.send == args.recv) return;  // in place: the receive layout is the send layout
      check_layout(name, "send", args.send_counts, args.send_displs, es, size);
      check_own_block(name, "recv", args.send_counts[static_cast<size_t>(rank)], args.recv_counts, rank);
      check_buffer(name, args.send, "send", total_count(args.send_counts));
      return;
    default:
      fail(Status::internal, name, " is not a block collective");
  }
}

BlockArgs::BlockArgs(const coll::Args& args) : args_(args) {
  if (args_.send_displs.empty() && !args_.send_counts.empty()) {
    send_displs_ = packed_displacements(args_.send_counts);
    args_.send_displs = send_displs_;
  }
  if (args_.recv_displs.empty() && !args_.recv_counts.empty()) {
    recv_displs_ = packed_displacements(args_.recv_counts);
    args_.recv_displs = recv_displs_;
  }
}

// --- chorus::Communicator: gather .. exscan -----------------------------------

void Communicator::gather(const void* send, void* recv, size_t count, DataType dtype, int root) {
  impl().run(Collective::gather, {send, recv, count, dtype, ReduceOp::sum, root});
}
coll::Args gatherv_args(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
                        std::span<const size_t> recv_displs, DataType dtype, int root) {
  coll::Args args{send, recv, send_count, dtype, ReduceOp::sum, root};
  args.recv_counts = recv_counts;
  args.recv_displs = recv_displs;
  return args;
}
coll::Args scatterv_args(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_displs,
                         void* recv, size_t recv_count, DataType dtype, int root) {
  coll::Args args{send, recv, recv_count, dtype, ReduceOp::sum, root};
  args.send_counts = send_counts;
  args.send_displs = send_displs;
  return args;
}
coll::Args allgatherv_args(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
                           std::span<const size_t> recv_displs, DataType dtype) {
  coll::Args args{send, recv, send_count, dtype, ReduceOp::sum, 0};
  args.recv_counts = recv_counts;
  args.recv_displs = recv_displs;
  return args;
}
coll::Args alltoallv_args(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_displs,
                          void* recv, std::span<const size_t> recv_counts, std::span<const size_t> recv_displs,
                          DataType dtype) {
  coll::Args args{send, recv, 0, dtype, ReduceOp::sum, 0};
  args.send_counts = send_counts;
  args.send_displs = send_displs;
  args.recv_counts = recv_counts;
  args.recv_displs = recv_displs;
  return args;
}

void Communicator::gatherv(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
                           std::span<const size_t> recv_displs, DataType dtype, int root) {
  impl().run(Collective::gatherv, BlockArgs(gatherv_args(send, send_count, recv, recv_counts, recv_displs, dtype, root)).args());
}
void Communicator::scatter(const void* send, void* recv, size_t count, DataType dtype, int root) {
  impl().run(Collective::scatter, {send, recv, count, dtype, ReduceOp::sum, root});
}
void Communicator::scatterv(const void* send, std::span<const size_t> send_counts, std::span<const size_t> send_displs,
                            void* recv, size_t recv_count, DataType dtype, int root) {
  impl().run(Collective::scatterv,
             BlockArgs(scatterv_args(send, send_counts, send_displs, recv, recv_count, dtype, root)).args());
}
void Communicator::allgatherv(const void* send, size_t send_count, void* recv, std::span<const size_t> recv_counts,
                              std::span<const size_t> recv_displs, DataType dtype) {
  impl().run(Collective::allgatherv,
             BlockArgs(allgatherv_args(send, send_count, recv, recv_counts, recv_displs, dtype)).args());
}
void Communicator::alltoallv(const void* send, std::span<const size_t> send_counts,
                             std::span<const size_t> send_displs, void* recv, std::span<const size_t> recv_counts,
                             std::span<const size_t> recv_displs, DataType dtype) {
  impl().run(Collective::alltoallv,
             BlockArgs(alltoallv_args(send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype)).args());
}
void Communicator::scan(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  impl().run(Collective::scan, {send, recv, count, dtype, op, 0});
}
void Communicator::exscan(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op) {
  impl().run(Collective::exscan, {send, recv, count, dtype, op, 0});
}

}  // namespace chorus
