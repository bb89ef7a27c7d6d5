// The MPI-4 large-count collectives (MPI_Bcast_c .. MPI_Iscatterv_c): counts
// as MPI_Count and displacements as MPI_Aint, on the same bodies as the
// MPI-3.1 functions (entry_bodies.hpp). chorus counts bytes in size_t
// throughout, so a count past INT_MAX takes the same path as any other.
#include "mpi/entry_bodies.hpp"

using namespace chorus::mpi;

extern "C" {

int MPI_Bcast_c(void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return bcast_entry("MPI_Bcast_c", buffer, count, datatype, root, comm);
}

int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm) {
  return allreduce_entry("MPI_Allreduce_c", sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Reduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root,
                 MPI_Comm comm) {
  return reduce_entry("MPI_Reduce_c", sendbuf, recvbuf, count, datatype, op, root, comm);
}

int MPI_Allgather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather_entry("MPI_Allgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Alltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall_entry("MPI_Alltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Reduce_scatter_block_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount, MPI_Datatype datatype,
                               MPI_Op op, MPI_Comm comm) {
  return reduce_scatter_block_entry("MPI_Reduce_scatter_block_c", sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Reduce_scatter_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm) {
  return reduce_scatter_entry("MPI_Reduce_scatter_c", sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int MPI_Reduce_local_c(const void* inbuf, void* inoutbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op) {
  return reduce_local_entry("MPI_Reduce_local_c", inbuf, inoutbuf, count, datatype, op);
}

int MPI_Iscan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                MPI_Request* request) {
  return iscan_entry("MPI_Iscan_c", sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Iexscan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                  MPI_Request* request) {
  return iexscan_entry("MPI_Iexscan_c", sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Ibcast_c(void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  return ibcast_entry("MPI_Ibcast_c", buffer, count, datatype, root, comm, request);
}

int MPI_Iallreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                     MPI_Comm comm, MPI_Request* request) {
  return iallreduce_entry("MPI_Iallreduce_c", sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Ireduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root,
                  MPI_Comm comm, MPI_Request* request) {
  return ireduce_entry("MPI_Ireduce_c", sendbuf, recvbuf, count, datatype, op, root, comm, request);
}

int MPI_Iallgather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                     MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return iallgather_entry("MPI_Iallgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                          request);
}

int MPI_Ialltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return ialltoall_entry("MPI_Ialltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Ireduce_scatter_block_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount, MPI_Datatype datatype,
                                MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return ireduce_scatter_block_entry("MPI_Ireduce_scatter_block_c", sendbuf, recvbuf, recvcount, datatype, op, comm,
                                     request);
}

int MPI_Ireduce_scatter_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype,
                          MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return ireduce_scatter_entry("MPI_Ireduce_scatter_c", sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
}

int MPI_Scan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return scan_entry("MPI_Scan_c", sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Exscan_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return exscan_entry("MPI_Exscan_c", sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Gather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gather_entry("MPI_Gather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Igather_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return igather_entry("MPI_Igather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                       request);
}

int MPI_Gatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                  MPI_Comm comm) {
  return gatherv_entry("MPI_Gatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,
                       comm);
}

int MPI_Igatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root,
                   MPI_Comm comm, MPI_Request* request) {
  return igatherv_entry("MPI_Igatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,
                        comm, request);
}

int MPI_Scatter_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatter_entry("MPI_Scatter_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Iscatter_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount,
                   MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return iscatter_entry("MPI_Iscatter_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                        request);
}

int MPI_Scatterv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype,
                   void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatterv_entry("MPI_Scatterv_c", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                        comm);
}

int MPI_Iscatterv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype,
                    void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                    MPI_Request* request) {
  return iscatterv_entry("MPI_Iscatterv_c", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                         comm, request);
}

int MPI_Allgatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                     const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return allgatherv_entry("MPI_Allgatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                          comm);
}

int MPI_Iallgatherv_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                      const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm,
                      MPI_Request* request) {
  return iallgatherv_entry("MPI_Iallgatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                           comm, request);
}

int MPI_Alltoallv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype,
                    void* recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype,
                    MPI_Comm comm) {
  return alltoallv_entry("MPI_Alltoallv_c", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                         recvtype, comm);
}

int MPI_Ialltoallv_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype,
                     void* recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype,
                     MPI_Comm comm, MPI_Request* request) {
  return ialltoallv_entry("MPI_Ialltoallv_c", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                          recvtype, comm, request);
}

int MPI_Alltoallw_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                    const MPI_Datatype sendtypes[], void* recvbuf, const MPI_Count recvcounts[],
                    const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  return alltoallw_entry("MPI_Alltoallw_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                         recvtypes, comm);
}

int MPI_Ialltoallw_c(const void* sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[],
                     const MPI_Datatype sendtypes[], void* recvbuf, const MPI_Count recvcounts[],
                     const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request* request) {
  return ialltoallw_entry("MPI_Ialltoallw_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                          recvtypes, comm, request);
}

}  // extern "C"
