// MPI_Scan and MPI_Exscan. When chorus has the op and type (SUM/PROD/MIN/MAX
// on integers, float, double) they are chorus' scan/exscan, with their
// algorithms (docs/algorithms.md). Everything else (user ops, which may not
// commute, logical/bitwise ops, long double, complex, value-index pairs)
// runs here by recursive doubling (the algorithm MPICH uses):
// ceil(log2(size)) exchange steps of `count` elements, in rank order.
//
// At step `mask` each rank exchanges with rank ^ mask the reduction of its
// aligned block of `mask` ranks ("partial"). The block that came from below
// is folded into the result on the left (incoming op result) and into the
// partial on the left; one from above only extends the partial on the right.
// Ranks whose partner would be >= size skip the step.
#include "mpi/entry_bodies.hpp"
#include "mpi/internal.hpp"

#include <cstring>

namespace chorus::mpi {

namespace {

void scan(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
          bool exclusive) {
  Comm c = use_comm(comm);
  const ScanArgs a = scan_args(sendbuf, recvbuf, count, datatype, op);
  const size_t n = a.count, bytes = a.bytes;
  const Datatype& type = a.type;
  const void* send = a.send;
  if (bytes == 0) return;
  if (auto fast = fast_path(op, type)) {
    using Raw = void (chorus::Communicator::*)(const void*, void*, size_t, chorus::DataType, chorus::ReduceOp);
    const Raw run = exclusive ? Raw{&chorus::Communicator::exscan} : Raw{&chorus::Communicator::scan};
    if (type.contiguous()) return (c.chorus.*run)(send, recvbuf, n * fast->count, fast->dtype, fast->op);
    Bytes packed = pack_copy(send, n, type);
    (c.chorus.*run)(packed.data(), packed.data(), n * fast->count, fast->dtype, fast->op);
    // Exscan leaves rank 0's receive buffer untouched (MPI: undefined there).
    if (!exclusive || c.rank != 0) unpack(packed.data(), n, type, recvbuf);
    return;
  }

  Bytes partial = pack_copy(send, n, type);
  Bytes incoming(bytes);
  Bytes result = exclusive ? Bytes() : partial;  // exclusive: nothing until a lower block arrives
  for (int mask = 1; mask < c.size; mask <<= 1) {
    const int peer = c.rank ^ mask;
    if (peer >= c.size) continue;
    exchange(c, peer, partial.data(), bytes, incoming.data(), bytes, kTagScan);
    if (peer < c.rank) {
      // incoming: the ranks just below everything this rank has folded in.
      if (result.empty()) {
        result = incoming;
      } else {
        reduce_local(op, type, incoming.data(), result.data(), n);  // result = incoming op result
      }
      reduce_local(op, type, incoming.data(), partial.data(), n);  // partial = incoming op partial
    } else {
      reduce_local(op, type, partial.data(), incoming.data(), n);  // incoming = partial op incoming
      partial.swap(incoming);
    }
  }
  // Exscan leaves rank 0's receive buffer untouched (MPI: undefined there).
  if (!result.empty()) unpack(result.data(), n, type, recvbuf);
}

}  // namespace

ScanArgs scan_args(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op) {
  const size_t n = use_count(count, "count");
  const Datatype& type = use_type(datatype, "datatype");
  check_op(op, type);
  const void* send = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  check_buffer(send, n, "sendbuf");
  check_buffer(recvbuf, n, "recvbuf");
  return {n, type, send, packed_bytes(n, type)};
}

}  // namespace chorus::mpi

namespace chorus::mpi {

int scan_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
               MPI_Op op, MPI_Comm comm) {
  return call(function, comm, [&] { scan(sendbuf, recvbuf, count, datatype, op, comm, false); });
}

int exscan_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                 MPI_Op op, MPI_Comm comm) {
  return call(function, comm, [&] { scan(sendbuf, recvbuf, count, datatype, op, comm, true); });
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return scan_entry("MPI_Scan", sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return exscan_entry("MPI_Exscan", sendbuf, recvbuf, count, datatype, op, comm);
}

}  // extern "C"
