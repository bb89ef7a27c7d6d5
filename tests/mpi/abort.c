/*
 * MPI_Abort: the last rank aborts with error code 7 while the others wait in
 * a barrier that can never complete. The whole job must end with status 7
 * (ctest checks the launcher's exit status and compares the output printed
 * before the abort).
 */
#include <stdio.h>

#include <mpi.h>

int main(int argc, char** argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int total = 0;
  MPI_Allreduce(&rank, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("before MPI_Abort: %d ranks, sum of ranks %d\n", size, total);
    fflush(stdout);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == size - 1) MPI_Abort(MPI_COMM_WORLD, 7);
  MPI_Barrier(MPI_COMM_WORLD); /* never completes: the last rank is gone */
  printf("FAILED: rank %d passed a barrier the aborted rank never entered\n", rank);
  MPI_Finalize();
  return 0;
}
