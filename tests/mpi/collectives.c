/*
 * Every collective of the MPI subset on MPI_COMM_WORLD: barrier, bcast,
 * reduce, allreduce, allgather(v), gather(v), scatter(v), alltoall,
 * reduce_scatter(_block), scan, exscan; each root, MPI_IN_PLACE where MPI
 * allows it, and sizes below and above chorus' eager limit (16 KiB). Values
 * are integers (exact in float/double in any order of summation), each
 * result is checked against its closed form, and a digest of it is printed
 * so ctest can compare with Open MPI.
 */
#include "report.h"

static int rank, size;

/* Rank r's i-th input value. */
static int value(int r, int i) { return (r + 1) * 100 + i; }

static long long sum_of_values(int i) { /* sum over ranks of value(r, i) */
  return 100LL * size * (size + 1) / 2 + (long long)size * i;
}

/* Prints a short int array. */
static void say_ints(const char* what, const int* values, int count) {
  char line[512];
  int used = snprintf(line, sizeof line, "%s:", what);
  for (int i = 0; i < count && used < (int)sizeof line - 16; ++i) used += snprintf(line + used, sizeof line - (size_t)used, " %d", values[i]);
  say("%s", line);
}

static void barrier(void) {
  expect(MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS, "barrier");
  say("barrier: ok");
}

static void bcast(void) {
  for (int root = 0; root < size; ++root) {
    int data[5];
    for (int i = 0; i < 5; ++i) data[i] = rank == root ? value(root, i) : -1;
    MPI_Bcast(data, 5, MPI_INT, root, MPI_COMM_WORLD);
    int ok = 1;
    for (int i = 0; i < 5; ++i) ok &= data[i] == value(root, i);
    expect(ok, "bcast from root %d", root);
    if (root == size - 1) say_ints("bcast int", data, 5);
  }
  /* Above the eager limit: 40000 doubles from the last rank. */
  enum { N = 40000 };
  static double big[N];
  for (int i = 0; i < N; ++i) big[i] = rank == size - 1 ? (double)(i % 1000) : -1.0;
  MPI_Bcast(big, N, MPI_DOUBLE, size - 1, MPI_COMM_WORLD);
  double sum = 0;
  int ok = 1;
  for (int i = 0; i < N; ++i) {
    ok &= big[i] == (double)(i % 1000);
    sum += big[i];
  }
  expect(ok, "bcast of %d doubles", N);
  say("bcast %d doubles: sum %.1f", N, sum);
}

static void allreduce(void) {
  int in[4], out[4];
  for (int i = 0; i < 4; ++i) in[i] = value(rank, i);
  MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  const char* names[] = {"sum", "prod", "min", "max"};
  for (int o = 0; o < 4; ++o) {
    int small[4];
    for (int i = 0; i < 4; ++i) small[i] = (rank + 1) * (i + 1) - (rank == 1 ? 7 : 0);
    MPI_Allreduce(small, out, 4, MPI_INT, ops[o], MPI_COMM_WORLD);
    char what[64];
    snprintf(what, sizeof what, "allreduce int %s", names[o]);
    say_ints(what, out, 4);
  }
  MPI_Allreduce(in, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int ok = 1;
  for (int i = 0; i < 4; ++i) ok &= out[i] == sum_of_values(i);
  expect(ok, "allreduce int sum");

  /* In place. */
  for (int i = 0; i < 4; ++i) out[i] = value(rank, i);
  MPI_Allreduce(MPI_IN_PLACE, out, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  ok = 1;
  for (int i = 0; i < 4; ++i) ok &= out[i] == value(size - 1, i);
  expect(ok, "allreduce in place max");
  say_ints("allreduce in place max", out, 4);

  /* MPI_SUM on MPI_CHAR, and other C types. */
  char c = (char)(rank + 1), csum = 0;
  MPI_Allreduce(&c, &csum, 1, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD);
  expect(csum == size * (size + 1) / 2, "allreduce char sum");
  say("allreduce char sum: %d", csum);
  float f = (float)(rank + 1) * 0.5f, fsum = 0;
  MPI_Allreduce(&f, &fsum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double d = (double)(rank + 1) * 0.25, dprod = 0;
  MPI_Allreduce(&d, &dprod, 1, MPI_DOUBLE, MPI_PROD, MPI_COMM_WORLD);
  long long ll = 1LL << (30 + rank), llsum = 0;
  MPI_Allreduce(&ll, &llsum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  unsigned u = 4000000000u - (unsigned)rank, umin = 0;
  MPI_Allreduce(&u, &umin, 1, MPI_UNSIGNED, MPI_MIN, MPI_COMM_WORLD);
  short s = (short)(-rank), smax = 0;
  MPI_Allreduce(&s, &smax, 1, MPI_SHORT, MPI_MAX, MPI_COMM_WORLD);
  expect(fsum == 0.25f * (float)(size * (size + 1)), "allreduce float sum");
  expect(umin == 4000000000u - (unsigned)(size - 1), "allreduce unsigned min");
  say("allreduce float sum %.2f, double prod %.6f, long long sum %lld, unsigned min %u, short max %d", fsum, dprod,
      llsum, umin, smax);

  /* Above the eager limit (chorus' large-message algorithms). */
  enum { N = 30000 };
  static int big_in[N], big_out[N];
  for (int i = 0; i < N; ++i) big_in[i] = rank * N + i;
  MPI_Allreduce(big_in, big_out, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  ok = 1;
  long long total = 0;
  for (int i = 0; i < N; ++i) {
    ok &= big_out[i] == N * size * (size - 1) / 2 + size * i;
    total += big_out[i];
  }
  expect(ok, "allreduce of %d ints", N);
  say("allreduce %d ints: total %lld", N, total);
}

static void reduce(void) {
  for (int root = 0; root < size; ++root) {
    int in[3], out[3] = {-1, -1, -1};
    for (int i = 0; i < 3; ++i) in[i] = value(rank, i);
    MPI_Reduce(in, rank == root ? out : NULL, 3, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD);
    if (rank == root) {
      int ok = 1;
      for (int i = 0; i < 3; ++i) ok &= out[i] == sum_of_values(i);
      expect(ok, "reduce sum to root %d", root);
      say_ints("reduce sum at root", out, 3);
    }
    /* In place at the root. */
    double inout[2] = {(double)rank, (double)-rank};
    MPI_Reduce(rank == root ? MPI_IN_PLACE : inout, inout, 2, MPI_DOUBLE, MPI_MAX, root, MPI_COMM_WORLD);
    if (rank == root) {
      expect(inout[0] == size - 1 && inout[1] == 0, "reduce in place max to root %d", root);
      say("reduce in place max at root: %.1f %.1f", inout[0], inout[1]);
    }
  }
}

static void allgather(void) {
  int mine[2] = {value(rank, 0), value(rank, 1)};
  int all[2 * 8];
  MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
  int ok = 1;
  for (int r = 0; r < size; ++r) ok &= all[2 * r] == value(r, 0) && all[2 * r + 1] == value(r, 1);
  expect(ok, "allgather");
  say_ints("allgather", all, 2 * size);
  /* In place: own block already in the receive buffer. */
  for (int i = 0; i < 2 * size; ++i) all[i] = -1;
  all[2 * rank] = 7 * rank;
  all[2 * rank + 1] = 7 * rank + 1;
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 2, MPI_INT, MPI_COMM_WORLD);
  ok = 1;
  for (int r = 0; r < size; ++r) ok &= all[2 * r] == 7 * r && all[2 * r + 1] == 7 * r + 1;
  expect(ok, "allgather in place");
  /* 6000 ints per rank: above the eager limit. */
  enum { N = 6000 };
  static int big_mine[N], big_all[N * 8];
  for (int i = 0; i < N; ++i) big_mine[i] = rank * N + i;
  MPI_Allgather(big_mine, N, MPI_INT, big_all, N, MPI_INT, MPI_COMM_WORLD);
  ok = 1;
  for (int i = 0; i < N * size; ++i) ok &= big_all[i] == i;
  expect(ok, "allgather of %d ints per rank", N);
}

/* Rank r contributes r + 1 elements; blocks land in reverse rank order with
 * one element of gap between them. */
static void allgatherv(void) {
  int counts[8], displs[8], all[64], mine[8];
  int offset = 0;
  for (int r = size - 1; r >= 0; --r) {
    counts[r] = r + 1;
    displs[r] = offset;
    offset += counts[r] + 1;
  }
  for (int i = 0; i < counts[rank]; ++i) mine[i] = value(rank, i);
  for (int i = 0; i < 64; ++i) all[i] = -1;
  MPI_Allgatherv(mine, counts[rank], MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD);
  int ok = 1;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < counts[r]; ++i) ok &= all[displs[r] + i] == value(r, i);
    ok &= all[displs[r] + counts[r]] == -1; /* the gap is untouched */
  }
  expect(ok, "allgatherv");
  say_ints("allgatherv", all, offset);
  /* In place. */
  for (int i = 0; i < 64; ++i) all[i] = -1;
  for (int i = 0; i < counts[rank]; ++i) all[displs[rank] + i] = value(rank, i);
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT, MPI_COMM_WORLD);
  ok = 1;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < counts[r]; ++i) ok &= all[displs[r] + i] == value(r, i);
  }
  expect(ok, "allgatherv in place");
  /* Skewed counts: rank 0 sends 5000, the others 1. */
  enum { BIG = 5000 };
  static int skew_mine[BIG], skew_all[BIG + 8];
  int skew_counts[8], skew_displs[8];
  for (int r = 0; r < size; ++r) {
    skew_counts[r] = r == 0 ? BIG : 1;
    skew_displs[r] = r == 0 ? 0 : BIG + r - 1;
  }
  for (int i = 0; i < skew_counts[rank]; ++i) skew_mine[i] = rank * 100000 + i;
  MPI_Allgatherv(skew_mine, skew_counts[rank], MPI_INT, skew_all, skew_counts, skew_displs, MPI_INT, MPI_COMM_WORLD);
  ok = 1;
  for (int i = 0; i < BIG; ++i) ok &= skew_all[i] == i;
  for (int r = 1; r < size; ++r) ok &= skew_all[BIG + r - 1] == r * 100000;
  expect(ok, "allgatherv with skewed counts");
  say("allgatherv skewed: last %d", skew_all[BIG + size - 2]);
}

static void gather(void) {
  int root = 1 % size;
  int mine[3] = {value(rank, 0), value(rank, 1), value(rank, 2)};
  int all[3 * 8];
  for (int i = 0; i < 3 * 8; ++i) all[i] = -1;
  MPI_Gather(mine, 3, MPI_INT, rank == root ? all : NULL, 3, MPI_INT, root, MPI_COMM_WORLD);
  if (rank == root) {
    int ok = 1;
    for (int r = 0; r < size; ++r) {
      for (int i = 0; i < 3; ++i) ok &= all[3 * r + i] == value(r, i);
    }
    expect(ok, "gather to root %d", root);
    say_ints("gather", all, 3 * size);
  }
  /* In place at the root (rank 0 this time). */
  for (int i = 0; i < 3 * 8; ++i) all[i] = rank == 0 ? -1 : 0;
  if (rank == 0) {
    for (int i = 0; i < 3; ++i) all[i] = 42 + i;
  }
  MPI_Gather(rank == 0 ? MPI_IN_PLACE : mine, 3, MPI_INT, all, 3, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    int ok = all[0] == 42 && all[1] == 43 && all[2] == 44;
    for (int r = 1; r < size; ++r) {
      for (int i = 0; i < 3; ++i) ok &= all[3 * r + i] == value(r, i);
    }
    expect(ok, "gather in place");
  }
  /* 5000 ints per rank: above the eager limit. */
  enum { N = 5000 };
  static int big_mine[N], big_all[N * 8];
  for (int i = 0; i < N; ++i) big_mine[i] = rank * N + i;
  MPI_Gather(big_mine, N, MPI_INT, big_all, N, MPI_INT, size - 1, MPI_COMM_WORLD);
  if (rank == size - 1) {
    int ok = 1;
    for (int i = 0; i < N * size; ++i) ok &= big_all[i] == i;
    expect(ok, "gather of %d ints per rank", N);
  }
}

static void gatherv(void) {
  int root = size - 1;
  int counts[8], displs[8], all[64], mine[8];
  for (int r = 0; r < size; ++r) counts[r] = size - r; /* rank 0 sends the most */
  int offset = 0;
  for (int r = size - 1; r >= 0; --r) {
    displs[r] = offset;
    offset += counts[r];
  }
  for (int i = 0; i < counts[rank]; ++i) mine[i] = value(rank, i);
  for (int i = 0; i < 64; ++i) all[i] = -1;
  MPI_Gatherv(mine, counts[rank], MPI_INT, all, counts, displs, MPI_INT, root, MPI_COMM_WORLD);
  if (rank == root) {
    int ok = 1;
    for (int r = 0; r < size; ++r) {
      for (int i = 0; i < counts[r]; ++i) ok &= all[displs[r] + i] == value(r, i);
    }
    expect(ok, "gatherv");
    say_ints("gatherv", all, offset);
  }
  /* In place at the root. */
  for (int i = 0; i < 64; ++i) all[i] = -1;
  if (rank == root) {
    for (int i = 0; i < counts[root]; ++i) all[displs[root] + i] = 1000 + i;
  }
  MPI_Gatherv(rank == root ? MPI_IN_PLACE : mine, counts[rank], MPI_INT, all, counts, displs, MPI_INT, root,
              MPI_COMM_WORLD);
  if (rank == root) {
    int ok = 1;
    for (int r = 0; r < size; ++r) {
      for (int i = 0; i < counts[r]; ++i) ok &= all[displs[r] + i] == (r == root ? 1000 + i : value(r, i));
    }
    expect(ok, "gatherv in place");
  }
}

static void scatter(void) {
  int root = size - 1;
  int all[2 * 8], mine[2] = {-1, -1};
  for (int r = 0; r < size; ++r) {
    all[2 * r] = value(r, 0);
    all[2 * r + 1] = value(r, 1);
  }
  MPI_Scatter(all, 2, MPI_INT, mine, 2, MPI_INT, root, MPI_COMM_WORLD);
  expect(mine[0] == value(rank, 0) && mine[1] == value(rank, 1), "scatter from root %d", root);
  say_ints("scatter", mine, 2);
  /* In place at the root: its block stays in the send buffer. */
  mine[0] = mine[1] = -1;
  MPI_Scatter(all, 2, MPI_INT, rank == 0 ? MPI_IN_PLACE : mine, 2, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank != 0) expect(mine[0] == value(rank, 0) && mine[1] == value(rank, 1), "scatter in place");
  /* 5000 ints per rank. */
  enum { N = 5000 };
  static int big_all[N * 8], big_mine[N];
  for (int i = 0; i < N * size; ++i) big_all[i] = i;
  MPI_Scatter(big_all, N, MPI_INT, big_mine, N, MPI_INT, 1 % size, MPI_COMM_WORLD);
  int ok = 1;
  for (int i = 0; i < N; ++i) ok &= big_mine[i] == rank * N + i;
  expect(ok, "scatter of %d ints per rank", N);
}

static void scatterv(void) {
  int root = 0;
  /* Up to 8 ranks: rank r's block is r + 1 elements at 10 r, and one more
   * element after the block must stay untouched. */
  int counts[8], displs[8], all[80], mine[9];
  for (int r = 0; r < size; ++r) {
    counts[r] = r + 1;
    displs[r] = 10 * r; /* gaps between blocks */
  }
  for (int i = 0; i < 80; ++i) all[i] = 500 + i;
  for (int i = 0; i < 9; ++i) mine[i] = -1;
  MPI_Scatterv(all, counts, displs, MPI_INT, mine, counts[rank], MPI_INT, root, MPI_COMM_WORLD);
  int ok = 1;
  for (int i = 0; i < counts[rank]; ++i) ok &= mine[i] == 500 + 10 * rank + i;
  ok &= mine[counts[rank]] == -1;
  expect(ok, "scatterv");
  say_ints("scatterv", mine, counts[rank]);
  /* In place at the root. */
  for (int i = 0; i < 9; ++i) mine[i] = -1;
  MPI_Scatterv(all, counts, displs, MPI_INT, rank == root ? MPI_IN_PLACE : mine, counts[rank], MPI_INT, root,
               MPI_COMM_WORLD);
  if (rank != root) expect(mine[0] == 500 + 10 * rank, "scatterv in place");
}

static void alltoall(void) {
  int send[2 * 8], recv[2 * 8];
  for (int r = 0; r < size; ++r) {
    send[2 * r] = 1000 * rank + 10 * r;
    send[2 * r + 1] = 1000 * rank + 10 * r + 1;
  }
  MPI_Alltoall(send, 2, MPI_INT, recv, 2, MPI_INT, MPI_COMM_WORLD);
  int ok = 1;
  for (int r = 0; r < size; ++r) ok &= recv[2 * r] == 1000 * r + 10 * rank && recv[2 * r + 1] == 1000 * r + 10 * rank + 1;
  expect(ok, "alltoall");
  say_ints("alltoall", recv, 2 * size);
  MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, send, 2, MPI_INT, MPI_COMM_WORLD);
  ok = 1;
  for (int r = 0; r < size; ++r) ok &= send[2 * r] == 1000 * r + 10 * rank;
  expect(ok, "alltoall in place");
}

/* Rank i sends (i + j) % 3 elements to rank j (none now and then), at
 * displacements with one element of gap; the receive side's blocks land in
 * reverse rank order. */
static void alltoallv(void) {
  int send[4 * 8], recv[4 * 8], scounts[8], sdispls[8], rcounts[8], rdispls[8];
  int offset = 0;
  for (int j = 0; j < size; ++j) {
    scounts[j] = (rank + j) % 3;
    sdispls[j] = offset;
    for (int k = 0; k < scounts[j]; ++k) send[offset + k] = 1000 * rank + 10 * j + k;
    offset += scounts[j] + 1;
  }
  offset = 0;
  for (int i = size - 1; i >= 0; --i) {
    rcounts[i] = (i + rank) % 3;
    rdispls[i] = offset;
    offset += rcounts[i] + 1;
  }
  for (int i = 0; i < 4 * 8; ++i) recv[i] = -1;
  MPI_Alltoallv(send, scounts, sdispls, MPI_INT, recv, rcounts, rdispls, MPI_INT, MPI_COMM_WORLD);
  int ok = 1;
  for (int i = 0; i < size; ++i) {
    for (int k = 0; k < rcounts[i]; ++k) ok &= recv[rdispls[i] + k] == 1000 * i + 10 * rank + k;
    ok &= recv[rdispls[i] + rcounts[i]] == -1; /* the gap is untouched */
  }
  expect(ok, "alltoallv");
  say_ints("alltoallv", recv, offset);
  /* In place: the symmetric counts (i + j) % 3 describe both directions. */
  for (int i = 0; i < size; ++i) {
    for (int k = 0; k < rcounts[i]; ++k) recv[rdispls[i] + k] = 1000 * rank + 10 * i + k;
  }
  MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, recv, rcounts, rdispls, MPI_INT, MPI_COMM_WORLD);
  ok = 1;
  for (int i = 0; i < size; ++i) {
    for (int k = 0; k < rcounts[i]; ++k) ok &= recv[rdispls[i] + k] == 1000 * i + 10 * rank + k;
  }
  expect(ok, "alltoallv in place");
}

static void reduce_scatter(void) {
  /* Block: 2 elements per rank. */
  int send[2 * 8], recv[2 * 8];
  for (int i = 0; i < 2 * size; ++i) send[i] = (rank + 1) * (i + 1);
  MPI_Reduce_scatter_block(send, recv, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const int ranks_sum = size * (size + 1) / 2;
  expect(recv[0] == ranks_sum * (2 * rank + 1) && recv[1] == ranks_sum * (2 * rank + 2), "reduce_scatter_block");
  say_ints("reduce_scatter_block", recv, 2);
  MPI_Reduce_scatter_block(MPI_IN_PLACE, send, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  expect(send[0] == size * (2 * rank + 1) && send[1] == size * (2 * rank + 2), "reduce_scatter_block in place");
  say_ints("reduce_scatter_block in place max", send, 2);

  /* Counts r + 1. */
  int counts[8], total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = r + 1;
    total += counts[r];
  }
  int vsend[64], vrecv[8];
  for (int i = 0; i < total; ++i) vsend[i] = rank * i;
  MPI_Reduce_scatter(vsend, vrecv, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  int first = rank * (rank + 1) / 2, ok = 1;
  for (int i = 0; i < counts[rank]; ++i) ok &= vrecv[i] == (first + i) * size * (size - 1) / 2;
  expect(ok, "reduce_scatter");
  say_ints("reduce_scatter", vrecv, counts[rank]);
  for (int i = 0; i < total; ++i) vsend[i] = rank * i;
  MPI_Reduce_scatter(MPI_IN_PLACE, vsend, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  ok = 1;
  for (int i = 0; i < counts[rank]; ++i) ok &= vsend[i] == (first + i) * size * (size - 1) / 2;
  expect(ok, "reduce_scatter in place");
  /* Equal counts take the block path. */
  int equal[8];
  for (int r = 0; r < size; ++r) equal[r] = 1;
  MPI_Reduce_scatter(send, recv, equal, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  say_ints("reduce_scatter equal counts min", recv, 1);
}

static void scans(void) {
  int in[2] = {rank + 1, 10 * (rank + 1)}, out[2] = {-1, -1};
  MPI_Scan(in, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  expect(out[0] == (rank + 1) * (rank + 2) / 2 && out[1] == 10 * out[0], "scan sum");
  say_ints("scan sum", out, 2);
  MPI_Scan(MPI_IN_PLACE, in, 2, MPI_INT, MPI_PROD, MPI_COMM_WORLD);
  say_ints("scan in place prod", in, 2);
  in[0] = rank + 1;
  in[1] = 10 * (rank + 1);
  out[0] = out[1] = -1;
  MPI_Exscan(in, out, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank > 0) { /* undefined on rank 0 */
    expect(out[0] == rank * (rank + 1) / 2, "exscan sum");
    say_ints("exscan sum", out, 2);
  }
  double dmax = (double)((rank * 7) % size);
  double dout = -1;
  MPI_Exscan(&dmax, &dout, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  if (rank > 0) say("exscan double max: %.1f", dout);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 8) {
    if (rank == 0) printf("collectives: at most 8 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  barrier();
  bcast();
  allreduce();
  reduce();
  allgather();
  allgatherv();
  gather();
  gatherv();
  scatter();
  scatterv();
  alltoall();
  alltoallv();
  reduce_scatter();
  scans();
  int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("collectives", failures);
  return failures == 0 ? 0 : 1;
}
