/*
 * The MPI-4 large-count collectives (MPI_Bcast_c .. MPI_Iscatterv_c): every
 * one of them, blocking and non-blocking, with MPI_Count counts and MPI_Aint
 * displacements, every result element checked. Open MPI 4.1 has no _c
 * functions, so its build (the comparison's other side) makes the same calls
 * through the MPI-3.1 functions with int counts: both must print the same.
 * With --beyond-int (chorus only, 2 ranks, about 4.3 GB of memory) it also
 * broadcasts 2^31 + 64 bytes, a count no int holds.
 */
#include "report.h"

#include <stdint.h>

#ifdef CHORUS_MPI_LARGE_COUNT_H
#define LC(name) name##_c
typedef MPI_Count count_t;
typedef MPI_Aint displ_t;
#else
#define LC(name) name
typedef int count_t;
typedef int displ_t;
#endif

#define MAXRANKS 16
static int rank, size;

static int value(int r, int i) { return 1000 * r + i; }

static void wait_or_not(MPI_Request* request, int nonblocking) {
  if (nonblocking) MPI_Wait(request, MPI_STATUS_IGNORE);
}

/* The same-count collectives: bcast, allreduce, reduce, allgather, alltoall,
 * reduce_scatter_block, scan, exscan, gather, scatter. */
static void same_counts(int nb) {
  const char* form = nb ? "I-form" : "blocking";
  MPI_Request q = MPI_REQUEST_NULL;
  int buf[8], out[8 * MAXRANKS], all[8 * MAXRANKS];
  count_t n = 8;

  for (int i = 0; i < 8; ++i) buf[i] = rank == 1 % size ? value(7, i) : -1;
  if (nb) LC(MPI_Ibcast)(buf, n, MPI_INT, 1 % size, MPI_COMM_WORLD, &q);
  else LC(MPI_Bcast)(buf, n, MPI_INT, 1 % size, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  int ok = 1;
  for (int i = 0; i < 8; ++i) ok &= buf[i] == value(7, i);
  expect(ok, "%s bcast_c", form);

  for (int i = 0; i < 8; ++i) buf[i] = value(rank, i);
  if (nb) LC(MPI_Iallreduce)(buf, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
  else LC(MPI_Allreduce)(buf, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int i = 0; i < 8; ++i) ok &= out[i] == 1000 * size * (size - 1) / 2 + size * i;
  expect(ok, "%s allreduce_c", form);

  const int root = size - 1;
  for (int i = 0; i < 8; ++i) out[i] = -1;
  if (nb) LC(MPI_Ireduce)(buf, out, n, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD, &q);
  else LC(MPI_Reduce)(buf, out, n, MPI_INT, MPI_MAX, root, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int i = 0; i < 8; ++i) ok &= rank != root || out[i] == value(size - 1, i);
  expect(ok, "%s reduce_c", form);

  if (nb) LC(MPI_Iallgather)(buf, n, MPI_INT, all, n, MPI_INT, MPI_COMM_WORLD, &q);
  else LC(MPI_Allgather)(buf, n, MPI_INT, all, n, MPI_INT, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < 8; ++i) ok &= all[8 * r + i] == value(r, i);
  expect(ok, "%s allgather_c", form);

  /* alltoall: block r of rank s holds value(s, 10 r + i). */
  int send[2 * MAXRANKS], recv[2 * MAXRANKS];
  for (int r = 0; r < size; ++r) send[2 * r] = value(rank, 10 * r), send[2 * r + 1] = value(rank, 10 * r + 1);
  if (nb) LC(MPI_Ialltoall)(send, 2, MPI_INT, recv, 2, MPI_INT, MPI_COMM_WORLD, &q);
  else LC(MPI_Alltoall)(send, 2, MPI_INT, recv, 2, MPI_INT, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int s = 0; s < size; ++s) ok &= recv[2 * s] == value(s, 10 * rank) && recv[2 * s + 1] == value(s, 10 * rank + 1);
  expect(ok, "%s alltoall_c", form);

  /* reduce_scatter_block: every rank sends value(rank, i) for i < 2 size; block r is elements 2r, 2r+1. */
  for (int i = 0; i < 2 * size; ++i) send[i] = value(rank, i);
  if (nb) LC(MPI_Ireduce_scatter_block)(send, recv, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
  else LC(MPI_Reduce_scatter_block)(send, recv, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  expect(recv[0] == 1000 * size * (size - 1) / 2 + size * 2 * rank &&
             recv[1] == 1000 * size * (size - 1) / 2 + size * (2 * rank + 1),
         "%s reduce_scatter_block_c: %d %d", form, recv[0], recv[1]);

  /* scan and exscan of rank + 1. */
  int one = rank + 1, scanned = -1, exscanned = -1;
  if (nb) LC(MPI_Iscan)(&one, &scanned, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
  else LC(MPI_Scan)(&one, &scanned, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  if (nb) LC(MPI_Iexscan)(&one, &exscanned, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
  else LC(MPI_Exscan)(&one, &exscanned, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  expect(scanned == (rank + 1) * (rank + 2) / 2 && (rank == 0 || exscanned == rank * (rank + 1) / 2),
         "%s scan_c %d, exscan_c %d", form, scanned, exscanned);

  /* gather to the last rank, scatter from it. */
  for (int i = 0; i < 8 * size; ++i) all[i] = -1;
  if (nb) LC(MPI_Igather)(buf, n, MPI_INT, all, n, MPI_INT, root, MPI_COMM_WORLD, &q);
  else LC(MPI_Gather)(buf, n, MPI_INT, all, n, MPI_INT, root, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int r = 0; r < size && rank == root; ++r)
    for (int i = 0; i < 8; ++i) ok &= all[8 * r + i] == value(r, i);
  expect(ok, "%s gather_c", form);
  for (int i = 0; i < 8 * size; ++i) all[i] = value(i / 8, 50 + i % 8);
  if (nb) LC(MPI_Iscatter)(all, n, MPI_INT, out, n, MPI_INT, root, MPI_COMM_WORLD, &q);
  else LC(MPI_Scatter)(all, n, MPI_INT, out, n, MPI_INT, root, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int i = 0; i < 8; ++i) ok &= out[i] == value(rank, 50 + i);
  expect(ok, "%s scatter_c", form);
  say("%s: bcast allreduce reduce allgather alltoall reduce_scatter_block scan exscan gather scatter", form);
}

/* The v- and w-forms: rank r contributes r + 1 elements; blocks lie in
 * reverse rank order with a gap of one element between them. */
static void varying_counts(int nb) {
  const char* form = nb ? "I-form" : "blocking";
  MPI_Request q = MPI_REQUEST_NULL;
  count_t counts[MAXRANKS];
  displ_t displs[MAXRANKS];
  int total = 0;
  for (int r = size - 1; r >= 0; --r) {
    counts[r] = r + 1;
    displs[r] = total;
    total += r + 2;
  }
  int mine[MAXRANKS + 1], gathered[MAXRANKS * (MAXRANKS + 2)];
  for (int i = 0; i <= rank; ++i) mine[i] = value(rank, i);
  const int root = 0;
  for (int i = 0; i < total; ++i) gathered[i] = -7;
  if (nb) LC(MPI_Igatherv)(mine, rank + 1, MPI_INT, gathered, counts, displs, MPI_INT, root, MPI_COMM_WORLD, &q);
  else LC(MPI_Gatherv)(mine, rank + 1, MPI_INT, gathered, counts, displs, MPI_INT, root, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  int ok = 1;
  for (int r = 0; r < size && rank == root; ++r) {
    for (int i = 0; i <= r; ++i) ok &= gathered[displs[r] + i] == value(r, i);
    ok &= gathered[displs[r] + r + 1] == -7;  /* the gap stays untouched */
  }
  expect(ok, "%s gatherv_c", form);

  for (int i = 0; i < total; ++i) gathered[i] = -7;
  if (nb) LC(MPI_Iallgatherv)(mine, rank + 1, MPI_INT, gathered, counts, displs, MPI_INT, MPI_COMM_WORLD, &q);
  else LC(MPI_Allgatherv)(mine, rank + 1, MPI_INT, gathered, counts, displs, MPI_INT, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int r = 0; r < size; ++r)
    for (int i = 0; i <= r; ++i) ok &= gathered[displs[r] + i] == value(r, i);
  expect(ok, "%s allgatherv_c", form);

  int source[MAXRANKS * (MAXRANKS + 2)], got[MAXRANKS + 1];
  for (int r = 0; r < size; ++r)
    for (int i = 0; i <= r; ++i) source[displs[r] + i] = value(r, 70 + i);
  if (nb) LC(MPI_Iscatterv)(source, counts, displs, MPI_INT, got, rank + 1, MPI_INT, root, MPI_COMM_WORLD, &q);
  else LC(MPI_Scatterv)(source, counts, displs, MPI_INT, got, rank + 1, MPI_INT, root, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int i = 0; i <= rank; ++i) ok &= got[i] == value(rank, 70 + i);
  expect(ok, "%s scatterv_c", form);

  /* alltoallv: rank s sends peer r (s + r) % 3 + 1 elements value(s, 100 r + i). */
  count_t scounts[MAXRANKS], rcounts[MAXRANKS];
  displ_t sdispls[MAXRANKS], rdispls[MAXRANKS];
  int sbuf[4 * MAXRANKS], rbuf[4 * MAXRANKS], so = 0, ro = 0;
  for (int r = 0; r < size; ++r) {
    scounts[r] = (rank + r) % 3 + 1, sdispls[r] = so, so += (int)scounts[r];
    rcounts[r] = (r + rank) % 3 + 1, rdispls[r] = ro, ro += (int)rcounts[r];
    for (int i = 0; i < scounts[r]; ++i) sbuf[sdispls[r] + i] = value(rank, 100 * r + i);
  }
  if (nb) LC(MPI_Ialltoallv)(sbuf, scounts, sdispls, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, MPI_COMM_WORLD, &q);
  else LC(MPI_Alltoallv)(sbuf, scounts, sdispls, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int s = 0; s < size; ++s)
    for (int i = 0; i < rcounts[s]; ++i) ok &= rbuf[rdispls[s] + i] == value(s, 100 * rank + i);
  expect(ok, "%s alltoallv_c", form);

  /* alltoallw: the same exchange with byte displacements and a type per peer. */
  MPI_Datatype types[MAXRANKS];
  displ_t sbytes[MAXRANKS], rbytes[MAXRANKS];
  for (int r = 0; r < size; ++r) {
    types[r] = MPI_INT;
    sbytes[r] = sdispls[r] * (displ_t)sizeof(int);
    rbytes[r] = rdispls[r] * (displ_t)sizeof(int);
  }
  for (int i = 0; i < ro; ++i) rbuf[i] = -1;
  if (nb) LC(MPI_Ialltoallw)(sbuf, scounts, sbytes, types, rbuf, rcounts, rbytes, types, MPI_COMM_WORLD, &q);
  else LC(MPI_Alltoallw)(sbuf, scounts, sbytes, types, rbuf, rcounts, rbytes, types, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int s = 0; s < size; ++s)
    for (int i = 0; i < rcounts[s]; ++i) ok &= rbuf[rdispls[s] + i] == value(s, 100 * rank + i);
  expect(ok, "%s alltoallw_c", form);

  /* reduce_scatter: block r has r + 1 elements. */
  int contribution[MAXRANKS * (MAXRANKS + 1) / 2 + 1], result[MAXRANKS + 1], at = 0;
  for (int r = 0; r < size; ++r)
    for (int i = 0; i <= r; ++i) contribution[at++] = value(rank, 10 * r + i);
  if (nb) LC(MPI_Ireduce_scatter)(contribution, result, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &q);
  else LC(MPI_Reduce_scatter)(contribution, result, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  wait_or_not(&q, nb);
  ok = 1;
  for (int i = 0; i <= rank; ++i) ok &= result[i] == 1000 * size * (size - 1) / 2 + size * (10 * rank + i);
  expect(ok, "%s reduce_scatter_c", form);
  say("%s: gatherv allgatherv scatterv alltoallv alltoallw reduce_scatter", form);
}

static void reduce_local(void) {
  int in[3] = {1, 2, 3}, inout[3] = {10, 20, 30};
  LC(MPI_Reduce_local)(in, inout, 3, MPI_INT, MPI_SUM);
  expect(inout[0] == 11 && inout[1] == 22 && inout[2] == 33, "reduce_local_c");
  say("reduce_local: %d %d %d", inout[0], inout[1], inout[2]);
}

#ifdef CHORUS_MPI_LARGE_COUNT_H
/* MemAvailable from /proc/meminfo in bytes, 0 if unknown. */
static long long available_memory(void) {
  FILE* meminfo = fopen("/proc/meminfo", "r");
  if (meminfo == NULL) return 0;
  char line[256];
  long long kib = 0;
  while (fgets(line, sizeof line, meminfo) != NULL) {
    if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
  }
  fclose(meminfo);
  return kib * 1024;
}

/* 2^31 + 64 bytes from rank 0 to rank 1: a count no int holds. */
static void beyond_int(void) {
  const MPI_Count bytes = ((MPI_Count)1 << 31) + 64;
  unsigned char* buffer = malloc((size_t)bytes);
  expect(buffer != NULL, "malloc of %lld bytes", (long long)bytes);
  if (buffer == NULL) return;
  for (MPI_Count i = 0; i < bytes; i += 4096) buffer[i] = rank == 0 ? (unsigned char)(i >> 12) : 0;
  buffer[bytes - 1] = rank == 0 ? 0x5a : 0;
  expect(MPI_Bcast_c(buffer, bytes, MPI_BYTE, 0, MPI_COMM_WORLD) == MPI_SUCCESS, "MPI_Bcast_c of 2^31 + 64 bytes");
  int ok = buffer[bytes - 1] == 0x5a;
  for (MPI_Count i = 0; i < bytes; i += 4096) ok &= buffer[i] == (unsigned char)(i >> 12);
  expect(ok, "every 4096th byte and the last of 2^31 + 64 broadcast bytes");
  say("beyond int: %lld bytes broadcast", (long long)bytes);
  free(buffer);
}
#endif

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int beyond = argc > 1 && strcmp(argv[1], "--beyond-int") == 0;
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    if (rank == 0) {
      printf("usage: large_count [--beyond-int] (under mpirun/chorusrun, 1..16 ranks): checks every MPI-4 large-count\n"
             "  collective, blocking and non-blocking; --beyond-int (chorus) also broadcasts 2^31 + 64 bytes\n");
    }
    MPI_Finalize();
    return 0;
  }
  if (size > MAXRANKS) {
    if (rank == 0) printf("FAILED: large_count runs on at most %d ranks\n", MAXRANKS);
    MPI_Finalize();
    return 1;
  }
  if (beyond) {
#ifdef CHORUS_MPI_LARGE_COUNT_H
    /* Every rank needs 2^31 + 64 bytes; the ranks of this test share one host. */
    long long need = (long long)size * (((long long)1 << 31) + 64) + ((long long)1 << 30), have = available_memory();
    long long least = have;
    MPI_Allreduce(&have, &least, 1, MPI_LONG_LONG_INT, MPI_MIN, MPI_COMM_WORLD);
    if (least < need) {
      if (rank == 0) printf("SKIP: --beyond-int needs %lld bytes of available memory, this host has %lld\n", need, least);
      MPI_Finalize();
      return 77;
    }
    beyond_int();
#else
    expect(0, "--beyond-int needs the _c functions (chorus-mpicc)");
#endif
  } else {
    same_counts(0);
    same_counts(1);
    varying_counts(0);
    varying_counts(1);
    reduce_local();
  }
  int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("large_count", failures);
  return failures == 0 ? 0 : 1;
}
