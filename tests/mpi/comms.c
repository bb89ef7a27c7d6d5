/*
 * Communicators and point-to-point: MPI_COMM_SELF, MPI_Comm_dup,
 * MPI_Comm_split (keys reorder ranks, MPI_UNDEFINED gives MPI_COMM_NULL,
 * nested splits), collectives on sub-communicators interleaved with the
 * parent's, MPI_Comm_free, error handlers inherited by new communicators,
 * MPI_Send/MPI_Recv with equal tags on different communicators (they must
 * not match), MPI_ANY_SOURCE/MPI_ANY_TAG, MPI_Get_count, MPI_PROC_NULL and
 * messages above the eager limit.
 */
#include "report.h"

static int rank, size;

static void self(void) {
  int self_rank = -1, self_size = -1, value = rank + 5, sum = 0;
  MPI_Comm_rank(MPI_COMM_SELF, &self_rank);
  MPI_Comm_size(MPI_COMM_SELF, &self_size);
  MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF);
  expect(self_rank == 0 && self_size == 1 && sum == rank + 5, "MPI_COMM_SELF");
  say("self: rank %d size %d allreduce %d", self_rank, self_size, sum);
}

static void dup_and_split(void) {
  MPI_Comm copy, half, quarter, without_zero;
  MPI_Comm_dup(MPI_COMM_WORLD, &copy);
  int copy_rank, copy_size;
  MPI_Comm_rank(copy, &copy_rank);
  MPI_Comm_size(copy, &copy_size);
  expect(copy_rank == rank && copy_size == size, "dup keeps rank and size");

  /* Odd and even ranks, ordered backwards by key. */
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
  int half_rank, half_size;
  MPI_Comm_rank(half, &half_rank);
  MPI_Comm_size(half, &half_size);
  say("split by parity: rank %d of %d", half_rank, half_size);

  /* Collectives on the half, the dup and the world, interleaved. */
  int world_rank = rank, half_sum = 0, copy_sum = 0, world_max = 0;
  MPI_Allreduce(&world_rank, &half_sum, 1, MPI_INT, MPI_SUM, half);
  MPI_Allreduce(&world_rank, &copy_sum, 1, MPI_INT, MPI_SUM, copy);
  MPI_Allreduce(&world_rank, &world_max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int expected_half = 0;
  for (int r = rank % 2; r < size; r += 2) expected_half += r;
  expect(half_sum == expected_half && copy_sum == size * (size - 1) / 2 && world_max == size - 1,
         "interleaved allreduce on half, dup and world");
  int members[8];
  MPI_Allgather(&world_rank, 1, MPI_INT, members, 1, MPI_INT, half);
  char line[128];
  int used = snprintf(line, sizeof line, "half members by rank:");
  for (int i = 0; i < half_size; ++i) used += snprintf(line + used, sizeof line - (size_t)used, " %d", members[i]);
  say("%s", line);
  int from_root = half_rank == 0 ? 1000 + rank : -1;
  MPI_Bcast(&from_root, 1, MPI_INT, 0, half);
  int prefix = 0;
  MPI_Scan(&world_rank, &prefix, 1, MPI_INT, MPI_SUM, half);
  int gathered[8] = {0};
  MPI_Gather(&world_rank, 1, MPI_INT, gathered, 1, MPI_INT, half_size - 1, half);
  say("half: bcast %d scan %d", from_root, prefix);
  if (half_rank == half_size - 1) say("half gather at its last rank: %d ... %d", gathered[0], gathered[half_size - 1]);

  /* Nested: quarters of the halves. */
  MPI_Comm_split(half, half_rank / 2, 0, &quarter);
  int quarter_size, quarter_sum = 0;
  MPI_Comm_size(quarter, &quarter_size);
  MPI_Allreduce(&world_rank, &quarter_sum, 1, MPI_INT, MPI_SUM, quarter);
  say("quarter: size %d sum %d", quarter_size, quarter_sum);

  /* MPI_UNDEFINED: rank 0 joins nothing. */
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 3, rank, &without_zero);
  expect((without_zero == MPI_COMM_NULL) == (rank == 0), "MPI_UNDEFINED gives MPI_COMM_NULL");
  if (without_zero != MPI_COMM_NULL) {
    int count = 0, one = 1;
    MPI_Allreduce(&one, &count, 1, MPI_INT, MPI_SUM, without_zero);
    expect(count == size - 1, "communicator without rank 0");
    MPI_Comm_free(&without_zero);
  }

  /* Error handlers: a dup inherits ERRORS_RETURN; the world stays fatal. */
  MPI_Errhandler handler;
  MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN);
  MPI_Comm half_copy;
  MPI_Comm_dup(half, &half_copy);
  MPI_Comm_get_errhandler(half_copy, &handler);
  expect(handler == MPI_ERRORS_RETURN, "dup inherits the error handler");
  MPI_Errhandler_free(&handler);
  int error = MPI_Bcast(&from_root, 1, MPI_INT, half_size, half_copy); /* root out of range */
  int error_class = -1;
  MPI_Error_class(error, &error_class);
  say("bad root on the dup of the half: %s", error_class == MPI_ERR_ROOT ? "MPI_ERR_ROOT" : "other");
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler);
  expect(handler == MPI_ERRORS_ARE_FATAL, "world keeps MPI_ERRORS_ARE_FATAL");
  MPI_Errhandler_free(&handler);

  MPI_Comm_free(&half_copy);
  MPI_Comm_free(&quarter);
  MPI_Comm_free(&half);
  expect(half == MPI_COMM_NULL, "comm_free sets MPI_COMM_NULL");
  MPI_Barrier(copy);
  MPI_Comm_free(&copy);
}

static void point_to_point(void) {
  MPI_Comm copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &copy);
  int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  /* Equal tags on two communicators, received in the opposite order. Small
   * messages (sent eagerly by both MPIs); even ranks send first. */
  int on_world[2] = {100 + rank, 0}, on_copy[2] = {200 + rank, 0}, got_world[2], got_copy[2];
  for (int turn = 0; turn < 2; ++turn) {
    if ((rank + turn) % 2 == 0) {
      MPI_Send(on_world, 2, MPI_INT, next, 7, MPI_COMM_WORLD);
      MPI_Send(on_copy, 2, MPI_INT, next, 7, copy);
    } else {
      MPI_Recv(got_copy, 2, MPI_INT, prev, 7, copy, MPI_STATUS_IGNORE);
      MPI_Recv(got_world, 2, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }
  expect(got_world[0] == 100 + prev && got_copy[0] == 200 + prev, "messages stay on their communicator");
  say("ring: world got %d, dup got %d", got_world[0], got_copy[0]);

  /* Wildcards: rank 0 takes one message from each other rank, on a
   * communicator nothing else uses (MPI_ANY_TAG would match anything). */
  MPI_Comm wild;
  MPI_Comm_dup(MPI_COMM_WORLD, &wild);
  if (rank == 0) {
    int seen_tag[8] = {0}, seen_count[8] = {0};
    for (int i = 1; i < size; ++i) {
      int payload[8];
      MPI_Status status;
      MPI_Recv(payload, 8, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, wild, &status);
      int count = -1;
      MPI_Get_count(&status, MPI_INT, &count);
      expect(status.MPI_SOURCE >= 1 && status.MPI_SOURCE < size && payload[0] == status.MPI_SOURCE,
             "wildcard source");
      if (status.MPI_SOURCE >= 1 && status.MPI_SOURCE < size) {
        seen_tag[status.MPI_SOURCE] = status.MPI_TAG;
        seen_count[status.MPI_SOURCE] = count;
      }
    }
    for (int r = 1; r < size; ++r) say("from %d: tag %d, %d ints", r, seen_tag[r], seen_count[r]);
  } else {
    int payload[8] = {rank, rank, rank, rank, rank, rank, rank, rank};
    MPI_Send(payload, rank, MPI_INT, 0, 50 + rank, wild); /* rank r sends r ints */
  }
  MPI_Comm_free(&wild);

  /* A specific tag among several pending ones, from a specific source. */
  if (rank == 1) {
    int a = 1, b = 2;
    MPI_Send(&a, 1, MPI_INT, 0, 11, copy);
    MPI_Send(&b, 1, MPI_INT, 0, 12, copy);
  } else if (rank == 0) {
    int x = 0, y = 0;
    MPI_Status status;
    MPI_Recv(&y, 1, MPI_INT, 1, 12, copy, &status);
    MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 11, copy, MPI_STATUS_IGNORE);
    expect(x == 1 && y == 2 && status.MPI_TAG == 12 && status.MPI_SOURCE == 1, "receive by tag out of order");
    say("by tag: %d then %d", y, x);
  }

  /* Above the eager limit, last rank to rank 0, with a larger buffer. */
  enum { N = 100000 };
  static int big[N + 10];
  if (rank == size - 1) {
    for (int i = 0; i < N; ++i) big[i] = i ^ 0x5a5a;
    MPI_Send(big, N, MPI_INT, 0, 99, MPI_COMM_WORLD);
  } else if (rank == 0) {
    MPI_Status status;
    MPI_Recv(big, N + 10, MPI_INT, size - 1, 99, MPI_COMM_WORLD, &status);
    int count = -1, ok = 1;
    MPI_Get_count(&status, MPI_INT, &count);
    for (int i = 0; i < N; ++i) ok &= big[i] == (i ^ 0x5a5a);
    expect(ok && count == N, "large message");
    say("large message: %d ints from %d", count, status.MPI_SOURCE);
    int bytes = -1;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    say("large message: %d bytes", bytes);
  }

  /* MPI_PROC_NULL: nothing moves, the status says so. */
  MPI_Status status;
  int dummy = 5;
  MPI_Send(&dummy, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD);
  MPI_Recv(&dummy, 1, MPI_INT, MPI_PROC_NULL, 1, MPI_COMM_WORLD, &status);
  int count = -1;
  MPI_Get_count(&status, MPI_INT, &count);
  expect(status.MPI_SOURCE == MPI_PROC_NULL && status.MPI_TAG == MPI_ANY_TAG && count == 0 && dummy == 5,
         "MPI_PROC_NULL");
  MPI_Comm_free(&copy);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2 || size > 8) MPI_Abort(MPI_COMM_WORLD, 2);
  self();
  dup_and_split();
  point_to_point();
  int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("comms", failures);
  return failures == 0 ? 0 : 1;
}
