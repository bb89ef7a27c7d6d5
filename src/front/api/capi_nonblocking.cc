// The C API's non-blocking calls: each starts a chorus::Request and hands
// it out as a chorus_request_t; wait, test and their any/all variants.
#include "api/capi_internal.hpp"
#include "api/communicator_impl.hpp"
#include "api/wait_any_of.hpp"
#include "common/error.hpp"

#include <chorus/chorus.h>

#include <cstring>
#include <vector>

using namespace chorus::capi;

namespace {

chorus_request_t* checked_output(chorus_request_t* request, const char* what) {
  if (request == nullptr) chorus::fail(chorus::Status::invalid_argument, what, ": null request pointer");
  *request = nullptr;
  return request;
}

// Hands a started operation to the caller as *request.
void hand_out(chorus_request_t* request, chorus::RequestRef state,
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

// Frees a request that has been reported complete (its C++ request is empty)
// and sets the handle to NULL; runs its completion step on success.
void release(chorus_request_t& handle, chorus_received_t* received, bool succeeded) {
  std::unique_ptr<chorus_request> owned(handle);
  handle = nullptr;
  fill_received(received, owned->request.received());
  if (succeeded && owned->after_completion) owned->after_completion();
}

// Waits for one request; NULL is inactive.
void wait_one(chorus_request_t& handle, chorus_received_t* received) {
  if (handle == nullptr) return fill_received(received, chorus::Received{});
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
    fill_received(received, chorus::Received{});
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

chorus_status_t chorus_igather(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_datatype_t dtype, int root, chorus_request_t* request) {
  return start_request("chorus_igather", request, [&] {
    auto& impl = impl_of(comm);
    return impl.start(chorus::Collective::gather, gather_call(impl, "chorus_igather", sendbuf, recvbuf, count, dtype, root));
  });
}

chorus_status_t chorus_igatherv(chorus_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                const size_t* recvcounts, const size_t* displs, chorus_datatype_t dtype, int root,
                                chorus_request_t* request) {
  return start_request("chorus_igatherv", request, [&] {
    auto& impl = impl_of(comm);
    return impl.start_block(chorus::Collective::gatherv, gatherv_call(impl, "chorus_igatherv", sendbuf, sendcount,
                                                                      recvbuf, recvcounts, displs, dtype, root));
  });
}

chorus_status_t chorus_iscatter(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                                chorus_datatype_t dtype, int root, chorus_request_t* request) {
  return start_request("chorus_iscatter", request, [&] {
    auto& impl = impl_of(comm);
    return impl.start(chorus::Collective::scatter,
                      scatter_call(impl, "chorus_iscatter", sendbuf, recvbuf, count, dtype, root));
  });
}

chorus_status_t chorus_iscatterv(chorus_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                 const size_t* displs, void* recvbuf, size_t recvcount, chorus_datatype_t dtype,
                                 int root, chorus_request_t* request) {
  return start_request("chorus_iscatterv", request, [&] {
    auto& impl = impl_of(comm);
    return impl.start_block(chorus::Collective::scatterv, scatterv_call(impl, "chorus_iscatterv", sendbuf, sendcounts,
                                                                        displs, recvbuf, recvcount, dtype, root));
  });
}

chorus_status_t chorus_iallgatherv(chorus_comm_t comm, const void* sendbuf, size_t sendcount, void* recvbuf,
                                   const size_t* recvcounts, const size_t* displs, chorus_datatype_t dtype,
                                   chorus_request_t* request) {
  return start_request("chorus_iallgatherv", request, [&] {
    auto& impl = impl_of(comm);
    return impl.start_block(chorus::Collective::allgatherv,
                            allgatherv_call(impl, sendbuf, sendcount, recvbuf, recvcounts, displs, dtype));
  });
}

chorus_status_t chorus_ialltoallv(chorus_comm_t comm, const void* sendbuf, const size_t* sendcounts,
                                  const size_t* sdispls, void* recvbuf, const size_t* recvcounts,
                                  const size_t* rdispls, chorus_datatype_t dtype, chorus_request_t* request) {
  return start_request("chorus_ialltoallv", request, [&] {
    auto& impl = impl_of(comm);
    return impl.start_block(chorus::Collective::alltoallv,
                            alltoallv_call(impl, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, dtype));
  });
}

chorus_status_t chorus_iscan(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                             chorus_datatype_t dtype, chorus_op_t op, chorus_request_t* request) {
  return start_collective("chorus_iscan", comm, chorus::Collective::scan, in_place(sendbuf) ? recvbuf : sendbuf,
                          recvbuf, count, dtype, op, 0, request);
}

chorus_status_t chorus_iexscan(chorus_comm_t comm, const void* sendbuf, void* recvbuf, size_t count,
                               chorus_datatype_t dtype, chorus_op_t op, chorus_request_t* request) {
  return start_collective("chorus_iexscan", comm, chorus::Collective::exscan, in_place(sendbuf) ? recvbuf : sendbuf,
                          recvbuf, count, dtype, op, 0, request);
}

chorus_status_t chorus_isend(chorus_comm_t comm, const void* buf, size_t bytes, int peer, int tag,
                             chorus_request_t* request) {
  return start_request("chorus_isend", request, [&] { return impl_of(comm).start_send(buf, bytes, peer, tag); });
}

chorus_status_t chorus_irecv(chorus_comm_t comm, void* buf, size_t bytes, int peer, int tag,
                             chorus_request_t* request) {
  return start_request("chorus_irecv", request, [&] { return impl_of(comm).start_recv(buf, bytes, peer, tag); });
}

chorus_status_t chorus_issend(chorus_comm_t comm, const void* buf, size_t bytes, int peer, int tag,
                              chorus_request_t* request) {
  return start_request("chorus_issend", request,
                       [&] { return impl_of(comm).start_send(buf, bytes, peer, tag, /*synchronous=*/true); });
}

chorus_status_t chorus_cancel(chorus_request_t* request, int* cancelled) {
  return guard([&] {
    if (request == nullptr || cancelled == nullptr) {
      chorus::fail(chorus::Status::invalid_argument, "chorus_cancel: null request or cancelled pointer");
    }
    *cancelled = 0;
    if (*request == nullptr || !(*request)->request.cancel()) return;
    std::unique_ptr<chorus_request> owned(*request);  // withdrawn: nothing left to wait for
    *request = nullptr;
    *cancelled = 1;
  });
}

// The C message as the C++ one, and back: a receive that started empties it.
chorus_status_t chorus_imrecv(chorus_message_t* message, void* buf, size_t bytes, chorus_request_t* request) {
  return start_request("chorus_imrecv", request, [&] {
    if (message == nullptr) chorus::fail(chorus::Status::invalid_argument, "chorus_imrecv: null message pointer");
    chorus::Message taken{{message->info.source, message->info.tag, message->info.bytes}, message->id};
    chorus::RequestRef started = impl_of(message->comm).start_matched_recv(taken, buf, bytes);
    message->id = 0;
    return started;
  });
}

chorus_status_t chorus_mrecv(chorus_message_t* message, void* buf, size_t bytes, chorus_received_t* received) {
  chorus_request_t request = nullptr;
  if (const chorus_status_t started = chorus_imrecv(message, buf, bytes, &request); started != CHORUS_SUCCESS) {
    fill_received(received, chorus::Received{});
    return started;
  }
  return guard([&] { wait_one(request, received); });
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
    fill_received(received, chorus::Received{});
    const auto done = chorus::wait_any_of(
        count, [&](size_t i) { return requests[i] == nullptr ? nullptr : &requests[i]->request; },
        [&](size_t i) {
          *index = i;
          release(requests[i], received, false);
        });
    if (!done) return;
    *index = *done;
    release(requests[*done], received, true);
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
    fill_received(received, chorus::Received{});
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

}  // extern "C"
