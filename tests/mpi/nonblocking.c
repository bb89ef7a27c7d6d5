/*
 * Non-blocking MPI: halo exchange with MPI_Isend/MPI_Irecv + MPI_Waitall
 * (below and above chorus' 16 KiB eager limit, contiguous and vector
 * datatypes), MPI_Waitany / MPI_Waitsome / MPI_Testany / MPI_Testall loops,
 * MPI_Request_free on a send, MPI_PROC_NULL peers and MPI_REQUEST_NULL,
 * MPI_Sendrecv and MPI_Sendrecv_replace rings, MPI_Iprobe/MPI_Probe then
 * MPI_Recv with the probed count, and every I-collective started together
 * (predefined, MINLOC and a non-commutative user op) and waited for in
 * reverse order, MPI_Iscan/MPI_Iexscan against MPI_Scan/MPI_Exscan. Every element is checked; only deterministic values are
 * printed, so the output matches Open MPI's.
 */
#include "report.h"

static int rank, size;

static int left(void) { return (rank + size - 1) % size; }
static int right(void) { return (rank + 1) % size; }
static int value(int r, int i) { return (r + 1) * 1000 + i; }

static void halo(int n, const char* what) {
  int* send_left = malloc(sizeof(int) * (size_t)n);
  int* send_right = malloc(sizeof(int) * (size_t)n);
  int* from_left = malloc(sizeof(int) * (size_t)n);
  int* from_right = malloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; ++i) {
    send_left[i] = value(rank, i);
    send_right[i] = -value(rank, i);
    from_left[i] = from_right[i] = 0;
  }
  MPI_Request requests[4];
  MPI_Status statuses[4];
  MPI_Irecv(from_left, n, MPI_INT, left(), 1, MPI_COMM_WORLD, &requests[0]);
  MPI_Irecv(from_right, n, MPI_INT, right(), 2, MPI_COMM_WORLD, &requests[1]);
  MPI_Isend(send_right, n, MPI_INT, right(), 1, MPI_COMM_WORLD, &requests[2]);
  MPI_Isend(send_left, n, MPI_INT, left(), 2, MPI_COMM_WORLD, &requests[3]);
  expect(MPI_Waitall(4, requests, statuses) == MPI_SUCCESS, "%s: waitall", what);
  int ok = 1, count_left = -1, count_right = -1;
  for (int i = 0; i < n; ++i) ok &= from_left[i] == -value(left(), i) && from_right[i] == value(right(), i);
  MPI_Get_count(&statuses[0], MPI_INT, &count_left);
  MPI_Get_count(&statuses[1], MPI_INT, &count_right);
  expect(ok, "%s: halo values", what);
  expect(statuses[0].MPI_SOURCE == left() && statuses[0].MPI_TAG == 1 && count_left == n, "%s: left status", what);
  expect(statuses[1].MPI_SOURCE == right() && statuses[1].MPI_TAG == 2 && count_right == n, "%s: right status", what);
  for (int i = 0; i < 4; ++i) expect(requests[i] == MPI_REQUEST_NULL, "%s: request %d freed", what, i);
  say("%s (%d ints): left %d..%d right %d..%d, counts %d %d", what, n, from_left[0], from_left[n - 1], from_right[0],
      from_right[n - 1], count_left, count_right);
  free(send_left);
  free(send_right);
  free(from_left);
  free(from_right);
}

/* Every other column of a 2 x n matrix row, as a vector type, both ways. */
static void halo_vector(void) {
  enum { N = 6000 }; /* 24 KB packed: above the eager limit */
  static int matrix[2 * N], incoming[2 * N];
  MPI_Datatype every_other;
  MPI_Type_vector(N, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  for (int i = 0; i < 2 * N; ++i) {
    matrix[i] = value(rank, i);
    incoming[i] = -1;
  }
  MPI_Request requests[2];
  MPI_Irecv(incoming, 1, every_other, left(), 3, MPI_COMM_WORLD, &requests[0]);
  MPI_Isend(matrix, 1, every_other, right(), 3, MPI_COMM_WORLD, &requests[1]);
  MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
  int ok = 1;
  for (int i = 0; i < 2 * N; ++i) ok &= incoming[i] == (i % 2 == 0 ? value(left(), i) : -1);
  expect(ok, "vector halo");
  say("vector halo: %d %d %d", incoming[0], incoming[1], incoming[2 * N - 2]);
  MPI_Type_free(&every_other);
}

/* Rank 0 receives one message from every other rank with MPI_Waitany. */
static void waitany_loop(void) {
  enum { MAX = 16 };
  int got[MAX] = {0}, mine = value(rank, 7);
  MPI_Request requests[MAX];
  if (rank == 0) {
    for (int r = 1; r < size; ++r) MPI_Irecv(&got[r], 1, MPI_INT, r, 10 + r, MPI_COMM_WORLD, &requests[r - 1]);
    int completed = 0, index = 0, ok = 1;
    MPI_Status status;
    for (;;) {
      MPI_Waitany(size - 1, requests, &index, &status);
      if (index == MPI_UNDEFINED) break;
      ++completed;
      ok &= status.MPI_SOURCE == index + 1 && status.MPI_TAG == 11 + index && got[index + 1] == value(index + 1, 7);
      ok &= requests[index] == MPI_REQUEST_NULL;
    }
    expect(ok && completed == size - 1, "waitany: %d completed", completed);
    say("waitany: %d messages, then MPI_UNDEFINED", completed);
  } else {
    MPI_Send(&mine, 1, MPI_INT, 0, 10 + rank, MPI_COMM_WORLD);
  }
}

/* Everyone to everyone with MPI_Waitsome; MPI_PROC_NULL receives mixed in. */
static void waitsome_loop(void) {
  enum { MAX = 16 };
  int got[MAX], out = value(rank, 3);
  MPI_Request requests[3 * MAX];
  int count = 0;
  for (int r = 0; r < size; ++r) {
    got[r] = -1;
    MPI_Irecv(&got[r], 1, MPI_INT, r, 20, MPI_COMM_WORLD, &requests[count++]);
    MPI_Isend(&out, 1, MPI_INT, r, 20, MPI_COMM_WORLD, &requests[count++]);
  }
  int null_value = 5;
  MPI_Irecv(&null_value, 1, MPI_INT, MPI_PROC_NULL, 20, MPI_COMM_WORLD, &requests[count++]);
  int done = 0, outcount = 0, rounds = 0, indices[3 * MAX];
  MPI_Status statuses[3 * MAX];
  for (;;) {
    MPI_Waitsome(count, requests, &outcount, indices, statuses);
    if (outcount == MPI_UNDEFINED) break;
    ++rounds;
    done += outcount;
    for (int k = 0; k < outcount; ++k) expect(requests[indices[k]] == MPI_REQUEST_NULL, "waitsome freed");
  }
  int ok = null_value == 5;
  for (int r = 0; r < size; ++r) ok &= got[r] == value(r, 3);
  expect(ok && done == count, "waitsome: %d of %d done (null %d got %d %d %d)", done, count, null_value, got[0], got[1], got[2]);
  say("waitsome: %d requests completed, then MPI_UNDEFINED", done);
}

static void testany_testall(void) {
  int from_left = -1, to_right = value(rank, 1);
  MPI_Request requests[2];
  MPI_Irecv(&from_left, 1, MPI_INT, left(), 30, MPI_COMM_WORLD, &requests[0]);
  MPI_Isend(&to_right, 1, MPI_INT, right(), 30, MPI_COMM_WORLD, &requests[1]);
  int completed = 0, index = 0, flag = 0;
  while (completed < 2) {
    MPI_Testany(2, requests, &index, &flag, MPI_STATUS_IGNORE);
    if (flag && index != MPI_UNDEFINED) ++completed;
  }
  MPI_Testany(2, requests, &index, &flag, MPI_STATUS_IGNORE);
  expect(flag == 1 && index == MPI_UNDEFINED, "testany without active requests");
  expect(from_left == value(left(), 1), "testany value");
  /* Testall: all or nothing. */
  int back = -1;
  MPI_Irecv(&back, 1, MPI_INT, right(), 31, MPI_COMM_WORLD, &requests[0]);
  MPI_Isend(&from_left, 1, MPI_INT, left(), 31, MPI_COMM_WORLD, &requests[1]);
  MPI_Status statuses[2];
  flag = 0;
  while (!flag) MPI_Testall(2, requests, &flag, statuses);
  expect(back == value(rank, 1) && statuses[0].MPI_SOURCE == right(), "testall round trip");
  expect(requests[0] == MPI_REQUEST_NULL && requests[1] == MPI_REQUEST_NULL, "testall freed");
  say("testany/testall: %d came back", back);
}

static void request_free_and_nulls(void) {
  /* A send freed right away still arrives; its buffer is left alone until then. */
  static int payload[10000];
  for (int i = 0; i < 10000; ++i) payload[i] = value(rank, i);
  MPI_Request request;
  MPI_Isend(payload, 10000, MPI_INT, right(), 40, MPI_COMM_WORLD, &request);
  MPI_Request_free(&request);
  expect(request == MPI_REQUEST_NULL, "request_free sets MPI_REQUEST_NULL");
  static int got[10000];
  MPI_Recv(got, 10000, MPI_INT, left(), 40, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int ok = 1;
  for (int i = 0; i < 10000; ++i) ok &= got[i] == value(left(), i);
  expect(ok, "freed send arrived");
  MPI_Barrier(MPI_COMM_WORLD); /* every freed send has been received */

  /* MPI_PROC_NULL peers and MPI_REQUEST_NULL. */
  MPI_Status status;
  int flag = 0, count = -1, x = 9;
  MPI_Isend(&x, 1, MPI_INT, MPI_PROC_NULL, 41, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, &status);
  expect(request == MPI_REQUEST_NULL, "proc_null send completes");
  MPI_Irecv(&x, 1, MPI_INT, MPI_PROC_NULL, 41, MPI_COMM_WORLD, &request);
  MPI_Test(&request, &flag, &status);
  MPI_Get_count(&status, MPI_INT, &count);
  expect(flag && x == 9 && status.MPI_SOURCE == MPI_PROC_NULL && status.MPI_TAG == MPI_ANY_TAG && count == 0,
         "proc_null receive status");
  request = MPI_REQUEST_NULL;
  expect(MPI_Wait(&request, &status) == MPI_SUCCESS, "wait on MPI_REQUEST_NULL");
  flag = 0;
  MPI_Test(&request, &flag, MPI_STATUS_IGNORE);
  expect(flag == 1, "test on MPI_REQUEST_NULL");
  say("request_free: freed send of 10000 ints arrived; MPI_PROC_NULL and MPI_REQUEST_NULL complete at once");
}

static void sendrecv_rings(void) {
  enum { N = 200000 }; /* 1.6 MB each way: rendezvous, no deadlock */
  static double out[N], in[N];
  for (int i = 0; i < N; ++i) {
    out[i] = rank * 1.0e6 + i;
    in[i] = -1;
  }
  MPI_Status status;
  MPI_Sendrecv(out, N, MPI_DOUBLE, right(), 50, in, N, MPI_DOUBLE, left(), 50, MPI_COMM_WORLD, &status);
  int ok = 1, count = -1;
  for (int i = 0; i < N; ++i) ok &= in[i] == left() * 1.0e6 + i;
  MPI_Get_count(&status, MPI_DOUBLE, &count);
  expect(ok && status.MPI_SOURCE == left() && status.MPI_TAG == 50 && count == N, "sendrecv ring");
  /* Replace: the data goes round the ring size times and comes home. */
  for (int i = 0; i < N; ++i) out[i] = rank * 1.0e6 + i;
  for (int step = 0; step < size; ++step) {
    MPI_Sendrecv_replace(out, N, MPI_DOUBLE, right(), 51, left(), 51, MPI_COMM_WORLD, &status);
  }
  ok = 1;
  for (int i = 0; i < N; ++i) ok &= out[i] == rank * 1.0e6 + i;
  expect(ok, "sendrecv_replace ring");
  /* MPI_PROC_NULL on either side: that side does nothing. */
  int one = rank, other = -1;
  MPI_Sendrecv(&one, 1, MPI_INT, right(), 52, &other, 1, MPI_INT, MPI_PROC_NULL, 52, MPI_COMM_WORLD, &status);
  expect(status.MPI_SOURCE == MPI_PROC_NULL && other == -1, "sendrecv from MPI_PROC_NULL");
  MPI_Sendrecv(&one, 1, MPI_INT, MPI_PROC_NULL, 52, &other, 1, MPI_INT, left(), 52, MPI_COMM_WORLD, &status);
  expect(status.MPI_SOURCE == left() && other == left(), "sendrecv to MPI_PROC_NULL");
  say("sendrecv: %d doubles from rank %d; replace ring of %d steps came home", count, left(), size);
}

static void probes(void) {
  /* Rank r sends 10 + 7r ints with tag 60 + r, then 30000 ints (rendezvous) with tag 61. */
  const int n_small = 10 + 7 * rank, n_large = 30000;
  int* small = malloc(sizeof(int) * (size_t)n_small);
  int* large = malloc(sizeof(int) * (size_t)n_large);
  for (int i = 0; i < n_small; ++i) small[i] = value(rank, i);
  for (int i = 0; i < n_large; ++i) large[i] = -value(rank, i);
  MPI_Request requests[2];
  MPI_Isend(small, n_small, MPI_INT, right(), 60 + rank, MPI_COMM_WORLD, &requests[0]);
  MPI_Isend(large, n_large, MPI_INT, right(), 61, MPI_COMM_WORLD, &requests[1]);
  MPI_Status status;
  int flag = 0, count = -1;
  while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
  /* From one source, messages match in send order: the small one first. */
  MPI_Get_count(&status, MPI_INT, &count);
  expect(status.MPI_SOURCE == left() && status.MPI_TAG == 60 + left() && count == 10 + 7 * left(), "iprobe");
  int* got = malloc(sizeof(int) * (size_t)count);
  MPI_Recv(got, count, MPI_INT, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int ok = 1;
  for (int i = 0; i < count; ++i) ok &= got[i] == value(left(), i);
  expect(ok, "received the probed message");
  say("iprobe: %d ints from rank %d tag %d", count, status.MPI_SOURCE, status.MPI_TAG);
  free(got);
  MPI_Probe(left(), 61, MPI_COMM_WORLD, &status);
  MPI_Get_count(&status, MPI_INT, &count);
  expect(count == n_large && status.MPI_SOURCE == left(), "probe of a rendezvous message");
  got = malloc(sizeof(int) * (size_t)count);
  MPI_Recv(got, count, MPI_INT, left(), 61, MPI_COMM_WORLD, &status);
  ok = 1;
  for (int i = 0; i < count; ++i) ok &= got[i] == -value(left(), i);
  expect(ok, "received the probed large message");
  flag = 1;
  MPI_Iprobe(left(), 62, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  expect(flag == 0, "iprobe without a message");
  say("probe: %d ints from rank %d tag %d", count, status.MPI_SOURCE, status.MPI_TAG);
  MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
  free(got);
  free(small);
  free(large);
}

/* a op b = a if a != 0 else b: associative, not commutative (the lowest rank's non-zero wins). */
static void first_nonzero(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) b[i] = a[i] != 0 ? a[i] : b[i];
}

static void icollectives(void) {
  enum { N = 100000, M = 5 };
  static double big_in[N], big_out[N];
  int bcast_data[M], reduce_out[M], reduce_in[M], firsts_in[M], firsts_out[M];
  int gathered[16 * M], all_in[16 * M], all_out[16 * M], rs_in[16 * M], rs_out[M];
  struct { double value; int rank; } loc_in, loc_out;
  const int bcast_root = size - 1, reduce_root = 1 % size;
  for (int i = 0; i < N; ++i) big_in[i] = (double)(rank + 1) * (i % 100);
  for (int i = 0; i < M; ++i) {
    bcast_data[i] = rank == bcast_root ? value(bcast_root, i) : -1;
    reduce_in[i] = value(rank, i);
    firsts_in[i] = (rank + i) % 3 == 0 ? value(rank, i) : 0;
  }
  for (int j = 0; j < size * M; ++j) {
    all_in[j] = value(rank, j);
    rs_in[j] = rank + j;
  }
  loc_in.value = (double)((rank * 7) % size);
  loc_in.rank = rank;
  MPI_Op first_op;
  MPI_Op_create(first_nonzero, 0, &first_op);
  MPI_Request requests[9];
  MPI_Ibarrier(MPI_COMM_WORLD, &requests[0]);
  MPI_Ibcast(bcast_data, M, MPI_INT, bcast_root, MPI_COMM_WORLD, &requests[1]);
  MPI_Ireduce(reduce_in, reduce_out, M, MPI_INT, MPI_SUM, reduce_root, MPI_COMM_WORLD, &requests[2]);
  MPI_Iallreduce(big_in, big_out, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &requests[3]);
  MPI_Iallreduce(firsts_in, firsts_out, M, MPI_INT, first_op, MPI_COMM_WORLD, &requests[4]);
  MPI_Iallreduce(&loc_in, &loc_out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD, &requests[5]);
  MPI_Iallgather(reduce_in, M, MPI_INT, gathered, M, MPI_INT, MPI_COMM_WORLD, &requests[6]);
  MPI_Ialltoall(all_in, M, MPI_INT, all_out, M, MPI_INT, MPI_COMM_WORLD, &requests[7]);
  MPI_Ireduce_scatter_block(rs_in, rs_out, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[8]);
  for (int k = 8; k >= 0; --k) expect(MPI_Wait(&requests[k], MPI_STATUS_IGNORE) == MPI_SUCCESS, "wait %d", k);
  MPI_Op_free(&first_op);

  int ok = 1;
  for (int i = 0; i < M; ++i) ok &= bcast_data[i] == value(bcast_root, i);
  expect(ok, "ibcast");
  if (rank == reduce_root) {
    ok = 1;
    for (int i = 0; i < M; ++i) ok &= reduce_out[i] == 1000 * size * (size + 1) / 2 + size * i;
    expect(ok, "ireduce");
    say("ireduce at root %d: %d %d", reduce_root, reduce_out[0], reduce_out[M - 1]);
  }
  ok = 1;
  for (int i = 0; i < N; ++i) ok &= big_out[i] == (double)size * (size + 1) / 2 * (i % 100);
  expect(ok, "iallreduce of %d doubles", N);
  ok = 1;
  for (int i = 0; i < M; ++i) {
    int lowest = 0;
    while ((lowest + i) % 3 != 0) ++lowest;
    ok &= firsts_out[i] == (lowest < size ? value(lowest, i) : 0);
  }
  expect(ok, "iallreduce with a non-commutative user op");
  expect(loc_out.value == (double)(size - 1), "iallreduce maxloc value");
  ok = 1;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < M; ++i) ok &= gathered[r * M + i] == value(r, i) && all_out[r * M + i] == value(r, rank * M + i);
  }
  expect(ok, "iallgather and ialltoall");
  ok = 1;
  for (int i = 0; i < M; ++i) ok &= rs_out[i] == size * (size - 1) / 2 + size * (rank * M + i);
  expect(ok, "ireduce_scatter_block");
  say("icollectives: bcast %d, allreduce %.1f, first-nonzero %d %d %d, maxloc %.1f at %d, gathered %d, alltoall %d, "
      "reduce_scatter %d", bcast_data[M - 1], big_out[N - 1], firsts_out[0], firsts_out[1], firsts_out[2],
      loc_out.value, loc_out.rank, gathered[size * M - 1], all_out[size * M - 1], rs_out[M - 1]);
}

/* MPI_Iscan and MPI_Iexscan, outstanding together: SUM on ints (chorus'
 * iscan), in place too, and the non-commutative first_nonzero (gathered,
 * combined in rank order); each against the blocking call's result. (Open
 * MPI refuses predefined ops on derived datatypes in scans, so none here.)
 * Exscan's rank 0 result is undefined: not checked. */
static void iscans(void) {
  enum { M = 6 };
  int in[M], firsts[M], in_place[M], sums[M], ex_sums[M], first_scan[M], first_ex[M];
  int want_sums[M], want_ex[M], want_first[M], want_first_ex[M];
  for (int i = 0; i < M; ++i) {
    in[i] = in_place[i] = value(rank, i);
    firsts[i] = (rank + i) % 3 == 0 ? value(rank, i) : 0;
    sums[i] = ex_sums[i] = first_scan[i] = first_ex[i] = -1;
  }
  MPI_Op first_op;
  MPI_Op_create(first_nonzero, 0, &first_op);
  MPI_Scan(in, want_sums, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Exscan(in, want_ex, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Scan(firsts, want_first, M, MPI_INT, first_op, MPI_COMM_WORLD);
  MPI_Exscan(firsts, want_first_ex, M, MPI_INT, first_op, MPI_COMM_WORLD);
  MPI_Request requests[5];
  MPI_Iscan(in, sums, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[0]);
  MPI_Iexscan(in, ex_sums, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[1]);
  MPI_Iscan(firsts, first_scan, M, MPI_INT, first_op, MPI_COMM_WORLD, &requests[2]);
  MPI_Iexscan(firsts, first_ex, M, MPI_INT, first_op, MPI_COMM_WORLD, &requests[3]);
  MPI_Iscan(MPI_IN_PLACE, in_place, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[4]);
  for (int k = 4; k >= 0; --k) expect(MPI_Wait(&requests[k], MPI_STATUS_IGNORE) == MPI_SUCCESS, "iscan wait %d", k);
  MPI_Op_free(&first_op);
  int ok = 1, expected_sum = 0;
  for (int r = 0; r <= rank; ++r) expected_sum += value(r, M - 1);
  for (int i = 0; i < M; ++i) {
    ok &= sums[i] == want_sums[i] && first_scan[i] == want_first[i] && in_place[i] == want_sums[i];
    if (rank > 0) ok &= ex_sums[i] == want_ex[i] && first_ex[i] == want_first_ex[i];
  }
  expect(ok && sums[M - 1] == expected_sum, "iscan and iexscan match the blocking calls");
  say("iscans: sum %d, exscan %d, first %d %d, in place %d", sums[M - 1], rank > 0 ? ex_sums[M - 1] : 0,
      first_scan[0], first_scan[1], in_place[M - 1]);
}

/* Derived datatypes, in-place forms and ops chorus' collectives lack, all outstanding together. */
static void icollectives_general(void) {
  enum { N = 3000, M = 4, MAXRANKS = 16 };
  static int matrix[2 * N], summed[2 * N];
  int firsts[MAXRANKS * M], firsts_out[M], rooted[M], rooted_out[M], band[M];
  int gathered[MAXRANKS * M], exchanged[MAXRANKS * M], scattered[MAXRANKS * M];
  MPI_Datatype every_other;
  MPI_Type_vector(N, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  MPI_Op first_op;
  MPI_Op_create(first_nonzero, 0, &first_op);
  for (int i = 0; i < 2 * N; ++i) {
    matrix[i] = rank == 0 ? value(0, i) : -1;
    summed[i] = i % 2 == 0 ? (rank + 1) * i : -7 * (rank + 1);
  }
  for (int j = 0; j < size * M; ++j) {
    firsts[j] = (rank + j) % 3 == 0 ? value(rank, j) : 0;
    gathered[j] = j / M == rank ? value(rank, j) : -1;
    exchanged[j] = value(rank, j);
    scattered[j] = rank + j;
  }
  for (int i = 0; i < M; ++i) {
    rooted[i] = (rank + i) % 2 == 0 ? value(rank, i) : 0;
    band[i] = 0xff0 | (1 << ((rank + i) % 4));
  }
  const int root = size - 1;
  MPI_Request requests[8];
  MPI_Ibcast(matrix, 1, every_other, 0, MPI_COMM_WORLD, &requests[0]);
  /* (Open MPI refuses predefined ops on derived types: a contiguous in-place one here.) */
  MPI_Iallreduce(MPI_IN_PLACE, summed, 2 * N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[1]);
  MPI_Ireduce(rooted, rooted_out, M, MPI_INT, first_op, root, MPI_COMM_WORLD, &requests[2]);
  MPI_Ireduce(rank == root ? MPI_IN_PLACE : band, band, M, MPI_INT, MPI_BOR, root, MPI_COMM_WORLD, &requests[3]);
  MPI_Ireduce_scatter_block(firsts, firsts_out, M, MPI_INT, first_op, MPI_COMM_WORLD, &requests[4]);
  MPI_Ireduce_scatter_block(MPI_IN_PLACE, scattered, M, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &requests[5]);
  MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, gathered, M, MPI_INT, MPI_COMM_WORLD, &requests[6]);
  MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, exchanged, M, MPI_INT, MPI_COMM_WORLD, &requests[7]);
  expect(MPI_Waitall(8, requests, MPI_STATUSES_IGNORE) == MPI_SUCCESS, "general waitall");
  MPI_Op_free(&first_op);
  MPI_Type_free(&every_other);

  int ok = 1;
  for (int i = 0; i < 2 * N; ++i) {
    ok &= matrix[i] == (i % 2 == 0 || rank == 0 ? value(0, i) : -1);
    ok &= summed[i] == (i % 2 == 0 ? 1 : -7) * size * (size + 1) / 2 * (i % 2 == 0 ? i : 1);
  }
  expect(ok, "ibcast of a vector type, in-place iallreduce");
  if (rank == root) {
    ok = 1;
    for (int i = 0; i < M; ++i) {
      ok &= rooted_out[i] == value(i % 2 == 0 ? 0 : 1, i);
      int bits = 0xff0;
      for (int r = 0; r < size; ++r) bits |= 1 << ((r + i) % 4);
      ok &= band[i] == bits;
    }
    expect(ok, "ireduce with a user op and in-place MPI_BOR at root %d", root);
    say("ireduce at root %d: first-nonzero %d %d, bor %#x", root, rooted_out[0], rooted_out[1], band[0]);
  }
  ok = 1;
  for (int i = 0; i < M; ++i) {
    const int j = rank * M + i;
    int lowest = 0;
    while ((lowest + j) % 3 != 0) ++lowest;
    ok &= firsts_out[i] == (lowest < size ? value(lowest, j) : 0);
    ok &= scattered[i] == size * (size - 1) / 2 + size * j;
  }
  expect(ok, "ireduce_scatter_block: user op, and in place");
  ok = 1;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < M; ++i) ok &= gathered[r * M + i] == value(r, r * M + i) && exchanged[r * M + i] == value(r, rank * M + i);
  }
  expect(ok, "in-place iallgather and ialltoall");
  say("icollectives (general): vector %d %d, first-nonzero block %d, in-place block %d, gathered %d, exchanged %d",
      matrix[2 * N - 2], summed[2 * N - 2], firsts_out[0], scattered[M - 1], gathered[size * M - 1],
      exchanged[size * M - 1]);
}

#ifdef CHORUS_MPI
/* A user op that is neither associative nor commutative in floating point. */
static void skewed(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  const double* a = in;
  double* b = inout;
  for (int i = 0; i < *len; ++i) b[i] = a[i] * 0.7 + b[i] * 1.3 + 0.1;
}

/* chorus reduces with ops its collectives lack one way, blocking or not
 * (docs/mpi.md, "Reductions"), so a blocking reduction and its I-call give
 * the same bits even for an op whose result depends on the grouping. Open
 * MPI need not: chorus only, and only a failure prints (the outputs of both
 * must stay identical). */
static void blocking_matches_nonblocking(void) {
  enum { M = 5, MAXRANKS = 16 };
  double in[MAXRANKS * M], blocking[MAXRANKS * M], nonblocking[MAXRANKS * M];
  for (int j = 0; j < size * M; ++j) in[j] = 1.0 / (rank + j + 3);
  MPI_Op op;
  MPI_Op_create(skewed, 0, &op);
  MPI_Request request;
  const size_t bytes = M * sizeof(double);
  int same = 1;
  MPI_Allreduce(in, blocking, M, MPI_DOUBLE, op, MPI_COMM_WORLD);
  MPI_Iallreduce(in, nonblocking, M, MPI_DOUBLE, op, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  same &= memcmp(blocking, nonblocking, bytes) == 0;
  const int root = size - 1;
  MPI_Reduce(in, blocking, M, MPI_DOUBLE, op, root, MPI_COMM_WORLD);
  MPI_Ireduce(in, nonblocking, M, MPI_DOUBLE, op, root, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  if (rank == root) same &= memcmp(blocking, nonblocking, bytes) == 0;
  MPI_Reduce_scatter_block(in, blocking, M, MPI_DOUBLE, op, MPI_COMM_WORLD);
  MPI_Ireduce_scatter_block(in, nonblocking, M, MPI_DOUBLE, op, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  same &= memcmp(blocking, nonblocking, bytes) == 0;
  MPI_Op_free(&op);
  if (!same) say("FAILED: a blocking reduction with a user op differs from its non-blocking form");
}
#endif

/* A truncated receive in MPI_Waitall, under MPI_ERRORS_RETURN: MPI_ERR_IN_STATUS, the status says which. */
static void waitall_error(void) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int two[2] = {rank, rank}, one = -1, error_class = -1, status_class = -1;
  MPI_Request requests[2];
  MPI_Status statuses[2];
  MPI_Irecv(&one, 1, MPI_INT, left(), 70, comm, &requests[0]);
  MPI_Isend(two, 2, MPI_INT, right(), 70, comm, &requests[1]);
  MPI_Error_class(MPI_Waitall(2, requests, statuses), &error_class);
  MPI_Error_class(statuses[0].MPI_ERROR, &status_class);
  expect(error_class == MPI_ERR_IN_STATUS && status_class == MPI_ERR_TRUNCATE, "waitall with a truncated receive");
  say("waitall with a truncated receive: %s, status 0 %s",
      error_class == MPI_ERR_IN_STATUS ? "MPI_ERR_IN_STATUS" : "other", status_class == MPI_ERR_TRUNCATE ? "MPI_ERR_TRUNCATE" : "other");
  /* The communicator stays usable. */
  expect(MPI_Barrier(comm) == MPI_SUCCESS, "barrier after a truncation");
  MPI_Comm_free(&comm);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    if (rank == 0) printf("usage: nonblocking (under mpirun/chorusrun, 2..16 ranks): checks non-blocking MPI calls\n");
    MPI_Finalize();
    return 0;
  }
  halo(8, "halo small");
  halo(50000, "halo large");
  halo_vector();
  waitany_loop();
  waitsome_loop();
  testany_testall();
  request_free_and_nulls();
  sendrecv_rings();
  probes();
  icollectives();
  icollectives_general();
  iscans();
#ifdef CHORUS_MPI
  blocking_matches_nonblocking();
#endif
  waitall_error();
  int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("nonblocking", failures);
  return failures == 0 ? 0 : 1;
}
