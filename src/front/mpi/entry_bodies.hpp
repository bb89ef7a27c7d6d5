// The bodies of the MPI collectives that have an MPI-4 large-count form:
// each MPI-3.1 entry point (int counts) and its `_c` twin (MPI_Count counts,
// MPI_Aint displacements; large_count.cc) call the same body, which takes
// the wider types and names `function` in its errors.
#pragma once

#include "mpi/internal.hpp"

namespace chorus::mpi {

int bcast_entry(const char* function, void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm);
int allreduce_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                    MPI_Op op, MPI_Comm comm);
int reduce_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                 MPI_Op op, int root, MPI_Comm comm);
int allgather_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                    void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int alltoall_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int reduce_scatter_block_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count recvcount,
                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int reduce_scatter_entry(const char* function, const void* sendbuf, void* recvbuf, CountArray recvcounts,
                         MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int reduce_local_entry(const char* function, const void* inbuf, void* inoutbuf, MPI_Count count, MPI_Datatype datatype,
                       MPI_Op op);
int iscan_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                MPI_Op op, MPI_Comm comm, MPI_Request* request);
int iexscan_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                  MPI_Op op, MPI_Comm comm, MPI_Request* request);
int ibcast_entry(const char* function, void* buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm,
                 MPI_Request* request);
int iallreduce_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                     MPI_Op op, MPI_Comm comm, MPI_Request* request);
int ireduce_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                  MPI_Op op, int root, MPI_Comm comm, MPI_Request* request);
int iallgather_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                     void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int ialltoall_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                    void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int ireduce_scatter_block_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count recvcount,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request);
int ireduce_scatter_entry(const char* function, const void* sendbuf, void* recvbuf, CountArray recvcounts,
                          MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request);
int scan_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
               MPI_Op op, MPI_Comm comm);
int exscan_entry(const char* function, const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype,
                 MPI_Op op, MPI_Comm comm);
int gather_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                 MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int igather_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request);
int gatherv_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  CountArray recvcounts, DisplArray displs, MPI_Datatype recvtype, int root, MPI_Comm comm);
int igatherv_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   CountArray recvcounts, DisplArray displs, MPI_Datatype recvtype, int root, MPI_Comm comm,
                   MPI_Request* request);
int scatter_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                  MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);
int iscatter_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void* recvbuf,
                   MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request);
int scatterv_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray displs,
                   MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                   MPI_Comm comm);
int iscatterv_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray displs,
                    MPI_Datatype sendtype, void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root,
                    MPI_Comm comm, MPI_Request* request);
int allgatherv_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                     void* recvbuf, CountArray recvcounts, DisplArray displs, MPI_Datatype recvtype, MPI_Comm comm);
int iallgatherv_entry(const char* function, const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                      void* recvbuf, CountArray recvcounts, DisplArray displs, MPI_Datatype recvtype, MPI_Comm comm,
                      MPI_Request* request);
int alltoallv_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray sdispls,
                    MPI_Datatype sendtype, void* recvbuf, CountArray recvcounts, DisplArray rdispls,
                    MPI_Datatype recvtype, MPI_Comm comm);
int ialltoallv_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray sdispls,
                     MPI_Datatype sendtype, void* recvbuf, CountArray recvcounts, DisplArray rdispls,
                     MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request);
int alltoallw_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray sdispls,
                    const MPI_Datatype sendtypes[], void* recvbuf, CountArray recvcounts, DisplArray rdispls,
                    const MPI_Datatype recvtypes[], MPI_Comm comm);
int ialltoallw_entry(const char* function, const void* sendbuf, CountArray sendcounts, DisplArray sdispls,
                     const MPI_Datatype sendtypes[], void* recvbuf, CountArray recvcounts, DisplArray rdispls,
                     const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request* request);

}  // namespace chorus::mpi
