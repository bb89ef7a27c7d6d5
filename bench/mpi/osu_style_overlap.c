/* osu_style_overlap: computation/communication overlap of MPI_Iallreduce
 * and MPI_Ibcast, OSU's method (osu_iallreduce), for bench/compare-overlap.
 * The same method as chorus-overlap (bench/overlap.cc), so the two tables
 * compare directly:
 *
 *   blocking  mean time of the blocking call (MPI_Allreduce / MPI_Bcast)
 *   pure      mean time of post + wait with nothing in between
 *   compute   a busy loop of `pure` microseconds, with no MPI call inside
 *   overall   mean time of post + compute + wait
 *   overlap % = 100 * (1 - (overall - compute) / pure), clamped to 0..100
 *
 * Each time is the slowest rank's mean, every iteration started after an
 * untimed barrier. float32 sum; every element of the last timed iteration's
 * result is checked after the timing (the inputs are small integers, so the
 * sum is exact), and a wrong element makes the program exit 1.
 * Output: one "overlap,<op>,<bytes>,<blocking>,<pure>,<compute>,<overall>,<pct>"
 * line per size (microseconds) and a table for people, from rank 0. */
#define _POSIX_C_SOURCE 200809L  /* clock_gettime under -std=c11 */
#include <mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* Busy work for `us` microseconds that makes no MPI call. */
static volatile double g_sink;
static void compute_for(double us) {
  const double until = now_us() + us;
  double x = 1.0;
  while (now_us() < until) {
    for (int i = 0; i < 64; ++i) x = sqrt(x + 1.0);
  }
  g_sink = x;
}

static double slowest(double local) {
  double max = 0;
  MPI_Allreduce(&local, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return max;
}

static int iterations_for(size_t bytes, int quick) {
  if (quick) return 5;
  if (bytes <= 65536) return 100;
  if (bytes <= (4u << 20)) return 20;
  return 5;
}

static void usage(void) {
  printf("Usage: mpirun -n N osu_style_overlap [--op iallreduce|ibcast] [--min-bytes B] [--max-bytes B] [--quick]\n\n"
         "Overlap of a non-blocking collective with computation, OSU's method:\n"
         "overlap %% = 100 (1 - (overall - compute) / pure), sizes x4 from min to max\n"
         "(default 4 B .. 64 MiB); --quick: 5 iterations per size.\n");
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* op = "iallreduce";
  size_t min_bytes = 4, max_bytes = 64u << 20;
  int quick = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      if (rank == 0) usage();
      MPI_Finalize();
      return 0;
    } else if (!strcmp(argv[i], "--op") && i + 1 < argc) {
      op = argv[++i];
    } else if (!strcmp(argv[i], "--min-bytes") && i + 1 < argc) {
      min_bytes = strtoull(argv[++i], NULL, 10);
    } else if (!strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
      max_bytes = strtoull(argv[++i], NULL, 10);
    } else if (!strcmp(argv[i], "--quick")) {
      quick = 1;
    } else {
      if (rank == 0) fprintf(stderr, "osu_style_overlap: unknown argument %s (see --help)\n", argv[i]);
      MPI_Finalize();
      return 2;
    }
  }
  const int is_bcast = strcmp(op, "ibcast") == 0;
  if (!is_bcast && strcmp(op, "iallreduce") != 0) {
    if (rank == 0) fprintf(stderr, "osu_style_overlap: --op must be iallreduce or ibcast\n");
    MPI_Finalize();
    return 2;
  }
  if (min_bytes < 4) min_bytes = 4;
  const size_t max_count = max_bytes / sizeof(float);
  float* send = malloc(max_count * sizeof(float));
  float* recv = malloc(max_count * sizeof(float));
  if (send == NULL || recv == NULL) {
    fprintf(stderr, "osu_style_overlap: out of memory for %zu bytes\n", max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (size_t i = 0; i < max_count; ++i) send[i] = (float)((i + (size_t)rank * 7) % 13);
  int wrong_total = 0;
  if (rank == 0) {
    printf("# %s overlap, %d ranks, float32%s (osu_style_overlap)\n", op, size, is_bcast ? ", root 0" : " sum");
    printf("# %12s %12s %12s %12s %12s %9s\n", "bytes", "blocking us", "pure us", "compute us", "overall us", "overlap %");
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    const size_t count = bytes / sizeof(float);
    const int iters = iterations_for(bytes, quick), warmup = quick ? 1 : 3;
    double blocking = 0, pure = 0, overall = 0;
    for (int phase = 0; phase < 3; ++phase) {
      double total = 0;
      for (int it = -warmup; it < iters; ++it) {
        MPI_Barrier(MPI_COMM_WORLD);
        const double start = now_us();
        if (phase == 0) {
          if (is_bcast) MPI_Bcast(rank == 0 ? send : recv, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD);
          else MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        } else {
          MPI_Request request;
          if (is_bcast) MPI_Ibcast(rank == 0 ? send : recv, (int)count, MPI_FLOAT, 0, MPI_COMM_WORLD, &request);
          else MPI_Iallreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
          if (phase == 2) compute_for(pure);
          MPI_Wait(&request, MPI_STATUS_IGNORE);
        }
        if (it >= 0) total += now_us() - start;
      }
      const double mean = slowest(total / iters);
      if (phase == 0) blocking = mean;
      if (phase == 1) pure = mean;
      if (phase == 2) overall = mean;
      /* The busy loop takes the pure time: every rank uses the slowest one. */
    }
    int wrong = 0;
    if (!is_bcast || rank != 0) {
      for (size_t i = 0; i < count; ++i) {
        double expected = 0;
        if (is_bcast) {
          expected = (double)(i % 13);
        } else {
          for (int r = 0; r < size; ++r) expected += (double)((i + (size_t)r * 7) % 13);
        }
        if ((double)recv[i] != expected) ++wrong;
      }
    }
    int wrong_all = 0;
    MPI_Allreduce(&wrong, &wrong_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    wrong_total += wrong_all;
    double percent = 100.0 * (1.0 - (overall - pure) / pure);
    if (percent < 0) percent = 0;
    if (percent > 100) percent = 100;
    if (rank == 0) {
      printf("  %12zu %12.2f %12.2f %12.2f %12.2f %9.1f%s\n", bytes, blocking, pure, pure, overall, percent,
             wrong_all ? "  WRONG RESULTS" : "");
      printf("overlap,%s,%zu,%.3f,%.3f,%.3f,%.3f,%.1f\n", op, bytes, blocking, pure, pure, overall, percent);
      fflush(stdout);
    }
    if (bytes > max_bytes / 4) break;
  }
  if (rank == 0) {
    if (wrong_total) printf("osu_style_overlap: %d wrong elements\n", wrong_total);
    else printf("osu_style_overlap: all results correct\n");
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return wrong_total ? 1 : 0;
}
