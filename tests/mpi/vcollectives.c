/*
 * The v- and w-collectives and their non-blocking forms: MPI_Igather,
 * MPI_Igatherv, MPI_Iscatter, MPI_Iscatterv, MPI_Iallgatherv,
 * MPI_Ialltoallv, MPI_Alltoallw, MPI_Ialltoallw, MPI_Ireduce_scatter (even
 * and uneven blocks, a predefined and a non-commutative user op) and
 * MPI_Reduce_local. Each I-form runs beside its blocking form on the same
 * input: contiguous and vector datatypes, in place where MPI allows it,
 * uneven counts (rank r's block holds r + 1 elements, one element of gap
 * between blocks), every root; all of one round outstanding together and
 * waited for in reverse order. Every element is checked against a formula;
 * only deterministic values are printed, so the output matches Open MPI's.
 */
#include "report.h"

static int rank, size;

enum { MAXRANKS = 16, GAP = 1 };

/* The value rank r contributes at element i. */
static int value(int r, int i) { return (r + 1) * 1000 + i; }
/* Block layout: rank r's block holds r + 1 elements; displacements leave a gap. */
static int block_count(int r) { return r + 1; }
static void layout(int counts[], int displs[], int* total) {
  int at = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = block_count(r);
    displs[r] = at;
    at += counts[r] + GAP;
  }
  *total = at;
}

/* Gather, gatherv and allgatherv at every root, blocking and not. */
static void gathers(void) {
  int counts[MAXRANKS], displs[MAXRANKS], total;
  layout(counts, displs, &total);
  for (int root = 0; root < size; ++root) {
    int mine[MAXRANKS], uniform_b[4 * MAXRANKS], uniform_i[4 * MAXRANKS];
    int v_b[MAXRANKS * (MAXRANKS + 2)], v_i[MAXRANKS * (MAXRANKS + 2)], all_i[MAXRANKS * (MAXRANKS + 2)];
    int in_place[4 * MAXRANKS];
    for (int i = 0; i < MAXRANKS; ++i) mine[i] = value(rank, i);
    for (int i = 0; i < 4 * MAXRANKS; ++i) uniform_b[i] = uniform_i[i] = in_place[i] = -1;
    for (int i = 0; i < MAXRANKS * (MAXRANKS + 2); ++i) v_b[i] = v_i[i] = all_i[i] = -1;
    for (int i = 0; i < 4; ++i) in_place[rank * 4 + i] = value(rank, i);
    MPI_Request requests[4];
    MPI_Igather(mine, 4, MPI_INT, uniform_i, 4, MPI_INT, root, MPI_COMM_WORLD, &requests[0]);
    MPI_Igatherv(mine, block_count(rank), MPI_INT, v_i, counts, displs, MPI_INT, root, MPI_COMM_WORLD, &requests[1]);
    MPI_Iallgatherv(mine, block_count(rank), MPI_INT, all_i, counts, displs, MPI_INT, MPI_COMM_WORLD, &requests[2]);
    MPI_Igather(rank == root ? MPI_IN_PLACE : in_place + rank * 4, 4, MPI_INT, in_place, 4, MPI_INT, root,
                MPI_COMM_WORLD, &requests[3]);
    MPI_Gather(mine, 4, MPI_INT, uniform_b, 4, MPI_INT, root, MPI_COMM_WORLD);
    MPI_Gatherv(mine, block_count(rank), MPI_INT, v_b, counts, displs, MPI_INT, root, MPI_COMM_WORLD);
    for (int k = 3; k >= 0; --k) expect(MPI_Wait(&requests[k], MPI_STATUS_IGNORE) == MPI_SUCCESS, "gathers wait %d", k);
    int ok = 1;
    for (int r = 0; r < size; ++r) {
      for (int i = 0; i < block_count(r) + GAP; ++i) {
        const int want = i < block_count(r) ? value(r, i) : -1;
        ok &= all_i[displs[r] + i] == want;
        if (rank == root) ok &= v_i[displs[r] + i] == want && v_b[displs[r] + i] == want;
      }
      for (int i = 0; i < 4 && rank == root; ++i) {
        ok &= uniform_i[r * 4 + i] == value(r, i) && uniform_b[r * 4 + i] == value(r, i);
        ok &= in_place[r * 4 + i] == value(r, i);
      }
    }
    if (rank != root) ok &= v_i[0] == -1 && uniform_i[0] == -1;  /* untouched away from the root */
    expect(ok, "igather, igatherv, iallgatherv and gather in place at root %d match the formula", root);
    if (root == size - 1) say("gathers at root %d: last block starts %d, allgatherv total %d", root, all_i[displs[size - 1]], total);
  }
}

/* Scatter and scatterv at every root, blocking and not, one with a vector receive type. */
static void scatters(void) {
  int counts[MAXRANKS], displs[MAXRANKS], total;
  layout(counts, displs, &total);
  MPI_Datatype pairs; /* every other int: 2 elements of it span 3 ints */
  MPI_Type_vector(2, 1, 2, MPI_INT, &pairs);
  MPI_Type_commit(&pairs);
  for (int root = 0; root < size; ++root) {
    int source[MAXRANKS * (MAXRANKS + 2)], uniform_b[4], uniform_i[4], v_i[MAXRANKS + 1], strided[3];
    for (int i = 0; i < MAXRANKS * (MAXRANKS + 2); ++i) source[i] = rank == root ? value(root, i) : -1;
    for (int i = 0; i < 4; ++i) uniform_b[i] = uniform_i[i] = -1;
    for (int i = 0; i <= MAXRANKS; ++i) v_i[i] = -1;
    for (int i = 0; i < 3; ++i) strided[i] = -1;
    int in_place_source[4 * MAXRANKS];
    for (int i = 0; i < 4 * MAXRANKS; ++i) in_place_source[i] = rank == root ? value(root, i) : -1;
    int in_place_out[4] = {-1, -1, -1, -1};
    MPI_Request requests[4];
    MPI_Iscatter(source, 4, MPI_INT, uniform_i, 4, MPI_INT, root, MPI_COMM_WORLD, &requests[0]);
    MPI_Iscatterv(source, counts, displs, MPI_INT, v_i, block_count(rank), MPI_INT, root, MPI_COMM_WORLD, &requests[1]);
    MPI_Iscatter(source, 2, MPI_INT, strided, 1, pairs, root, MPI_COMM_WORLD, &requests[2]);
    MPI_Iscatter(in_place_source, 4, MPI_INT, rank == root ? MPI_IN_PLACE : in_place_out, 4, MPI_INT, root,
                 MPI_COMM_WORLD, &requests[3]);
    MPI_Scatter(source, 4, MPI_INT, uniform_b, 4, MPI_INT, root, MPI_COMM_WORLD);
    for (int k = 3; k >= 0; --k) expect(MPI_Wait(&requests[k], MPI_STATUS_IGNORE) == MPI_SUCCESS, "scatters wait %d", k);
    int ok = 1;
    for (int i = 0; i < 4; ++i) {
      ok &= uniform_i[i] == value(root, rank * 4 + i) && uniform_b[i] == value(root, rank * 4 + i);
      if (rank != root) ok &= in_place_out[i] == value(root, rank * 4 + i);
    }
    for (int i = 0; i <= MAXRANKS; ++i) ok &= v_i[i] == (i < block_count(rank) ? value(root, displs[rank] + i) : -1);
    ok &= strided[0] == value(root, rank * 2) && strided[1] == -1 && strided[2] == value(root, rank * 2 + 1);
    if (rank == root) ok &= in_place_source[rank * 4] == value(root, rank * 4);
    expect(ok, "iscatter, iscatterv, iscatter into a vector type and in place at root %d match the formula", root);
    if (root == 0) say("scatters from root 0: first %d, v-block %d..%d, strided %d %d", uniform_i[0], v_i[0],
                       v_i[block_count(rank) - 1], strided[0], strided[2]);
  }
  MPI_Type_free(&pairs);
}

/* Alltoallv and alltoallw, blocking and not: rank r sends rank j (r + j) % 3 + 1 elements. */
static int exchanged(int from, int to) { return (from + to) % 3 + 1; }
static void exchanges(void) {
  enum { CAP = MAXRANKS * 5 };
  int sendcounts[MAXRANKS], sdispls[MAXRANKS], recvcounts[MAXRANKS], rdispls[MAXRANKS];
  int sbytes[MAXRANKS], rbytes[MAXRANKS];
  MPI_Datatype stypes[MAXRANKS], rtypes[MAXRANKS];
  int out[CAP], v_b[CAP], v_i[CAP], w_b[CAP], w_i[CAP], w_in_place[CAP];
  int s = 0, r = 0;
  for (int j = 0; j < size; ++j) {
    sendcounts[j] = exchanged(rank, j);
    sdispls[j] = s;
    sbytes[j] = s * (int)sizeof(int);
    s += sendcounts[j] + GAP;
    recvcounts[j] = exchanged(j, rank);
    rdispls[j] = r;
    rbytes[j] = r * (int)sizeof(int);
    r += recvcounts[j] + GAP;
    stypes[j] = MPI_INT;
    rtypes[j] = MPI_INT;
  }
  for (int i = 0; i < CAP; ++i) out[i] = value(rank, i), v_b[i] = v_i[i] = w_b[i] = w_i[i] = -1;
  for (int j = 0; j < size; ++j)
    for (int i = 0; i < recvcounts[j]; ++i) w_in_place[rdispls[j] + i] = value(rank, 500 + j * 10 + i);
  MPI_Request requests[3];
  MPI_Ialltoallv(out, sendcounts, sdispls, MPI_INT, v_i, recvcounts, rdispls, MPI_INT, MPI_COMM_WORLD, &requests[0]);
  MPI_Ialltoallw(out, sendcounts, sbytes, stypes, w_i, recvcounts, rbytes, rtypes, MPI_COMM_WORLD, &requests[1]);
  /* In place: the receive layout is also the send layout, so counts must be symmetric: rank r gets what it sends. */
  int sym_counts[MAXRANKS], sym_bytes[MAXRANKS];
  for (int j = 0; j < size; ++j) sym_counts[j] = exchanged(rank, j), sym_bytes[j] = rbytes[j];
  MPI_Ialltoallw(MPI_IN_PLACE, NULL, NULL, NULL, w_in_place, sym_counts, sym_bytes, rtypes, MPI_COMM_WORLD,
                 &requests[2]);
  MPI_Alltoallv(out, sendcounts, sdispls, MPI_INT, v_b, recvcounts, rdispls, MPI_INT, MPI_COMM_WORLD);
  MPI_Alltoallw(out, sendcounts, sbytes, stypes, w_b, recvcounts, rbytes, rtypes, MPI_COMM_WORLD);
  for (int k = 2; k >= 0; --k) expect(MPI_Wait(&requests[k], MPI_STATUS_IGNORE) == MPI_SUCCESS, "exchanges wait %d", k);
  int ok = 1, in_place_ok = 1;
  for (int j = 0; j < size; ++j) {
    /* Rank j's block for this rank starts at its own sdispls[rank]: the sum over k < rank of exchanged(j, k) + GAP. */
    int from = 0;
    for (int k = 0; k < rank; ++k) from += exchanged(j, k) + GAP;
    for (int i = 0; i < recvcounts[j] + GAP; ++i) {
      const int want = i < recvcounts[j] ? value(j, from + i) : -1;
      ok &= v_i[rdispls[j] + i] == want && v_b[rdispls[j] + i] == want && w_i[rdispls[j] + i] == want &&
            w_b[rdispls[j] + i] == want;
    }
    for (int i = 0; i < sym_counts[j]; ++i) in_place_ok &= w_in_place[rdispls[j] + i] == value(j, 500 + rank * 10 + i);
  }
  expect(ok, "ialltoallv, ialltoallw and their blocking forms match the formula");
  expect(in_place_ok, "ialltoallw in place swaps the blocks");
  say("exchanges: from rank 0 %d, in place from rank 0 %d", v_i[rdispls[0]], w_in_place[rdispls[0]]);
}

/* Alltoallw with a type per peer: rank j's block is a vector type on the send side, contiguous on the receive side. */
static void alltoallw_types(void) {
  enum { CAP = MAXRANKS * 8 };
  MPI_Datatype strided; /* 2 ints 2 apart */
  MPI_Type_vector(2, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);
  int sendcounts[MAXRANKS], sdispls[MAXRANKS], recvcounts[MAXRANKS], rdispls[MAXRANKS];
  MPI_Datatype stypes[MAXRANKS], rtypes[MAXRANKS];
  int out[CAP], in[CAP];
  for (int i = 0; i < CAP; ++i) out[i] = value(rank, i), in[i] = -1;
  for (int j = 0; j < size; ++j) {
    /* Odd peers get one strided element (ints 4j and 4j+2), even peers two contiguous ints (4j, 4j+1). */
    sendcounts[j] = j % 2 == 1 ? 1 : 2;
    stypes[j] = j % 2 == 1 ? strided : MPI_INT;
    sdispls[j] = 4 * j * (int)sizeof(int);
    recvcounts[j] = 2;
    rtypes[j] = MPI_INT;
    rdispls[j] = 3 * j * (int)sizeof(int);
  }
  MPI_Request request;
  MPI_Ialltoallw(out, sendcounts, sdispls, stypes, in, recvcounts, rdispls, rtypes, MPI_COMM_WORLD, &request);
  /* The caller may free a type while the request is outstanding. */
  MPI_Type_free(&strided);
  expect(MPI_Wait(&request, MPI_STATUS_IGNORE) == MPI_SUCCESS, "alltoallw types wait");
  int ok = 1;
  for (int j = 0; j < size; ++j) {
    const int second = rank % 2 == 1 ? 4 * rank + 2 : 4 * rank + 1;
    ok &= in[3 * j] == value(j, 4 * rank) && in[3 * j + 1] == value(j, second) && in[3 * j + 2] == -1;
  }
  expect(ok, "ialltoallw with a vector send type for odd peers");
  say("alltoallw types: from rank 0 %d %d", in[0], in[1]);
}

/* A non-commutative op: keeps the left operand where it is non-zero. */
static void first_nonzero(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  int* a = (int*)in;
  int* b = (int*)inout;
  for (int i = 0; i < *len; ++i)
    if (a[i] != 0) b[i] = a[i];
}

/* Ireduce_scatter with even and uneven blocks, predefined and user ops, in place; and MPI_Reduce_local. */
static void reduce_scatters(void) {
  enum { CAP = MAXRANKS * (MAXRANKS + 1) / 2 + MAXRANKS };
  int uneven[MAXRANKS], even[MAXRANKS];
  int total = 0;
  for (int r = 0; r < size; ++r) uneven[r] = block_count(r), even[r] = 3, total += uneven[r];
  int in[CAP], firsts[CAP], in_place[CAP], sums_v[MAXRANKS], sums_e[3], firsts_v[MAXRANKS], blocking_v[MAXRANKS];
  for (int i = 0; i < CAP; ++i) {
    in[i] = in_place[i] = value(rank, i);
    firsts[i] = (rank + i) % 3 == 0 ? value(rank, i) : 0;
  }
  for (int i = 0; i < MAXRANKS; ++i) sums_v[i] = firsts_v[i] = blocking_v[i] = -1;
  MPI_Op first_op;
  MPI_Op_create(first_nonzero, 0, &first_op);
  MPI_Request requests[4];
  MPI_Ireduce_scatter(in, sums_v, uneven, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[0]);
  MPI_Ireduce_scatter(in, sums_e, even, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[1]);
  MPI_Ireduce_scatter(firsts, firsts_v, uneven, MPI_INT, first_op, MPI_COMM_WORLD, &requests[2]);
  MPI_Ireduce_scatter(MPI_IN_PLACE, in_place, uneven, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[3]);
  MPI_Reduce_scatter(firsts, blocking_v, uneven, MPI_INT, first_op, MPI_COMM_WORLD);
  for (int k = 3; k >= 0; --k) expect(MPI_Wait(&requests[k], MPI_STATUS_IGNORE) == MPI_SUCCESS, "reduce_scatter wait %d", k);
  int start = 0;
  for (int r = 0; r < rank; ++r) start += uneven[r];
  int ok = 1;
  for (int i = 0; i < uneven[rank]; ++i) {
    int sum = 0, first = 0;
    for (int r = size - 1; r >= 0; --r) {
      sum += value(r, start + i);
      if ((r + start + i) % 3 == 0) first = value(r, start + i);
    }
    ok &= sums_v[i] == sum && in_place[i] == sum && firsts_v[i] == first && blocking_v[i] == first;
  }
  for (int i = 0; i < 3; ++i) {
    int sum = 0;
    for (int r = 0; r < size; ++r) sum += value(r, rank * 3 + i);
    ok &= sums_e[i] == sum;
  }
  expect(ok, "ireduce_scatter (uneven and even, sum, a non-commutative op, in place) matches the formula");
  say("reduce_scatter: uneven sum %d, even sum %d, first %d", sums_v[0], sums_e[0], firsts_v[0]);

  /* Reduce_local: inout = in op inout, for a non-commutative op. */
  int a[4] = {1, 0, 3, 0}, b[4] = {5, 6, 7, 8};
  expect(MPI_Reduce_local(a, b, 4, MPI_INT, first_op) == MPI_SUCCESS, "reduce_local first_nonzero");
  expect(b[0] == 1 && b[1] == 6 && b[2] == 3 && b[3] == 8, "reduce_local first_nonzero gives %d %d %d %d", b[0], b[1], b[2], b[3]);
  MPI_Op_free(&first_op);
  say("reduce_local: %d %d %d %d", b[0], b[1], b[2], b[3]);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    if (rank == 0) printf("usage: vcollectives (under mpirun/chorusrun, 1..16 ranks): checks the v- and w-collectives and their I-forms\n");
    MPI_Finalize();
    return 0;
  }
  if (size > MAXRANKS) {
    if (rank == 0) printf("FAILED: vcollectives runs on at most %d ranks\n", MAXRANKS);
    MPI_Finalize();
    return 1;
  }
  gathers();
  scatters();
  exchanges();
  alltoallw_types();
  reduce_scatters();
  int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("vcollectives", failures);
  return failures == 0 ? 0 : 1;
}
