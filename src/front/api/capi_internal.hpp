// What the C API's files share (capi.cc, capi_nonblocking.cc): the handles
// behind chorus_comm_t and chorus_request_t, and the wrapper that turns
// chorus::Error into a status code plus a thread-local message.
#pragma once

#include "api/communicator_impl.hpp"
#include "common/error.hpp"

#include <chorus/chorus.h>

#include <functional>
#include <memory>
#include <string>

struct chorus_comm {
  std::unique_ptr<chorus::CommunicatorImpl> impl;
};

// A C request: the C++ Request plus what must happen after it completes
// (an in-place ireduce_scatter moves its block to the buffer's start).
struct chorus_request {
  chorus::Request request;
  std::function<void()> after_completion;

  static chorus::Request wrap(chorus::RequestRef state) { return chorus::Request(state.release()); }
};

namespace chorus::capi {

inline thread_local std::string g_last_error;

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

inline chorus::CommunicatorImpl& impl_of(chorus_comm_t comm) {
  if (comm == nullptr || !comm->impl) chorus::fail(chorus::Status::invalid_argument, "null chorus_comm_t");
  return *comm->impl;
}

inline chorus::DataType to_dtype(chorus_datatype_t dtype) { return static_cast<chorus::DataType>(dtype); }
inline chorus::ReduceOp to_op(chorus_op_t op) { return static_cast<chorus::ReduceOp>(op); }

inline bool in_place(const void* send) { return send == CHORUS_IN_PLACE; }

// What a receive got, into the caller's chorus_received_t (which may be NULL).
inline void fill_received(chorus_received_t* out, const chorus::Received& got) {
  if (out != nullptr) *out = chorus_received_t{got.source, got.tag, got.bytes};
}

// Byte offset of block `rank` in a buffer of per-rank blocks of `count` elements.
inline size_t block_offset(chorus::CommunicatorImpl& comm, size_t count, chorus_datatype_t dtype) {
  return static_cast<size_t>(comm.rank()) * count * chorus::datatype_size(to_dtype(dtype));
}

inline chorus_status_t run(chorus_comm_t comm, chorus::Collective op, const void* send, void* recv, size_t count,
                           chorus_datatype_t dtype, chorus_op_t redop, int root) {
  return guard([&] { impl_of(comm).run(op, {send, recv, count, to_dtype(dtype), to_op(redop), root}); });
}

// The arguments of chorus_gather .. chorus_alltoallv and of their
// non-blocking forms (capi.cc): CHORUS_IN_PLACE resolved, the per-rank
// arrays as spans over the caller's (`function` names the call in errors).
chorus::coll::Args gather_call(chorus::CommunicatorImpl& impl, const char* function, const void* sendbuf,
                               void* recvbuf, size_t count, chorus_datatype_t dtype, int root);
chorus::coll::Args gatherv_call(chorus::CommunicatorImpl& impl, const char* function, const void* sendbuf,
                                size_t sendcount, void* recvbuf, const size_t* recvcounts, const size_t* displs,
                                chorus_datatype_t dtype, int root);
chorus::coll::Args scatter_call(chorus::CommunicatorImpl& impl, const char* function, const void* sendbuf,
                                void* recvbuf, size_t count, chorus_datatype_t dtype, int root);
chorus::coll::Args scatterv_call(chorus::CommunicatorImpl& impl, const char* function, const void* sendbuf,
                                 const size_t* sendcounts, const size_t* displs, void* recvbuf, size_t recvcount,
                                 chorus_datatype_t dtype, int root);
chorus::coll::Args allgatherv_call(chorus::CommunicatorImpl& impl, const void* sendbuf, size_t sendcount,
                                   void* recvbuf, const size_t* recvcounts, const size_t* displs,
                                   chorus_datatype_t dtype);
chorus::coll::Args alltoallv_call(chorus::CommunicatorImpl& impl, const void* sendbuf, const size_t* sendcounts,
                                  const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                  const size_t* rdispls, chorus_datatype_t dtype);

}  // namespace chorus::capi
