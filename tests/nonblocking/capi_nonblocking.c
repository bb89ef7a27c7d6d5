/*
 * The C API's non-blocking calls between real processes (run under
 * chorusrun, 3 ranks): every i-collective (in place where the blocking call
 * allows it) started together and waited for in reverse order,
 * chorus_waitall / waitany / testall / testany loops over point-to-point
 * rings (wildcard receive and its chorus_received_t), chorus_request_free on
 * a send, NULL requests, and errors: a bad tag, a truncated receive; probes,
 * matched probes (eager and rendezvous), cancel and issend. Every
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

/* Probes, matched probes, cancel and a synchronous send, around the ring:
 * each rank sends to its right and receives from its left. */
static void probes(chorus_comm_t comm) {
  enum { BIG = 40000 }; /* 160 000 bytes: above the eager limit, a rendezvous */
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int flag = -1;
  chorus_received_t got = {7, 7, 7};
  expect(chorus_iprobe(comm, left, 39, &flag, &got) == CHORUS_SUCCESS && flag == 0 && got.source == -1,
         "iprobe finds no message of a tag nobody sent");

  /* probe, then the receive gets the probed message. */
  int32_t mine = rank * 11, value = -1;
  chorus_request_t send = NULL, recv = NULL;
  expect(chorus_isend(comm, &mine, sizeof mine, right, 40, &send) == CHORUS_SUCCESS, "isend for probe");
  expect(chorus_probe(comm, CHORUS_ANY_SOURCE, 40, &got) == CHORUS_SUCCESS, "probe");
  expect(got.source == left && got.tag == 40 && got.bytes == sizeof(int32_t), "probe reports source, tag, length");
  expect(chorus_recv(comm, &value, sizeof value, got.source, got.tag) == CHORUS_SUCCESS && value == left * 11,
         "the receive after probe gets the probed message");
  expect(chorus_wait(&send, NULL) == CHORUS_SUCCESS, "probed send completes");

  /* improbe: the matched message is no plain receive's; a later message is. */
  int32_t first = rank * 13, second = rank * 17, other = -1;
  chorus_request_t sends[2];
  chorus_isend(comm, &first, sizeof first, right, 41, &sends[0]);
  chorus_message_t message;
  flag = 0;
  chorus_status_t status = CHORUS_SUCCESS;
  while (!flag && status == CHORUS_SUCCESS) status = chorus_improbe(comm, CHORUS_ANY_SOURCE, 41, &flag, &message);
  expect(status == CHORUS_SUCCESS && flag == 1, "improbe matches");
  expect(message.comm == comm && message.id != 0 && message.info.source == left && message.info.tag == 41 &&
             message.info.bytes == sizeof(int32_t),
         "improbe's message names its communicator, source, tag and length");
  expect(chorus_irecv(comm, &other, sizeof other, left, 41, &recv) == CHORUS_SUCCESS, "irecv beside a matched message");
  chorus_isend(comm, &second, sizeof second, right, 41, &sends[1]);
  expect(chorus_wait(&recv, &got) == CHORUS_SUCCESS && other == left * 17,
         "a receive posted after improbe gets the next message, not the matched one");
  value = -1;
  const chorus_message_t copy = message;
  expect(chorus_mrecv(&message, &value, sizeof value, &got) == CHORUS_SUCCESS && value == left * 13 &&
             got.source == left && got.tag == 41 && message.id == 0,
         "mrecv gets the matched message and empties it");
  expect(chorus_mrecv(&message, &value, sizeof value, NULL) == CHORUS_ERR_INVALID_ARGUMENT,
         "mrecv of an emptied message is refused");
  chorus_message_t again = copy;
  expect(chorus_mrecv(&again, &value, sizeof value, NULL) == CHORUS_ERR_INVALID_ARGUMENT &&
             strstr(chorus_last_error(), "already received") != NULL,
         "mrecv of a copy of a received message is refused, named");
  expect(chorus_waitall(2, sends, NULL) == CHORUS_SUCCESS, "improbe's sends complete");

  /* mprobe + imrecv of a rendezvous message, every element checked. */
  static int32_t out_big[BIG], in_big[BIG];
  for (int i = 0; i < BIG; ++i) {
    out_big[i] = rank * 100000 + i;
    in_big[i] = -1;
  }
  chorus_isend(comm, out_big, sizeof out_big, right, 42, &send);
  expect(chorus_mprobe(comm, left, 42, &message) == CHORUS_SUCCESS && message.info.bytes == sizeof out_big,
         "mprobe of a rendezvous message");
  expect(chorus_imrecv(&message, NULL, sizeof in_big, &recv) == CHORUS_ERR_INVALID_ARGUMENT && recv == NULL &&
             message.id != 0,
         "imrecv into a NULL buffer is refused and leaves the message");
  expect(chorus_imrecv(&message, in_big, sizeof in_big, &recv) == CHORUS_SUCCESS && message.id == 0, "imrecv");
  expect(chorus_wait(&recv, &got) == CHORUS_SUCCESS && got.bytes == sizeof in_big, "imrecv completes");
  int ok = 1;
  for (int i = 0; i < BIG; ++i) ok &= in_big[i] == left * 100000 + i;
  expect(ok, "imrecv's every element");
  expect(chorus_wait(&send, NULL) == CHORUS_SUCCESS, "the rendezvous send completes");

  /* A matched message longer than the buffer: truncated, the communicator usable. */
  chorus_isend(comm, &mine, sizeof mine, right, 43, &send);
  int16_t too_small = 0;
  expect(chorus_mprobe(comm, left, 43, &message) == CHORUS_SUCCESS, "mprobe before truncation");
  expect(chorus_mrecv(&message, &too_small, sizeof too_small, NULL) == CHORUS_ERR_TRUNCATED, "truncated mrecv");
  expect(chorus_wait(&send, NULL) == CHORUS_SUCCESS, "the truncated message's send");

  /* cancel: a receive nobody sends to is withdrawn; a send is not cancelled. */
  int cancelled = -1;
  expect(chorus_irecv(comm, &value, sizeof value, left, 44, &recv) == CHORUS_SUCCESS, "irecv to cancel");
  expect(chorus_cancel(&recv, &cancelled) == CHORUS_SUCCESS && cancelled == 1 && recv == NULL,
         "cancel withdraws an unmatched receive");
  chorus_isend(comm, &mine, sizeof mine, right, 45, &send);
  expect(chorus_cancel(&send, &cancelled) == CHORUS_SUCCESS && cancelled == 0 && send != NULL,
         "cancel leaves a send to complete");
  expect(chorus_recv(comm, &value, sizeof value, left, 45) == CHORUS_SUCCESS && value == left * 11,
         "the send that was not cancelled arrives");
  expect(chorus_wait(&send, NULL) == CHORUS_SUCCESS, "and completes");
  chorus_request_t none = NULL;
  expect(chorus_cancel(&none, &cancelled) == CHORUS_SUCCESS && cancelled == 0, "cancel of NULL cancels nothing");
  expect(chorus_cancel(NULL, &cancelled) == CHORUS_ERR_INVALID_ARGUMENT, "cancel(NULL pointer)");

  /* issend completes once its receive matched it. */
  value = -1;
  expect(chorus_issend(comm, &mine, sizeof mine, right, 46, &send) == CHORUS_SUCCESS, "issend");
  expect(chorus_irecv(comm, &value, sizeof value, left, 46, &recv) == CHORUS_SUCCESS, "irecv for issend");
  chorus_request_t pair[2] = {send, recv};
  expect(chorus_waitall(2, pair, NULL) == CHORUS_SUCCESS && value == left * 11, "issend and its receive");

  /* Bad arguments: at once, named. */
  expect(chorus_iprobe(comm, left, 40, NULL, NULL) == CHORUS_ERR_INVALID_ARGUMENT, "iprobe(NULL flag)");
  expect(chorus_improbe(comm, left, -3, &flag, &message) == CHORUS_ERR_INVALID_ARGUMENT &&
             strstr(chorus_last_error(), "tag -3") != NULL,
         "improbe with a negative tag names it");
  expect(chorus_mprobe(comm, size, 40, &message) == CHORUS_ERR_INVALID_ARGUMENT, "mprobe of a rank past the size");
  chorus_request_t barrier;
  expect(chorus_ibarrier(comm, &barrier) == CHORUS_SUCCESS && chorus_wait(&barrier, NULL) == CHORUS_SUCCESS,
         "ibarrier after the probes");
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
  probes(comm);
  expect(chorus_finalize(&comm) == CHORUS_SUCCESS, "finalize");
  printf("rank %d: capi_nonblocking: %d checks, %d failed\n", rank, checks, failed);
  /* Every rank's own pass line, after finalize (tests/job_verdict.py). */
  if (failed == 0 && checks > 0) printf("chorus-capi-nonblocking: rank %d passed\n", rank);
  return failed == 0 ? 0 : 1;
}
