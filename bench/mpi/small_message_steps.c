/*
 * small_message_steps: where the time of a small collective goes when every
 * call is timed alone after a barrier (the --sync timing of chorus-bench and
 * osu_style_bench). Built twice, with chorus-mpicc and Open MPI's mpicc, so
 * both libraries run the same code (bench/verbs-vs-ucx --steps runs them).
 *
 * Every rank stamps CLOCK_MONOTONIC when it leaves the barrier (enters the
 * call) and when the call returns. All ranks must share one clock, so all
 * must run on one host (checked). Per call, from the stamps of all ranks:
 *
 *   slowest     max over ranks of (return - entry): what the benchmarks time
 *   entry skew  last entry - first entry: what the barrier before left
 *   after all   last return - last entry: the operation's own latency once
 *               every rank is in it, free of the skew; the larger of
 *   last own    the last rank to enter: its return - its entry (how long it
 *               takes once its peers' messages are already there), and
 *   others      the other ranks: their last return - the last entry (how
 *               long the last rank's messages take to reach and release them)
 *   from root   (broadcast) last return - the root's entry
 *
 * Printed: the mean of "slowest" (the benchmarks' figure) and the medians of
 * the others. Every result is checked after its call, outside the stamps.
 * Exit status 1 if a result was wrong, 2 for usage errors.
 */
#define _POSIX_C_SOURCE 200809L  /* clock_gettime under -std=c11 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ALLREDUCE, BROADCAST, BARRIER, NUM_OPS };
static const char* const op_names[NUM_OPS] = {"allreduce", "broadcast", "barrier"};

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* values, int count) {
  qsort(values, (size_t)count, sizeof *values, compare_doubles);
  return count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

static int usage(int rank, const char* problem, const char* value) {
  if (rank == 0) {
    if (problem) fprintf(stderr, "small_message_steps: %s%s%s\n", problem, value ? ": " : "", value ? value : "");
    fprintf(problem ? stderr : stdout,
            "usage: small_message_steps [--ops LIST] [--ints N] [--iters N] [--warmup N]\n"
            "  Times small collectives each alone after a barrier and splits the time\n"
            "  into the entry skew the barrier left and the operation's own latency.\n"
            "  All ranks must run on one host (they compare CLOCK_MONOTONIC stamps).\n"
            "  --ops LIST   allreduce, broadcast, barrier (default all three)\n"
            "  --ints N     int32 elements per call (default 1: 4 bytes)\n"
            "  --iters N    timed calls per operation (default 2000)\n"
            "  --warmup N   untimed calls before them (default 200)\n"
            "  --help       this text\n");
  }
  return problem ? 2 : 0;
}

static int parse_count(const char* text, int min, int* out) {
  char* end = NULL;
  long value = strtol(text, &end, 10);
  if (text[0] == '\0' || *end != '\0' || value < min || value > 10000000) return -1;
  *out = (int)value;
  return 0;
}

/* The element j of rank r's input in call i; sums stay far below 2^31. */
static int input(int rank, int call, int j) { return (rank * 7 + call * 3 + j) % 1000 + 1; }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int ops[NUM_OPS] = {1, 1, 1}, ints = 1, iters = 2000, warmup = 200, status = -1;
  for (int a = 1; a < argc && status < 0; ++a) {
    const char* arg = argv[a];
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      status = usage(rank, NULL, NULL);
      break;
    }
    if (a + 1 >= argc) {
      status = usage(rank, "missing value after", arg);
      break;
    }
    const char* value = argv[++a];
    if (strcmp(arg, "--ops") == 0) {
      memset(ops, 0, sizeof ops);
      char list[256];
      snprintf(list, sizeof list, "%s", value);
      for (char* name = strtok(list, ","); name && status < 0; name = strtok(NULL, ",")) {
        int found = 0;
        for (int o = 0; o < NUM_OPS; ++o) {
          if (strcmp(name, op_names[o]) == 0) ops[o] = found = 1;
        }
        if (!found) status = usage(rank, "unknown operation", name);
      }
    } else if (strcmp(arg, "--ints") == 0) {
      if (parse_count(value, 1, &ints) != 0) status = usage(rank, "--ints needs a count >= 1", value);
    } else if (strcmp(arg, "--iters") == 0) {
      if (parse_count(value, 1, &iters) != 0) status = usage(rank, "--iters needs a count >= 1", value);
    } else if (strcmp(arg, "--warmup") == 0) {
      if (parse_count(value, 0, &warmup) != 0) status = usage(rank, "--warmup needs a count >= 0", value);
    } else {
      status = usage(rank, "unknown option", arg);
    }
  }
  if (status >= 0) {
    MPI_Finalize();
    return status;
  }

  /* One clock for all: every rank on the host rank 0 is on. */
  char host[MPI_MAX_PROCESSOR_NAME] = {0}, first[MPI_MAX_PROCESSOR_NAME] = {0};
  int length = 0, same = 1, all_same = 0;
  MPI_Get_processor_name(host, &length);
  memcpy(first, host, sizeof host);
  MPI_Bcast(first, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
  same = strcmp(first, host) == 0;
  MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  if (!all_same) {
    if (rank == 0) fprintf(stderr, "small_message_steps: the ranks run on more than one host; their clocks differ\n");
    MPI_Finalize();
    return 2;
  }

  int* buffer = malloc(sizeof(int) * (size_t)ints);
  double* stamps = malloc(sizeof(double) * 2 * (size_t)iters);
  double* all = rank == 0 ? malloc(sizeof(double) * 2 * (size_t)iters * (size_t)n) : NULL;
  double *skew = malloc(sizeof(double) * (size_t)iters), *after = malloc(sizeof(double) * (size_t)iters);
  double* from_root = malloc(sizeof(double) * (size_t)iters);
  double *last_own = malloc(sizeof(double) * (size_t)iters), *others = malloc(sizeof(double) * (size_t)iters);
  if (!buffer || !stamps || (rank == 0 && !all) || !skew || !after || !from_root || !last_own || !others) {
    fprintf(stderr, "small_message_steps: rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  long wrong = 0;
  if (rank == 0) {
    printf("# small_message_steps: %d ranks, %d bytes, %d timed calls each alone after a barrier; times in us\n", n,
           ints * 4, iters);
    printf("# slowest = the benchmarks' figure (mean over calls of the slowest rank); the rest are medians\n");
    printf("%-10s %8s %8s %11s %9s %8s %10s %10s\n", "op", "slowest", "skew", "after_all", "last_own", "others",
           "from_root", "min_after");
  }
  for (int o = 0; o < NUM_OPS; ++o) {
    if (!ops[o]) continue;
    for (int i = -warmup; i < iters; ++i) {
      for (int j = 0; j < ints; ++j) buffer[j] = input(o == BROADCAST ? 0 : rank, i, j);
      if (o == BROADCAST && rank != 0) memset(buffer, 0, sizeof(int) * (size_t)ints);
      MPI_Barrier(MPI_COMM_WORLD);
      double entry = now_us();
      if (o == ALLREDUCE) MPI_Allreduce(MPI_IN_PLACE, buffer, ints, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
      if (o == BROADCAST) MPI_Bcast(buffer, ints, MPI_INT, 0, MPI_COMM_WORLD);
      if (o == BARRIER) MPI_Barrier(MPI_COMM_WORLD);
      double done = now_us();
      if (i >= 0) {
        stamps[2 * i] = entry;
        stamps[2 * i + 1] = done;
      }
      for (int j = 0; j < ints && o != BARRIER; ++j) {
        long expected = 0;
        for (int r = 0; r < n; ++r) expected += o == ALLREDUCE ? input(r, i, j) : (r == 0 ? input(0, i, j) : 0);
        if (buffer[j] != expected && wrong++ < 3) {
          fprintf(stderr, "small_message_steps: rank %d: %s call %d element %d: %d, expected %ld\n", rank,
                  op_names[o], i, j, buffer[j], expected);
        }
      }
    }
    MPI_Gather(stamps, 2 * iters, MPI_DOUBLE, all, 2 * iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank != 0) continue;
    double slowest_sum = 0, min_after = 1e30;
    for (int i = 0; i < iters; ++i) {
      double first_in = 1e300, last_in = -1e300, last_out = -1e300, slowest = 0;
      int last_rank = 0;
      for (int r = 0; r < n; ++r) {
        double in = all[(size_t)r * 2 * iters + 2 * i], out = all[(size_t)r * 2 * iters + 2 * i + 1];
        if (in < first_in) first_in = in;
        if (in > last_in) {
          last_in = in;
          last_rank = r;
        }
        if (out > last_out) last_out = out;
        if (out - in > slowest) slowest = out - in;
      }
      double others_out = last_in;  // n == 1: no others
      for (int r = 0; r < n; ++r) {
        double out = all[(size_t)r * 2 * iters + 2 * i + 1];
        if (r != last_rank && out > others_out) others_out = out;
      }
      last_own[i] = all[(size_t)last_rank * 2 * iters + 2 * i + 1] - last_in;
      others[i] = others_out - last_in;
      slowest_sum += slowest;
      skew[i] = last_in - first_in;
      after[i] = last_out - last_in;
      from_root[i] = last_out - all[2 * i];  // rank 0 is the broadcast's root
      if (after[i] < min_after) min_after = after[i];
    }
    char root_text[32] = "-";
    if (o == BROADCAST) snprintf(root_text, sizeof root_text, "%.2f", median(from_root, iters));
    printf("%-10s %8.2f %8.2f %11.2f %9.2f %8.2f %10s %10.2f\n", op_names[o], slowest_sum / iters,
           median(skew, iters), median(after, iters), median(last_own, iters), median(others, iters), root_text,
           min_after);
    fflush(stdout);
  }
  long wrong_all = 0;
  MPI_Allreduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    printf(wrong_all ? "small_message_steps: FAILED: %ld wrong results\n" : "small_message_steps: all results correct\n",
           wrong_all);
  }
  free(buffer);
  free(stamps);
  free(all);
  free(skew);
  free(after);
  free(from_root);
  free(last_own);
  free(others);
  MPI_Finalize();
  /* Every rank's own last line: tests require one from each rank. */
  if (!wrong_all) printf("small_message_steps: rank %d passed\n", rank);
  return wrong_all ? 1 : 0;
}
