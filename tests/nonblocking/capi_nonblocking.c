/*
 * The C API's non-blocking calls between real processes (run under
 * chorusrun, 3 ranks): every i-collective (in place where the blocking call
 * allows it) started together and waited for in reverse order,
 * chorus_waitall / waitany / testall / testany loops over point-to-point
 * rings (wildcard receive and its chorus_received_t), chorus_request_free on
 * a send, NULL requests, and errors: a bad tag, a truncated receive. Every
 * element is checked; prints "capi_nonblocking: N checks, 0 failed".
 */
#include <chorus/chorus.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int checks = 0, failed = 0, rank = -1, size = -1;

static void expect(int ok, const char* what) {
  ++checks;
  if (!ok) {
    ++failed;
    printf("FAILED: rank %d: %s (last error: %s)\n", rank, what, chorus_last_error());
  }
}

static void collectives(chorus_comm_t comm) {
  enum { N = 50000, M = 4, MAXRANKS = 16 };
  static float sum_in[N], sum_out[N];
  int32_t inplace[M], gather_in[M], reduce_scatter_in[MAXRANKS * M], reduce_scatter_out[M], inplace_rs[MAXRANKS * M];
  int64_t bcast[M];
  double reduce_in[M], reduce_out[M];
  int32_t gathered[MAXRANKS * M], gathered_inplace[MAXRANKS * M], alltoall_in[MAXRANKS * M],
      alltoall_out[MAXRANKS * M];
  const int bcast_root = size - 1, reduce_root = 1 % size;
  for (int i = 0; i < N; ++i) sum_in[i] = (float)((rank + 1) * (i % 64));
  for (int i = 0; i < M; ++i) {
    inplace[i] = rank * 10 + i;
    gather_in[i] = rank + i;
    bcast[i] = rank == bcast_root ? 1000000000000LL + i : -1;
    reduce_in[i] = (double)(rank + 1) * (i + 1);
    gathered_inplace[rank * M + i] = rank * 100 + i;
  }
  for (int j = 0; j < size * M; ++j) {
    reduce_scatter_in[j] = rank + j;
    inplace_rs[j] = rank + j;
    alltoall_in[j] = rank * 1000 + j;
  }
  chorus_request_t requests[10];
  const chorus_status_t started[10] = {
      chorus_ibarrier(comm, &requests[0]),
      chorus_iallreduce(comm, sum_in, sum_out, N, CHORUS_FLOAT32, CHORUS_SUM, &requests[1]),
      chorus_iallreduce(comm, CHORUS_IN_PLACE, inplace, M, CHORUS_INT32, CHORUS_MAX, &requests[2]),
      chorus_ibroadcast(comm, bcast, M, CHORUS_INT64, bcast_root, &requests[3]),
      chorus_ireduce(comm, reduce_in, reduce_out, M, CHORUS_FLOAT64, CHORUS_SUM, reduce_root, &requests[4]),
      chorus_iallgather(comm, gather_in, gathered, M, CHORUS_INT32, &requests[5]),
      chorus_iallgather(comm, CHORUS_IN_PLACE, gathered_inplace, M, CHORUS_INT32, &requests[6]),
      chorus_ireduce_scatter(comm, reduce_scatter_in, reduce_scatter_out, M, CHORUS_INT32, CHORUS_SUM, &requests[7]),
      chorus_ireduce_scatter(comm, CHORUS_IN_PLACE, inplace_rs, M, CHORUS_INT32, CHORUS_SUM, &requests[8]),
      chorus_ialltoall(comm, alltoall_in, alltoall_out, M, CHORUS_INT32, &requests[9]),
  };
  for (int k = 0; k < 10; ++k) expect(started[k] == CHORUS_SUCCESS, "start an i-collective");
  for (int k = 9; k >= 0; --k) {
    chorus_received_t got = {7, 7, 7};
    expect(chorus_wait(&requests[k], &got) == CHORUS_SUCCESS && requests[k] == NULL, "wait in reverse order");
    expect(got.source == -1 && got.tag == -1 && got.bytes == 0, "a collective receives nothing");
  }
  int ok = 1;
  for (int i = 0; i < N; ++i) ok &= sum_out[i] == (float)(size * (size + 1) / 2 * (i % 64));
  expect(ok, "iallreduce float32 sum");
  ok = 1;
  for (int i = 0; i < M; ++i) ok &= inplace[i] == (size - 1) * 10 + i && bcast[i] == 1000000000000LL + i;
  expect(ok, "in-place iallreduce max, ibroadcast int64");
  if (rank == reduce_root) {
    ok = 1;
    for (int i = 0; i < M; ++i) ok &= reduce_out[i] == (double)size * (size + 1) / 2 * (i + 1);
    expect(ok, "ireduce at its root");
  }
  ok = 1;
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < M; ++i) {
      ok &= gathered[r * M + i] == r + i && gathered_inplace[r * M + i] == r * 100 + i;
      ok &= alltoall_out[r * M + i] == r * 1000 + rank * M + i;
    }
  }
  expect(ok, "iallgather (in place too), ialltoall");
  ok = 1;
  for (int i = 0; i < M; ++i) {
    const int expected = size * (size - 1) / 2 + size * (rank * M + i);
    ok &= reduce_scatter_out[i] == expected && inplace_rs[i] == expected;
  }
  expect(ok, "ireduce_scatter, in place too (block moved to the start)");
}

static void point_to_point(chorus_comm_t comm) {
  enum { BIG = 40000 };
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  static int32_t out_big[BIG], in_big[BIG];
  int32_t out_small = rank * 7, in_small = -1;
  for (int i = 0; i < BIG; ++i) {
    out_big[i] = rank * 100000 + i;
    in_big[i] = -1;
  }
  /* waitall: a wildcard receive reports the sender, tag and length. */
  chorus_request_t requests[4];
  chorus_received_t received[4];
  /* The exact receive first: the small message matches the earliest posted receive that fits it. */
  expect(chorus_irecv(comm, &in_small, sizeof in_small, right, 5, &requests[0]) == CHORUS_SUCCESS, "irecv");
  expect(chorus_irecv(comm, in_big, sizeof in_big, CHORUS_ANY_SOURCE, CHORUS_ANY_TAG, &requests[1]) ==
             CHORUS_SUCCESS, "irecv any");
  expect(chorus_isend(comm, out_big, sizeof out_big, right, 4, &requests[2]) == CHORUS_SUCCESS, "isend big");
  expect(chorus_isend(comm, &out_small, sizeof out_small, left, 5, &requests[3]) == CHORUS_SUCCESS, "isend small");
  expect(chorus_waitall(4, requests, received) == CHORUS_SUCCESS, "waitall");
  int ok = 1;
  for (int i = 0; i < BIG; ++i) ok &= in_big[i] == left * 100000 + i;
  expect(ok && in_small == right * 7, "ring values");
  expect(received[0].source == right && received[0].tag == 5 && received[0].bytes == sizeof in_small, "received");
  expect(received[1].source == left && received[1].tag == 4 && received[1].bytes == sizeof in_big, "received any");
  expect(requests[0] == NULL && requests[3] == NULL, "waitall sets NULL");

  /* waitany until none is active; then testall and testany loops. */
  int32_t values[3] = {-1, -1, -1}, mine = rank;
  for (int k = 0; k < 3; ++k) chorus_irecv(comm, &values[k], sizeof(int32_t), left, 10 + k, &requests[k]);
  for (int k = 0; k < 3; ++k) {
    chorus_request_t send;
    chorus_isend(comm, &mine, sizeof mine, right, 12 - k, &send);
    expect(chorus_request_free(&send) == CHORUS_SUCCESS && send == NULL, "request_free on a send");
  }
  size_t index = 0, completed = 0;
  for (;;) {
    chorus_received_t got;
    expect(chorus_waitany(3, requests, &index, &got) == CHORUS_SUCCESS, "waitany");
    if (index == 3) break;
    ++completed;
    expect(got.tag == 10 + (int)index && values[index] == left && requests[index] == NULL, "waitany result");
  }
  expect(completed == 3, "waitany completed all three, then reported none active");

  int flag = 0;
  chorus_irecv(comm, &values[0], sizeof(int32_t), right, 20, &requests[0]);
  chorus_isend(comm, &mine, sizeof mine, left, 20, &requests[1]);
  chorus_status_t status = CHORUS_SUCCESS;
  while (!flag && status == CHORUS_SUCCESS) status = chorus_testall(2, requests, &flag, NULL);
  expect(status == CHORUS_SUCCESS, "testall");
  expect(values[0] == right && requests[0] == NULL && requests[1] == NULL, "testall result");
  chorus_irecv(comm, &values[1], sizeof(int32_t), left, 21, &requests[0]);
  chorus_isend(comm, &mine, sizeof mine, right, 21, &requests[1]);
  completed = 0;
  while (completed < 2 && status == CHORUS_SUCCESS) {
    flag = 0;
    status = chorus_testany(2, requests, &index, &flag, NULL);
    if (flag && index < 2) ++completed;
  }
  expect(status == CHORUS_SUCCESS, "testany");
  expect(chorus_testany(2, requests, &index, &flag, NULL) == CHORUS_SUCCESS && flag == 1 && index == 2,
         "testany with none active");
  expect(values[1] == left, "testany result");

  /* NULL requests wait for nothing; chorus_test reports them complete. */
  chorus_request_t none = NULL;
  expect(chorus_wait(&none, NULL) == CHORUS_SUCCESS, "wait on NULL");
  flag = 0;
  expect(chorus_test(&none, &flag, NULL) == CHORUS_SUCCESS && flag == 1, "test on NULL");

  /* Errors: a bad tag at once; a truncated receive from its wait. */
  chorus_request_t bad = (chorus_request_t)1;
  expect(chorus_isend(comm, &mine, sizeof mine, right, -5, &bad) == CHORUS_ERR_INVALID_ARGUMENT && bad == NULL,
         "isend with a negative tag");
  expect(strstr(chorus_last_error(), "tag -5") != NULL, "the message names the tag");
  expect(chorus_wait(NULL, NULL) == CHORUS_ERR_INVALID_ARGUMENT, "wait(NULL pointer)");
  int16_t too_small = 0;
  chorus_irecv(comm, &too_small, sizeof too_small, left, 30, &requests[0]);
  chorus_isend(comm, &mine, sizeof mine, right, 30, &requests[1]);
  expect(chorus_wait(&requests[0], NULL) == CHORUS_ERR_TRUNCATED && requests[0] == NULL, "truncated receive");
  expect(chorus_wait(&requests[1], NULL) == CHORUS_SUCCESS, "the truncated message's send");
  /* The communicator stays usable after a truncation. */
  chorus_request_t after;
  expect(chorus_ibarrier(comm, &after) == CHORUS_SUCCESS && chorus_wait(&after, NULL) == CHORUS_SUCCESS,
         "ibarrier after a truncation");
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    printf("usage: chorusrun -n N capi_nonblocking\n"
           "Checks the C API's non-blocking calls between N ranks (2..16).\n");
    return 0;
  }
  chorus_comm_t comm = NULL;
  if (chorus_init(&comm) != CHORUS_SUCCESS) {
    printf("FAILED: chorus_init: %s\n", chorus_last_error());
    return 1;
  }
  chorus_comm_rank(comm, &rank);
  chorus_comm_size(comm, &size);
  collectives(comm);
  point_to_point(comm);
  expect(chorus_finalize(&comm) == CHORUS_SUCCESS, "finalize");
  printf("rank %d: capi_nonblocking: %d checks, %d failed\n", rank, checks, failed);
  /* Every rank's own pass line, after finalize (tests/job_verdict.py). */
  if (failed == 0 && checks > 0) printf("chorus-capi-nonblocking: rank %d passed\n", rank);
  return failed == 0 ? 0 : 1;
}
