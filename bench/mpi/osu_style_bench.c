/*
 * osu_style_bench: the MPI counterpart of chorus-bench, for
 * bench/compare-openmpi. Same sweep, same buffers, same inputs, same
 * verification and the same metric definitions as chorus-bench
 * (bench/main.cc, bench/values.cc, docs/benchmarking.md), so the two tables
 * can be joined row by row:
 *
 *  - sizes: min-bytes, then x step-factor (rounded up) up to max-bytes; a
 *    size whose element count equals the previous row's is skipped; for
 *    allgather, reduce_scatter and alltoall the size is the whole
 *    gathered/scattered buffer (each rank's block is size / n);
 *  - per size, fresh buffers; per iteration (warmup + iters): reset the inputs
 *    (with --check; otherwise only before the first), with --sync an untimed
 *    barrier, time the one call with MPI_Wtime, then (with --check) compare
 *    every element with its expected value outside the timed region;
 *  - time = the slowest rank's mean over the timed iterations; with --sync
 *    the median over the timed calls of each call's slowest rank (as
 *    chorus-bench --sync); algbw = size / time; busbw = algbw x nccl-tests' factor (allreduce 2(n-1)/n; allgather,
 *    reduce_scatter, alltoall (n-1)/n; broadcast, reduce 1);
 *  - inputs: element j of rank r is ((r + j) mod 8) + 1, for prod 2 when
 *    (r + j) mod 5 == 0 else 1: exact in any order of reduction.
 *
 * Built with mpicc; run with mpirun. --help lists the options. Exit status 1
 * if any element of any iteration was wrong, 2 for usage errors.
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum coll { ALLREDUCE, BROADCAST, BARRIER, REDUCE, ALLGATHER, REDUCE_SCATTER, ALLTOALL, NUM_COLLS };
static const char* const coll_names[NUM_COLLS] = {"allreduce", "broadcast",      "barrier", "reduce",
                                                  "allgather", "reduce_scatter", "alltoall"};

enum dtype { INT8, UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64, FLOAT32, FLOAT64, NUM_DTYPES };
static const char* const dtype_names[NUM_DTYPES] = {"int8",  "uint8",  "int16", "uint16",  "int32",
                                                    "uint32", "int64", "uint64", "float32", "float64"};
static const size_t dtype_sizes[NUM_DTYPES] = {1, 1, 2, 2, 4, 4, 8, 8, 4, 8};

enum redop { SUM, PROD, MIN, MAX, NUM_OPS };
static const char* const op_names[NUM_OPS] = {"sum", "prod", "min", "max"};

static const double kSentinel = 99; /* never a valid result for these inputs */

struct options {
  int ops[NUM_COLLS];
  int nops;
  int dtype, redop, root, in_place, check, csv, sync;
  size_t min_bytes, max_bytes;
  double step_factor;
  int iters, warmup;
  int inject_error_for_test; /* corrupt one result element on the last rank: the check must fail */
};

static void usage(FILE* out) {
  fputs(
      "Usage: mpirun -n N osu_style_bench [options]\n"
      "\n"
      "Times MPI collectives over a range of sizes, the way chorus-bench times\n"
      "chorus' (same sizes, buffers, inputs, verification and metrics), and prints\n"
      "per size: bytes, elements, time (mean over iterations, slowest rank), algbw\n"
      "= bytes / time and busbw = algbw x the nccl-tests factor (allreduce\n"
      "2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n; broadcast, reduce 1).\n"
      "\n"
      "Options:\n"
      "  --op LIST        allreduce, broadcast, barrier, reduce, allgather,\n"
      "                   reduce_scatter, alltoall, a comma-separated list, or all\n"
      "                   (default allreduce)\n"
      "  --dtype T        int8 uint8 int16 uint16 int32 uint32 int64 uint64 float32\n"
      "                   float64 (default float32)\n"
      "  --redop OP       sum, prod, min or max (default sum)\n"
      "  --min-bytes B    smallest size (default 8; K/M/G suffixes; 0 allowed)\n"
      "  --max-bytes B    largest size (default 64M)\n"
      "  --step-factor F  multiply the size by F each row (default 2; > 1)\n"
      "  --iters N        timed iterations per size (default 20)\n"
      "  --warmup N       untimed iterations first (default 5)\n"
      "  --check          verify every element of every iteration (inputs are reset\n"
      "                   before each one); exit 1 if anything is wrong\n"
      "  --in-place       MPI_IN_PLACE (broadcast is always in place)\n"
      "  --root R         root of broadcast and reduce (default 0)\n"
      "  --sync           an untimed MPI_Barrier before every call (as chorus-bench\n"
      "                   --sync): the time is the median over the calls of each\n"
      "                   call's slowest rank\n"
      "  --csv            comma-separated output, the columns of chorus-bench --csv\n"
      "  -h, --help       this text\n",
      out);
}

static int usage_error(int rank, const char* what, const char* value) {
  if (rank == 0) {
    fprintf(stderr, "osu_style_bench: %s \"%s\"\nRun 'osu_style_bench --help' for the options.\n", what,
            value ? value : "");
  }
  return 2;
}

static int lookup(const char* text, const char* const* names, int n) {
  for (int i = 0; i < n; ++i) {
    if (strcmp(text, names[i]) == 0) return i;
  }
  return -1;
}

/* "0", "8", "64K", "4M", "1G" (powers of 1024). */
static int parse_bytes(const char* text, size_t* out) {
  char* end = NULL;
  if (text[0] < '0' || text[0] > '9') return -1;
  unsigned long long value = strtoull(text, &end, 10);
  unsigned long long scale = 1;
  if (*end == 'K') scale = 1ull << 10, ++end;
  else if (*end == 'M') scale = 1ull << 20, ++end;
  else if (*end == 'G') scale = 1ull << 30, ++end;
  if (*end != '\0' || value > (1ull << 40) / scale) return -1;
  *out = (size_t)(value * scale);
  return 0;
}

static int parse_int(const char* text, int min, int max, int* out) {
  char* end = NULL;
  long value = strtol(text, &end, 10);
  if (text[0] == '\0' || *end != '\0' || value < min || value > max) return -1;
  *out = (int)value;
  return 0;
}

/* Returns 0, or the exit status (2: usage error; -1: --help printed). */
static int parse_options(int argc, char** argv, int rank, struct options* o) {
  memset(o, 0, sizeof *o);
  o->ops[0] = ALLREDUCE;
  o->nops = 1;
  o->dtype = FLOAT32;
  o->redop = SUM;
  o->min_bytes = 8;
  o->max_bytes = 64u << 20;
  o->step_factor = 2;
  o->iters = 20;
  o->warmup = 5;
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : NULL;
    int takes_value = 1;
    if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
      if (rank == 0) usage(stdout);
      return -1;
    } else if (strcmp(arg, "--check") == 0) {
      o->check = 1, takes_value = 0;
    } else if (strcmp(arg, "--in-place") == 0) {
      o->in_place = 1, takes_value = 0;
    } else if (strcmp(arg, "--csv") == 0) {
      o->csv = 1, takes_value = 0;
    } else if (strcmp(arg, "--sync") == 0) {
      o->sync = 1, takes_value = 0;
    } else if (strcmp(arg, "--inject-error-for-test") == 0) {
      o->inject_error_for_test = 1, takes_value = 0;
    } else if (value == NULL) {
      return usage_error(rank, "missing value or unknown option", arg);
    } else if (strcmp(arg, "--op") == 0) {
      o->nops = 0;
      if (strcmp(value, "all") == 0) {
        for (int c = 0; c < NUM_COLLS; ++c) o->ops[o->nops++] = c;
      } else {
        char list[256];
        snprintf(list, sizeof list, "%s", value);
        for (char* name = strtok(list, ","); name != NULL; name = strtok(NULL, ",")) {
          int c = lookup(name, coll_names, NUM_COLLS);
          if (c < 0 || o->nops == NUM_COLLS) return usage_error(rank, "--op: unknown collective", name);
          o->ops[o->nops++] = c;
        }
        if (o->nops == 0) return usage_error(rank, "--op: expected a collective name", value);
      }
    } else if (strcmp(arg, "--dtype") == 0) {
      if ((o->dtype = lookup(value, dtype_names, NUM_DTYPES)) < 0) return usage_error(rank, "--dtype", value);
    } else if (strcmp(arg, "--redop") == 0) {
      if ((o->redop = lookup(value, op_names, NUM_OPS)) < 0) return usage_error(rank, "--redop", value);
    } else if (strcmp(arg, "--min-bytes") == 0) {
      if (parse_bytes(value, &o->min_bytes) != 0) return usage_error(rank, "--min-bytes", value);
    } else if (strcmp(arg, "--max-bytes") == 0) {
      if (parse_bytes(value, &o->max_bytes) != 0) return usage_error(rank, "--max-bytes", value);
    } else if (strcmp(arg, "--step-factor") == 0) {
      char* end = NULL;
      o->step_factor = strtod(value, &end);
      if (*end != '\0' || !(o->step_factor > 1.0) || !isfinite(o->step_factor)) {
        return usage_error(rank, "--step-factor (a number greater than 1)", value);
      }
    } else if (strcmp(arg, "--iters") == 0) {
      if (parse_int(value, 1, 1000000, &o->iters) != 0) return usage_error(rank, "--iters", value);
    } else if (strcmp(arg, "--warmup") == 0) {
      if (parse_int(value, 0, 1000000, &o->warmup) != 0) return usage_error(rank, "--warmup", value);
    } else if (strcmp(arg, "--root") == 0) {
      if (parse_int(value, 0, 1 << 20, &o->root) != 0) return usage_error(rank, "--root", value);
    } else {
      return usage_error(rank, "unknown option", arg);
    }
    i += takes_value;
  }
  if (o->min_bytes > o->max_bytes) return usage_error(rank, "--min-bytes is larger than --max-bytes", "");
  return 0;
}

/* --- element access and expected values (bench/values.cc) ------------------ */

static double load(const void* b, size_t i, int t) {
  switch (t) {
    case INT8: return ((const int8_t*)b)[i];
    case UINT8: return ((const uint8_t*)b)[i];
    case INT16: return ((const int16_t*)b)[i];
    case UINT16: return ((const uint16_t*)b)[i];
    case INT32: return ((const int32_t*)b)[i];
    case UINT32: return ((const uint32_t*)b)[i];
    case INT64: return (double)((const int64_t*)b)[i];
    case UINT64: return (double)((const uint64_t*)b)[i];
    case FLOAT32: return ((const float*)b)[i];
    default: return ((const double*)b)[i];
  }
}

/* Integers wrap (two's complement), as chorus' kernels and chorus-bench do. */
static void store(void* b, size_t i, int t, double v) {
  uint64_t w = (uint64_t)(int64_t)v;
  switch (t) {
    case INT8: ((int8_t*)b)[i] = (int8_t)w; break;
    case UINT8: ((uint8_t*)b)[i] = (uint8_t)w; break;
    case INT16: ((int16_t*)b)[i] = (int16_t)w; break;
    case UINT16: ((uint16_t*)b)[i] = (uint16_t)w; break;
    case INT32: ((int32_t*)b)[i] = (int32_t)w; break;
    case UINT32: ((uint32_t*)b)[i] = (uint32_t)w; break;
    case INT64: ((int64_t*)b)[i] = (int64_t)w; break;
    case UINT64: ((uint64_t*)b)[i] = w; break;
    case FLOAT32: ((float*)b)[i] = (float)v; break;
    default: ((double*)b)[i] = v; break;
  }
}

static double as_stored(double v, int t) {
  uint64_t cell;
  store(&cell, 0, t, v);
  return load(&cell, 0, t);
}

static double input_value(int rank, size_t index, int op) {
  if (op == PROD) return ((size_t)rank + index) % 5 == 0 ? 2.0 : 1.0;
  return (double)(((size_t)rank + index) % 8 + 1);
}

static double reduced_value(int ranks, size_t index, int op, int t) {
  double result = input_value(0, index, op);
  for (int r = 1; r < ranks; ++r) {
    double v = input_value(r, index, op);
    switch (op) {
      case SUM: result += v; break;
      case PROD: result *= v; break;
      case MIN: result = v < result ? v : result; break;
      default: result = v > result ? v : result; break;
    }
  }
  return as_stored(result, t);
}

/* --- one collective's shape, inputs and expected outputs -------------------- */

struct shape {
  size_t count, send_elems, recv_elems;
};

static struct shape shape_of(int c, size_t bytes, size_t elem, int n) {
  struct shape s = {0, 0, 0};
  size_t per_rank = bytes / elem / (size_t)n;
  switch (c) {
    case BARRIER: break;
    case ALLGATHER: s.count = per_rank, s.send_elems = per_rank, s.recv_elems = per_rank * (size_t)n; break;
    case REDUCE_SCATTER: s.count = per_rank, s.send_elems = per_rank * (size_t)n, s.recv_elems = per_rank; break;
    case ALLTOALL: s.count = per_rank, s.send_elems = s.recv_elems = per_rank * (size_t)n; break;
    default: s.count = s.send_elems = s.recv_elems = bytes / elem; break;
  }
  return s;
}

static int reduces(int c) { return c == ALLREDUCE || c == REDUCE || c == REDUCE_SCATTER; }

static double bus_factor(int c, int n) {
  switch (c) {
    case ALLREDUCE: return 2.0 * (n - 1) / n;
    case ALLGATHER:
    case REDUCE_SCATTER:
    case ALLTOALL: return (double)(n - 1) / n;
    case BARRIER: return 0;
    default: return 1;
  }
}

/* Expected receive element `i` on `rank` (NaN: not checked). */
static double expected(int c, const struct shape* s, size_t i, int rank, int n, const struct options* o) {
  switch (c) {
    case ALLREDUCE: return reduced_value(n, i, o->redop, o->dtype);
    case BROADCAST: return as_stored(input_value(o->root, i, SUM), o->dtype);
    case REDUCE: return rank == o->root ? reduced_value(n, i, o->redop, o->dtype) : NAN;
    case ALLGATHER: return as_stored(input_value((int)(i / s->count), i % s->count, SUM), o->dtype);
    case REDUCE_SCATTER: return reduced_value(n, (size_t)rank * s->count + i, o->redop, o->dtype);
    case ALLTOALL:
      return as_stored(input_value((int)(i / s->count), (size_t)rank * s->count + i % s->count, SUM), o->dtype);
    default: return NAN;
  }
}

/* Buffers of one row. In place (as chorus-bench lays them out): one buffer of
 * max(send, recv) elements; allgather's input is the rank's own block. */
struct buffers {
  unsigned char* send; /* NULL in place */
  unsigned char* recv;
};

static MPI_Datatype mpi_dtype(int t) {
  switch (t) {
    case INT8: return MPI_INT8_T;
    case UINT8: return MPI_UINT8_T;
    case INT16: return MPI_INT16_T;
    case UINT16: return MPI_UINT16_T;
    case INT32: return MPI_INT32_T;
    case UINT32: return MPI_UINT32_T;
    case INT64: return MPI_INT64_T;
    case UINT64: return MPI_UINT64_T;
    case FLOAT32: return MPI_FLOAT;
    default: return MPI_DOUBLE;
  }
}

static MPI_Op mpi_op(int op) {
  switch (op) {
    case SUM: return MPI_SUM;
    case PROD: return MPI_PROD;
    case MIN: return MPI_MIN;
    default: return MPI_MAX;
  }
}

static int one_buffer(int c, const struct options* o) { return o->in_place || c == BROADCAST; }

static void fill(int c, const struct shape* s, struct buffers* b, int rank, const struct options* o) {
  for (size_t i = 0; i < s->recv_elems; ++i) store(b->recv, i, o->dtype, kSentinel);
  if (c == BROADCAST && rank != o->root) return;
  int op = reduces(c) ? o->redop : SUM;
  unsigned char* input = one_buffer(c, o) ? b->recv : b->send;
  if (o->in_place && c == ALLGATHER) input += (size_t)rank * s->count * dtype_sizes[o->dtype];
  for (size_t i = 0; i < s->send_elems; ++i) store(input, i, o->dtype, input_value(rank, i, op));
}

static uint64_t count_wrong(int c, const struct shape* s, const struct buffers* b, int rank, int n,
                            const struct options* o, int report) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < s->recv_elems; ++i) {
    double want = expected(c, s, i, rank, n, o);
    if (isnan(want)) continue;
    double got = load(b->recv, i, o->dtype);
    if (got == want) continue;
    if (wrong < (uint64_t)report) {
      fprintf(stderr, "rank %d: %s element %zu of %zu is %g, expected %g\n", rank, coll_names[c], i, s->recv_elems,
              got, want);
    }
    ++wrong;
  }
  return wrong;
}

static int run(int c, const struct shape* s, struct buffers* b, int rank, const struct options* o) {
  const MPI_Datatype t = mpi_dtype(o->dtype);
  const MPI_Op op = mpi_op(o->redop);
  const int count = (int)s->count;
  const void* send = o->in_place ? MPI_IN_PLACE : b->send;
  MPI_Comm w = MPI_COMM_WORLD;
  switch (c) {
    case ALLREDUCE: return MPI_Allreduce(send, b->recv, count, t, op, w);
    case BROADCAST: return MPI_Bcast(b->recv, count, t, o->root, w);
    case BARRIER: return MPI_Barrier(w);
    case REDUCE:
      if (o->in_place && rank != o->root) return MPI_Reduce(b->recv, NULL, count, t, op, o->root, w);
      return MPI_Reduce(send, b->recv, count, t, op, o->root, w);
    case ALLGATHER: return MPI_Allgather(send, count, t, b->recv, count, t, w);
    case REDUCE_SCATTER: return MPI_Reduce_scatter_block(send, b->recv, count, t, op, w);
    default: return MPI_Alltoall(send, count, t, b->recv, count, t, w);
  }
}

static int compare_doubles(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The median of values[0..count) (sorts them). */
static double median(double* values, int count) {
  if (count <= 0) return 0;
  qsort(values, (size_t)count, sizeof(double), compare_doubles);
  return count % 2 == 1 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
}

static void print_header(int c, int n, const struct options* o) {
  if (o->csv) {
    printf("op,algorithm,bytes,count,dtype,redop,root,time_us,algbw_GBs,busbw_GBs,wrong\n");
    return;
  }
  printf("#\n# %s  ranks %d  MPI (%s)  dtype %s  redop %s  root %d  %s\n", coll_names[c], n, "osu_style_bench",
         dtype_names[o->dtype], reduces(c) ? op_names[o->redop] : "-", o->root,
         o->in_place ? "in-place" : "out-of-place");
  printf("# %12s %12s %-20s %10s %9s %9s %8s\n", "size(B)", "count", "algorithm", "time(us)", "algbw", "busbw",
         "#wrong");
  printf("# %12s %12s %-20s %10s %9s %9s %8s\n", "", "(elements)", "", "", "(GB/s)", "(GB/s)", "");
  fflush(stdout);
}

/* One size: returns the wrong elements over all ranks and iterations. */
static uint64_t row(int c, size_t bytes, const struct shape* s, int rank, int n, const struct options* o) {
  const size_t elem = dtype_sizes[o->dtype];
  size_t words = ((s->send_elems > s->recv_elems ? s->send_elems : s->recv_elems) * elem + 7) / 8 + 1;
  struct buffers b;
  /* Zeroed like chorus-bench's std::vector buffers. */
  b.recv = (unsigned char*)calloc(one_buffer(c, o) ? words : (s->recv_elems * elem + 7) / 8 + 1, 8);
  b.send = one_buffer(c, o) ? NULL : (unsigned char*)calloc((s->send_elems * elem + 7) / 8 + 1, 8);
  if (b.recv == NULL || (!one_buffer(c, o) && b.send == NULL)) {
    fprintf(stderr, "osu_style_bench: rank %d: out of memory for %zu bytes\n", rank, bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  uint64_t wrong = 0;
  double busy = 0;
  double* call_seconds = (double*)calloc((size_t)o->iters, sizeof(double)); /* --sync: each timed call's */
  double* slowest_calls = (double*)calloc((size_t)o->iters, sizeof(double));
  if (call_seconds == NULL || slowest_calls == NULL) {
    fprintf(stderr, "osu_style_bench: rank %d: out of memory for %d call times\n", rank, o->iters);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (int it = 0; it < o->warmup + o->iters; ++it) {
    if (o->check || it == 0) fill(c, s, &b, rank, o);
    if (o->sync) MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    int err = run(c, s, &b, rank, o);
    double seconds = MPI_Wtime() - start;
    if (err != MPI_SUCCESS) {
      char text[MPI_MAX_ERROR_STRING];
      int length = 0;
      MPI_Error_string(err, text, &length);
      fprintf(stderr, "osu_style_bench: rank %d: %s of %zu bytes failed: %s\n", rank, coll_names[c], bytes, text);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (it >= o->warmup) {
      busy += seconds;
      call_seconds[it - o->warmup] = seconds;
    }
    if (o->inject_error_for_test && rank == n - 1 && s->recv_elems > 0) store(b.recv, 0, o->dtype, kSentinel);
    if (o->check) wrong += count_wrong(c, s, &b, rank, n, o, wrong < 3 ? 3 : 0);
  }
  free(b.send);
  free(b.recv);
  double mean = busy / o->iters, slowest = 0;
  uint64_t wrong_all = 0;
  if (o->sync) {
    MPI_Allreduce(call_seconds, slowest_calls, o->iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    slowest = median(slowest_calls, o->iters);
  } else {
    MPI_Allreduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }
  free(call_seconds);
  free(slowest_calls);
  MPI_Allreduce(&wrong, &wrong_all, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    /* The bytes one call moves, as chorus-bench shows them (3 ranks: a 16 B allgather moves 12 B). */
    size_t shown = c == BARRIER ? 0 : (s->send_elems > s->recv_elems ? s->send_elems : s->recv_elems) * elem;
    double algbw = slowest > 0 ? (double)shown / slowest / 1e9 : 0;
    double busbw = algbw * bus_factor(c, n);
    char wrong_text[32];
    if (o->check) snprintf(wrong_text, sizeof wrong_text, "%llu", (unsigned long long)wrong_all);
    else snprintf(wrong_text, sizeof wrong_text, "N/A");
    if (o->csv) {
      printf("%s,ompi,%zu,%zu,%s,%s,%d,%.2f,%.4f,%.4f,%s\n", coll_names[c], shown, s->count, dtype_names[o->dtype],
             reduces(c) ? op_names[o->redop] : "-", o->root, slowest * 1e6, algbw, busbw, wrong_text);
    } else {
      printf("  %12zu %12zu %-20s %10.2f %9.3f %9.3f %8s\n", shown, s->count, "ompi", slowest * 1e6, algbw, busbw,
             wrong_text);
    }
    fflush(stdout);
  }
  return wrong_all;
}

static size_t next_size(size_t bytes, const struct options* o) {
  size_t next = (size_t)ceil((double)bytes * o->step_factor);
  if (next <= bytes) next = bytes + 1;
  return next < o->max_bytes ? next : o->max_bytes;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  struct options o;
  int status = parse_options(argc, argv, rank, &o);
  if (status == 0 && o.root >= n) status = usage_error(rank, "--root is not a rank of this job", "");
  if (status != 0) {
    MPI_Finalize();
    return status < 0 ? 0 : status;
  }
  uint64_t wrong = 0;
  for (int k = 0; k < o.nops; ++k) {
    const int c = o.ops[k];
    if (rank == 0) print_header(c, n, &o);
    size_t previous = SIZE_MAX;
    for (size_t bytes = o.min_bytes;; bytes = next_size(bytes, &o)) {
      struct shape s = shape_of(c, bytes, dtype_sizes[o.dtype], n);
      if (c == BARRIER || s.count != previous) {
        previous = s.count;
        wrong += row(c, bytes, &s, rank, n, &o);
      }
      if (c == BARRIER || bytes >= o.max_bytes) break;
    }
  }
  if (rank == 0 && o.check) {
    printf("# osu_style_bench: %s\n", wrong == 0 ? "all results correct" : "WRONG RESULTS");
  }
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
