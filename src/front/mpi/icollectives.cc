// Non-blocking collectives: MPI_Ibarrier, MPI_Ibcast, MPI_Ireduce,
// MPI_Iallreduce, MPI_Iallgather, MPI_Ialltoall, MPI_Ireduce_scatter_block,
// MPI_Ireduce_scatter, MPI_Iscan, MPI_Iexscan,
// on chorus' i-calls; and the one strategy for reductions chorus'
// collectives cannot compute, which the blocking calls use too
// (requests.hpp, "Reductions chorus lacks").
//
// Contiguous data is the user's buffer itself; derived datatypes are packed
// into the request's staging buffer when the call starts and unpacked when
// it completes. Reductions chorus' collectives compute (SUM/PROD/MIN/MAX on
// integers, float, double) run there; any other op (user-defined, logical,
// bitwise, MINLOC/MAXLOC, long double, complex) gathers every rank's packed
// contribution (iallgather, or ialltoall for reduce_scatter) and combines
// them in rank order when the request completes, on the thread that
// completes it: correct for non-commutative ops, at the cost of moving
// size x the data.
#include "mpi/entry_bodies.hpp"
#include "mpi/requests.hpp"

#include <cstring>
#include <memory>

namespace chorus::mpi {

namespace {

constexpr auto kBytes = chorus::DataType::uint8;

// Unpacks the request's staging buffer (`count` elements) into `buffer` when it completes.
void unpack_when_complete(chorus_mpi_request& request, size_t count, const Datatype& type, void* buffer) {
  request.finish() = [staged = &request, count, type, buffer](const chorus::Received&) {
    unpack(staged->recv_staging().data(), count, type, buffer);
  };
}

// When the request completes: combines the blocks staged in it and unpacks
// the result into `recv`. A user function gets the datatype handle the call
// was given where that outlives the request (a blocking call's); a
// non-blocking request keeps a copy of the type, which may be freed
// (MPI_Type_free) before the request completes, and passes that.
// `upto` (scans): only the first `upto` ranks' blocks are combined.
void combine_when_complete(chorus_mpi_request& request, int size, size_t count, const Datatype& type, MPI_Op op,
                           void* recv, int upto = -1) {
  std::optional<Datatype> copy;
  if (!request.blocking) copy.emplace(type);
  request.finish() = [staged = &request, size, count, original = &type, copy = std::move(copy), op, recv,
                    upto](const chorus::Received&) {
    const Datatype& t = copy ? *copy : *original;
    const Bytes& blocks = staged->recv_staging();
    Bytes result = upto < 0 ? combine_in_rank_order(blocks, size, count, t, op)
                            : combine_in_rank_order(Bytes(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(
                                                                              static_cast<size_t>(upto) * packed_bytes(count, t))),
                                                    upto, count, t, op);
    unpack(result.data(), count, t, recv);
  };
}

// MPI_Iscan and MPI_Iexscan: chorus' iscan/iexscan where it has the op
// and type; else every rank's contribution gathered (iallgather) and, when
// the request completes, ranks 0..rank (exscan: 0..rank-1) combined in rank
// order. Exscan leaves rank 0's receive buffer untouched (MPI: undefined).
int start_scan(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
               MPI_Op op, MPI_Comm comm, MPI_Request* request, bool exclusive) {
  return start_collective(function, comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    const ScanArgs a = scan_args(sendbuf, recvbuf, count, datatype, op);
    const size_t n = a.count, block = a.bytes;
    const Datatype& type = a.type;
    const void* send = a.send;
    if (block == 0) return;
    const bool receives = !exclusive || c.rank != 0;
    if (auto fast = fast_path(op, type)) {
      using Start = chorus::Request (chorus::Communicator::*)(const void*, void*, size_t, chorus::DataType,
                                                              chorus::ReduceOp);
      const Start run = exclusive ? Start{&chorus::Communicator::iexscan} : Start{&chorus::Communicator::iscan};
      if (type.contiguous()) {
        r.operation = (c.chorus.*run)(send, recvbuf, n * fast->count, fast->dtype, fast->op);
        return;
      }
      r.recv_staging() = pack_copy(send, n, type);
      if (receives) unpack_when_complete(r, n, type, recvbuf);
      r.operation =
          (c.chorus.*run)(r.recv_staging().data(), r.recv_staging().data(), n * fast->count, fast->dtype, fast->op);
      return;
    }
    r.recv_staging().resize(block * static_cast<size_t>(c.size));
    std::byte* own = r.recv_staging().data() + static_cast<size_t>(c.rank) * block;
    pack(send, n, type, own);
    if (receives) combine_when_complete(r, c.size, n, type, op, recvbuf, exclusive ? c.rank : c.rank + 1);
    r.operation = c.chorus.iallgather(own, r.recv_staging().data(), block, kBytes);
  });
}

}  // namespace

void start_gathered_reduction(const Comm& c, chorus_mpi_request& request, const Reduction& a) {
  const size_t block = packed_bytes(a.count, a.type);
  request.recv_staging().resize(block * static_cast<size_t>(c.size));
  std::byte* own = request.recv_staging().data() + static_cast<size_t>(c.rank) * block;
  pack(a.send, a.count, a.type, own);
  if (a.receives) combine_when_complete(request, c.size, a.count, a.type, a.op, a.recv);
  request.operation = c.chorus.iallgather(own, request.recv_staging().data(), block, kBytes);
}

void start_gathered_reduce_scatter(const Comm& c, chorus_mpi_request& request, const void* send, size_t count,
                                   const Datatype& type, MPI_Op op, void* recv) {
  const size_t block = packed_bytes(count, type);
  request.send_staging() = pack_copy(send, count * static_cast<size_t>(c.size), type);  // in place: read before written
  // Every rank's block for this rank arrives here; combined at completion.
  request.recv_staging().resize(block * static_cast<size_t>(c.size));
  combine_when_complete(request, c.size, count, type, op, recv);
  request.operation = c.chorus.ialltoall(request.send_staging().data(), request.recv_staging().data(), block, kBytes);
}

void start_gathered_reduce_scatter_v(const Comm& c, chorus_mpi_request& request, const void* send,
                                     const std::vector<size_t>& counts, const Datatype& type, MPI_Op op, void* recv) {
  const size_t ranks = counts.size();
  const size_t mine = counts[static_cast<size_t>(c.rank)];
  const size_t block = packed_bytes(mine, type);
  auto layout = std::make_shared<std::vector<size_t>>(4 * ranks);  // send bytes, send displs, recv bytes, recv displs
  size_t* send_bytes = layout->data();
  size_t* send_displs = send_bytes + ranks;
  size_t* recv_bytes = send_displs + ranks;
  size_t* recv_displs = recv_bytes + ranks;
  size_t total = 0;
  for (size_t r = 0; r < ranks; ++r) {
    send_displs[r] = packed_bytes(total, type);
    send_bytes[r] = packed_bytes(counts[r], type);
    recv_bytes[r] = block;
    recv_displs[r] = r * block;
    total += counts[r];
  }
  request.send_staging() = pack_copy(send, total, type);  // in place: read before written
  request.recv_staging().resize(block * ranks);
  if (mine > 0) combine_when_complete(request, c.size, mine, type, op, recv);
  auto combine = std::move(request.finish());
  request.finish() = [layout, combine = std::move(combine)](const chorus::Received& received) {
    if (combine) combine(received);
  };
  request.operation = c.chorus.ialltoallv(request.send_staging().data(), {send_bytes, ranks}, {send_displs, ranks},
                                          request.recv_staging().data(), {recv_bytes, ranks}, {recv_displs, ranks},
                                          kBytes);
}

void start_reduce_scatter_block(const Comm& c, chorus_mpi_request& r, const void* send, void* recvbuf, size_t n,
                                const Datatype& type, MPI_Op op) {
  const size_t total = n * static_cast<size_t>(c.size);
  const size_t block = packed_bytes(n, type);
  if (block == 0) return;
  auto fast = fast_path(op, type);
  if (!fast) return start_gathered_reduce_scatter(c, r, send, n, type, op, recvbuf);
  if (type.contiguous()) {
    // chorus lets the receive buffer alias block `rank` of the send buffer;
    // in place, the result then moves to the start of recvbuf.
    void* own = send == recvbuf ? element(recvbuf, static_cast<size_t>(c.rank) * n, type) : recvbuf;
    if (own != recvbuf) {
      r.finish() = [recvbuf, own, block](const chorus::Received&) { std::memmove(recvbuf, own, block); };
    }
    r.operation = c.chorus.ireduce_scatter(send, own, n * fast->count, fast->dtype, fast->op);
    return;
  }
  r.send_staging() = pack_copy(send, total, type);
  r.recv_staging().resize(block);
  unpack_when_complete(r, n, type, recvbuf);
  r.operation =
      c.chorus.ireduce_scatter(r.send_staging().data(), r.recv_staging().data(), n * fast->count, fast->dtype, fast->op);
}

}  // namespace chorus::mpi

namespace chorus::mpi {

int iscan_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return start_scan(function, sendbuf, recvbuf, count, datatype, op, comm, request, false);
}

int iexscan_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return start_scan(function, sendbuf, recvbuf, count, datatype, op, comm, request, true);
}

int ibcast_entry(const char* function, void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  return start_collective(function, comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    const Broadcast b = broadcast_args(c, buffer, count, datatype, root);
    if (b.bytes == 0) return;
    if (b.type.contiguous()) {
      r.operation = c.chorus.ibroadcast(buffer, b.bytes, kBytes, root);
      return;
    }
    r.recv_staging().resize(b.bytes);
    if (c.rank == root) {
      pack(buffer, b.count, b.type, r.recv_staging().data());
    } else {
      unpack_when_complete(r, b.count, b.type, buffer);
    }
    r.operation = c.chorus.ibroadcast(r.recv_staging().data(), b.bytes, kBytes, root);
  });
}

int iallreduce_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                     MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return start_collective(function, comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    const Reduction a = reduction(c, sendbuf, recvbuf, count, datatype, op, std::nullopt);
    if (a.empty()) return;
    if (!a.fast) return start_gathered_reduction(c, r, a);
    if (a.type.contiguous()) {
      r.operation = c.chorus.iallreduce(a.send, recvbuf, a.chorus_count(), a.fast->dtype, a.fast->op);
      return;
    }
    r.recv_staging() = pack_copy(a.send, a.count, a.type);
    unpack_when_complete(r, a.count, a.type, recvbuf);
    r.operation = c.chorus.iallreduce(r.recv_staging().data(), r.recv_staging().data(), a.chorus_count(), a.fast->dtype,
                                      a.fast->op);
  });
}

int ireduce_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                  MPI_Op op, int root, MPI_Comm comm, MPI_Request* request) {
  return start_collective(function, comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    const Reduction a = reduction(c, sendbuf, recvbuf, count, datatype, op, root);
    if (a.empty()) return;
    if (!a.fast) return start_gathered_reduction(c, r, a);
    if (a.type.contiguous()) {
      r.operation =
          c.chorus.ireduce(a.send, a.receives ? recvbuf : nullptr, a.chorus_count(), a.fast->dtype, a.fast->op, root);
      return;
    }
    r.recv_staging() = pack_copy(a.send, a.count, a.type);
    if (a.receives) unpack_when_complete(r, a.count, a.type, recvbuf);
    r.operation = c.chorus.ireduce(r.recv_staging().data(), r.recv_staging().data(), a.chorus_count(), a.fast->dtype,
                                   a.fast->op, root);
  });
}

int iallgather_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                     void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return start_collective(function, comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    BlockExchange a = block_exchange(c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, 1);
    if (a.block == 0) return;
    const size_t rank_offset = static_cast<size_t>(c.rank) * a.block;
    if (a.rtype.contiguous()) {
      auto* out = static_cast<std::byte*>(recvbuf);
      r.send_staging() = std::move(a.send.storage);  // keeps a.send.data valid
      r.operation = c.chorus.iallgather(a.in_place ? out + rank_offset : a.send.data, out, a.block, kBytes);
      return;
    }
    r.recv_staging().resize(a.block * static_cast<size_t>(c.size));
    std::byte* mine = r.recv_staging().data() + rank_offset;
    if (a.in_place) {
      pack(element(recvbuf, static_cast<size_t>(c.rank) * a.rcount, a.rtype), a.rcount, a.rtype, mine);
    } else {
      std::memcpy(mine, a.send.data, a.block);
    }
    unpack_when_complete(r, a.total_count, a.rtype, recvbuf);
    r.operation = c.chorus.iallgather(mine, r.recv_staging().data(), a.block, kBytes);
  });
}

int ialltoall_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                    void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return start_collective(function, comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    BlockExchange a =
        block_exchange(c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, static_cast<size_t>(c.size));
    if (a.in_place) a.send = packed_view(recvbuf, a.total_count, a.rtype);
    if (a.block == 0) return;
    r.send_staging() = std::move(a.send.storage);  // keeps a.send.data valid
    if (a.rtype.contiguous()) {
      r.operation = c.chorus.ialltoall(a.send.data, recvbuf, a.block, kBytes);  // same pointer: in place
      return;
    }
    r.recv_staging().resize(a.block * static_cast<size_t>(c.size));
    unpack_when_complete(r, a.total_count, a.rtype, recvbuf);
    r.operation = c.chorus.ialltoall(a.send.data, r.recv_staging().data(), a.block, kBytes);
  });
}

int ireduce_scatter_block_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count recvcount,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return start_collective(function, comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    const size_t n = use_count(recvcount, "recvcount");
    const Datatype& type = use_type(datatype, "datatype");
    check_op(op, type);
    const size_t total = n * static_cast<size_t>(c.size);
    const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    check_buffer(send, total, "sendbuf");
    check_buffer(recvbuf, n, "recvbuf");
    start_reduce_scatter_block(c, r, send, recvbuf, n, type, op);
  });
}

int ireduce_scatter_entry(const char* function, const void* sendbuf, void* recvbuf, CountArray recvcounts,
                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return start_collective(function, comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    const ReduceScatterCounts a = reduce_scatter_counts(c, sendbuf, recvbuf, recvcounts, datatype, op);
    if (packed_bytes(a.total, a.type) == 0) return;
    if (a.even()) return start_reduce_scatter_block(c, r, a.send, recvbuf, a.counts[0], a.type, op);
    start_gathered_reduce_scatter_v(c, r, a.send, a.counts, a.type, op, recvbuf);
  });
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              MPI_Request* request) {
  return iscan_entry("MPI_Iscan", sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                MPI_Request* request) {
  return iexscan_entry("MPI_Iexscan", sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return start_collective("MPI_Ibarrier", comm, request,
                          [&](const Comm& c, chorus_mpi_request& r) { r.operation = c.chorus.ibarrier(); });
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  return ibcast_entry("MPI_Ibcast", buffer, count, datatype, root, comm, request);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  return iallreduce_entry("MPI_Iallreduce", sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* request) {
  return ireduce_entry("MPI_Ireduce", sendbuf, recvbuf, count, datatype, op, root, comm, request);
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return iallgather_entry("MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return ialltoall_entry("MPI_Ialltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  return ireduce_scatter_block_entry("MPI_Ireduce_scatter_block", sendbuf, recvbuf, recvcount, datatype, op, comm,
                                     request);
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm, MPI_Request* request) {
  return ireduce_scatter_entry("MPI_Ireduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
}

}  // extern "C"
