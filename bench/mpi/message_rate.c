/*
 * Windowed point-to-point bandwidth and message rate, OSU's method
 * (osu_bw, osu_bibw): rank 0 posts a window of MPI_Isend, rank 1 a window
 * of MPI_Irecv, both MPI_Waitall; rank 1 then acknowledges with one small
 * message. --bidirectional: both ranks send and receive a window at once
 * (osu_bibw). Plain MPI: built with chorus-mpicc and with Open MPI's mpicc,
 * so the two sides run the same program. Every received byte is checked
 * in the untimed rounds after the timed ones.
 *
 *   message_rate [--size B] [--window W] [--iters N] [--warmup N] [--bidirectional]
 *
 * Prints "size window iters seconds MB/s messages/s" from rank 0.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_WINDOW = 1024 };

static void fill(unsigned char* buffer, size_t bytes, int sender, int round) {
  for (size_t i = 0; i < bytes; ++i) buffer[i] = (unsigned char)(sender * 31 + round * 7 + (int)i);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t bytes = 8;
  int window = 64, iters = 1000, warmup = 100, bidirectional = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      if (rank == 0) {
        printf("usage: message_rate [--size B] [--window W] [--iters N] [--warmup N] [--bidirectional]\n"
               "  OSU's windowed bandwidth (osu_bw; --bidirectional: osu_bibw) between ranks 0 and 1;\n"
               "  prints: size window iters seconds MB/s messages/s\n");
      }
      MPI_Finalize();
      return 0;
    }
    if (i + 1 < argc && strcmp(argv[i], "--size") == 0) bytes = (size_t)atol(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--window") == 0) window = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--iters") == 0) iters = atoi(argv[++i]);
    else if (i + 1 < argc && strcmp(argv[i], "--warmup") == 0) warmup = atoi(argv[++i]);
    else if (strcmp(argv[i], "--bidirectional") == 0) bidirectional = 1;
    else {
      if (rank == 0) fprintf(stderr, "message_rate: unknown argument \"%s\" (--help)\n", argv[i]);
      MPI_Finalize();
      return 2;
    }
  }
  if (size != 2 || window < 1 || window > MAX_WINDOW || iters < 1 || warmup < 0 || bytes < 1) {
    if (rank == 0) fprintf(stderr, "message_rate: needs 2 ranks, 1 <= window <= %d, iters >= 1, size >= 1\n", MAX_WINDOW);
    MPI_Finalize();
    return 2;
  }
  unsigned char* out = malloc(bytes * (size_t)window);
  unsigned char* in = malloc(bytes * (size_t)window);
  MPI_Request requests[2 * MAX_WINDOW];
  const int peer = 1 - rank;
  const int sends = rank == 0 || bidirectional, receives = rank == 1 || bidirectional;
  int ack = 0, wrong = 0;
  const int checked_rounds = 3;
  double start = 0;
  for (int round = 0; round < warmup + iters + checked_rounds; ++round) {
    if (round == warmup) {
      MPI_Barrier(MPI_COMM_WORLD);
      start = MPI_Wtime();
    }
    const int checking = round >= warmup + iters;
    if (checking) {
      fill(out, bytes * (size_t)window, rank, round);
      memset(in, 0, bytes * (size_t)window);
    }
    int n = 0;
    if (receives)
      for (int w = 0; w < window; ++w) MPI_Irecv(in + (size_t)w * bytes, (int)bytes, MPI_BYTE, peer, 100, MPI_COMM_WORLD, &requests[n++]);
    if (sends)
      for (int w = 0; w < window; ++w) MPI_Isend(out + (size_t)w * bytes, (int)bytes, MPI_BYTE, peer, 100, MPI_COMM_WORLD, &requests[n++]);
    MPI_Waitall(n, requests, MPI_STATUSES_IGNORE);
    if (!bidirectional) {
      if (rank == 0) MPI_Recv(&ack, 1, MPI_INT, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      else MPI_Send(&ack, 1, MPI_INT, 0, 101, MPI_COMM_WORLD);
    }
    if (checking && receives) {
      unsigned char* want = malloc(bytes * (size_t)window);
      fill(want, bytes * (size_t)window, peer, round);
      wrong += memcmp(want, in, bytes * (size_t)window) != 0;
      free(want);
    }
    if (round == warmup + iters - 1) {
      const double seconds = MPI_Wtime() - start;
      const double messages = (double)iters * window * (bidirectional ? 2 : 1);
      if (rank == 0) {
        printf("%zu %d %d %.6f %.3f %.0f\n", bytes, window, iters, seconds, messages * (double)bytes / seconds / 1e6,
               messages / seconds);
      }
    }
  }
  int all_wrong = 0;
  MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && all_wrong) printf("FAILED: %d checked windows arrived wrong\n", all_wrong);
  free(out);
  free(in);
  MPI_Finalize();
  return all_wrong ? 1 : 0;
}
