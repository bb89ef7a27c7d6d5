// Communicators: rank, size, dup, split, free, and the argument checks every
// function shares.
#include "mpi/internal.hpp"

#include <climits>

namespace chorus::mpi {

void refuse_comm(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) fail(MPI_ERR_COMM, "MPI_COMM_NULL is not a usable communicator");
  if (comm->magic != kCommMagic) fail(MPI_ERR_COMM, "invalid communicator handle (freed, or not a communicator)");
  fail(MPI_ERR_COMM, "the communicator is not connected (MPI_Init not called?)");
}

void refuse_count(MPI_Count count, const char* role) { fail(MPI_ERR_COUNT, role, " ", count, " is negative"); }

void check_root(int root, const Comm& comm) {
  if (root < 0 || root >= comm.size) {
    fail(MPI_ERR_ROOT, "root ", root, " is not a rank of the communicator (0..", comm.size - 1, ")");
  }
}

void refuse_buffer(size_t count, const char* role) { fail(MPI_ERR_BUFFER, "null ", role, " with count ", count); }

void recv_exact(chorus::Communicator& comm, void* buffer, size_t bytes, int peer, int tag) {
  chorus::Received got = comm.recv(buffer, bytes, peer, tag);
  if (got.bytes != bytes) {
    fail(MPI_ERR_TRUNCATE, "rank ", peer, " sent ", got.bytes, " bytes where ", bytes,
         " were expected: counts or datatypes differ between ranks");
  }
}

void exchange(const Comm& comm, int peer, const void* send, size_t send_bytes, void* recv, size_t recv_bytes,
              int tag) {
  if (comm.rank < peer) {
    comm.internal.send(send, send_bytes, peer, tag);
    recv_exact(comm.internal, recv, recv_bytes, peer, tag);
  } else {
    recv_exact(comm.internal, recv, recv_bytes, peer, tag);
    comm.internal.send(send, send_bytes, peer, tag);
  }
}

namespace {

// Wraps a new chorus communicator (and its private dup, collective over it)
// in a handle that inherits the parent's error handler. `world_ranks`: its
// members' ranks in MPI_COMM_WORLD (groups).
MPI_Comm make_comm(chorus::Communicator communicator, MPI_Errhandler errhandler, std::vector<int> world_ranks) {
  auto chorus_comm = std::make_unique<chorus::Communicator>(std::move(communicator));
  auto internal = std::make_unique<chorus::Communicator>(chorus_comm->dup());
  const int rank = chorus_comm->rank(), size = chorus_comm->size();
  auto* comm = new chorus_mpi_comm{kCommMagic, chorus_comm.release(), internal.release(), errhandler, nullptr, false,
                                   std::move(world_ranks), {}, rank, size};
  retain_errhandler(errhandler);
  register_comm(comm);
  return comm;
}

// Local: blocking calls on it have completed, so no message is in flight.
void destroy_comm(MPI_Comm comm) {
  unregister_comm(comm);
  delete comm->internal;
  delete comm->chorus;
  release_errhandler(comm->errhandler);
  comm->magic = 0;
  delete comm;
}

}  // namespace

MPI_Comm dup_comm(MPI_Comm comm) {
  Comm c = use_comm(comm);
  MPI_Comm made = make_comm(c.chorus.dup(), comm->errhandler, comm->world_ranks);
  made->cart = comm->cart;    // a duplicate keeps the topology (MPI-3.1 6.4.2)
  made->graph = comm->graph;
  made->hints = comm->hints;  // and the info hints
  try {
    copy_attributes(comm, made);
  } catch (...) {
    // A copy function refused: no new communicator (what it copied is deleted).
    try {
      delete_attributes(made);
    } catch (...) {
      // The copy function's error is the one reported.
    }
    destroy_comm(made);
    throw;
  }
  return made;
}

MPI_Comm split_comm(MPI_Comm parent, const Comm& c, int color, int key) {
  if (color < 0 && color != MPI_UNDEFINED) fail(MPI_ERR_ARG, "color ", color, " is negative and not MPI_UNDEFINED");
  auto child = c.chorus.split(color == MPI_UNDEFINED ? -1 : color, key);
  if (!child) return MPI_COMM_NULL;
  // Each member's rank in MPI_COMM_WORLD, by its rank in the new communicator.
  const int32_t mine = world_rank();
  std::vector<int32_t> everyone(static_cast<size_t>(child->size()));
  child->allgather(&mine, everyone.data(), 1, chorus::DataType::int32);
  return make_comm(std::move(*child), parent->errhandler, std::vector<int>(everyone.begin(), everyone.end()));
}

MPI_Comm group_comm(MPI_Comm parent, const Comm& c, const std::vector<int>& members, std::vector<int> world_ranks,
                    int tag) {
  return make_comm(c.chorus.create_group(members, tag), parent->errhandler, std::move(world_ranks));
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Comm_rank(MPI_Comm comm, int* rank) {
  return call("MPI_Comm_rank", comm, [&] {
    Comm c = use_comm(comm);
    if (rank == nullptr) fail(MPI_ERR_ARG, "null rank");
    *rank = c.rank;
  });
}

int MPI_Comm_size(MPI_Comm comm, int* size) {
  return call("MPI_Comm_size", comm, [&] {
    Comm c = use_comm(comm);
    if (size == nullptr) fail(MPI_ERR_ARG, "null size");
    *size = c.size;
  });
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  return call("MPI_Comm_dup", comm, [&] {
    use_comm(comm);
    if (newcomm == nullptr) fail(MPI_ERR_ARG, "null newcomm");
    *newcomm = MPI_COMM_NULL;
    *newcomm = dup_comm(comm);
  });
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  return call("MPI_Comm_split", comm, [&] {
    Comm c = use_comm(comm);
    if (newcomm == nullptr) fail(MPI_ERR_ARG, "null newcomm");
    *newcomm = MPI_COMM_NULL;
    *newcomm = split_comm(comm, c, color, key);
  });
}

int MPI_Comm_free(MPI_Comm* comm) {
  return call("MPI_Comm_free", comm != nullptr ? *comm : MPI_COMM_WORLD, [&] {
    if (comm == nullptr) fail(MPI_ERR_ARG, "null comm pointer");
    use_comm(*comm);
    if ((*comm)->predefined) fail(MPI_ERR_COMM, (*comm)->name, " cannot be freed");
    delete_attributes(*comm);  // a delete function's error leaves the communicator (MPI-3.1 6.7.2)
    destroy_comm(*comm);
    *comm = MPI_COMM_NULL;
  });
}

}  // extern "C"
