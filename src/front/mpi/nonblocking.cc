// Non-blocking point-to-point (MPI_Isend, MPI_Irecv), MPI_Sendrecv(_replace)
// on top of them, and MPI_Iprobe/MPI_Probe. Derived datatypes travel packed:
// a send packs into the request's staging buffer when it starts, a receive
// lands in one and is unpacked when the request completes.
#include "mpi/requests.hpp"

namespace chorus::mpi {

RequestPtr start_send(const Comm& comm, const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                      SendMode mode) {
  const size_t n = use_count(count, "count");
  const Datatype& type = use_type(datatype, "datatype");
  check_tag(tag, false);
  if (dest == MPI_PROC_NULL) return new_request(comm.handle);
  check_peer(dest, comm, false);
  check_buffer(buf, n, "buf");
  if (mode == SendMode::buffered) return start_buffered_send(comm, buf, n, type, dest, tag);
  const bool synchronous = mode == SendMode::synchronous;
  auto send = [&](const void* data, size_t bytes) {
    return synchronous ? comm.chorus.issend(data, bytes, dest, tag) : comm.chorus.isend(data, bytes, dest, tag);
  };
  if (type.contiguous()) {
    // The user's memory itself (packed_view's answer, without its vector).
    const size_t bytes = packed_bytes(n, type);
    return started_request(comm.handle, false, [&] { return send(buf, bytes); });
  }
  RequestPtr request = new_request(comm.handle);
  PackedView view = packed_view(buf, n, type);
  request->send_staging() = std::move(view.storage);  // moving keeps view.data valid
  request->operation = send(view.data, view.bytes);
  return request;
}

namespace {

// A receive of at most `n` elements of `type` into `buf`, posted by
// post(memory, capacity): into the user's memory for a contiguous type,
// else into a staging buffer that is unpacked when the request completes.
template <class Post>
RequestPtr post_recv(MPI_Comm comm, void* buf, size_t n, const Datatype& type, Post&& post) {
  const size_t capacity = packed_bytes(n, type);
  if (type.contiguous()) return started_request(comm, true, [&] { return post(buf, capacity); });
  RequestPtr request = new_request(comm);
  request->receive = true;
  request->recv_staging().resize(capacity);
  // The staging object, not the request: MPI_Start moves it into a persistent request.
  request->finish() = [staged = &request->staging(), buf, type](const chorus::Received& got) {
    unpack(staged->recv.data(), got.bytes / type.packed_size, type, buf);
  };
  request->operation = post(request->recv_staging().data(), capacity);
  return request;
}

}  // namespace

RequestPtr start_recv(const Comm& comm, void* buf, int count, MPI_Datatype datatype, int source, int tag) {
  const size_t n = use_count(count, "count");
  const Datatype& type = use_type(datatype, "datatype");
  check_tag(tag, true);
  if (source == MPI_PROC_NULL) {
    RequestPtr request = new_request(comm.handle);
    request->receive = true;
    request->from_proc_null = true;
    return request;
  }
  check_peer(source, comm, true);
  check_buffer(buf, n, "buf");
  return post_recv(comm.handle, buf, n, type,
                   [&](void* memory, size_t capacity) { return comm.chorus.irecv(memory, capacity, source, tag); });
}

RequestPtr start_matched_recv(chorus_mpi_message& message, void* buf, int count, MPI_Datatype datatype) {
  const size_t n = use_count(count, "count");
  const Datatype& type = use_type(datatype, "datatype");
  check_buffer(buf, n, "buf");
  Comm c = use_comm(message.comm);
  return post_recv(message.comm, buf, n, type, [&](void* memory, size_t capacity) {
    return c.chorus.imrecv(message.message, memory, capacity);
  });
}

namespace {

// MPI_Send_init / MPI_Recv_init: the call checked as its MPI_Start will
// make it, kept with a copy of the datatype; inactive until started.
RequestPtr new_persistent(bool send, MPI_Comm comm, const void* buf, int count, MPI_Datatype datatype, int peer,
                          int tag, SendMode mode = SendMode::standard) {
  const Comm c = use_comm(comm);
  const size_t n = use_count(count, "count");
  const Datatype& type = use_type(datatype, "datatype");
  check_tag(tag, !send);
  if (peer != MPI_PROC_NULL) check_peer(peer, c, !send);
  check_buffer(buf, n, "buf");
  RequestPtr request = new_request(comm);
  request->receive = !send;
  request->persistent = std::make_unique<PersistentCall>(
      PersistentCall{send, mode, comm, const_cast<void*>(buf), count, type, peer, tag});
  return request;
}

chorus_mpi_request& persistent_request(MPI_Request request, const char* role) {
  if (request == MPI_REQUEST_NULL || request->magic != kRequestMagic) {
    fail(MPI_ERR_REQUEST, role, " is not a valid request (MPI_REQUEST_NULL, freed, or not a request)");
  }
  if (!request->persistent) fail(MPI_ERR_REQUEST, role, " is not a persistent request (MPI_Send_init, MPI_Recv_init)");
  if (request->started) fail(MPI_ERR_REQUEST, role, " is active: MPI_Start again only after it completed");
  return *request;
}

// MPI_Start: the operation made as MPI_Isend/MPI_Irecv make it, moved into
// the persistent request (its handle stays the caller's).
void start_persistent(chorus_mpi_request& request) {
  const PersistentCall& made = *request.persistent;
  const Comm c = use_comm(made.comm);
  MPI_Datatype type = const_cast<MPI_Datatype>(&made.type);
  RequestPtr fresh = made.send ? start_send(c, made.buf, made.count, type, made.peer, made.tag, made.mode)
                               : start_recv(c, made.buf, made.count, type, made.peer, made.tag);
  request.operation = std::move(fresh->operation);
  request.from_proc_null = fresh->from_proc_null;
  request.extra = std::move(fresh->extra);
  request.cancelled = false;
  request.started = true;
}

// Waits for a send and a receive that were started together; the receive's
// status is reported. Both are waited for even if one fails.
void wait_pair(chorus_mpi_request& send, chorus_mpi_request& recv, MPI_Status* status) {
  try {
    wait_unpublished(recv, status);
  } catch (...) {
    try {
      wait_unpublished(send, MPI_STATUS_IGNORE);
    } catch (...) {
      // The receive's error is the one reported.
    }
    throw;
  }
  wait_unpublished(send, MPI_STATUS_IGNORE);
}

}  // namespace

RequestPtr new_persistent_send(MPI_Comm comm, const void* buf, int count, MPI_Datatype datatype, int dest, int tag,
                               SendMode mode) {
  return new_persistent(true, comm, buf, count, datatype, dest, tag, mode);
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
              MPI_Request* request) {
  return call("MPI_Isend", comm, [&] {
    check_request_output(request);
    publish(start_send(use_comm(comm), buf, count, datatype, dest, tag), request);
  });
}

// A ready send is a standard send: MPI-3.1 3.4 allows it (its receive is
// already posted, so it has nothing to wait for that a standard send would).
int MPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return call("MPI_Irsend", comm, [&] {
    check_request_output(request);
    publish(start_send(use_comm(comm), buf, count, datatype, dest, tag), request);
  });
}

int MPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return call("MPI_Send_init", comm, [&] {
    check_request_output(request);
    publish(new_persistent(true, comm, buf, count, datatype, dest, tag), request);
  });
}

int MPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return call("MPI_Rsend_init", comm, [&] {
    check_request_output(request);
    publish(new_persistent(true, comm, buf, count, datatype, dest, tag), request);
  });
}

int MPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                  MPI_Request* request) {
  return call("MPI_Recv_init", comm, [&] {
    check_request_output(request);
    publish(new_persistent(false, comm, buf, count, datatype, source, tag), request);
  });
}

int MPI_Start(MPI_Request* request) {
  MPI_Comm comm = request != nullptr && *request != MPI_REQUEST_NULL && (*request)->magic == kRequestMagic
                      ? (*request)->comm
                      : MPI_COMM_WORLD;
  return call("MPI_Start", comm, [&] {
    if (request == nullptr) fail(MPI_ERR_ARG, "null request pointer");
    start_persistent(persistent_request(*request, "the request"));
  });
}

// Every request is checked before any starts: a refused one starts none.
int MPI_Startall(int count, MPI_Request array_of_requests[]) {
  MPI_Comm comm = count > 0 && array_of_requests != nullptr && array_of_requests[0] != MPI_REQUEST_NULL &&
                          array_of_requests[0]->magic == kRequestMagic
                      ? array_of_requests[0]->comm
                      : MPI_COMM_WORLD;
  return call("MPI_Startall", comm, [&] {
    if (count < 0) fail(MPI_ERR_COUNT, "count ", count, " is negative");
    if (count > 0 && array_of_requests == nullptr) fail(MPI_ERR_ARG, "null array of requests");
    for (int i = 0; i < count; ++i) persistent_request(array_of_requests[i], concat("request ", i).c_str());
    for (int i = 0; i < count; ++i) start_persistent(*array_of_requests[i]);
  });
}

int MPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request* request) {
  return call("MPI_Irecv", comm, [&] {
    check_request_output(request);
    publish(start_recv(use_comm(comm), buf, count, datatype, source, tag), request);
  });
}

// Both directions are posted before either is waited for, so a ring of
// Sendrecv calls never deadlocks, whatever the message size.
int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  return call("MPI_Sendrecv", comm, [&] {
    Comm c = use_comm(comm);
    RequestPtr recv = start_recv(c, recvbuf, recvcount, recvtype, source, recvtag);
    RequestPtr send = start_send(c, sendbuf, sendcount, sendtype, dest, sendtag);
    wait_pair(*send, *recv, status);
  });
}

int MPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag,
                         MPI_Comm comm, MPI_Status* status) {
  return call("MPI_Sendrecv_replace", comm, [&] {
    Comm c = use_comm(comm);
    const size_t n = use_count(count, "count");
    const Datatype& type = use_type(datatype, "datatype");
    check_buffer(buf, n, "buf");
    // The outgoing data is copied first: the receive overwrites buf.
    Bytes outgoing = pack_copy(buf, n, type);
    RequestPtr recv = start_recv(c, buf, count, datatype, source, recvtag);
    RequestPtr send = start_send(c, outgoing.data(), static_cast<int>(outgoing.size()), MPI_BYTE, dest, sendtag);
    wait_pair(*send, *recv, status);
  });
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  return call("MPI_Iprobe", comm, [&] {
    Comm c = use_comm(comm);
    if (flag == nullptr) fail(MPI_ERR_ARG, "null flag pointer");
    *flag = 0;
    check_tag(tag, true);
    if (source == MPI_PROC_NULL) {
      *flag = 1;
      return set_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0);
    }
    check_peer(source, c, true);
    if (auto got = c.chorus.iprobe(source, tag)) {
      *flag = 1;
      set_status(status, got->source, got->tag, got->bytes);
    }
  });
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  return call("MPI_Probe", comm, [&] {
    Comm c = use_comm(comm);
    check_tag(tag, true);
    if (source == MPI_PROC_NULL) return set_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0);
    check_peer(source, c, true);
    const chorus::Received got = c.chorus.probe(source, tag);
    set_status(status, got.source, got.tag, got.bytes);
  });
}

}  // extern "C"
