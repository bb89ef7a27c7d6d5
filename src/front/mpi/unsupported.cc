// The declared-only part of the MPI subset (include/chorus/mpi/mpi.h):
// each function reports MPI_ERR_UNSUPPORTED_OPERATION with a message naming
// itself, through the error handler of its communicator argument (else of
// MPI_COMM_WORLD). tests/mpi/unsupported_all.c calls every one of them.
#include "mpi/internal.hpp"

// The parameters exist only so the signatures match the standard.
#pragma GCC diagnostic ignored "-Wunused-parameter"

using chorus::mpi::unsupported;

extern "C" {

// --- Groups and communicators
// --- Intercommunicators (docs/mpi.md, "MPI-3.1 status by family")
int MPI_Comm_remote_size(MPI_Comm comm, int* size) {
  return unsupported("MPI_Comm_remote_size", comm);
}
int MPI_Comm_remote_group(MPI_Comm comm, MPI_Group* group) {
  return unsupported("MPI_Comm_remote_group", comm);
}
int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag,
                         MPI_Comm* newintercomm) {
  return unsupported("MPI_Intercomm_create", local_comm);
}
int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newintracomm) {
  return unsupported("MPI_Intercomm_merge", intercomm);
}

// --- One-sided (RMA)
int MPI_Win_create(void* base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win* win) {
  return unsupported("MPI_Win_create", comm);
}
int MPI_Win_allocate(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
  return unsupported("MPI_Win_allocate", comm);
}
int MPI_Win_allocate_shared(MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void* baseptr, MPI_Win* win) {
  return unsupported("MPI_Win_allocate_shared", comm);
}
int MPI_Win_create_dynamic(MPI_Info info, MPI_Comm comm, MPI_Win* win) {
  return unsupported("MPI_Win_create_dynamic", comm);
}
int MPI_Win_attach(MPI_Win win, void* base, MPI_Aint size) {
  return unsupported("MPI_Win_attach", MPI_COMM_WORLD);
}
int MPI_Win_detach(MPI_Win win, const void* base) {
  return unsupported("MPI_Win_detach", MPI_COMM_WORLD);
}
int MPI_Win_free(MPI_Win* win) {
  return unsupported("MPI_Win_free", MPI_COMM_WORLD);
}
int MPI_Win_fence(int assert, MPI_Win win) {
  return unsupported("MPI_Win_fence", MPI_COMM_WORLD);
}
int MPI_Win_lock(int lock_type, int rank, int assert, MPI_Win win) {
  return unsupported("MPI_Win_lock", MPI_COMM_WORLD);
}
int MPI_Win_unlock(int rank, MPI_Win win) {
  return unsupported("MPI_Win_unlock", MPI_COMM_WORLD);
}
int MPI_Win_lock_all(int assert, MPI_Win win) {
  return unsupported("MPI_Win_lock_all", MPI_COMM_WORLD);
}
int MPI_Win_unlock_all(MPI_Win win) {
  return unsupported("MPI_Win_unlock_all", MPI_COMM_WORLD);
}
int MPI_Win_flush(int rank, MPI_Win win) {
  return unsupported("MPI_Win_flush", MPI_COMM_WORLD);
}
int MPI_Win_flush_local(int rank, MPI_Win win) {
  return unsupported("MPI_Win_flush_local", MPI_COMM_WORLD);
}
int MPI_Win_flush_all(MPI_Win win) {
  return unsupported("MPI_Win_flush_all", MPI_COMM_WORLD);
}
int MPI_Win_flush_local_all(MPI_Win win) {
  return unsupported("MPI_Win_flush_local_all", MPI_COMM_WORLD);
}
int MPI_Win_sync(MPI_Win win) {
  return unsupported("MPI_Win_sync", MPI_COMM_WORLD);
}
int MPI_Win_post(MPI_Group group, int assert, MPI_Win win) {
  return unsupported("MPI_Win_post", MPI_COMM_WORLD);
}
int MPI_Win_start(MPI_Group group, int assert, MPI_Win win) {
  return unsupported("MPI_Win_start", MPI_COMM_WORLD);
}
int MPI_Win_complete(MPI_Win win) {
  return unsupported("MPI_Win_complete", MPI_COMM_WORLD);
}
int MPI_Win_wait(MPI_Win win) {
  return unsupported("MPI_Win_wait", MPI_COMM_WORLD);
}
int MPI_Win_test(MPI_Win win, int* flag) {
  return unsupported("MPI_Win_test", MPI_COMM_WORLD);
}
int MPI_Win_shared_query(MPI_Win win, int rank, MPI_Aint* size, int* disp_unit, void* baseptr) {
  return unsupported("MPI_Win_shared_query", MPI_COMM_WORLD);
}
int MPI_Put(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
            MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win) {
  return unsupported("MPI_Put", MPI_COMM_WORLD);
}
int MPI_Get(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
            int target_count, MPI_Datatype target_datatype, MPI_Win win) {
  return unsupported("MPI_Get", MPI_COMM_WORLD);
}
int MPI_Rput(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
             MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win,
             MPI_Request* request) {
  return unsupported("MPI_Rput", MPI_COMM_WORLD);
}
int MPI_Rget(void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp,
             int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request* request) {
  return unsupported("MPI_Rget", MPI_COMM_WORLD);
}
int MPI_Accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank,
                   MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  return unsupported("MPI_Accumulate", MPI_COMM_WORLD);
}
int MPI_Get_accumulate(const void* origin_addr, int origin_count, MPI_Datatype origin_datatype, void* result_addr,
                       int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp,
                       int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win) {
  return unsupported("MPI_Get_accumulate", MPI_COMM_WORLD);
}
int MPI_Fetch_and_op(const void* origin_addr, void* result_addr, MPI_Datatype datatype, int target_rank,
                     MPI_Aint target_disp, MPI_Op op, MPI_Win win) {
  return unsupported("MPI_Fetch_and_op", MPI_COMM_WORLD);
}
int MPI_Compare_and_swap(const void* origin_addr, const void* compare_addr, void* result_addr, MPI_Datatype datatype,
                         int target_rank, MPI_Aint target_disp, MPI_Win win) {
  return unsupported("MPI_Compare_and_swap", MPI_COMM_WORLD);
}

}  // extern "C"
