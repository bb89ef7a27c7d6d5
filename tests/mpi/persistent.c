/*
 * Persistent point-to-point requests and ready sends: MPI_Send_init,
 * MPI_Recv_init, MPI_Rsend_init, MPI_Start, MPI_Startall restarted on a
 * ring (below and above the eager limit, with a vector type whose handle
 * is freed after the init), completion by MPI_Waitall/MPI_Wait/MPI_Test
 * loops, what an inactive persistent request gives (MPI_Wait, MPI_Test,
 * MPI_Waitany, MPI_Testany, MPI_Testall: at once, an empty status),
 * MPI_PROC_NULL, MPI_Request_free of an inactive request and of a started
 * one, and MPI_Rsend/MPI_Irsend after the receive is posted. Every value
 * and status is checked; what is printed is the same under Open MPI.
 */
#include "report.h"

static int rank, size, left, right;

static int get_count(const MPI_Status* status, MPI_Datatype type) {
  int count = -1;
  MPI_Get_count(status, type, &count);
  return count;
}

static int empty_status(const MPI_Status* status) {
  return status->MPI_SOURCE == MPI_ANY_SOURCE && status->MPI_TAG == MPI_ANY_TAG && get_count(status, MPI_INT) == 0;
}

static void ring(int elements, const char* label) {
  int* out = calloc((size_t)elements, sizeof(int));
  int* in = calloc((size_t)elements, sizeof(int));
  MPI_Request requests[2];
  MPI_Send_init(out, elements, MPI_INT, right, 5, MPI_COMM_WORLD, &requests[0]);
  MPI_Recv_init(in, elements, MPI_INT, left, 5, MPI_COMM_WORLD, &requests[1]);
  int sum_all = 0;
  for (int iteration = 0; iteration < 5; ++iteration) {
    for (int j = 0; j < elements; ++j) out[j] = rank * 1000 + iteration * 10 + j % 7, in[j] = -1;
    MPI_Startall(2, requests);
    MPI_Status statuses[2];
    MPI_Waitall(2, requests, statuses);
    int ok = 1;
    for (int j = 0; j < elements; ++j) ok &= in[j] == left * 1000 + iteration * 10 + j % 7;
    expect(ok, "%s: iteration %d: wrong data from rank %d", label, iteration, left);
    expect(statuses[1].MPI_SOURCE == left && statuses[1].MPI_TAG == 5 && get_count(&statuses[1], MPI_INT) == elements,
           "%s: iteration %d: receive status %d/%d/%d", label, iteration, statuses[1].MPI_SOURCE,
           statuses[1].MPI_TAG, get_count(&statuses[1], MPI_INT));
    expect(requests[0] != MPI_REQUEST_NULL && requests[1] != MPI_REQUEST_NULL,
           "%s: a completed persistent request must keep its handle", label);
    sum_all += in[0] + in[elements - 1];
  }
  say("%s: 5 rounds of %d ints from rank %d: first+last summed %d", label, elements, left, sum_all);
  /* Inactive now: every completion call returns at once, status empty. */
  MPI_Status status;
  MPI_Wait(&requests[1], &status);
  expect(empty_status(&status) && requests[1] != MPI_REQUEST_NULL, "%s: wait on an inactive request", label);
  int flag = 0;
  MPI_Test(&requests[0], &flag, &status);
  expect(flag == 1 && empty_status(&status), "%s: test on an inactive request: flag %d", label, flag);
  int index = -5;
  MPI_Waitany(2, requests, &index, &status);
  expect(index == MPI_UNDEFINED && empty_status(&status), "%s: waitany over inactive requests: %d", label, index);
  flag = 0, index = -5;
  MPI_Testany(2, requests, &index, &flag, &status);
  expect(flag == 1 && index == MPI_UNDEFINED, "%s: testany over inactive requests: %d %d", label, flag, index);
  flag = 0;
  MPI_Testall(2, requests, &flag, MPI_STATUSES_IGNORE);
  expect(flag == 1, "%s: testall over inactive requests", label);
  MPI_Request_free(&requests[0]);
  MPI_Request_free(&requests[1]);
  expect(requests[0] == MPI_REQUEST_NULL && requests[1] == MPI_REQUEST_NULL, "%s: freed handles", label);
  free(out);
  free(in);
}

/* A strided receive type freed right after MPI_Recv_init, completed by a
 * MPI_Test loop; the send side restarted with MPI_Start. */
static void strided(void) {
  MPI_Datatype every_other;
  MPI_Type_vector(3, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  int out[3], in[6];
  MPI_Request send, recv;
  MPI_Recv_init(in, 1, every_other, left, 6, MPI_COMM_WORLD, &recv);
  MPI_Type_free(&every_other);
  MPI_Send_init(out, 3, MPI_INT, right, 6, MPI_COMM_WORLD, &send);
  for (int iteration = 0; iteration < 3; ++iteration) {
    for (int j = 0; j < 3; ++j) out[j] = rank * 100 + iteration * 10 + j;
    for (int j = 0; j < 6; ++j) in[j] = -1;
    MPI_Start(&recv);
    MPI_Start(&send);
    int flag = 0;
    MPI_Status status;
    while (!flag) MPI_Test(&recv, &flag, &status);
    MPI_Wait(&send, MPI_STATUS_IGNORE);
    int ok = 1;
    for (int j = 0; j < 3; ++j) ok &= in[2 * j] == left * 100 + iteration * 10 + j && in[2 * j + 1] == -1;
    expect(ok && status.MPI_SOURCE == left, "strided: iteration %d: %d %d %d %d %d %d", iteration, in[0], in[1], in[2],
           in[3], in[4], in[5]);
    say("strided round %d: %d,%d,%d,%d,%d,%d", iteration, in[0], in[1], in[2], in[3], in[4], in[5]);
  }
  MPI_Request_free(&send);
  MPI_Request_free(&recv);
}

static void proc_null(void) {
  int value = 7, got = -1;
  MPI_Request send, recv;
  MPI_Send_init(&value, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &send);
  MPI_Recv_init(&got, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &recv);
  MPI_Request both[2] = {send, recv};
  for (int round = 0; round < 2; ++round) {
    MPI_Status statuses[2];
    MPI_Startall(2, both);
    MPI_Waitall(2, both, statuses);
    expect(got == -1 && statuses[1].MPI_SOURCE == MPI_PROC_NULL && statuses[1].MPI_TAG == MPI_ANY_TAG &&
               get_count(&statuses[1], MPI_INT) == 0,
           "MPI_PROC_NULL round %d: got %d, source %d", round, got, statuses[1].MPI_SOURCE);
  }
  MPI_Request_free(&both[0]);
  MPI_Request_free(&both[1]);
  say("MPI_PROC_NULL persistent pair: 2 rounds complete at once");
}

/* Ready sends: the receive is posted before the barrier, the send after. */
static void ready_sends(void) {
  int got[3] = {-1, -1, -1}, sent[3] = {rank, rank + 100, rank + 200};
  MPI_Request recvs[3], sends[2];
  for (int i = 0; i < 3; ++i) MPI_Irecv(&got[i], 1, MPI_INT, left, 20 + i, MPI_COMM_WORLD, &recvs[i]);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Rsend(&sent[0], 1, MPI_INT, right, 20, MPI_COMM_WORLD);
  MPI_Irsend(&sent[1], 1, MPI_INT, right, 21, MPI_COMM_WORLD, &sends[0]);
  MPI_Rsend_init(&sent[2], 1, MPI_INT, right, 22, MPI_COMM_WORLD, &sends[1]);
  MPI_Start(&sends[1]);
  MPI_Waitall(2, sends, MPI_STATUSES_IGNORE);
  MPI_Waitall(3, recvs, MPI_STATUSES_IGNORE);
  expect(got[0] == left && got[1] == left + 100 && got[2] == left + 200, "ready sends: %d %d %d", got[0], got[1], got[2]);
  expect(sends[0] == MPI_REQUEST_NULL && sends[1] != MPI_REQUEST_NULL, "ready sends: handles after waitall");
  MPI_Request_free(&sends[1]);
  say("ready sends from rank %d: %d %d %d", left, got[0], got[1], got[2]);
}

/* A started persistent send freed before it completes still delivers. */
static void free_while_started(void) {
  int value = rank + 5000, got = -1;
  MPI_Request send, recv;
  MPI_Irecv(&got, 1, MPI_INT, left, 30, MPI_COMM_WORLD, &recv);
  MPI_Send_init(&value, 1, MPI_INT, right, 30, MPI_COMM_WORLD, &send);
  MPI_Start(&send);
#ifdef CHORUS_MPI
  /* Starting an active request is refused (Open MPI does not check). */
  const int again = MPI_Start(&send);
  int error_class = -1;
  MPI_Error_class(again, &error_class);
  const int refused = again != MPI_SUCCESS && error_class == MPI_ERR_REQUEST;
#else
  const int refused = 1;
#endif
  expect(refused, "MPI_Start of an active persistent request must be refused");
  MPI_Request_free(&send);
  MPI_Wait(&recv, MPI_STATUS_IGNORE);
  expect(send == MPI_REQUEST_NULL && got == left + 5000, "freed while started: got %d", got);
  say("freed while started: rank %d's value %d arrived", left, got);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  left = (rank + size - 1) % size;
  right = (rank + 1) % size;

  ring(4, "eager ring");
  ring(1 << 18, "1 MiB ring");  /* above every transport's eager limit */
  strided();
  proc_null();
  ready_sends();
  free_while_started();

  const int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("persistent", failures);
  return failures == 0 ? 0 : 1;
}
