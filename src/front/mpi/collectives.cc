// The MPI collectives that map onto chorus' own collectives: barrier, bcast,
// allreduce, reduce, allgather, alltoall, reduce_scatter(_block); and
// MPI_Reduce_local.
//
// Data travels packed (see datatype.cc): for contiguous types that is the
// user's buffer itself; derived types are packed into a temporary first.
// Reductions run on chorus' collectives (and their fast algorithms) when
// chorus has the op and type (SUM/PROD/MIN/MAX on integers, float, double);
// anything else (user ops, logical/bitwise ops, long double, complex,
// value-index pairs) takes the one strategy the non-blocking calls take:
// every rank's contribution gathered, then combined in rank order
// (requests.hpp, "Reductions chorus lacks"), started and waited for here.
#include "mpi/entry_bodies.hpp"
#include "mpi/requests.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace chorus::mpi {

namespace {

constexpr auto kBytes = chorus::DataType::uint8;

// MPI_Reduce_scatter_block; `send` holds size * count elements (in place:
// recvbuf, with the result written to its start).
void reduce_scatter_block(const Comm& comm, const void* send, void* recv, size_t count, const Datatype& type,
                          MPI_Op op) {
  const size_t total = count * static_cast<size_t>(comm.size);
  const bool in_place = send == recv;
  auto fast = fast_path(op, type);
  if (!fast) {
    return run_to_completion(comm.handle, [&](chorus_mpi_request& r) {
      start_gathered_reduce_scatter(comm, r, send, count, type, op, recv);
    });
  }
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
}

}  // namespace

Reduction reduction(const Comm& comm, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                    MPI_Op op, std::optional<int> root) {
  const size_t n = use_count(count, "count");
  const Datatype& type = use_type(datatype, "datatype");
  check_op(op, type);
  if (root) check_root(*root, comm);
  const bool receives = !root || comm.rank == *root;
  if (sendbuf == MPI_IN_PLACE && !receives) fail(MPI_ERR_BUFFER, "MPI_IN_PLACE is only allowed at the root");
  const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  check_buffer(send, n, "sendbuf");
  if (receives) check_buffer(recvbuf, n, "recvbuf");
  return Reduction{n, type, op, send, recvbuf, receives, fast_path(op, type)};
}

ReduceScatterCounts reduce_scatter_counts(const Comm& comm, const void* sendbuf, void* recvbuf, CountArray recvcounts,
                                          MPI_Datatype datatype, MPI_Op op) {
  const Datatype& type = use_type(datatype, "datatype");
  check_op(op, type);
  if (recvcounts.null()) fail(MPI_ERR_ARG, "null recvcounts");
  std::vector<size_t> counts(static_cast<size_t>(comm.size));
  for (size_t r = 0; r < counts.size(); ++r) counts[r] = use_count(recvcounts[r], "recvcounts[r]");
  const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
  const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  check_buffer(send, total, "sendbuf");
  check_buffer(recvbuf, counts[static_cast<size_t>(comm.rank)], "recvbuf");
  return ReduceScatterCounts{type, std::move(counts), total, send};
}

Broadcast broadcast_args(const Comm& comm, const void* buffer, MPI_Count count, MPI_Datatype datatype, int root) {
  const size_t n = use_count(count, "count");
  const Datatype& type = use_type(datatype, "datatype");
  check_root(root, comm);
  check_buffer(buffer, n, "buffer");
  return Broadcast{n, type, packed_bytes(n, type)};
}

BlockExchange block_exchange(const Comm& comm, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                             const void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, size_t send_blocks) {
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

namespace chorus::mpi {

int bcast_entry(const char* function, void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return call(function, comm, [&] {
    Comm c = use_comm(comm);
    const Broadcast b = broadcast_args(c, buffer, count, datatype, root);
    if (b.bytes == 0) return;
    if (b.type.contiguous()) return c.chorus.broadcast(buffer, b.bytes, kBytes, root);
    Bytes packed(b.bytes);
    if (c.rank == root) pack(buffer, b.count, b.type, packed.data());
    c.chorus.broadcast(packed.data(), b.bytes, kBytes, root);
    if (c.rank != root) unpack(packed.data(), b.count, b.type, buffer);
  });
}

int allreduce_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                    MPI_Op op, MPI_Comm comm) {
  return call(function, comm, [&] {
    Comm c = use_comm(comm);
    const Reduction a = reduction(c, sendbuf, recvbuf, count, datatype, op, std::nullopt);
    if (a.empty()) return;
    if (!a.fast) return run_to_completion(comm, [&](chorus_mpi_request& r) { start_gathered_reduction(c, r, a); });
    if (a.type.contiguous()) return c.chorus.allreduce(a.send, recvbuf, a.chorus_count(), a.fast->dtype, a.fast->op);
    Bytes packed = pack_copy(a.send, a.count, a.type);
    c.chorus.allreduce(packed.data(), packed.data(), a.chorus_count(), a.fast->dtype, a.fast->op);
    unpack(packed.data(), a.count, a.type, recvbuf);
  });
}

int reduce_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                 MPI_Op op, int root, MPI_Comm comm) {
  return call(function, comm, [&] {
    Comm c = use_comm(comm);
    const Reduction a = reduction(c, sendbuf, recvbuf, count, datatype, op, root);
    if (a.empty()) return;
    if (!a.fast) return run_to_completion(comm, [&](chorus_mpi_request& r) { start_gathered_reduction(c, r, a); });
    if (a.type.contiguous()) {
      return c.chorus.reduce(a.send, a.receives ? recvbuf : nullptr, a.chorus_count(), a.fast->dtype, a.fast->op, root);
    }
    Bytes packed = pack_copy(a.send, a.count, a.type);
    c.chorus.reduce(packed.data(), packed.data(), a.chorus_count(), a.fast->dtype, a.fast->op, root);
    if (a.receives) unpack(packed.data(), a.count, a.type, recvbuf);
  });
}

int allgather_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                    void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return call(function, comm, [&] {
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

int alltoall_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return call(function, comm, [&] {
    Comm c = use_comm(comm);
    BlockExchange a =
        block_exchange(c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, static_cast<size_t>(c.size));
    if (a.in_place) a.send = packed_view(recvbuf, a.total_count, a.rtype);
    if (a.block == 0) return;
    if (a.rtype.contiguous())
      return c.chorus.alltoall(a.send.data, recvbuf, a.block, kBytes);  // same pointer: in place
    Bytes packed(a.block * static_cast<size_t>(c.size));
    c.chorus.alltoall(a.send.data, packed.data(), a.block, kBytes);
    unpack(packed.data(), a.total_count, a.rtype, recvbuf);
  });
}

int reduce_scatter_block_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count recvcount,
                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return call(function, comm, [&] {
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

int reduce_scatter_entry(const char* function, const void* sendbuf, void* recvbuf, CountArray recvcounts,
                         MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return call(function, comm, [&] {
    Comm c = use_comm(comm);
    const ReduceScatterCounts a = reduce_scatter_counts(c, sendbuf, recvbuf, recvcounts, datatype, op);
    if (packed_bytes(a.total, a.type) == 0) return;
    if (a.even()) return reduce_scatter_block(c, a.send, recvbuf, a.counts[0], a.type, op);
    auto fast = fast_path(op, a.type);
    if (!fast) {
      // Every rank's contribution to this rank's block (alltoallv), combined in rank order.
      return run_to_completion(comm, [&](chorus_mpi_request& r) {
        start_gathered_reduce_scatter_v(c, r, a.send, a.counts, a.type, op, recvbuf);
      });
    }
    // Uneven blocks: chorus' reduce of everything to rank 0, then each rank's block (chorus' scatterv).
    Bytes reduced = pack_copy(a.send, a.total, a.type);
    c.chorus.reduce(reduced.data(), reduced.data(), a.total * fast->count, fast->dtype, fast->op, 0);
    std::vector<size_t> bytes(a.counts.size());
    for (size_t r = 0; r < a.counts.size(); ++r) bytes[r] = packed_bytes(a.counts[r], a.type);
    Bytes block(bytes[static_cast<size_t>(c.rank)]);
    c.chorus.scatterv(reduced.data(), bytes, {}, block.data(), block.size(), kBytes, 0);
    unpack(block.data(), a.counts[static_cast<size_t>(c.rank)], a.type, recvbuf);
  });
}

int reduce_local_entry(const char* function, const void* inbuf, void* inoutbuf, MPI_Count count, MPI_Datatype datatype,
                       MPI_Op op) {
  return call(function, MPI_COMM_WORLD, [&] {
    const size_t n = use_count(count, "count");
    const Datatype& type = use_type(datatype, "datatype");
    check_op(op, type);
    check_buffer(inbuf, n, "inbuf");
    check_buffer(inoutbuf, n, "inoutbuf");
    if (n == 0) return;
    if (type.contiguous()) return reduce_local(op, type, inbuf, inoutbuf, n);
    // reduce_local works on packed elements.
    Bytes in = pack_copy(inbuf, n, type), inout = pack_copy(inoutbuf, n, type);
    reduce_local(op, type, in.data(), inout.data(), n);
    unpack(inout.data(), n, type, inoutbuf);
  });
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Barrier(MPI_Comm comm) {
  return call("MPI_Barrier", comm, [&] { use_comm(comm).chorus.barrier(); });
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return bcast_entry("MPI_Bcast", buffer, count, datatype, root, comm);
}

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return allreduce_entry("MPI_Allreduce", sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
               MPI_Comm comm) {
  return reduce_entry("MPI_Reduce", sendbuf, recvbuf, count, datatype, op, root, comm);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather_entry("MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall_entry("MPI_Alltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  return reduce_scatter_block_entry("MPI_Reduce_scatter_block", sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
  return reduce_scatter_entry("MPI_Reduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int MPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype, MPI_Op op) {
  return reduce_local_entry("MPI_Reduce_local", inbuf, inoutbuf, count, datatype, op);
}

}  // extern "C"
