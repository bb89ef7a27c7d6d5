// Blocking point-to-point: MPI_Send (and MPI_Rsend), MPI_Recv, MPI_Get_count, over chorus'
// send/recv on the communicator (user tags 0..2^31-1, wildcards).
#include "api/user_tag.hpp"
#include "mpi/requests.hpp"

#include <climits>

namespace chorus::mpi {

static_assert(kMaxUserTag == INT_MAX, "mpi.h promises tags up to 2^31-1 (MPI_TAG_UB)");

// Shared with the non-blocking calls (requests.hpp).

void refuse_peer(int peer, const Comm& comm) {
  fail(MPI_ERR_RANK, "rank ", peer, " is not a rank of the communicator (0..", comm.size - 1, ")");
}

void refuse_tag(int tag, bool wildcard_allowed) {
  static_assert(MPI_ANY_TAG == kAnyTag);
  fail(MPI_ERR_TAG, user_tag_problem(tag, wildcard_allowed, "MPI_ANY_TAG"));
}

namespace {
// MPI_Send and MPI_Rsend.
void blocking_send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  Comm c = use_comm(comm);
  const size_t n = use_count(count, "count");
  const Datatype& type = use_type(datatype, "datatype");
  check_tag(tag, false);
  if (dest == MPI_PROC_NULL) return;
  check_peer(dest, c, false);
  check_buffer(buf, n, "buf");
  PackedView view = packed_view(buf, n, type);
  c.chorus.send(view.data, view.bytes, dest, tag);
}
}  // namespace

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return call("MPI_Send", comm, [&] { blocking_send(buf, count, datatype, dest, tag, comm); });
}

// A ready send is a standard send: MPI-3.1 3.4 allows it (its receive is
// already posted, so it has nothing to wait for that a standard send would).
int MPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return call("MPI_Rsend", comm, [&] { blocking_send(buf, count, datatype, dest, tag, comm); });
}

int MPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  return call("MPI_Recv", comm, [&] {
    Comm c = use_comm(comm);
    const size_t n = use_count(count, "count");
    const Datatype& type = use_type(datatype, "datatype");
    check_tag(tag, true);
    if (source == MPI_PROC_NULL) return set_status(status, MPI_PROC_NULL, MPI_ANY_TAG, 0);
    check_peer(source, c, true);
    check_buffer(buf, n, "buf");
    // MPI_ANY_SOURCE / MPI_ANY_TAG are chorus::kAnySource / kAnyTag (-1).
    const size_t capacity = packed_bytes(n, type);
    chorus::Received got;
    if (type.contiguous()) {
      got = c.chorus.recv(buf, capacity, source, tag);
    } else {
      Bytes packed(capacity);
      got = c.chorus.recv(packed.data(), capacity, source, tag);
      unpack(packed.data(), got.bytes / type.packed_size, type, buf);
    }
    set_status(status, got.source, got.tag, got.bytes);
  });
}

int MPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  return call("MPI_Get_count", MPI_COMM_WORLD, [&] {
    if (status == nullptr || count == nullptr) fail(MPI_ERR_ARG, "null status or count");
    const Datatype& type = use_type(datatype, "datatype");
    const size_t bytes = status->chorus_bytes;
    if (type.packed_size == 0) {
      *count = bytes == 0 ? 0 : MPI_UNDEFINED;
    } else if (bytes % type.packed_size != 0 || bytes / type.packed_size > static_cast<size_t>(INT_MAX)) {
      *count = MPI_UNDEFINED;  // not a whole number of elements
    } else {
      *count = static_cast<int>(bytes / type.packed_size);
    }
  });
}

}  // extern "C"
