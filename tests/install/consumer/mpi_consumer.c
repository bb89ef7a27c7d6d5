/* An MPI program built against an installed chorus: with the installed
 * chorus-mpicc, and through find_package (chorus::chorus_mpi). Runs as a
 * 1-rank job without a launcher. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int rank = -1, size = -1, value = 21, doubled = 0;
  char name[MPI_MAX_OBJECT_NAME];
  int length = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&value, &doubled, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
  MPI_Type_get_name(MPI_INT, name, &length);
  MPI_Finalize();
  if (rank != 0 || size != 1 || doubled != 21) {
    printf("mpi consumer: wrong results (rank %d size %d sum %d)\n", rank, size, doubled);
    return 1;
  }
  printf("mpi consumer: %s ok\n", name);
  return 0;
}
