// The C API: lifecycle, blocking collectives and point-to-point, and the
// error strings (non-blocking calls: capi_nonblocking.cc).
#include "api/block_collectives.hpp"
#include "api/capi_internal.hpp"
#include "api/communicator_impl.hpp"
#include "api/user_tag.hpp"
#include "common/error.hpp"

#include <chorus/chorus.h>

#include <cstring>

using namespace chorus::capi;

namespace {

// gather .. alltoallv: per-rank arrays and CHORUS_IN_PLACE.

// CHORUS_IN_PLACE in a rooted collective: only the root has its own block
// in the other buffer.
bool in_place_at_root(chorus::CommunicatorImpl& comm, const void* buffer, int root, const char* function,
                      chorus::Collective op) {
  if (!in_place(buffer)) return false;
  if (comm.rank() != root) {
    // This rank's argument alone, in a call the others are in: it fails on
    // every rank, as a null buffer does (docs/errors.md, "Bad arguments").
    comm.refuse_collective(op, root,
                           chorus::Error(chorus::Status::invalid_argument,
                                         chorus::concat(function, ": CHORUS_IN_PLACE on rank ", comm.rank(),
                                                        ", which is not the root (", root, ")")));
  }
  return true;
}

// One entry per rank of `comm`, or none for a null array.
std::span<const size_t> per_rank(chorus::CommunicatorImpl& comm, const size_t* values) {
  return values == nullptr ? std::span<const size_t>() : std::span<const size_t>(values, static_cast<size_t>(comm.size()));
}

// Byte offset of element `elements` of a buffer of `dtype`.
const uint8_t* element_at(const void* base, size_t elements, chorus_datatype_t dtype) {
  return static_cast<const uint8_t*>(base) + elements * chorus::datatype_size(to_dtype(dtype));
}

// The root's own block for CHORUS_IN_PLACE at a rooted v-variant: element
// displs[root] (packed: the sum of the counts before it), or 0 if unknown.
size_t own_displacement(chorus::CommunicatorImpl& comm, const size_t* counts, const size_t* displs) {
  const auto rank = static_cast<size_t>(comm.rank());
  if (displs != nullptr) return displs[rank];
  size_t offset = 0;
  for (size_t r = 0; counts != nullptr && r < rank; ++r) offset += counts[r];
  return offset;
}

}  // namespace

namespace chorus::capi {

chorus::coll::Args gather_call(chorus::CommunicatorImpl& impl, const char* function, const void* sendbuf,
                               void* recvbuf, size_t count, chorus_datatype_t dtype, int root) {
  const void* send = in_place_at_root(impl, sendbuf, root, function, chorus::Collective::gather)
                         ? element_at(recvbuf, static_cast<size_t>(root) * count, dtype)
                         : sendbuf;
  return {send, recvbuf, count, to_dtype(dtype), chorus::ReduceOp::sum, root};
}

chorus::coll::Args gatherv_call(chorus::CommunicatorImpl& impl, const char* function, const void* sendbuf,
                                size_t sendcount, void* recvbuf, const size_t* recvcounts, const size_t* displs,
                                chorus_datatype_t dtype, int root) {
  const void* send = in_place_at_root(impl, sendbuf, root, function, chorus::Collective::gatherv)
                         ? element_at(recvbuf, own_displacement(impl, recvcounts, displs), dtype)
                         : sendbuf;
  return chorus::gatherv_args(send, sendcount, recvbuf, per_rank(impl, recvcounts), per_rank(impl, displs),
                              to_dtype(dtype), root);
}

chorus::coll::Args scatter_call(chorus::CommunicatorImpl& impl, const char* function, const void* sendbuf,
                                void* recvbuf, size_t count, chorus_datatype_t dtype, int root) {
  void* recv = in_place_at_root(impl, recvbuf, root, function, chorus::Collective::scatter)
                   ? const_cast<uint8_t*>(element_at(sendbuf, static_cast<size_t>(root) * count, dtype))
                   : recvbuf;
  return {sendbuf, recv, count, to_dtype(dtype), chorus::ReduceOp::sum, root};
}

chorus::coll::Args scatterv_call(chorus::CommunicatorImpl& impl, const char* function, const void* sendbuf,
                                 const size_t* sendcounts, const size_t* displs, void* recvbuf, size_t recvcount,
                                 chorus_datatype_t dtype, int root) {
  void* recv = in_place_at_root(impl, recvbuf, root, function, chorus::Collective::scatterv)
                   ? const_cast<uint8_t*>(element_at(sendbuf, own_displacement(impl, sendcounts, displs), dtype))
                   : recvbuf;
  return chorus::scatterv_args(sendbuf, per_rank(impl, sendcounts), per_rank(impl, displs), recv, recvcount,
                               to_dtype(dtype), root);
}

chorus::coll::Args allgatherv_call(chorus::CommunicatorImpl& impl, const void* sendbuf, size_t sendcount,
                                   void* recvbuf, const size_t* recvcounts, const size_t* displs,
                                   chorus_datatype_t dtype) {
  const void* send =
      in_place(sendbuf) ? element_at(recvbuf, own_displacement(impl, recvcounts, displs), dtype) : sendbuf;
  return chorus::allgatherv_args(send, sendcount, recvbuf, per_rank(impl, recvcounts), per_rank(impl, displs),
                                 to_dtype(dtype));
}

chorus::coll::Args alltoallv_call(chorus::CommunicatorImpl& impl, const void* sendbuf, const size_t* sendcounts,
                                  const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                  const size_t* rdispls, chorus_datatype_t dtype) {
  return chorus::alltoallv_args(in_place(sendbuf) ? recvbuf : sendbuf, per_rank(impl, sendcounts),
                                per_rank(impl, sdispls), recvbuf, per_rank(impl, recvcounts), per_rank(impl, rdispls),
                                to_dtype(dtype));
}

}  // namespace chorus::capi

extern "C" {

chorus_status_t chorus_init(chorus_comm_t* comm) {
  return guard([&] {
    if (comm == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_init: null output pointer");
    *comm = nullptr;
    auto impl = chorus::CommunicatorImpl::create_from_environment();
    *comm = new chorus_comm{std::move(impl)};
  });
}

chorus_status_t chorus_finalize(chorus_comm_t* comm) {
  return guard([&] {
    if (comm == nullptr || *comm == nullptr) {
      chorus::fail(chorus::Status::invalid_argument, "chorus_finalize: null communicator");
    }
    std::unique_ptr<chorus_comm> owned(*comm);
    *comm = nullptr;
    owned->impl->finalize();
  });
}

chorus_status_t chorus_comm_split(chorus_comm_t comm, int color, int key, chorus_comm_t* newcomm) {
  return guard([&] {
    if (newcomm == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_comm_split: null output pointer");
    *newcomm = nullptr;
    auto child = impl_of(comm).split(color, key);
    if (child) *newcomm = new chorus_comm{std::move(child)};
  });
}

chorus_status_t chorus_comm_dup(chorus_comm_t comm, chorus_comm_t* newcomm) {
  return guard([&] {
    if (newcomm == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_comm_dup: null output pointer");
    *newcomm = nullptr;
    auto& impl = impl_of(comm);
    *newcomm = new chorus_comm{impl.split(0, impl.rank())};
  });
}

chorus_status_t chorus_comm_create_group(chorus_comm_t comm, const int* members, size_t count, int tag,
                                         chorus_comm_t* newcomm) {
  return guard([&] {
    if (newcomm == nullptr) {
      chorus::fail(chorus::Status::invalid_argument, "chorus_comm_create_group: null output pointer");
    }
    *newcomm = nullptr;
    if (members == nullptr && count != 0) {
      chorus::fail(chorus::Status::invalid_argument, "chorus_comm_create_group: null members with count ", count);
    }
    const std::span<const int> listed(members, members == nullptr ? 0 : count);
    *newcomm = new chorus_comm{impl_of(comm).create_group(listed, tag)};
  });
}

chorus_status_t chorus_comm_rank(chorus_comm_t comm, int* rank) {
  return guard([&] {
    if (rank == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_comm_rank: null output pointer");
    *rank = impl_of(comm).rank();
  });
}

chorus_status_t chorus_comm_size(chorus_comm_t comm, int* size) {
  return guard([&] {
    if (size == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_comm_size: null output pointer");
    *size = impl_of(comm).size();
  });
}

chorus_status_t chorus_allreduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                 chorus_datatype_t dtype, chorus_op_t op) {
  return run(comm, chorus::Collective::allreduce, in_place(sendbuf) ? recvbuf : sendbuf, recvbuf, count, dtype, op, 0);
}

chorus_status_t chorus_broadcast(chorus_comm_t comm, void* buf, size_t count, chorus_datatype_t dtype, int root) {
  return run(comm, chorus::Collective::broadcast, buf, buf, count, dtype, CHORUS_SUM, root);
}

chorus_status_t chorus_barrier(chorus_comm_t comm) {
  return run(comm, chorus::Collective::barrier, nullptr, nullptr, 0, CHORUS_UINT8, CHORUS_SUM, 0);
}

chorus_status_t chorus_reduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                              chorus_datatype_t dtype, chorus_op_t op, int root) {
  return run(comm, chorus::Collective::reduce, in_place(sendbuf) ? recvbuf : sendbuf, recvbuf, count, dtype, op, root);
}

chorus_status_t chorus_allgather(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                 chorus_datatype_t dtype) {
  return guard([&] {
    auto& impl = impl_of(comm);
    const void* send = sendbuf;
    if (in_place(sendbuf)) send = static_cast<const uint8_t*>(recvbuf) + block_offset(impl, count, dtype);
    impl.run(chorus::Collective::allgather, {send, recvbuf, count, to_dtype(dtype), chorus::ReduceOp::sum, 0});
  });
}

chorus_status_t chorus_reduce_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                      chorus_datatype_t dtype, chorus_op_t op) {
  return guard([&] {
    auto& impl = impl_of(comm);
    if (!in_place(sendbuf)) {
      impl.run(chorus::Collective::reduce_scatter, {sendbuf, recvbuf, count, to_dtype(dtype), to_op(op), 0});
      return;
    }
    // In place (as MPI_Reduce_scatter_block): recvbuf holds every block on
    // input and this rank's reduced block at its start on output.
    auto* own_block = static_cast<uint8_t*>(recvbuf) + block_offset(impl, count, dtype);
    impl.run(chorus::Collective::reduce_scatter, {recvbuf, own_block, count, to_dtype(dtype), to_op(op), 0});
    if (own_block != recvbuf) std::memmove(recvbuf, own_block, count * chorus::datatype_size(to_dtype(dtype)));
  });
}

chorus_status_t chorus_alltoall(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                chorus_datatype_t dtype) {
  return run(comm, chorus::Collective::alltoall, in_place(sendbuf) ? recvbuf : sendbuf, recvbuf, count, dtype,
             CHORUS_SUM, 0);
}

// --- gather .. exscan ------------------------------------------------------------

chorus_status_t chorus_gather(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                              chorus_datatype_t dtype, int root) {
  return guard([&] {
    auto& impl = impl_of(comm);
    impl.run(chorus::Collective::gather, gather_call(impl, "chorus_gather", sendbuf, recvbuf, count, dtype, root));
  });
}

chorus_status_t chorus_gatherv(chorus_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                               const size_t* recvcounts, const size_t* displs, chorus_datatype_t dtype, int root) {
  return guard([&] {
    auto& impl = impl_of(comm);
    impl.run(chorus::Collective::gatherv,
             chorus::BlockArgs(gatherv_call(impl, "chorus_gatherv", sendbuf, sendcount, recvbuf, recvcounts, displs,
                                            dtype, root))
                 .args());
  });
}

chorus_status_t chorus_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_datatype_t dtype, int root) {
  return guard([&] {
    auto& impl = impl_of(comm);
    impl.run(chorus::Collective::scatter, scatter_call(impl, "chorus_scatter", sendbuf, recvbuf, count, dtype, root));
  });
}

chorus_status_t chorus_scatterv(chorus_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                const size_t* displs, void* recvbuf, size_t recvcount, chorus_datatype_t dtype,
                                int root) {
  return guard([&] {
    auto& impl = impl_of(comm);
    impl.run(chorus::Collective::scatterv,
             chorus::BlockArgs(scatterv_call(impl, "chorus_scatterv", sendbuf, sendcounts, displs, recvbuf, recvcount,
                                             dtype, root))
                 .args());
  });
}

chorus_status_t chorus_allgatherv(chorus_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                  const size_t* recvcounts, const size_t* displs, chorus_datatype_t dtype) {
  return guard([&] {
    auto& impl = impl_of(comm);
    impl.run(chorus::Collective::allgatherv,
             chorus::BlockArgs(allgatherv_call(impl, sendbuf, sendcount, recvbuf, recvcounts, displs, dtype)).args());
  });
}

chorus_status_t chorus_alltoallv(chorus_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                 const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                 const size_t* rdispls, chorus_datatype_t dtype) {
  return guard([&] {
    auto& impl = impl_of(comm);
    impl.run(chorus::Collective::alltoallv,
             chorus::BlockArgs(alltoallv_call(impl, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype))
                 .args());
  });
}

chorus_status_t chorus_scan(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                            chorus_datatype_t dtype, chorus_op_t op) {
  return run(comm, chorus::Collective::scan, in_place(sendbuf) ? recvbuf : sendbuf, recvbuf, count, dtype, op, 0);
}

chorus_status_t chorus_exscan(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                              chorus_datatype_t dtype, chorus_op_t op) {
  return run(comm, chorus::Collective::exscan, in_place(sendbuf) ? recvbuf : sendbuf, recvbuf, count, dtype, op, 0);
}

// --- end gather .. exscan --------------------------------------------------------

chorus_status_t chorus_send(chorus_comm_t comm, const void* buf, size_t bytes, int peer, int tag) {
  return guard([&] { impl_of(comm).send(buf, bytes, peer, tag); });
}

chorus_status_t chorus_recv(chorus_comm_t comm, void* buf, size_t bytes, int peer, int tag) {
  return guard([&] {
    if (peer < 0) chorus::fail(chorus::Status::invalid_argument, "chorus_recv: peer ", peer, " is not a rank");
    chorus::check_user_tag("chorus_recv", tag, false);  // the C API's blocking receive has no wildcard
    impl_of(comm).recv(buf, bytes, peer, tag);
  });
}

chorus_status_t chorus_comm_local_rank(chorus_comm_t comm, int* local_rank) {
  return guard([&] {
    if (local_rank == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_comm_local_rank: null output pointer");
    *local_rank = impl_of(comm).local_rank();
  });
}

chorus_status_t chorus_comm_local_size(chorus_comm_t comm, int* local_size) {
  return guard([&] {
    if (local_size == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_comm_local_size: null output pointer");
    *local_size = impl_of(comm).local_size();
  });
}

chorus_status_t chorus_comm_transport_name(chorus_comm_t comm, char* name, size_t capacity, size_t* length) {
  return guard([&] {
    const std::string transport = impl_of(comm).transport_name();
    if (length != nullptr) *length = transport.size();
    if (name == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_comm_transport_name: null name buffer");
    if (transport.size() >= capacity) {
      if (capacity > 0) name[0] = '\0';
      chorus::fail(chorus::Status::truncated, "chorus_comm_transport_name: \"", transport, "\" needs ",
                   transport.size() + 1, " bytes, the buffer has ", capacity);
    }
    std::memcpy(name, transport.c_str(), transport.size() + 1);
  });
}

chorus_status_t chorus_comm_host(chorus_comm_t comm, int* host) {
  return guard([&] {
    if (host == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_comm_host: null output pointer");
    *host = impl_of(comm).host();
  });
}

chorus_status_t chorus_comm_traffic(chorus_comm_t comm, chorus_traffic_t* traffic) {
  return guard([&] {
    if (traffic == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_comm_traffic: null output pointer");
    const chorus::Traffic counted = impl_of(comm).traffic();
    *traffic = {counted.bytes_out_this_host, counted.bytes_in_this_host, counted.bytes_out_other_hosts,
                counted.bytes_in_other_hosts};
  });
}

const char* chorus_version(int* major, int* minor, int* patch) {
  if (major != nullptr) *major = CHORUS_VERSION_MAJOR;
  if (minor != nullptr) *minor = CHORUS_VERSION_MINOR;
  if (patch != nullptr) *patch = CHORUS_VERSION_PATCH;
  return CHORUS_VERSION_STRING;
}

const char* chorus_last_error(void) { return g_last_error.c_str(); }

const char* chorus_status_string(chorus_status_t status) {
  return chorus::to_string(static_cast<chorus::Status>(status)).data();
}

}  // extern "C"
