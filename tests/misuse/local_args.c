/* chorus-local-args: one rank of a test of bad arguments and of finalize
 * with unmatched requests (issue 42, items 4 and 5; docs/errors.md).
 *
 *   chorus-local-args --case NAME
 *
 * Bad-argument cases: rank 1 (or the root, rank 0) makes one bad call; every
 * rank prints "rank R: error: <status>: <text>" for a call that failed or
 * "rank R: completed" for one that succeeded, then every rank runs a checked
 * allreduce and prints "rank R: usable" (or "rank R: unusable: <text>").
 * Finalize cases: the ranks leave requests unmatched and call
 * chorus_finalize, which prints "rank R: finalize: <status>: <text>" and
 * "rank R: finalize took S s". The script (local_args.sh) asserts each
 * rank's lines. Every rank ends with "rank R: exit".
 */
#include <chorus/chorus.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define COUNT 4
#define BIG (1u << 20) /* above the eager limit: a rendezvous send */

static int rank, size;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void report(const char* what, chorus_status_t status) {
  if (status == CHORUS_SUCCESS) {
    printf("rank %d: completed %s\n", rank, what);
  } else {
    printf("rank %d: error: %s: %s\n", rank, chorus_status_string(status), chorus_last_error());
  }
  fflush(stdout);
}

/* The communicator still works: a checked allreduce. */
static void check_usable(chorus_comm_t comm) {
  int32_t mine = rank + 1, sum = 0;
  const double start = now();
  chorus_status_t status = chorus_allreduce(comm, &mine, &sum, 1, CHORUS_INT32, CHORUS_SUM);
  if (status != CHORUS_SUCCESS) {
    printf("rank %d: unusable: %s\n", rank, chorus_last_error());
  } else if (sum != size * (size + 1) / 2) {
    printf("rank %d: WRONG RESULT %d after the bad call\n", rank, sum);
  } else {
    printf("rank %d: usable\n", rank);
  }
  printf("rank %d: check took %.1f s\n", rank, now() - start);
  fflush(stdout);
}

/* A bad point-to-point call on rank 1 alone: the others only check usability. */
static chorus_status_t bad_p2p(chorus_comm_t comm, const char* name) {
  char byte = 0;
  chorus_request_t request = NULL;
  if (strcmp(name, "send_null") == 0) return chorus_send(comm, NULL, COUNT, 0, 1);
  if (strcmp(name, "recv_null") == 0) return chorus_recv(comm, NULL, COUNT, 0, 1);
  if (strcmp(name, "isend_null") == 0) return chorus_isend(comm, NULL, COUNT, 0, 1, &request);
  if (strcmp(name, "irecv_null") == 0) return chorus_irecv(comm, NULL, COUNT, 0, 1, &request);
  if (strcmp(name, "isend_null_big") == 0) return chorus_isend(comm, NULL, BIG, 0, 1, &request);
  if (strcmp(name, "send_peer") == 0) return chorus_send(comm, &byte, 1, size, 1);
  if (strcmp(name, "recv_peer") == 0) return chorus_recv(comm, &byte, 1, -5, 1);
  if (strcmp(name, "send_tag") == 0) return chorus_send(comm, &byte, 1, 0, -1);
  if (strcmp(name, "irecv_tag") == 0) return chorus_irecv(comm, &byte, 1, 0, -7, &request);
  if (strcmp(name, "send_huge") == 0) return chorus_send(comm, &byte, SIZE_MAX, 0, 1);
  return CHORUS_ERR_INTERNAL;
}

/* Rooted collectives whose root (rank 0) alone passes a null buffer, and
 * collectives where rank 1 alone does. */
static chorus_status_t bad_collective(chorus_comm_t comm, const char* name) {
  int32_t send[64], recv[64];
  size_t counts[16], i;
  chorus_request_t request = NULL;
  chorus_status_t status;
  for (i = 0; i < 64; ++i) send[i] = rank;
  for (i = 0; i < 16; ++i) counts[i] = COUNT;
  const int root_bad = rank == 0, one_bad = rank == 1;
  if (strcmp(name, "gather_root_null") == 0) {
    return chorus_gather(comm, send, root_bad ? NULL : recv, COUNT, CHORUS_INT32, 0);
  }
  if (strcmp(name, "gatherv_root_null") == 0) {
    return chorus_gatherv(comm, send, COUNT, root_bad ? NULL : recv, counts, NULL, CHORUS_INT32, 0);
  }
  if (strcmp(name, "reduce_root_null") == 0) {
    return chorus_reduce(comm, send, root_bad ? NULL : recv, COUNT, CHORUS_INT32, CHORUS_SUM, 0);
  }
  if (strcmp(name, "scatter_root_null") == 0) {
    return chorus_scatter(comm, root_bad ? NULL : send, recv, COUNT, CHORUS_INT32, 0);
  }
  if (strcmp(name, "broadcast_root_null") == 0) {
    return chorus_broadcast(comm, root_bad ? NULL : send, COUNT, CHORUS_INT32, 0);
  }
  if (strcmp(name, "allreduce_one_null") == 0) {
    return chorus_allreduce(comm, one_bad ? NULL : send, recv, COUNT, CHORUS_INT32, CHORUS_SUM);
  }
  if (strcmp(name, "gather_nonroot_null") == 0) {
    return chorus_gather(comm, one_bad ? NULL : send, recv, COUNT, CHORUS_INT32, 0);
  }
  if (strcmp(name, "gather_inplace_nonroot") == 0) {
    return chorus_gather(comm, one_bad ? CHORUS_IN_PLACE : send, recv, COUNT, CHORUS_INT32, 0);
  }
  if (strcmp(name, "ireduce_root_null") == 0) {
    status = chorus_ireduce(comm, send, root_bad ? NULL : recv, COUNT, CHORUS_INT32, CHORUS_SUM, 0, &request);
    if (status == CHORUS_SUCCESS) status = chorus_wait(&request, NULL);
    return status;
  }
  if (strcmp(name, "iallreduce_one_null") == 0) {
    status = chorus_iallreduce(comm, one_bad ? NULL : send, recv, COUNT, CHORUS_INT32, CHORUS_SUM, &request);
    if (status == CHORUS_SUCCESS) status = chorus_wait(&request, NULL);
    return status;
  }
  return CHORUS_ERR_INTERNAL;
}

static int run_finalize_case(chorus_comm_t* comm, const char* name) {
  static char small[64], big_buf[BIG];
  chorus_request_t request = NULL;
  int32_t mine = rank, sum = 0;
  chorus_status_t status = CHORUS_SUCCESS;
  if (strcmp(name, "finalize_irecv") == 0 && rank == 0) {
    /* Kept, never waited for: rank 1 sends nothing. */
    status = chorus_irecv(*comm, small, sizeof small, 1, 5, &request);
  } else if (strcmp(name, "finalize_irecv_both") == 0) {
    status = chorus_irecv(*comm, small, sizeof small, (rank + 1) % size, 5 + rank, &request);
  } else if (strcmp(name, "finalize_isend_detached") == 0 && rank == 0) {
    /* A rendezvous send nobody receives, detached (MPI_Request_free). */
    status = chorus_isend(*comm, big_buf, sizeof big_buf, 1, 9, &request);
    if (status == CHORUS_SUCCESS) status = chorus_request_free(&request);
  } else if (strcmp(name, "finalize_matched_late") == 0 && rank == 0) {
    /* Not a misuse: rank 0's detached rendezvous send is received by rank 1
     * only 2 s after rank 0 has entered finalize; both must succeed. */
    status = chorus_isend(*comm, big_buf, sizeof big_buf, 1, 3, &request);
    if (status == CHORUS_SUCCESS) status = chorus_request_free(&request);
  }
  if (strcmp(name, "finalize_detached_failed") == 0) {
    /* Rank 0's detached rendezvous send fails when rank 1 fails (a null
     * buffer in an allreduce of its own); rank 0 makes no call after it, so
     * only its finalize can report that failure. */
    struct timespec pause = {3, 0};
    if (rank == 0) {
      status = chorus_isend(*comm, big_buf, sizeof big_buf, 1, 11, &request);
      if (status == CHORUS_SUCCESS) status = chorus_request_free(&request);
      if (status != CHORUS_SUCCESS) report("setup", status);
    } else if (rank == 1) {
      report("allreduce", chorus_allreduce(*comm, NULL, &sum, 1, CHORUS_INT32, CHORUS_SUM));
    }
    if (rank != 1) nanosleep(&pause, NULL);
  } else {
    if (status != CHORUS_SUCCESS) report("setup", status);
    /* A collective in between: the last call is not the point-to-point one. */
    status = chorus_allreduce(*comm, &mine, &sum, 1, CHORUS_INT32, CHORUS_SUM);
    if (status != CHORUS_SUCCESS) report("allreduce", status);
  }
  const int late = strcmp(name, "finalize_icollective_late") == 0;
  if ((late || strcmp(name, "finalize_icollective") == 0) && rank == 0) {
    /* A collective only rank 0 starts, detached: nobody joins it. Late:
     * rank 0 reaches finalize 2 s after the others, so its progress thread
     * has found that they finalized without joining the call. */
    static int32_t in[64], out[64];
    status = chorus_iallreduce(*comm, in, out, 64, CHORUS_INT32, CHORUS_SUM, &request);
    if (status == CHORUS_SUCCESS) status = chorus_request_free(&request);
    if (status != CHORUS_SUCCESS) report("iallreduce", status);
    if (late) {
      struct timespec pause = {2, 0};
      nanosleep(&pause, NULL);
    }
  }
  if (strcmp(name, "finalize_matched_late") == 0 && rank == 1) {
    struct timespec pause = {2, 0};
    nanosleep(&pause, NULL);
    status = chorus_recv(*comm, big_buf, sizeof big_buf, 0, 3);
    if (status != CHORUS_SUCCESS) report("recv", status);
  }
  const double start = now();
  status = chorus_finalize(comm);
  if (status == CHORUS_SUCCESS) {
    printf("rank %d: finalize: success\n", rank);
  } else {
    printf("rank %d: finalize: %s: %s\n", rank, chorus_status_string(status), chorus_last_error());
  }
  printf("rank %d: finalize took %.1f s\n", rank, now() - start);
  if (request != NULL) {
    /* A request kept across finalize reports what finalize did to it. */
    status = chorus_wait(&request, NULL);
    printf("rank %d: kept request: %s: %s\n", rank, chorus_status_string(status),
           status == CHORUS_SUCCESS ? "" : chorus_last_error());
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* name = argc > 2 && strcmp(argv[1], "--case") == 0 ? argv[2] : "";
  chorus_comm_t comm = NULL;
  if (chorus_init(&comm) != CHORUS_SUCCESS) {
    printf("init failed: %s\n", chorus_last_error());
    return 2;
  }
  chorus_comm_rank(comm, &rank);
  chorus_comm_size(comm, &size);
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (strncmp(name, "finalize_", 9) == 0) {
    run_finalize_case(&comm, name);
    printf("rank %d: exit\n", rank);
    return 0;
  }
  const double start = now();
  static const char* const p2p_cases[] = {"send_null", "recv_null", "isend_null", "irecv_null", "isend_null_big",
                                          "send_peer", "recv_peer", "send_tag", "irecv_tag", "send_huge"};
  int is_p2p = 0;
  for (size_t i = 0; i < sizeof p2p_cases / sizeof *p2p_cases; ++i) is_p2p |= strcmp(name, p2p_cases[i]) == 0;
  if (is_p2p) {
    if (rank == 1) report(name, bad_p2p(comm, name));
  } else {
    report(name, bad_collective(comm, name));
  }
  printf("rank %d: call took %.1f s\n", rank, now() - start);
  check_usable(comm);
  chorus_status_t status = chorus_finalize(&comm);
  if (status != CHORUS_SUCCESS) printf("rank %d: finalize: %s: %s\n", rank, chorus_status_string(status), chorus_last_error());
  printf("rank %d: exit\n", rank);
  return 0;
}
