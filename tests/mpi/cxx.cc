// The MPI subset from C++ (chorus-mpicxx / Open MPI's mpicxx): mpi.h is
// usable from C++ (extern "C"), with standard containers for the buffers.
#include <mpi.h>

#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  std::vector<long> mine(4);
  std::iota(mine.begin(), mine.end(), 10L * rank);
  std::vector<long> sums(4), everyone(4 * static_cast<size_t>(size));
  MPI_Allreduce(mine.data(), sums.data(), 4, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allgather(mine.data(), 4, MPI_LONG, everyone.data(), 4, MPI_LONG, MPI_COMM_WORLD);

  MPI_Comm pairs;
  MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pairs);
  int pair_size = 0;
  MPI_Comm_size(pairs, &pair_size);
  double value = 0.5 * rank, pair_max = 0;
  MPI_Allreduce(&value, &pair_max, 1, MPI_DOUBLE, MPI_MAX, pairs);
  MPI_Comm_free(&pairs);

  // Rank 0 prints everyone's line, received in rank order.
  std::string line = "rank " + std::to_string(rank) + ": sums";
  for (long s : sums) line += " " + std::to_string(s);
  line += ", gathered " + std::to_string(std::accumulate(everyone.begin(), everyone.end(), 0L));
  line += ", pair of " + std::to_string(pair_size) + " max " + std::to_string(pair_max);
  if (rank == 0) {
    std::puts(line.c_str());
    for (int r = 1; r < size; ++r) {
      std::vector<char> text(256);
      MPI_Status status;
      MPI_Recv(text.data(), static_cast<int>(text.size()), MPI_CHAR, r, 0, MPI_COMM_WORLD, &status);
      int length = 0;
      MPI_Get_count(&status, MPI_CHAR, &length);
      std::printf("%.*s\n", length, text.data());
    }
  } else {
    MPI_Send(line.data(), static_cast<int>(line.size()), MPI_CHAR, 0, 0, MPI_COMM_WORLD);
  }
  bool ok = sums[0] == 10L * size * (size - 1) / 2 && everyone[4 * static_cast<size_t>(size) - 1] == 10L * (size - 1) + 3;
  if (!ok) std::printf("FAILED: rank %d\n", rank);
  MPI_Finalize();
  // Every rank's own pass line, after MPI_Finalize (compare.sh requires one per rank).
  if (ok) std::printf("cxx: rank %d passed\n", rank);
  return ok ? 0 : 1;
}
