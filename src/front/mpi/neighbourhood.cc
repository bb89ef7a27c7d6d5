// The neighbourhood collectives of every kind of process topology (MPI-3.1
// 7.6 and 7.7), blocking and non-blocking: one exchange, started in a
// request whose parts are a receive from each source and a send to each
// destination on the communicator's internal twin (whom: plan_of,
// topology.cc). A blocking call starts it and waits (run_to_completion), so
// both forms send the same messages. chorus has no collective for a sparse
// exchange, and an alltoallv over every rank would cost each call n - 1
// steps where a halo exchange needs 2 x ndims messages.
#include "mpi/requests.hpp"

#include <deque>
#include <span>

namespace chorus::mpi {
namespace {

// Where incoming block k lands: `count` elements of `type` at `at`.
struct Landing {
  std::byte* at = nullptr;
  size_t count = 0;
  const Datatype* type = nullptr;
};

// What the request of one exchange keeps until it completes: the packed
// blocks, where each incoming one goes and, for a non-blocking call, copies
// of the datatypes those places are described by (the caller may free its
// handles first). `receive_part[k]`: the request part that receives block
// k (kNone: MPI_PROC_NULL, nothing comes).
struct Exchange {
  static constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<Bytes> incoming, outgoing;
  std::vector<Landing> landings;
  std::vector<size_t> receive_part;
  std::vector<int> from;
  std::deque<Datatype> types;  // a deque: the landings point into it
};

// Starts the exchange over `plan` in `request`. `send_block(k)`: the packed
// bytes of outgoing block k; `landing(k)`: where incoming block k goes.
// Every block is packed and every landing checked before anything is
// posted: a refused argument leaves no receive behind. Every receive is
// posted before any send. When the request completes, each block is checked
// for its size and unpacked.
template <class SendBlock, class LandingOf>
void start_exchange(const Comm& c, const NeighbourPlan& plan, chorus_mpi_request& request, SendBlock&& send_block,
                    LandingOf&& landing) {
  const size_t sources = plan.from.size(), destinations = plan.to.size();
  auto state = std::make_shared<Exchange>();
  Exchange& x = *state;
  x.incoming.resize(sources);
  x.outgoing.resize(destinations);
  x.landings.resize(sources);
  x.receive_part.assign(sources, Exchange::kNone);
  x.from = plan.from;
  for (size_t k = 0; k < sources; ++k) {
    if (plan.from[k] == MPI_PROC_NULL) continue;
    Landing& place = x.landings[k];
    place = landing(k);
    if (!request.blocking) place.type = &x.types.emplace_back(*place.type);
    x.incoming[k].resize(packed_bytes(place.count, *place.type));
  }
  for (size_t k = 0; k < destinations; ++k) {
    if (plan.to[k] != MPI_PROC_NULL) x.outgoing[k] = send_block(k);
  }
  RequestStaging& staging = request.staging();
  staging.keep = state;
  staging.parts.reserve(sources + destinations);
  for (size_t k = 0; k < sources; ++k) {
    if (plan.from[k] == MPI_PROC_NULL) continue;
    x.receive_part[k] = staging.parts.size();
    staging.parts.push_back(c.internal.irecv(x.incoming[k].data(), x.incoming[k].size(), plan.from[k],
                                             plan.from_tags[k]));
  }
  for (size_t k = 0; k < destinations; ++k) {
    if (plan.to[k] == MPI_PROC_NULL) continue;
    staging.parts.push_back(c.internal.isend(x.outgoing[k].data(), x.outgoing[k].size(), plan.to[k], plan.to_tags[k]));
  }
  staging.finish = [&x, &staging](const chorus::Received&) {
    for (size_t k = 0; k < x.landings.size(); ++k) {
      if (x.receive_part[k] == Exchange::kNone) continue;
      const size_t got = staging.parts[x.receive_part[k]].received().bytes;
      if (got != x.incoming[k].size()) {
        // A chorus::Error, as a failed part: MPI_Waitall reports it in the request's status.
        throw chorus::Error(chorus::Status::truncated,
                            concat("neighbour rank ", x.from[k], " sent ", got, " bytes where ", x.incoming[k].size(),
                                   " were expected: counts or datatypes differ between ranks"));
      }
      const Landing& place = x.landings[k];
      unpack(x.incoming[k].data(), place.count, *place.type, place.at);
    }
  };
}

// Block k of `count` elements of `type` at element displacement `index`.
std::byte* element_at(void* buffer, size_t index, const Datatype& type) {
  return static_cast<std::byte*>(buffer) + static_cast<MPI_Aint>(index) * type.extent;
}
const std::byte* element_at(const void* buffer, size_t index, const Datatype& type) {
  return static_cast<const std::byte*>(buffer) + static_cast<MPI_Aint>(index) * type.extent;
}

// A per-neighbour count or displacement array, checked.
std::span<const int> per_neighbour(const int* values, size_t neighbours, const char* role) {
  if (values == nullptr && neighbours > 0) fail(MPI_ERR_ARG, "null ", role);
  return {values, neighbours};
}
size_t count_of(std::span<const int> counts, size_t k, const char* role) {
  if (counts[k] < 0) fail(MPI_ERR_COUNT, role, "[", k, "] = ", counts[k], " is negative");
  return static_cast<size_t>(counts[k]);
}

void check_neighbor_buffers(const void* sendbuf, size_t sendcount, void* recvbuf, size_t recvcount) {
  if (sendbuf == MPI_IN_PLACE || recvbuf == MPI_IN_PLACE) {
    fail(MPI_ERR_ARG, "MPI_IN_PLACE is not allowed in a neighbourhood collective");
  }
  check_buffer(sendbuf, sendcount, "sendbuf");
  check_buffer(recvbuf, recvcount, "recvbuf");
}

// (I)neighbor_allgather (`one_for_all`: every neighbour gets the whole send
// buffer) and (I)neighbor_alltoall (neighbour k gets block k), with
// `recvcount` elements from each.
void start_blocks(const Comm& c, MPI_Comm comm, chorus_mpi_request& request, const void* sendbuf, int sendcount,
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype, bool one_for_all) {
  const NeighbourPlan plan = plan_of(comm, c.rank);
  const size_t send_n = use_count(sendcount, "sendcount"), recv_n = use_count(recvcount, "recvcount");
  const Datatype& stype = use_type(sendtype, "sendtype");
  const Datatype& rtype = use_type(recvtype, "recvtype");
  check_neighbor_buffers(sendbuf, send_n, recvbuf, recv_n);
  const Bytes whole = one_for_all ? pack_copy(sendbuf, send_n, stype) : Bytes{};
  start_exchange(
      c, plan, request,
      [&](size_t k) { return one_for_all ? whole : pack_copy(element_at(sendbuf, k * send_n, stype), send_n, stype); },
      [&](size_t k) { return Landing{element_at(recvbuf, k * recv_n, rtype), recv_n, &rtype}; });
}

// (I)neighbor_allgatherv: the whole send buffer to every neighbour,
// recvcounts[k] elements from neighbour k at element displacement displs[k].
void start_allgatherv(const Comm& c, MPI_Comm comm, chorus_mpi_request& request, const void* sendbuf, int sendcount,
                      MPI_Datatype sendtype, void* recvbuf, const int recvcounts[], const int displs[],
                      MPI_Datatype recvtype) {
  const NeighbourPlan plan = plan_of(comm, c.rank);
  const size_t sources = plan.from.size();
  const size_t send_n = use_count(sendcount, "sendcount");
  const Datatype& stype = use_type(sendtype, "sendtype");
  const Datatype& rtype = use_type(recvtype, "recvtype");
  const auto counts = per_neighbour(recvcounts, sources, "recvcounts");
  const auto at = per_neighbour(displs, sources, "displs");
  check_neighbor_buffers(sendbuf, send_n, recvbuf, 0);
  const Bytes packed = pack_copy(sendbuf, send_n, stype);
  start_exchange(
      c, plan, request, [&](size_t) { return packed; },
      [&](size_t k) {
        const size_t n = count_of(counts, k, "recvcounts");
        check_buffer(recvbuf, n, "recvbuf");
        return Landing{element_at(recvbuf, static_cast<size_t>(at[k]), rtype), n, &rtype};
      });
}

// Where each block of a v- or w-form is: its byte offset and its type.
struct BlockPlace {
  MPI_Aint offset = 0;
  const Datatype* type = nullptr;
};
using BlockLayout = std::vector<BlockPlace>;

// (I)neighbor_alltoallv and _alltoallw: block k is `sendcounts[k]` /
// `recvcounts[k]` elements at send[k] / recv[k].
void start_per_block(const Comm& c, const NeighbourPlan& plan, chorus_mpi_request& request, const void* sendbuf,
                     const int sendcounts[], const BlockLayout& send, void* recvbuf, const int recvcounts[],
                     const BlockLayout& recv) {
  const auto scounts = per_neighbour(sendcounts, send.size(), "sendcounts");
  const auto rcounts = per_neighbour(recvcounts, recv.size(), "recvcounts");
  check_neighbor_buffers(sendbuf, 0, recvbuf, 0);
  start_exchange(
      c, plan, request,
      [&](size_t k) {
        const size_t n = count_of(scounts, k, "sendcounts");
        check_buffer(sendbuf, n, "sendbuf");
        return pack_copy(static_cast<const std::byte*>(sendbuf) + send[k].offset, n, *send[k].type);
      },
      [&](size_t k) {
        const size_t n = count_of(rcounts, k, "recvcounts");
        check_buffer(recvbuf, n, "recvbuf");
        return Landing{static_cast<std::byte*>(recvbuf) + recv[k].offset, n, recv[k].type};
      });
}

void start_alltoallv(const Comm& c, MPI_Comm comm, chorus_mpi_request& request, const void* sendbuf,
                     const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void* recvbuf,
                     const int recvcounts[], const int rdispls[], MPI_Datatype recvtype) {
  const NeighbourPlan plan = plan_of(comm, c.rank);
  const Datatype& stype = use_type(sendtype, "sendtype");
  const Datatype& rtype = use_type(recvtype, "recvtype");
  const auto sat = per_neighbour(sdispls, plan.to.size(), "sdispls");
  const auto rat = per_neighbour(rdispls, plan.from.size(), "rdispls");
  BlockLayout send(plan.to.size()), recv(plan.from.size());
  for (size_t k = 0; k < send.size(); ++k) send[k] = {static_cast<MPI_Aint>(sat[k]) * stype.extent, &stype};
  for (size_t k = 0; k < recv.size(); ++k) recv[k] = {static_cast<MPI_Aint>(rat[k]) * rtype.extent, &rtype};
  start_per_block(c, plan, request, sendbuf, sendcounts, send, recvbuf, recvcounts, recv);
}

// Displacements in bytes and a type per block (MPI-3.1 7.6.1).
void start_alltoallw(const Comm& c, MPI_Comm comm, chorus_mpi_request& request, const void* sendbuf,
                     const int sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void* recvbuf,
                     const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[]) {
  const NeighbourPlan plan = plan_of(comm, c.rank);
  if ((!plan.to.empty() && (sdispls == nullptr || sendtypes == nullptr)) ||
      (!plan.from.empty() && (rdispls == nullptr || recvtypes == nullptr))) {
    fail(MPI_ERR_ARG, "null sdispls, rdispls, sendtypes or recvtypes");
  }
  BlockLayout send(plan.to.size()), recv(plan.from.size());
  for (size_t k = 0; k < send.size(); ++k) send[k] = {sdispls[k], &use_type(sendtypes[k], "sendtypes")};
  for (size_t k = 0; k < recv.size(); ++k) recv[k] = {rdispls[k], &use_type(recvtypes[k], "recvtypes")};
  start_per_block(c, plan, request, sendbuf, sendcounts, send, recvbuf, recvcounts, recv);
}

// The blocking form: the non-blocking one started and waited for.
template <class Start>
int blocking(const char* function, MPI_Comm comm, Start&& start) {
  return call(function, comm, [&] {
    const Comm c = use_comm(comm);
    run_to_completion(comm, [&](chorus_mpi_request& request) { start(c, request); });
  });
}

}  // namespace
}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm) {
  return blocking("MPI_Neighbor_allgather", comm, [&](const Comm& c, chorus_mpi_request& r) {
    start_blocks(c, comm, r, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, /*one_for_all=*/true);
  });
}

int MPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                            MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return start_collective("MPI_Ineighbor_allgather", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    start_blocks(c, comm, r, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, /*one_for_all=*/true);
  });
}

int MPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                          MPI_Datatype recvtype, MPI_Comm comm) {
  return blocking("MPI_Neighbor_alltoall", comm, [&](const Comm& c, chorus_mpi_request& r) {
    start_blocks(c, comm, r, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, /*one_for_all=*/false);
  });
}

int MPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return start_collective("MPI_Ineighbor_alltoall", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    start_blocks(c, comm, r, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, /*one_for_all=*/false);
  });
}

int MPI_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                            const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return blocking("MPI_Neighbor_allgatherv", comm, [&](const Comm& c, chorus_mpi_request& r) {
    start_allgatherv(c, comm, r, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype);
  });
}

int MPI_Ineighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                             const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                             MPI_Request* request) {
  return start_collective("MPI_Ineighbor_allgatherv", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    start_allgatherv(c, comm, r, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype);
  });
}

int MPI_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                           void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                           MPI_Comm comm) {
  return blocking("MPI_Neighbor_alltoallv", comm, [&](const Comm& c, chorus_mpi_request& r) {
    start_alltoallv(c, comm, r, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype);
  });
}

int MPI_Ineighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                            void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                            MPI_Comm comm, MPI_Request* request) {
  return start_collective("MPI_Ineighbor_alltoallv", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    start_alltoallv(c, comm, r, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype);
  });
}

int MPI_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                           const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                           const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return blocking("MPI_Neighbor_alltoallw", comm, [&](const Comm& c, chorus_mpi_request& r) {
    start_alltoallw(c, comm, r, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes);
  });
}

int MPI_Ineighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                            const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                            MPI_Request* request) {
  return start_collective("MPI_Ineighbor_alltoallw", comm, request, [&](const Comm& c, chorus_mpi_request& r) {
    start_alltoallw(c, comm, r, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes);
  });
}

}  // extern "C"
