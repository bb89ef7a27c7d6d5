/*
 * MPI_THREAD_MULTIPLE: several threads of a rank in MPI at once.
 *
 * - MPI_Init_thread(MPI_THREAD_MULTIPLE) provides it (MPI_Query_thread too).
 * - The pair case (issue 42): on each rank, thread A sends 1 MiB (a
 *   rendezvous) to its partner with MPI_Isend and waits in MPI_Wait; thread
 *   B posts the MPI_Irecv for the partner's message 20 ms later and waits.
 *   A waiting thread that kept the library's lock would stall both sides.
 * - Four threads per rank, each with its own communicator (MPI_Comm_dup,
 *   in order, before they start), each running allreduces and a ring
 *   exchange with MPI_Sendrecv, every element checked.
 * Threads only count what they check; the main thread reports after
 * joining them (report.h is not thread-safe).
 */
#include "report.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

enum { kPairRuns = 10, kPairInts = 256 * 1024, kThreads = 4, kIterations = 20, kCount = 1000 };

static int rank, size;
static atomic_int checks, failures;
static MPI_Comm comms[kThreads];

static void count(int ok) {
  atomic_fetch_add(&checks, 1);
  if (!ok) atomic_fetch_add(&failures, 1);
}

static int value(int r, int i, int seed) { return (i * 31 + r * 17 + seed * 7) % 19 - 9; }

struct pair {
  int run, partner;
  int* out;
  int* in;
};

static void* pair_sender(void* arg) {
  struct pair* p = arg;
  MPI_Request request;
  MPI_Isend(p->out, kPairInts, MPI_INT, p->partner, p->run, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  return NULL;
}

static void* pair_receiver(void* arg) {
  struct pair* p = arg;
  struct timespec pause = {0, 20 * 1000 * 1000};
  nanosleep(&pause, NULL);
  MPI_Request request;
  MPI_Irecv(p->in, kPairInts, MPI_INT, p->partner, p->run, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  return NULL;
}

static void pair_case(void) {
  int partner = rank ^ 1;
  if (partner >= size) return;
  int* out = malloc(sizeof(int) * kPairInts);
  int* in = malloc(sizeof(int) * kPairInts);
  int right = 0;
  for (int run = 0; run < kPairRuns; ++run) {
    for (int i = 0; i < kPairInts; ++i) {
      out[i] = value(rank, i, run);
      in[i] = 0;
    }
    struct pair p = {run, partner, out, in};
    pthread_t sender, receiver;
    pthread_create(&sender, NULL, pair_sender, &p);
    pthread_create(&receiver, NULL, pair_receiver, &p);
    pthread_join(sender, NULL);
    pthread_join(receiver, NULL);
    int ok = 1;
    for (int i = 0; i < kPairInts && ok; ++i) ok = in[i] == value(partner, i, run);
    count(ok);
    right += ok;
  }
  free(out);
  free(in);
  expect(right == kPairRuns, "pair case: %d of %d runs received the partner's message", right, kPairRuns);
}

static void* worker(void* arg) {
  int t = (int)(long)arg;
  MPI_Comm comm = comms[t];
  int send[kCount], recv[kCount], ring_in[kCount];
  int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  for (int it = 0; it < kIterations; ++it) {
    int seed = it * kThreads + t;
    for (int i = 0; i < kCount; ++i) send[i] = value(rank, i, seed);
    MPI_Allreduce(send, recv, kCount, MPI_INT, MPI_SUM, comm);
    int ok = 1;
    for (int i = 0; i < kCount && ok; ++i) {
      int expected = 0;
      for (int r = 0; r < size; ++r) expected += value(r, i, seed);
      ok = recv[i] == expected;
    }
    count(ok);
    MPI_Sendrecv(send, kCount, MPI_INT, next, t, ring_in, kCount, MPI_INT, previous, t, comm, MPI_STATUS_IGNORE);
    ok = 1;
    for (int i = 0; i < kCount && ok; ++i) ok = ring_in[i] == value(previous, i, seed);
    count(ok);
  }
  return NULL;
}

int main(int argc, char** argv) {
  int provided = -1, query = -1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Query_thread(&query);
  expect(provided == MPI_THREAD_MULTIPLE, "MPI_Init_thread provides MPI_THREAD_MULTIPLE (got %d)", provided);
  expect(query == provided, "MPI_Query_thread agrees");
  say("provided MPI_THREAD_MULTIPLE: %d", provided == MPI_THREAD_MULTIPLE);
  if (provided == MPI_THREAD_MULTIPLE) {
    pair_case();
    for (int t = 0; t < kThreads; ++t) MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]);
    pthread_t threads[kThreads];
    for (int t = 0; t < kThreads; ++t) pthread_create(&threads[t], NULL, worker, (void*)(long)t);
    for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
    for (int t = 0; t < kThreads; ++t) MPI_Comm_free(&comms[t]);
    int expected = (rank ^ 1) < size ? kPairRuns + 2 * kThreads * kIterations : 2 * kThreads * kIterations;
    expect(atomic_load(&checks) == expected, "threads checked %d results (expected %d)", atomic_load(&checks), expected);
    expect(atomic_load(&failures) == 0, "%d of them wrong", atomic_load(&failures));
    say("threads: every result right: %d", atomic_load(&failures) == 0);
  }
  int failed = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("threads", failed);
  return failed == 0 ? 0 : 1;
}
