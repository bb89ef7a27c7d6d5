/*
 * Matched probes, cancellation and MPI_Request_get_status, each rank with
 * its neighbours on a ring (to itself at 1 rank).
 * - MPI_Mprobe takes the first of two messages with one tag, MPI_Improbe
 *   with wildcards the second (non-overtaking); they are received in the
 *   other order (MPI_Mrecv exact, MPI_Imrecv into a strided type), and a
 *   later MPI_Recv of another tag is not disturbed; a 100000-byte message
 *   (the rendezvous) by MPI_Mprobe + MPI_Imrecv; MPI_PROC_NULL gives
 *   MPI_MESSAGE_NO_PROC; an Improbe of a tag nobody sends finds nothing;
 *   a matched message larger than the buffer is MPI_ERR_TRUNCATE.
 * - MPI_Cancel withdraws a receive nothing matched (MPI_Test_cancelled
 *   true, and the message sent later reaches a new receive), not one whose
 *   message arrived, nor a send; a persistent receive cancelled, then
 *   started again, receives. Chorus only: MPI_Cancel of MPI_REQUEST_NULL
 *   and of a collective's request is MPI_ERR_REQUEST (erroneous in MPI).
 * - MPI_Request_get_status says not yet before the message is sent, then
 *   gives the status and the data (unpacked from a strided type) without
 *   freeing the request; MPI_Wait then gives the same status.
 * - Two threads (MPI_THREAD_MULTIPLE) each MPI_Mprobe + MPI_Mrecv 100 of
 *   the 200 messages the left neighbour sends with one tag: every message
 *   is received exactly once, whichever thread probed it.
 * Every value received is checked; what is printed is the same under Open MPI.
 */
#include "report.h"

#include <pthread.h>

static int rank, size, left, right;

static int count_of(const MPI_Status* status, MPI_Datatype type) {
  int count = -1;
  MPI_Get_count(status, type, &count);
  return count;
}

static void matched_probes(void) {
  int first[5], second[9], other[2];
  for (int i = 0; i < 5; ++i) first[i] = rank * 1000 + i;
  for (int i = 0; i < 9; ++i) second[i] = rank * 1000 + 100 + i;
  other[0] = rank * 1000 + 200, other[1] = rank * 1000 + 201;
  MPI_Request sends[3];
  MPI_Isend(first, 5, MPI_INT, right, 3, MPI_COMM_WORLD, &sends[0]);
  MPI_Isend(second, 9, MPI_INT, right, 3, MPI_COMM_WORLD, &sends[1]);
  MPI_Isend(other, 2, MPI_INT, right, 4, MPI_COMM_WORLD, &sends[2]);

  MPI_Message m1 = MPI_MESSAGE_NULL, m2 = MPI_MESSAGE_NULL;
  MPI_Status status;
  int code = MPI_Mprobe(left, 3, MPI_COMM_WORLD, &m1, &status);
  expect(code == MPI_SUCCESS && m1 != MPI_MESSAGE_NULL, "mprobe: %s", report_class_name(code));
  expect(status.MPI_SOURCE == left && status.MPI_TAG == 3 && count_of(&status, MPI_INT) == 5,
         "mprobe status: source %d tag %d count %d", status.MPI_SOURCE, status.MPI_TAG, count_of(&status, MPI_INT));
  int flag = 0;
  for (int tries = 0; !flag && tries < 10000000; ++tries) {
    MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m2, &status);
  }
  expect(flag && status.MPI_SOURCE == left && status.MPI_TAG == 3 && count_of(&status, MPI_INT) == 9,
         "improbe: flag %d source %d tag %d count %d", flag, status.MPI_SOURCE, status.MPI_TAG,
         count_of(&status, MPI_INT));
  say("mprobe: count %d from %d; improbe (any, any): tag %d count %d from %d", 5, left, status.MPI_TAG,
      count_of(&status, MPI_INT), status.MPI_SOURCE);

  /* The second first, exactly; then the first into every other int. */
  int got2[9] = {0}, got1[10];
  for (int i = 0; i < 10; ++i) got1[i] = -1;
  code = MPI_Mrecv(got2, 9, MPI_INT, &m2, &status);
  expect(code == MPI_SUCCESS && m2 == MPI_MESSAGE_NULL, "mrecv: %s", report_class_name(code));
  int ok = status.MPI_SOURCE == left && status.MPI_TAG == 3 && count_of(&status, MPI_INT) == 9;
  for (int i = 0; i < 9; ++i) ok &= got2[i] == left * 1000 + 100 + i;
  expect(ok, "mrecv: wrong data or status");
  MPI_Datatype strided;
  MPI_Type_vector(5, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);
  MPI_Request request;
  code = MPI_Imrecv(got1, 1, strided, &m1, &request);
  expect(code == MPI_SUCCESS && m1 == MPI_MESSAGE_NULL, "imrecv: %s", report_class_name(code));
  MPI_Type_free(&strided); /* the request keeps its own */
  MPI_Wait(&request, &status);
  ok = status.MPI_SOURCE == left && status.MPI_TAG == 3 && count_of(&status, MPI_INT) == 5;
  for (int i = 0; i < 10; ++i) ok &= got1[i] == (i % 2 == 0 ? left * 1000 + i / 2 : -1);
  expect(ok, "imrecv into a strided type: wrong data or status");
  int got_other[2] = {0, 0};
  MPI_Recv(got_other, 2, MPI_INT, left, 4, MPI_COMM_WORLD, &status);
  expect(got_other[0] == left * 1000 + 200 && got_other[1] == left * 1000 + 201, "recv after matched probes");
  MPI_Waitall(3, sends, MPI_STATUSES_IGNORE);
  say("mrecv/imrecv: got %d..%d and %d..%d from %d", got2[0], got2[8], got1[0], got1[8], left);

  /* The rendezvous. */
  const int bytes = 100000;
  char* big = malloc(bytes);
  char* big_in = malloc(bytes);
  for (int i = 0; i < bytes; ++i) big[i] = (char)(i * 13 + rank), big_in[i] = 0;
  MPI_Isend(big, bytes, MPI_CHAR, right, 7, MPI_COMM_WORLD, &sends[0]);
  MPI_Mprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &m1, &status);
  expect(count_of(&status, MPI_CHAR) == bytes, "mprobe of %d bytes: count %d", bytes, count_of(&status, MPI_CHAR));
  MPI_Imrecv(big_in, bytes, MPI_CHAR, &m1, &request);
  MPI_Wait(&request, &status);
  MPI_Wait(&sends[0], MPI_STATUS_IGNORE);
  ok = status.MPI_SOURCE == left;
  for (int i = 0; i < bytes; ++i) ok &= big_in[i] == (char)(i * 13 + left);
  expect(ok, "imrecv of %d bytes: wrong data", bytes);
  say("mprobe + imrecv of %d bytes from %d", count_of(&status, MPI_CHAR), status.MPI_SOURCE);
  free(big);
  free(big_in);

  /* MPI_PROC_NULL, and a tag nobody sends. */
  code = MPI_Mprobe(MPI_PROC_NULL, 3, MPI_COMM_WORLD, &m1, &status);
  expect(code == MPI_SUCCESS && m1 == MPI_MESSAGE_NO_PROC && status.MPI_SOURCE == MPI_PROC_NULL &&
             status.MPI_TAG == MPI_ANY_TAG && count_of(&status, MPI_INT) == 0,
         "mprobe of MPI_PROC_NULL");
  code = MPI_Mrecv(got2, 9, MPI_INT, &m1, &status);
  expect(code == MPI_SUCCESS && m1 == MPI_MESSAGE_NULL && status.MPI_SOURCE == MPI_PROC_NULL &&
             count_of(&status, MPI_INT) == 0,
         "mrecv of MPI_MESSAGE_NO_PROC");
  flag = 0;
  MPI_Improbe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m1, &status);
  expect(flag && m1 == MPI_MESSAGE_NO_PROC, "improbe of MPI_PROC_NULL");
  MPI_Imrecv(got2, 9, MPI_INT, &m1, &request);
  MPI_Wait(&request, &status);
  expect(m1 == MPI_MESSAGE_NULL && status.MPI_SOURCE == MPI_PROC_NULL, "imrecv of MPI_MESSAGE_NO_PROC");
  flag = 1;
  m2 = MPI_MESSAGE_NULL;
  MPI_Improbe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, &m2, &status);
  expect(!flag, "improbe of a tag nobody sends found one");
  say("proc null: mprobe and improbe give MPI_MESSAGE_NO_PROC; nothing for tag 99");

  /* Larger than the buffer: the message is spent either way. */
  MPI_Isend(second, 9, MPI_INT, right, 8, MPI_COMM_WORLD, &sends[0]);
  MPI_Mprobe(left, 8, MPI_COMM_WORLD, &m1, &status);
  code = MPI_Mrecv(got2, 4, MPI_INT, &m1, &status);
  expect(strcmp(report_class_name(code), "MPI_ERR_TRUNCATE") == 0 && m1 == MPI_MESSAGE_NULL, "mrecv into a short buffer: %s",
         report_class_name(code));
  MPI_Wait(&sends[0], MPI_STATUS_IGNORE);
  say("mrecv of 9 ints into 4: %s", report_class_name(code));
  MPI_Barrier(MPI_COMM_WORLD);
}

static void cancellation(void) {
  MPI_Status status;
  int flag = -1, value = -1;
  /* Nothing sent yet: withdrawn. */
  MPI_Request request;
  MPI_Irecv(&value, 1, MPI_INT, left, 11, MPI_COMM_WORLD, &request);
  int code = MPI_Cancel(&request);
  expect(code == MPI_SUCCESS, "cancel: %s", report_class_name(code));
  MPI_Wait(&request, &status);
  MPI_Test_cancelled(&status, &flag);
  expect(flag == 1 && request == MPI_REQUEST_NULL && value == -1, "unmatched receive: cancelled %d, value %d", flag,
         value);
  say("receive nothing matched: cancelled %d", flag);
  MPI_Barrier(MPI_COMM_WORLD);
  /* What is sent now goes to a new receive, not to the cancelled one. */
  int out = rank * 10 + 1;
  MPI_Request send;
  MPI_Isend(&out, 1, MPI_INT, right, 11, MPI_COMM_WORLD, &send);
  MPI_Recv(&value, 1, MPI_INT, left, 11, MPI_COMM_WORLD, &status);
  MPI_Wait(&send, MPI_STATUS_IGNORE);
  expect(value == left * 10 + 1, "message after the cancel: got %d", value);

  /* The message has arrived (a later one from the same sender has): not withdrawn. */
  int early = -1, later = -1, out12 = rank * 10 + 2, out13 = rank * 10 + 3;
  MPI_Request sends[2];
  MPI_Irecv(&early, 1, MPI_INT, left, 12, MPI_COMM_WORLD, &request);
  MPI_Isend(&out12, 1, MPI_INT, right, 12, MPI_COMM_WORLD, &sends[0]);
  MPI_Isend(&out13, 1, MPI_INT, right, 13, MPI_COMM_WORLD, &sends[1]);
  MPI_Recv(&later, 1, MPI_INT, left, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Cancel(&request);
  MPI_Wait(&request, &status);
  MPI_Test_cancelled(&status, &flag);
  expect(flag == 0 && early == left * 10 + 2 && status.MPI_SOURCE == left && status.MPI_TAG == 12,
         "matched receive: cancelled %d, value %d", flag, early);
  say("receive whose message came: cancelled %d, got %d", flag, early);

  /* A send completes as it would have. */
  int out14 = rank * 10 + 4, in14 = -1;
  MPI_Cancel(&sends[0]);
  MPI_Waitall(2, sends, MPI_STATUSES_IGNORE);
  MPI_Isend(&out14, 1, MPI_INT, right, 14, MPI_COMM_WORLD, &send);
  MPI_Cancel(&send);
  MPI_Wait(&send, &status);
  MPI_Test_cancelled(&status, &flag);
  MPI_Recv(&in14, 1, MPI_INT, left, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  expect(flag == 0 && in14 == left * 10 + 4, "send: cancelled %d, received %d", flag, in14);
  say("send: cancelled %d", flag);

  /* A persistent receive: cancelled, then started again. */
  int persistent_value = -1;
  MPI_Recv_init(&persistent_value, 1, MPI_INT, left, 15, MPI_COMM_WORLD, &request);
  MPI_Start(&request);
  MPI_Cancel(&request);
  MPI_Wait(&request, &status);
  MPI_Test_cancelled(&status, &flag);
  expect(flag == 1 && request != MPI_REQUEST_NULL, "persistent receive: cancelled %d", flag);
  int cancelled_first = flag;
  MPI_Barrier(MPI_COMM_WORLD);
  int out15 = rank * 10 + 5;
  MPI_Isend(&out15, 1, MPI_INT, right, 15, MPI_COMM_WORLD, &send);
  MPI_Start(&request);
  MPI_Wait(&request, &status);
  MPI_Test_cancelled(&status, &flag);
  expect(flag == 0 && persistent_value == left * 10 + 5, "persistent receive started again: cancelled %d, got %d", flag,
         persistent_value);
  MPI_Wait(&send, MPI_STATUS_IGNORE);
  MPI_Request_free(&request);
  say("persistent receive: cancelled %d, then got %d", cancelled_first, persistent_value);

#ifdef CHORUS_MPI
  /* Erroneous in MPI; chorus refuses them. */
  request = MPI_REQUEST_NULL;
  code = MPI_Cancel(&request);
  expect(strcmp(report_class_name(code), "MPI_ERR_REQUEST") == 0, "cancel of MPI_REQUEST_NULL: %s", report_class_name(code));
  MPI_Ibarrier(MPI_COMM_WORLD, &request);
  code = MPI_Cancel(&request);
  expect(strcmp(report_class_name(code), "MPI_ERR_REQUEST") == 0, "cancel of an ibarrier: %s", report_class_name(code));
  MPI_Wait(&request, MPI_STATUS_IGNORE);
#else
  expect(1, "cancel of MPI_REQUEST_NULL");
  expect(1, "cancel of an ibarrier");
#endif
  MPI_Barrier(MPI_COMM_WORLD);
}

static void request_status(void) {
  MPI_Status status;
  int flag = -1;
  /* MPI_REQUEST_NULL: complete, with the empty status. */
  MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &status);
  expect(flag == 1 && status.MPI_SOURCE == MPI_ANY_SOURCE && status.MPI_TAG == MPI_ANY_TAG &&
             count_of(&status, MPI_INT) == 0,
         "get_status of MPI_REQUEST_NULL");

  int in[6] = {-1, -1, -1, -1, -1, -1};
  MPI_Datatype strided;
  MPI_Type_vector(3, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);
  MPI_Request request;
  MPI_Irecv(in, 1, strided, left, 20, MPI_COMM_WORLD, &request);
  flag = -1;
  MPI_Request_get_status(request, &flag, &status);
  expect(flag == 0, "get_status before the message was sent: flag %d", flag);
  MPI_Barrier(MPI_COMM_WORLD);
  int out[3] = {rank * 10, rank * 10 + 1, rank * 10 + 2};
  MPI_Request send;
  MPI_Isend(out, 3, MPI_INT, right, 20, MPI_COMM_WORLD, &send);
  flag = 0;
  for (int tries = 0; !flag && tries < 10000000; ++tries) MPI_Request_get_status(request, &flag, &status);
  int ok = flag && request != MPI_REQUEST_NULL && status.MPI_SOURCE == left && status.MPI_TAG == 20 &&
           count_of(&status, MPI_INT) == 3;
  for (int i = 0; i < 6; ++i) ok &= in[i] == (i % 2 == 0 ? left * 10 + i / 2 : -1);
  expect(ok, "get_status once complete: flag %d source %d, data %d %d %d", flag, status.MPI_SOURCE, in[0], in[2], in[4]);
  MPI_Request_get_status(request, &flag, &status);
  expect(flag == 1 && request != MPI_REQUEST_NULL, "get_status again: flag %d", flag);
  MPI_Status waited;
  MPI_Wait(&request, &waited);
  expect(request == MPI_REQUEST_NULL && waited.MPI_SOURCE == left && waited.MPI_TAG == 20 &&
             count_of(&waited, MPI_INT) == 3 && in[1] == -1,
         "wait after get_status");
  MPI_Wait(&send, MPI_STATUS_IGNORE);
  MPI_Type_free(&strided);
  say("request_get_status: not yet, then source %d tag %d count %d, and the same from MPI_Wait", waited.MPI_SOURCE,
      waited.MPI_TAG, count_of(&waited, MPI_INT));

#ifdef CHORUS_MPI
  /* A failure is reported by get_status and again by the wait that frees the request. */
  int small = -1, two[2] = {rank, rank};
  MPI_Irecv(&small, 1, MPI_INT, left, 21, MPI_COMM_WORLD, &request);
  MPI_Isend(two, 2, MPI_INT, right, 21, MPI_COMM_WORLD, &send);
  int code = MPI_SUCCESS;
  flag = 0;
  for (int tries = 0; !flag && tries < 10000000; ++tries) code = MPI_Request_get_status(request, &flag, &status);
  expect(strcmp(report_class_name(code), "MPI_ERR_TRUNCATE") == 0 && request != MPI_REQUEST_NULL,
         "get_status of a truncated receive: %s", report_class_name(code));
  code = MPI_Wait(&request, &status);
  expect(strcmp(report_class_name(code), "MPI_ERR_TRUNCATE") == 0 && request == MPI_REQUEST_NULL,
         "wait after get_status reported a truncation: %s", report_class_name(code));
  MPI_Wait(&send, MPI_STATUS_IGNORE);
#else
  expect(1, "get_status of a truncated receive");
  expect(1, "wait after get_status reported a truncation");
#endif
  MPI_Barrier(MPI_COMM_WORLD);
}

enum { kThreadMessages = 200, kReceivers = 2 };
static int received_by_value[kThreadMessages];
static int threads_failed = 0;
static pthread_mutex_t received_lock = PTHREAD_MUTEX_INITIALIZER;

static void* probing_receiver(void* unused) {
  (void)unused;
  for (int n = 0; n < kThreadMessages / kReceivers; ++n) {
    MPI_Message message;
    MPI_Status status;
    int value = -1;
    int code = MPI_Mprobe(left, 30, MPI_COMM_WORLD, &message, &status);
    if (code == MPI_SUCCESS) code = MPI_Mrecv(&value, 1, MPI_INT, &message, &status);
    const int index = value - left * 1000;
    pthread_mutex_lock(&received_lock);
    if (code != MPI_SUCCESS || index < 0 || index >= kThreadMessages) {
      ++threads_failed;
    } else {
      ++received_by_value[index];
    }
    pthread_mutex_unlock(&received_lock);
  }
  return NULL;
}

static void threads(int provided) {
  if (provided != MPI_THREAD_MULTIPLE) {
    expect(0, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
    return;
  }
  int values[kThreadMessages];
  MPI_Request sends[kThreadMessages];
  for (int i = 0; i < kThreadMessages; ++i) values[i] = rank * 1000 + i;
  pthread_t receivers[kReceivers];
  for (int t = 0; t < kReceivers; ++t) pthread_create(&receivers[t], NULL, probing_receiver, NULL);
  for (int i = 0; i < kThreadMessages; ++i) MPI_Isend(&values[i], 1, MPI_INT, right, 30, MPI_COMM_WORLD, &sends[i]);
  MPI_Waitall(kThreadMessages, sends, MPI_STATUSES_IGNORE);
  for (int t = 0; t < kReceivers; ++t) pthread_join(receivers[t], NULL);
  int once = 0;
  for (int i = 0; i < kThreadMessages; ++i) once += received_by_value[i] == 1;
  expect(threads_failed == 0 && once == kThreadMessages, "threads: %d failures, %d of %d messages received once",
         threads_failed, once, kThreadMessages);
  say("threads: %d probing threads received %d of %d messages exactly once", kReceivers, once, kThreadMessages);
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  left = (rank + size - 1) % size;
  right = (rank + 1) % size;

  matched_probes();
  cancellation();
  request_status();
  threads(provided);

  const int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("mprobe", failures);
  return failures == 0 ? 0 : 1;
}
