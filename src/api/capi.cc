// The C API: thin wrappers that turn chorus::Error into a status code plus a
// thread-local message (chorus_last_error).
#include "api/block_collectives.hpp"
#include "api/communicator_impl.hpp"
#include "common/error.hpp"

#include <chorus/chorus.h>

#include <cstring>
#include <functional>
#include <vector>

struct chorus_comm {
  std::unique_ptr<chorus::CommunicatorImpl> impl;
};

// A C request: the C++ Request plus what must happen after it completes
// (an in-place ireduce_scatter moves its block to the buffer's start).
struct chorus_request {
  chorus::Request request;
  std::function<void()> after_completion;

  static chorus::Request wrap(std::shared_ptr<chorus::RequestState> state) { return chorus::Request(std::move(state)); }
};

namespace {

thread_local std::string g_last_error;

template <class Body>
chorus_status_t guard(Body&& body) {
  try {
    body();
    return CHORUS_SUCCESS;
  } catch (const chorus::Error& e) {
    g_last_error = e.what();
    return static_cast<chorus_status_t>(e.status());
  } catch (const std::bad_alloc&) {
    g_last_error = "out of memory";
    return CHORUS_ERR_INTERNAL;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return CHORUS_ERR_INTERNAL;
  }
}

chorus::CommunicatorImpl& impl_of(chorus_comm_t comm) {
  if (comm == nullptr || !comm->impl) chorus::fail(chorus::Status::invalid_argument, "null chorus_comm_t");
  return *comm->impl;
}

chorus::DataType to_dtype(chorus_datatype_t dtype) { return static_cast<chorus::DataType>(dtype); }
chorus::ReduceOp to_op(chorus_op_t op) { return static_cast<chorus::ReduceOp>(op); }

bool in_place(const void* send) { return send == CHORUS_IN_PLACE; }

// Byte offset of block `rank` in a buffer of per-rank blocks of `count` elements.
size_t block_offset(chorus::CommunicatorImpl& comm, size_t count, chorus_datatype_t dtype) {
  return static_cast<size_t>(comm.rank()) * count * chorus::datatype_size(to_dtype(dtype));
}

chorus_status_t run(chorus_comm_t comm, chorus::Collective op, const void* send, void* recv, size_t count,
                    chorus_datatype_t dtype, chorus_op_t redop, int root) {
  return guard([&] { impl_of(comm).run(op, {send, recv, count, to_dtype(dtype), to_op(redop), root}); });
}

// gather .. exscan: per-rank arrays and CHORUS_IN_PLACE.

// CHORUS_IN_PLACE in a rooted collective: only the root has its own block
// in the other buffer.
bool in_place_at_root(chorus::CommunicatorImpl& comm, const void* buffer, int root, const char* function) {
  if (!in_place(buffer)) return false;
  if (comm.rank() != root) {
    chorus::fail(chorus::Status::invalid_argument, function, ": CHORUS_IN_PLACE on rank ", comm.rank(),
                 ", which is not the root (", root, ")");
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
    const void* send = in_place_at_root(impl, sendbuf, root, "chorus_gather")
                           ? element_at(recvbuf, static_cast<size_t>(root) * count, dtype)
                           : sendbuf;
    impl.run(chorus::Collective::gather, {send, recvbuf, count, to_dtype(dtype), chorus::ReduceOp::sum, root});
  });
}

chorus_status_t chorus_gatherv(chorus_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                               const size_t* recvcounts, const size_t* displs, chorus_datatype_t dtype, int root) {
  return guard([&] {
    auto& impl = impl_of(comm);
    const void* send = in_place_at_root(impl, sendbuf, root, "chorus_gatherv")
                           ? element_at(recvbuf, own_displacement(impl, recvcounts, displs), dtype)
                           : sendbuf;
    chorus::coll::Args args{send, recvbuf, sendcount, to_dtype(dtype), chorus::ReduceOp::sum, root};
    args.recv_counts = per_rank(impl, recvcounts);
    args.recv_displs = per_rank(impl, displs);
    impl.run(chorus::Collective::gatherv, chorus::BlockArgs(args).args());
  });
}

chorus_status_t chorus_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_datatype_t dtype, int root) {
  return guard([&] {
    auto& impl = impl_of(comm);
    void* recv = in_place_at_root(impl, recvbuf, root, "chorus_scatter")
                     ? const_cast<uint8_t*>(element_at(sendbuf, static_cast<size_t>(root) * count, dtype))
                     : recvbuf;
    impl.run(chorus::Collective::scatter, {sendbuf, recv, count, to_dtype(dtype), chorus::ReduceOp::sum, root});
  });
}

chorus_status_t chorus_scatterv(chorus_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                const size_t* displs, void* recvbuf, size_t recvcount, chorus_datatype_t dtype,
                                int root) {
  return guard([&] {
    auto& impl = impl_of(comm);
    void* recv = in_place_at_root(impl, recvbuf, root, "chorus_scatterv")
                     ? const_cast<uint8_t*>(element_at(sendbuf, own_displacement(impl, sendcounts, displs), dtype))
                     : recvbuf;
    chorus::coll::Args args{sendbuf, recv, recvcount, to_dtype(dtype), chorus::ReduceOp::sum, root};
    args.send_counts = per_rank(impl, sendcounts);
    args.send_displs = per_rank(impl, displs);
    impl.run(chorus::Collective::scatterv, chorus::BlockArgs(args).args());
  });
}

chorus_status_t chorus_allgatherv(chorus_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                  const size_t* recvcounts, const size_t* displs, chorus_datatype_t dtype) {
  return guard([&] {
    auto& impl = impl_of(comm);
    const void* send =
        in_place(sendbuf) ? element_at(recvbuf, own_displacement(impl, recvcounts, displs), dtype) : sendbuf;
    chorus::coll::Args args{send, recvbuf, sendcount, to_dtype(dtype), chorus::ReduceOp::sum, 0};
    args.recv_counts = per_rank(impl, recvcounts);
    args.recv_displs = per_rank(impl, displs);
    impl.run(chorus::Collective::allgatherv, chorus::BlockArgs(args).args());
  });
}

chorus_status_t chorus_alltoallv(chorus_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                 const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                 const size_t* rdispls, chorus_datatype_t dtype) {
  return guard([&] {
    auto& impl = impl_of(comm);
    chorus::coll::Args args{in_place(sendbuf) ? recvbuf : sendbuf, recvbuf, 0, to_dtype(dtype),
                            chorus::ReduceOp::sum, 0};
    args.send_counts = per_rank(impl, sendcounts);
    args.send_displs = per_rank(impl, sdispls);
    args.recv_counts = per_rank(impl, recvcounts);
    args.recv_displs = per_rank(impl, rdispls);
    impl.run(chorus::Collective::alltoallv, chorus::BlockArgs(args).args());
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
    if (tag < 0) chorus::fail(chorus::Status::invalid_argument, "chorus_recv: tag ", tag, " outside 0..2147483647");
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

const char* chorus_version(int* major, int* minor, int* patch) {
  if (major != nullptr) *major = CHORUS_VERSION_MAJOR;
  if (minor != nullptr) *minor = CHORUS_VERSION_MINOR;
  if (patch != nullptr) *patch = CHORUS_VERSION_PATCH;
  return CHORUS_VERSION_STRING;
}

// ---- Non-blocking operations -------------------------------------------------

}  // extern "C"

namespace {

chorus_request_t* checked_output(chorus_request_t* request, const char* what) {
  if (request == nullptr) chorus::fail(chorus::Status::invalid_argument, what, ": null request pointer");
  *request = nullptr;
  return request;
}

// Hands a started operation to the caller as *request.
void hand_out(chorus_request_t* request, std::shared_ptr<chorus::RequestState> state,
              std::function<void()> after_completion = {}) {
  auto handle = std::make_unique<chorus_request>();
  handle->request = chorus_request::wrap(std::move(state));
  handle->after_completion = std::move(after_completion);
  *request = handle.release();
}

// Starts an operation through `start` (returns its RequestState) into *request.
template <class Start>
chorus_status_t start_request(const char* what, chorus_request_t* request, Start&& start) {
  return guard([&] {
    checked_output(request, what);
    hand_out(request, start());
  });
}

chorus_status_t start_collective(const char* what, chorus_comm_t comm, chorus::Collective op, const void* send,
                                 void* recv, size_t count, chorus_datatype_t dtype, chorus_op_t redop, int root,
                                 chorus_request_t* request) {
  return start_request(what, request, [&] {
    return impl_of(comm).start(op, {send, recv, count, to_dtype(dtype), to_op(redop), root});
  });
}

void fill(chorus_received_t* out, const chorus::Received& got) {
  if (out != nullptr) *out = chorus_received_t{got.source, got.tag, got.bytes};
}

// Frees a request that has been reported complete (its C++ request is empty)
// and sets the handle to NULL; runs its completion step on success.
void release(chorus_request_t& handle, chorus_received_t* received, bool succeeded) {
  std::unique_ptr<chorus_request> owned(handle);
  handle = nullptr;
  fill(received, owned->request.received());
  if (succeeded && owned->after_completion) owned->after_completion();
}

// Waits for one request; NULL is inactive.
void wait_one(chorus_request_t& handle, chorus_received_t* received) {
  if (handle == nullptr) return fill(received, chorus::Received{});
  try {
    handle->request.wait();
  } catch (...) {
    release(handle, received, false);
    throw;
  }
  release(handle, received, true);
}

// Tests one request: true once it completed (handle then NULL).
bool test_one(chorus_request_t& handle, chorus_received_t* received) {
  if (handle == nullptr) {
    fill(received, chorus::Received{});
    return true;
  }
  bool done = false;
  try {
    done = handle->request.test();
  } catch (...) {
    release(handle, received, false);
    throw;
  }
  if (done) release(handle, received, true);
  return done;
}

void check_array(size_t count, const chorus_request_t* requests, const char* what) {
  if (count > 0 && requests == nullptr) chorus::fail(chorus::Status::invalid_argument, what, ": null request array");
}

}  // namespace

extern "C" {

chorus_status_t chorus_iallreduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                  chorus_datatype_t dtype, chorus_op_t op, chorus_request_t* request) {
  return start_collective("chorus_iallreduce", comm, chorus::Collective::allreduce,
                          in_place(sendbuf) ? recvbuf : sendbuf, recvbuf, count, dtype, op, 0, request);
}

chorus_status_t chorus_ibroadcast(chorus_comm_t comm, void* buf, size_t count, chorus_datatype_t dtype, int root,
                                  chorus_request_t* request) {
  return start_collective("chorus_ibroadcast", comm, chorus::Collective::broadcast, buf, buf, count, dtype,
                          CHORUS_SUM, root, request);
}

chorus_status_t chorus_ibarrier(chorus_comm_t comm, chorus_request_t* request) {
  return start_collective("chorus_ibarrier", comm, chorus::Collective::barrier, nullptr, nullptr, 0, CHORUS_UINT8,
                          CHORUS_SUM, 0, request);
}

chorus_status_t chorus_ireduce(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_datatype_t dtype, chorus_op_t op, int root, chorus_request_t* request) {
  return start_collective("chorus_ireduce", comm, chorus::Collective::reduce, in_place(sendbuf) ? recvbuf : sendbuf,
                          recvbuf, count, dtype, op, root, request);
}

chorus_status_t chorus_iallgather(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                  chorus_datatype_t dtype, chorus_request_t* request) {
  return start_request("chorus_iallgather", request, [&] {
    auto& impl = impl_of(comm);
    const void* send = sendbuf;
    if (in_place(sendbuf)) send = static_cast<const uint8_t*>(recvbuf) + block_offset(impl, count, dtype);
    return impl.start(chorus::Collective::allgather, {send, recvbuf, count, to_dtype(dtype), chorus::ReduceOp::sum, 0});
  });
}

chorus_status_t chorus_ireduce_scatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                       chorus_datatype_t dtype, chorus_op_t op, chorus_request_t* request) {
  if (!in_place(sendbuf)) {
    return start_collective("chorus_ireduce_scatter", comm, chorus::Collective::reduce_scatter, sendbuf, recvbuf,
                            count, dtype, op, 0, request);
  }
  // In place: as chorus_reduce_scatter, the reduced block moves to the start
  // of recvbuf once the operation has completed.
  return guard([&] {
    checked_output(request, "chorus_ireduce_scatter");
    auto& impl = impl_of(comm);
    auto* own_block = static_cast<uint8_t*>(recvbuf) + block_offset(impl, count, dtype);
    const size_t block_bytes = count * chorus::datatype_size(to_dtype(dtype));
    std::function<void()> move_block;
    if (own_block != recvbuf) move_block = [=] { std::memmove(recvbuf, own_block, block_bytes); };
    hand_out(request, impl.start(chorus::Collective::reduce_scatter, {recvbuf, own_block, count, to_dtype(dtype), to_op(op), 0}),
             std::move(move_block));
  });
}

chorus_status_t chorus_ialltoall(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                 chorus_datatype_t dtype, chorus_request_t* request) {
  return start_collective("chorus_ialltoall", comm, chorus::Collective::alltoall,
                          in_place(sendbuf) ? recvbuf : sendbuf, recvbuf, count, dtype, CHORUS_SUM, 0, request);
}

chorus_status_t chorus_isend(chorus_comm_t comm, const void* buf, size_t bytes, int peer, int tag,
                             chorus_request_t* request) {
  return start_request("chorus_isend", request, [&] { return impl_of(comm).start_send(buf, bytes, peer, tag); });
}

chorus_status_t chorus_irecv(chorus_comm_t comm, void* buf, size_t bytes, int peer, int tag,
                             chorus_request_t* request) {
  return start_request("chorus_irecv", request, [&] { return impl_of(comm).start_recv(buf, bytes, peer, tag); });
}

chorus_status_t chorus_wait(chorus_request_t* request, chorus_received_t* received) {
  return guard([&] {
    if (request == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_wait: null request pointer");
    wait_one(*request, received);
  });
}

chorus_status_t chorus_test(chorus_request_t* request, int* flag, chorus_received_t* received) {
  return guard([&] {
    if (request == nullptr || flag == nullptr) {
      chorus::fail(chorus::Status::invalid_argument, "chorus_test: null request or flag pointer");
    }
    *flag = 0;
    *flag = test_one(*request, received) ? 1 : 0;
  });
}

chorus_status_t chorus_waitall(size_t count, chorus_request_t requests[], chorus_received_t received[]) {
  return guard([&] {
    check_array(count, requests, "chorus_waitall");
    std::optional<chorus::Error> first;
    for (size_t i = 0; i < count; ++i) {
      try {
        wait_one(requests[i], received == nullptr ? nullptr : &received[i]);
      } catch (const chorus::Error& e) {
        if (!first) first = e;
      }
    }
    if (first) throw *first;
  });
}

chorus_status_t chorus_waitany(size_t count, chorus_request_t requests[], size_t* index,
                               chorus_received_t* received) {
  return guard([&] {
    check_array(count, requests, "chorus_waitany");
    if (index == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_waitany: null index pointer");
    *index = count;
    fill(received, chorus::Received{});
    // The C++ wait_any over the active requests, moved out and back.
    std::vector<size_t> positions;
    std::vector<chorus::Request> active;
    for (size_t i = 0; i < count; ++i) {
      if (requests[i] == nullptr) continue;
      positions.push_back(i);
      active.push_back(std::move(requests[i]->request));
    }
    if (active.empty()) return;
    auto put_back = [&] {
      for (size_t k = 0; k < active.size(); ++k) requests[positions[k]]->request = std::move(active[k]);
    };
    size_t done = active.size();
    try {
      done = chorus::wait_any(active);
    } catch (...) {
      // The request that failed is the one wait_any emptied.
      for (size_t k = 0; k < active.size(); ++k) {
        if (!active[k].active()) done = k;
      }
      put_back();
      if (done < active.size()) {
        *index = positions[done];
        release(requests[positions[done]], received, false);
      }
      throw;
    }
    put_back();
    *index = positions[done];
    release(requests[positions[done]], received, true);
  });
}

chorus_status_t chorus_testall(size_t count, chorus_request_t requests[], int* flag, chorus_received_t received[]) {
  return guard([&] {
    check_array(count, requests, "chorus_testall");
    if (flag == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_testall: null flag pointer");
    *flag = 0;
    std::optional<chorus::Error> first;
    bool all = true;
    for (size_t i = 0; i < count; ++i) {
      try {
        all = test_one(requests[i], received == nullptr ? nullptr : &received[i]) && all;
      } catch (const chorus::Error& e) {
        if (!first) first = e;
      }
    }
    if (first) throw *first;
    *flag = all ? 1 : 0;
  });
}

chorus_status_t chorus_testany(size_t count, chorus_request_t requests[], size_t* index, int* flag,
                               chorus_received_t* received) {
  return guard([&] {
    check_array(count, requests, "chorus_testany");
    if (index == nullptr || flag == nullptr) {
      chorus::fail(chorus::Status::invalid_argument, "chorus_testany: null index or flag pointer");
    }
    *index = count;
    *flag = 1;  // stays 1 when no request is active
    fill(received, chorus::Received{});
    for (size_t i = 0; i < count; ++i) {
      if (requests[i] == nullptr) continue;
      *flag = 0;
      *index = i;  // if its test throws, the error belongs to request i
      if (test_one(requests[i], received)) {
        *flag = 1;
        return;
      }
      *index = count;
    }
  });
}

chorus_status_t chorus_request_free(chorus_request_t* request) {
  return guard([&] {
    if (request == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_request_free: null request pointer");
    if (*request == nullptr) return;
    if ((*request)->after_completion && (*request)->request.active()) {
      chorus::fail(chorus::Status::invalid_argument,
                   "chorus_request_free: an in-place chorus_ireduce_scatter moves its result when it is waited "
                   "for; wait for it instead of freeing it");
    }
    std::unique_ptr<chorus_request> owned(*request);  // destroying the C++ Request detaches the operation
    *request = nullptr;
  });
}
// ---- end of non-blocking operations ----

const char* chorus_last_error(void) { return g_last_error.c_str(); }

const char* chorus_status_string(chorus_status_t status) {
  return chorus::to_string(static_cast<chorus::Status>(status)).data();
}

}  // extern "C"
