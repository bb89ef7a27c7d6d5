// Non-blocking collectives: MPI_Ibarrier, MPI_Ibcast, MPI_Ireduce,
// MPI_Iallreduce, MPI_Iallgather, MPI_Ialltoall, MPI_Ireduce_scatter_block,
// on chorus' i-calls.
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
#include "mpi/requests.hpp"

#include <cstring>

namespace chorus::mpi {

namespace {

constexpr auto kBytes = chorus::DataType::uint8;

// Unpacks the request's staging buffer (`count` elements) into `buffer` when it completes.
void unpack_when_complete(chorus_mpi_request& request, size_t count, const Datatype& type, void* buffer) {
  request.finish = [staged = &request, count, type, buffer](const chorus::Received&) {
    unpack(staged->recv_staging.data(), count, type, buffer);
  };
}

// x0 op (x1 op (... op x[size-1])) of the `size` packed blocks of `count`
// elements in `blocks` (block r is rank r's).
Bytes combine_in_rank_order(const Bytes& blocks, int size, size_t count, const Datatype& type, MPI_Op op) {
  const size_t block = packed_bytes(count, type);
  Bytes result(blocks.end() - static_cast<std::ptrdiff_t>(block), blocks.end());
  for (int r = size - 2; r >= 0; --r) {
    reduce_local(op, type, blocks.data() + static_cast<size_t>(r) * block, result.data(), count);
  }
  return result;
}

// When the request completes: combines the blocks staged in it and unpacks
// the result into `recv`.
void combine_when_complete(chorus_mpi_request& request, int size, size_t count, const Datatype& type, MPI_Op op,
                           void* recv) {
  request.finish = [staged = &request, size, count, type, op, recv](const chorus::Received&) {
    Bytes result = combine_in_rank_order(staged->recv_staging, size, count, type, op);
    unpack(result.data(), count, type, recv);
  };
}

// The general reduction: gathers every rank's packed `send` and, when the
// request completes, combines them and unpacks into `recv` (if `deliver`).
void start_gathered_reduction(const Comm& c, chorus_mpi_request& request, const void* send, size_t count,
                              const Datatype& type, MPI_Op op, void* recv, bool deliver) {
  const size_t block = packed_bytes(count, type);
  request.recv_staging.resize(block * static_cast<size_t>(c.size));
  std::byte* own = request.recv_staging.data() + static_cast<size_t>(c.rank) * block;
  pack(send, count, type, own);
  if (deliver) combine_when_complete(request, c.size, count, type, op, recv);
  request.operation = c.chorus.iallgather(own, request.recv_staging.data(), block, kBytes);
}

// Runs an I-collective's body, which starts the operation in the request.
template <class Body>
int start(const char* function, MPI_Comm comm, MPI_Request* request, Body&& body) {
  return call(function, comm, [&] {
    check_request_output(request);
    Comm c = use_comm(comm);
    RequestPtr started = new_request(comm);
    body(c, *started);
    publish(std::move(started), request);
  });
}

}  // namespace

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return start("MPI_Ibarrier", comm, request,
               [&](const Comm& c, chorus_mpi_request& r) { r.operation = c.chorus.ibarrier(); });
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  return start("MPI_Ibcast", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    const size_t n = use_count(count, "count");
    const Datatype& type = use_type(datatype, "datatype");
    check_root(root, c);
    check_buffer(buffer, n, "buffer");
    const size_t bytes = packed_bytes(n, type);
    if (bytes == 0) return;
    if (type.contiguous()) {
      r.operation = c.chorus.ibroadcast(buffer, bytes, kBytes, root);
      return;
    }
    r.recv_staging.resize(bytes);
    if (c.rank == root) {
      pack(buffer, n, type, r.recv_staging.data());
    } else {
      unpack_when_complete(r, n, type, buffer);
    }
    r.operation = c.chorus.ibroadcast(r.recv_staging.data(), bytes, kBytes, root);
  });
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  return start("MPI_Iallreduce", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    const Reduction args = reduction(c, sendbuf, recvbuf, count, datatype, op, std::nullopt);
    const size_t n = args.count;
    const Datatype& type = args.type;
    const void* send = args.send;
    if (packed_bytes(n, type) == 0) return;
    auto fast = fast_path(op, type);
    if (!fast) return start_gathered_reduction(c, r, send, n, type, op, recvbuf, true);
    if (type.contiguous()) {
      r.operation = c.chorus.iallreduce(send, recvbuf, n * fast->count, fast->dtype, fast->op);
      return;
    }
    r.recv_staging = pack_copy(send, n, type);
    unpack_when_complete(r, n, type, recvbuf);
    r.operation = c.chorus.iallreduce(r.recv_staging.data(), r.recv_staging.data(), n * fast->count, fast->dtype,
                                      fast->op);
  });
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* request) {
  return start("MPI_Ireduce", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    const Reduction args = reduction(c, sendbuf, recvbuf, count, datatype, op, root);
    const size_t n = args.count;
    const Datatype& type = args.type;
    const void* send = args.send;
    const bool is_root = args.receives;
    if (packed_bytes(n, type) == 0) return;
    auto fast = fast_path(op, type);
    if (!fast) return start_gathered_reduction(c, r, send, n, type, op, recvbuf, is_root);
    if (type.contiguous()) {
      r.operation = c.chorus.ireduce(send, is_root ? recvbuf : nullptr, n * fast->count, fast->dtype, fast->op, root);
      return;
    }
    r.recv_staging = pack_copy(send, n, type);
    if (is_root) unpack_when_complete(r, n, type, recvbuf);
    r.operation = c.chorus.ireduce(r.recv_staging.data(), r.recv_staging.data(), n * fast->count, fast->dtype,
                                   fast->op, root);
  });
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return start("MPI_Iallgather", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    BlockExchange a = block_exchange(c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, 1);
    if (a.block == 0) return;
    const size_t rank_offset = static_cast<size_t>(c.rank) * a.block;
    if (a.rtype.contiguous()) {
      auto* out = static_cast<std::byte*>(recvbuf);
      r.send_staging = std::move(a.send.storage);  // keeps a.send.data valid
      r.operation = c.chorus.iallgather(a.in_place ? out + rank_offset : a.send.data, out, a.block, kBytes);
      return;
    }
    r.recv_staging.resize(a.block * static_cast<size_t>(c.size));
    std::byte* mine = r.recv_staging.data() + rank_offset;
    if (a.in_place) {
      pack(element(recvbuf, static_cast<size_t>(c.rank) * a.rcount, a.rtype), a.rcount, a.rtype, mine);
    } else {
      std::memcpy(mine, a.send.data, a.block);
    }
    unpack_when_complete(r, a.total_count, a.rtype, recvbuf);
    r.operation = c.chorus.iallgather(mine, r.recv_staging.data(), a.block, kBytes);
  });
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return start("MPI_Ialltoall", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    BlockExchange a =
        block_exchange(c, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, static_cast<size_t>(c.size));
    if (a.in_place) a.send = packed_view(recvbuf, a.total_count, a.rtype);
    if (a.block == 0) return;
    r.send_staging = std::move(a.send.storage);  // keeps a.send.data valid
    if (a.rtype.contiguous()) {
      r.operation = c.chorus.ialltoall(a.send.data, recvbuf, a.block, kBytes);  // same pointer: in place
      return;
    }
    r.recv_staging.resize(a.block * static_cast<size_t>(c.size));
    unpack_when_complete(r, a.total_count, a.rtype, recvbuf);
    r.operation = c.chorus.ialltoall(a.send.data, r.recv_staging.data(), a.block, kBytes);
  });
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  return start("MPI_Ireduce_scatter_block", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    const size_t n = use_count(recvcount, "recvcount");
    const Datatype& type = use_type(datatype, "datatype");
    check_op(op, type);
    const size_t total = n * static_cast<size_t>(c.size);
    const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    check_buffer(send, total, "sendbuf");
    check_buffer(recvbuf, n, "recvbuf");
    const size_t block = packed_bytes(n, type);
    if (block == 0) return;
    auto fast = fast_path(op, type);
    if (fast && type.contiguous()) {
      // chorus lets the receive buffer alias block `rank` of the send buffer;
      // in place, the result then moves to the start of recvbuf.
      void* own = send == recvbuf ? element(recvbuf, static_cast<size_t>(c.rank) * n, type) : recvbuf;
      if (own != recvbuf) {
        r.finish = [recvbuf, own, block](const chorus::Received&) { std::memmove(recvbuf, own, block); };
      }
      r.operation = c.chorus.ireduce_scatter(send, own, n * fast->count, fast->dtype, fast->op);
      return;
    }
    r.send_staging = pack_copy(send, total, type);
    if (fast) {
      r.recv_staging.resize(block);
      unpack_when_complete(r, n, type, recvbuf);
      r.operation = c.chorus.ireduce_scatter(r.send_staging.data(), r.recv_staging.data(), n * fast->count,
                                             fast->dtype, fast->op);
      return;
    }
    // Every rank's block for this rank arrives here; combined at completion.
    r.recv_staging.resize(block * static_cast<size_t>(c.size));
    combine_when_complete(r, c.size, n, type, op, recvbuf);
    r.operation = c.chorus.ialltoall(r.send_staging.data(), r.recv_staging.data(), block, kBytes);
  });
}

}  // extern "C"
