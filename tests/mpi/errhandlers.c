/*
 * User error handlers (MPI_Comm_create_errhandler, MPI-3.1 8.3): a handler
 * set on MPI_COMM_WORLD is called once per failed call with that
 * communicator and the call's code, and the call returns the code (one
 * the handler overwrites is still the one returned); MPI_Comm_dup and
 * MPI_Comm_split inherit it and pass their own communicator;
 * MPI_Comm_get_errhandler gives it back; MPI_Errhandler_free leaves it in
 * use; MPI_Comm_call_errhandler calls it (and returns MPI_SUCCESS), and
 * with MPI_ERRORS_RETURN calls nothing. What is printed is the same under
 * Open MPI.
 */
#include "report.h"

static int rank, size;
static int calls = 0, last_class = -1, last_code = -1;
static MPI_Comm last_comm = MPI_COMM_NULL;
static int replace_code = 0;

static void record(MPI_Comm* comm, int* code, ...) {
  ++calls;
  last_comm = *comm;
  last_code = *code;
  MPI_Error_class(*code, &last_class);
  if (replace_code) *code = MPI_ERR_OTHER;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  int code = MPI_Comm_create_errhandler(record, &handler);
  expect(code == MPI_SUCCESS && handler != MPI_ERRHANDLER_NULL, "create_errhandler: %d", code);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler);
  MPI_Errhandler got = MPI_ERRHANDLER_NULL;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &got);
  expect(got == handler, "get_errhandler gives another handler");
  MPI_Errhandler_free(&got);

  /* A failed call: the handler sees it, the call returns its code. */
  int value = rank;
  code = MPI_Send(&value, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD);
  int returned_class = -1;
  MPI_Error_class(code, &returned_class);
  expect(calls == 1 && last_comm == MPI_COMM_WORLD && last_code == code && last_class == MPI_ERR_RANK,
         "send to rank %d: %d calls, class %s", size + 3, calls, report_class_name(last_class));
  say("send to a rank out of range: handler called %d time(s) on MPI_COMM_WORLD with %s, the call returned %s", calls,
      report_class_name(last_class), report_class_name(returned_class));

  /* The handler's code is its own copy: overwriting it changes nothing. */
  replace_code = 1;
  code = MPI_Send(&value, -1, MPI_INT, 0, 0, MPI_COMM_WORLD);
  replace_code = 0;
  MPI_Error_class(code, &returned_class);
  expect(calls == 2 && last_class == MPI_ERR_COUNT && returned_class == MPI_ERR_COUNT,
         "replaced code: %d calls, saw %s, returned %s", calls, report_class_name(last_class), report_class_name(returned_class));
  say("negative count: handler saw %s, overwrote it, the call returned %s", report_class_name(last_class),
      report_class_name(returned_class));

  /* Inherited by dup and split, which pass their own communicator. */
  MPI_Comm dup, split;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &split);
  MPI_Send(&value, 1, MPI_INT, 0, -5, dup);
  expect(calls == 3 && last_comm == dup && last_class == MPI_ERR_TAG, "dup: %d calls, comm %s, %s", calls,
         last_comm == dup ? "the dup" : "another", report_class_name(last_class));
  int split_size = 0;
  MPI_Comm_size(split, &split_size);
  MPI_Send(&value, 1, MPI_INT, split_size, 0, split);
  expect(calls == 4 && last_comm == split && last_class == MPI_ERR_RANK, "split: %d calls, comm %s, %s", calls,
         last_comm == split ? "the split" : "another", report_class_name(last_class));
  say("dup and split inherit it: %s on the dup, %s on the split", "MPI_ERR_TAG", report_class_name(last_class));
  MPI_Comm_free(&dup);
  MPI_Comm_free(&split);

  /* Freed, it stays in use; MPI_Comm_call_errhandler calls it. */
  MPI_Errhandler_free(&handler);
  expect(handler == MPI_ERRHANDLER_NULL, "errhandler_free leaves the handle set");
  code = MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER);
  expect(code == MPI_SUCCESS && calls == 5 && last_code == MPI_ERR_OTHER && last_comm == MPI_COMM_WORLD,
         "call_errhandler: returned %d, %d calls, code %d", code, calls, last_code);
  say("call_errhandler after errhandler_free: handler called with %s, returned %s", report_class_name(last_class),
      report_class_name(code));

  /* MPI_ERRORS_RETURN calls nothing. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  code = MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER);
  expect(code == MPI_SUCCESS && calls == 5, "call_errhandler with MPI_ERRORS_RETURN: returned %d, %d calls", code,
         calls);
  code = MPI_Send(&value, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD);
  MPI_Error_class(code, &returned_class);
  expect(returned_class == MPI_ERR_RANK && calls == 5, "errors_return: %s, %d calls", report_class_name(returned_class), calls);
  say("MPI_ERRORS_RETURN again: no handler call, the send returned %s", report_class_name(returned_class));

  const int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("errhandlers", failures);
  return failures == 0 ? 0 : 1;
}
