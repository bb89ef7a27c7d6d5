// The MPI collectives that map onto chorus' own collectives: barrier, bcast,
// allreduce, reduce, allgather, alltoall, reduce_scatter(_block).
//
// Data travels packed (see datatype.cc): for contiguous types that is the
// user's buffer itself; derived types are packed into a temporary first.
// Reductions run on chorus' collectives (and their fast algorithms) when
// chorus has the op and type (SUM/PROD/MIN/MAX on integers, float, double);
// anything else (user ops, logical/bitwise ops, long double, complex,
// value-index pairs) is reduced to rank 0 in rank order (op.cc) and then
// broadcast or scattered (chorus' broadcast, scatterv).
#include "mpi/internal.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace chorus::mpi {

namespace {

constexpr auto kBytes = chorus::DataType::uint8;

// Sends rank 0's packed blocks (bytes[r] long, one after another) to their
// ranks with chorus' scatterv; returns this rank's block.
Bytes scatter_from_rank0(const Comm& comm, const Bytes& all, const std::vector<size_t>& bytes) {
  Bytes block(bytes[static_cast<size_t>(comm.rank)]);
  comm.chorus.scatterv(all.data(), bytes, {}, block.data(), block.size(), kBytes, 0);
  return block;
}

// Reduces `count` elements of every rank to a packed result on rank 0.
Bytes reduce_packed_to_rank0(const Comm& comm, const void* send, size_t count, const Datatype& type, MPI_Op op) {
  if (auto fast = fast_path(op, type)) {
    Bytes packed = pack_copy(send, count, type);
    comm.chorus.reduce(packed.data(), packed.data(), count * fast->count, fast->dtype, fast->op, 0);
    if (comm.rank != 0) return {};
    return packed;
  }
  return reduce_to_rank0(comm, send, count, type, op);
}

// MPI_Reduce_scatter_block; `send` holds size * count elements (in place:
// recvbuf, with the result written to its start).
void reduce_scatter_block(const Comm& comm, const void* send, void* recv, size_t count, const Datatype& type,
                          MPI_Op op) {
  const size_t total = count * static_cast<size_t>(comm.size);
  const bool in_place = send == recv;
  if (auto fast = fast_path(op, type)) {
    const size_t n = count * fast->count;
    if (type.contiguous()) {
      // chorus lets the receive buffer alias block `rank` of the send buffer.
      void* own = in_place ? element(recv, static_cast<size_t>(comm.rank) * count, type) : recv;
      comm.chorus.reduce_scatter(send, own, n, fast->dtype, fast->op);
      if (own != recv) std::memmove(recv, own, packed_bytes(count, type));
      return;
    }
    Bytes packed = pack_copy(send, total, type);
    Bytes result(packed_bytes(count, type));
    comm.chorus.reduce_scatter(packed.data(), result.data(), n, fast->dtype, fast->op);
    unpack(result.data(), count, type, recv);
    return;
  }
  Bytes reduced = reduce_to_rank0(comm, send, total, type, op);
  const std::vector<size_t> bytes(static_cast<size_t>(comm.size), packed_bytes(count, type));
  Bytes mine = scatter_from_rank0(comm, reduced, bytes);
  unpack(mine.data(), count, type, recv);
}

}  // namespace

Reduction reduction(const Comm& comm, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                    std::optional<int> root) {
  const size_t n = use_count(count, "count");
  const Datatype& type = use_type(datatype, "datatype");
  check_op(op, type);
  if (root) check_root(*root, comm);
  const bool receives = !root || comm.rank == *root;
  if (sendbuf == MPI_IN_PLACE && !receives) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is only allowed at the root");
  const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  check_buffer(send, n, "sendbuf");
  if (receives) check_buffer(recvbuf, n, "recvbuf");
  return Reduction{n, type, send, receives};
}

BlockExchange block_exchange(const Comm& comm, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             const void* recvbuf, int recvcount, MPI_Datatype recvtype, size_t send_blocks) {
  const size_t rcount = use_count(recvcount, "recvcount");
  const Datatype& rtype = use_type(recvtype, "recvtype");
  const size_t block = packed_bytes(rcount, rtype);
  const size_t total_count = rcount * static_cast<size_t>(comm.size);
  check_buffer(recvbuf, total_count, "recvbuf");
  BlockExchange args{rtype, rcount, block, total_count, sendbuf == MPI_IN_PLACE, PackedView{nullptr, 0, {}}};
  if (args.in_place) return args;
  const size_t scount = use_count(sendcount, "sendcount");
  const Datatype& stype = use_type(sendtype, "sendtype");
  check_buffer(sendbuf, scount * send_blocks, "sendbuf");
  if (packed_bytes(scount, stype) != block) {
    fail(MPI_ERR_TRUNCATE, "sends ", packed_bytes(scount, stype), " bytes per rank but receives ", block);
  }
  args.send = packed_view(sendbuf, scount * send_blocks, stype);
  return args;
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Barrier(MPI_Comm comm) {
  return call("MPI_Barrier", comm, [&] { use_comm(comm).chorus.barrier(); });
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return call("MPI_Bcast", comm, [&] {
    Comm c = use_comm(comm);
    const size_t n = use_count(count, "count");
    const Datatype& type = use_type(datatype, "datatype");
    check_root(root, c);
    check_buffer(buffer, n, "buffer");
    const size_t bytes = packed_bytes(n, type);
    if (bytes == 0) return;
    if (type.contiguous()) return c.chorus.broadcast(buffer, bytes, kBytes, root);
    Bytes packed(bytes);
    if (c.rank == root) pack(buffer, n, type, packed.data());
    c.chorus.broadcast(packed.data(), bytes, kBytes, root);
    if (c.rank != root) unpack(packed.data(), n, type, buffer);
  });
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return call("MPI_Allreduce", comm, [&] {
    Comm c = use_comm(comm);
    const Reduction args = reduction(c, sendbuf, recvbuf, count, datatype, op, std::nullopt);
    const size_t n = args.count;
    const Datatype& type = args.type;
    const void* send = args.send;
    if (packed_bytes(n, type) == 0) return;
    if (auto fast = fast_path(op, type)) {
      if (type.contiguous()) return c.chorus.allreduce(send, recvbuf, n * fast->count, fast->dtype, fast->op);
      Bytes packed = pack_copy(send, n, type);
      c.chorus.allreduce(packed.data(), packed.data(), n * fast->count, fast->dtype, fast->op);
      return unpack(packed.data(), n, type, recvbuf);
    }
    Bytes result = reduce_to_rank0(c, send, n, type, op);
    result.resize(packed_bytes(n, type));
    c.chorus.broadcast(result.data(), result.size(), kBytes, 0);
    unpack(result.data(), n, type, recvbuf);
  });
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm) {
  return call("MPI_Reduce", comm, [&] {
    Comm c = use_comm(comm);
    const Reduction args = reduction(c, sendbuf, recvbuf, count, datatype, op, root);
    const size_t n = args.count;
    const Datatype& type = args.type;
    const void* send = args.send;
    const bool is_root = args.receives;
    if (packed_bytes(n, type) == 0) return;
    auto fast = fast_path(op, type);
    if (fast && type.contiguous()) {
      return c.chorus.reduce(send, is_root ? recvbuf : nullptr, n * fast->count, fast->dtype, fast->op, root);
    }
    if (fast) {
      Bytes packed = pack_copy(send, n, type);
      c.chorus.reduce(packed.data(), packed.data(), n * fast->count, fast->dtype, fast->op, root);
      if (is_root) unpack(packed.data(), n, type, recvbuf);
      return;
    }
    Bytes result = reduce_to_rank0(c, send, n, type, op);
    if (root != 0 && c.rank == 0) c.internal.send(result.data(), result.size(), root, kTagForward);
    if (root != 0 && is_root) {
      result.resize(packed_bytes(n, type));
      recv_exact(c.internal, result.data(), result.size(), 0, kTagForward);
    }
    if (is_root) unpack(result.data(), n, type, recvbuf);
  });
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return call("MPI_Allgather", comm, [&] {
    Comm c = use_comm(comm);
    BlockExchange a = block_exchange(c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, 1);
    if (a.block == 0) return;
    const size_t rank_offset = static_cast<size_t>(c.rank) * a.block;
    if (a.rtype.contiguous()) {
      auto* out = static_cast<std::byte*>(recvbuf);
      // In place: chorus takes the own block inside the receive buffer.
      return c.chorus.allgather(a.in_place ? out + rank_offset : a.send.data, out, a.block, kBytes);
    }
    Bytes packed(a.block * static_cast<size_t>(c.size));
    if (a.in_place) {
      pack(element(recvbuf, static_cast<size_t>(c.rank) * a.rcount, a.rtype), a.rcount, a.rtype,
           packed.data() + rank_offset);
    } else {
      std::memcpy(packed.data() + rank_offset, a.send.data, a.block);
    }
    c.chorus.allgather(packed.data() + rank_offset, packed.data(), a.block, kBytes);
    unpack(packed.data(), a.total_count, a.rtype, recvbuf);
  });
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  return call("MPI_Alltoall", comm, [&] {
    Comm c = use_comm(comm);
    BlockExchange a =
        block_exchange(c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, static_cast<size_t>(c.size));
    if (a.in_place) a.send = packed_view(recvbuf, a.total_count, a.rtype);
    if (a.block == 0) return;
    if (a.rtype.contiguous()) return c.chorus.alltoall(a.send.data, recvbuf, a.block, kBytes);  // same pointer: in place
    Bytes packed(a.block * static_cast<size_t>(c.size));
    c.chorus.alltoall(a.send.data, packed.data(), a.block, kBytes);
    unpack(packed.data(), a.total_count, a.rtype, recvbuf);
  });
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  return call("MPI_Reduce_scatter_block", comm, [&] {
    Comm c = use_comm(comm);
    const size_t n = use_count(recvcount, "recvcount");
    const Datatype& type = use_type(datatype, "datatype");
    check_op(op, type);
    const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    check_buffer(send, n * static_cast<size_t>(c.size), "sendbuf");
    check_buffer(recvbuf, n, "recvbuf");
    if (packed_bytes(n, type) == 0) return;
    reduce_scatter_block(c, send, recvbuf, n, type, op);
  });
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
  return call("MPI_Reduce_scatter", comm, [&] {
    Comm c = use_comm(comm);
    const Datatype& type = use_type(datatype, "datatype");
    check_op(op, type);
    if (recvcounts == nullptr) fail(MPI_ERR_ARG, "null recvcounts");
    std::vector<size_t> counts(static_cast<size_t>(c.size));
    for (size_t r = 0; r < counts.size(); ++r) counts[r] = use_count(recvcounts[r], "recvcounts[r]");
    const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
    const size_t mine = counts[static_cast<size_t>(c.rank)];
    const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    check_buffer(send, total, "sendbuf");
    check_buffer(recvbuf, mine, "recvbuf");
    if (packed_bytes(total, type) == 0) return;
    if (std::all_of(counts.begin(), counts.end(), [&](size_t n) { return n == counts[0]; })) {
      return reduce_scatter_block(c, send, recvbuf, counts[0], type, op);
    }
    // Uneven blocks: reduce everything to rank 0, then send each rank its block.
    Bytes reduced = reduce_packed_to_rank0(c, send, total, type, op);
    std::vector<size_t> bytes(counts.size());
    for (size_t r = 0; r < counts.size(); ++r) bytes[r] = packed_bytes(counts[r], type);
    Bytes block = scatter_from_rank0(c, reduced, bytes);
    unpack(block.data(), mine, type, recvbuf);
  });
}

}  // extern "C"
