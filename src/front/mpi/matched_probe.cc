// Matched probes (MPI-3.1 3.8.2): MPI_Improbe / MPI_Mprobe take the message
// they find (Communicator::improbe / mprobe), so no other receive, on any
// thread, can get it; MPI_Mrecv / MPI_Imrecv receive it. A probe of
// MPI_PROC_NULL finds MPI_MESSAGE_NO_PROC at once, whose receive completes
// with the status of a receive from MPI_PROC_NULL.
#include "mpi/requests.hpp"

namespace chorus::mpi {

namespace {

using MessagePtr = std::unique_ptr<chorus_mpi_message>;

// A matched probe of (source, tag) on `comm`: `probe(c)` returns the
// chorus::Message, or nullopt when none has come (MPI_Improbe). The
// handle is made first: an allocation failure takes no message.
template <class Probe>
bool probe_message(MPI_Comm comm, int source, int tag, MPI_Message* message, MPI_Status* status, Probe&& probe) {
  Comm c = use_comm(comm);
  if (message == nullptr) fail(MPI_ERR_ARG, "null message pointer");
  check_tag(tag, true);
  if (source == MPI_PROC_NULL) {
    *message = MPI_MESSAGE_NO_PROC;
    set_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0);
    return true;
  }
  check_peer(source, c, true);
  auto made = std::make_unique<chorus_mpi_message>(chorus_mpi_message{kMessageMagic, comm, {}});
  std::optional<chorus::Message> found = probe(c);
  if (!found) return false;
  made->message = *found;
  set_status(status, found->info.source, found->info.tag, found->info.bytes);
  *message = made.release();
  return true;
}

// What MPI_Mrecv / MPI_Imrecv receive: nullptr for MPI_MESSAGE_NO_PROC.
chorus_mpi_message* use_message(MPI_Message* message) {
  if (message == nullptr) fail(MPI_ERR_ARG, "null message pointer");
  if (*message == MPI_MESSAGE_NULL) {
    fail(MPI_ERR_REQUEST, "the message is MPI_MESSAGE_NULL (already received, or the probe found none)");
  }
  if (*message == MPI_MESSAGE_NO_PROC) return nullptr;
  if ((*message)->magic != kMessageMagic) fail(MPI_ERR_REQUEST, "invalid message handle (already received, or not a message)");
  return *message;
}

MPI_Comm comm_of(const MPI_Message* message) {
  if (message == nullptr || *message == MPI_MESSAGE_NULL || *message == MPI_MESSAGE_NO_PROC ||
      (*message)->magic != kMessageMagic) {
    return MPI_COMM_WORLD;
  }
  return (*message)->comm;
}

// Posts the receive of `*handle`'s message; the handle becomes
// MPI_MESSAGE_NULL once the message is spent (a refused count or datatype
// spends nothing: the call may be made again).
RequestPtr start_message_recv(void* buf, int count, MPI_Datatype datatype, MPI_Message* handle) {
  chorus_mpi_message* message = use_message(handle);
  if (message == nullptr) {
    *handle = MPI_MESSAGE_NULL;
    RequestPtr request = new_request(MPI_COMM_WORLD);
    request->receive = true;
    request->from_proc_null = true;
    return request;
  }
  auto spend = [&] {
    if (message->message.id != 0) return;
    message->magic = 0;
    MessagePtr gone(message);
    *handle = MPI_MESSAGE_NULL;
  };
  try {
    RequestPtr request = start_matched_recv(*message, buf, count, datatype);
    spend();
    return request;
  } catch (...) {
    spend();
    throw;
  }
}

}  // namespace

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message, MPI_Status* status) {
  return call("MPI_Improbe", comm, [&] {
    if (flag == nullptr) fail(MPI_ERR_ARG, "null flag pointer");
    *flag = 0;
    *flag = probe_message(comm, source, tag, message, status, [&](Comm& c) { return c.chorus.improbe(source, tag); });
  });
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  return call("MPI_Mprobe", comm, [&] {
    probe_message(comm, source, tag, message, status,
                  [&](Comm& c) { return std::optional<chorus::Message>(c.chorus.mprobe(source, tag)); });
  });
}

int MPI_Mrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Status* status) {
  return call("MPI_Mrecv", comm_of(message), [&] {
    RequestPtr request = start_message_recv(buf, count, datatype, message);
    wait_unpublished(*request, status);
  });
}

int MPI_Imrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Request* request) {
  return call("MPI_Imrecv", comm_of(message), [&] {
    check_request_output(request);
    publish(start_message_recv(buf, count, datatype, message), request);
  });
}

}  // extern "C"
