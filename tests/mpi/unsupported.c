/*
 * chorus only: every declared-only function of the MPI subset compiles,
 * links, and when called returns an error of class
 * MPI_ERR_UNSUPPORTED_OPERATION whose message names the function (under
 * MPI_ERRORS_RETURN), without touching its arguments.
 *
 * With the argument "fatal", calls MPI_Win_create under the default
 * MPI_ERRORS_ARE_FATAL: the message must name the function and the process
 * must exit with a failure status, as MPI_Abort does (ctest checks both).
 */
#include <stdio.h>
#include <string.h>

#include <mpi.h>

static int checked = 0, wrong = 0;

static void expect_unsupported(const char* function, int code) {
  int error_class = -1, length = 0;
  char message[MPI_MAX_ERROR_STRING] = "";
  MPI_Error_class(code, &error_class);
  MPI_Error_string(code, message, &length);
  ++checked;
  if (error_class != MPI_ERR_UNSUPPORTED_OPERATION || strstr(message, function) == NULL) {
    ++wrong;
    printf("FAILED: %s returned class %d, message \"%s\"\n", function, error_class, message);
  }
}

static void call_every_declared_only_function(void) {
  expect_unsupported("MPI_Comm_remote_size", MPI_Comm_remote_size(MPI_COMM_WORLD, NULL));
  expect_unsupported("MPI_Comm_remote_group", MPI_Comm_remote_group(MPI_COMM_WORLD, NULL));
  expect_unsupported("MPI_Intercomm_create", MPI_Intercomm_create(MPI_COMM_WORLD, 0, MPI_COMM_WORLD, 0, 0, NULL));
  expect_unsupported("MPI_Intercomm_merge", MPI_Intercomm_merge(MPI_COMM_WORLD, 0, NULL));
  expect_unsupported("MPI_Win_create", MPI_Win_create(NULL, 0, 0, MPI_INFO_NULL, MPI_COMM_WORLD, NULL));
  expect_unsupported("MPI_Win_allocate", MPI_Win_allocate(0, 0, MPI_INFO_NULL, MPI_COMM_WORLD, NULL, NULL));
  expect_unsupported("MPI_Win_allocate_shared", MPI_Win_allocate_shared(0, 0, MPI_INFO_NULL, MPI_COMM_WORLD, NULL, NULL));
  expect_unsupported("MPI_Win_create_dynamic", MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, NULL));
  expect_unsupported("MPI_Win_attach", MPI_Win_attach(MPI_WIN_NULL, NULL, 0));
  expect_unsupported("MPI_Win_detach", MPI_Win_detach(MPI_WIN_NULL, NULL));
  expect_unsupported("MPI_Win_free", MPI_Win_free(NULL));
  expect_unsupported("MPI_Win_fence", MPI_Win_fence(0, MPI_WIN_NULL));
  expect_unsupported("MPI_Win_lock", MPI_Win_lock(0, 0, 0, MPI_WIN_NULL));
  expect_unsupported("MPI_Win_unlock", MPI_Win_unlock(0, MPI_WIN_NULL));
  expect_unsupported("MPI_Win_lock_all", MPI_Win_lock_all(0, MPI_WIN_NULL));
  expect_unsupported("MPI_Win_unlock_all", MPI_Win_unlock_all(MPI_WIN_NULL));
  expect_unsupported("MPI_Win_flush", MPI_Win_flush(0, MPI_WIN_NULL));
  expect_unsupported("MPI_Win_flush_local", MPI_Win_flush_local(0, MPI_WIN_NULL));
  expect_unsupported("MPI_Win_flush_all", MPI_Win_flush_all(MPI_WIN_NULL));
  expect_unsupported("MPI_Win_flush_local_all", MPI_Win_flush_local_all(MPI_WIN_NULL));
  expect_unsupported("MPI_Win_sync", MPI_Win_sync(MPI_WIN_NULL));
  expect_unsupported("MPI_Win_post", MPI_Win_post(MPI_GROUP_NULL, 0, MPI_WIN_NULL));
  expect_unsupported("MPI_Win_start", MPI_Win_start(MPI_GROUP_NULL, 0, MPI_WIN_NULL));
  expect_unsupported("MPI_Win_complete", MPI_Win_complete(MPI_WIN_NULL));
  expect_unsupported("MPI_Win_wait", MPI_Win_wait(MPI_WIN_NULL));
  expect_unsupported("MPI_Win_test", MPI_Win_test(MPI_WIN_NULL, NULL));
  expect_unsupported("MPI_Win_shared_query", MPI_Win_shared_query(MPI_WIN_NULL, 0, NULL, NULL, NULL));
  expect_unsupported("MPI_Put", MPI_Put(NULL, 0, MPI_INT, 0, 0, 0, MPI_INT, MPI_WIN_NULL));
  expect_unsupported("MPI_Get", MPI_Get(NULL, 0, MPI_INT, 0, 0, 0, MPI_INT, MPI_WIN_NULL));
  expect_unsupported("MPI_Rput", MPI_Rput(NULL, 0, MPI_INT, 0, 0, 0, MPI_INT, MPI_WIN_NULL, NULL));
  expect_unsupported("MPI_Rget", MPI_Rget(NULL, 0, MPI_INT, 0, 0, 0, MPI_INT, MPI_WIN_NULL, NULL));
  expect_unsupported("MPI_Accumulate", MPI_Accumulate(NULL, 0, MPI_INT, 0, 0, 0, MPI_INT, MPI_SUM, MPI_WIN_NULL));
  expect_unsupported("MPI_Get_accumulate", MPI_Get_accumulate(NULL, 0, MPI_INT, NULL, 0, MPI_INT, 0, 0, 0, MPI_INT, MPI_SUM, MPI_WIN_NULL));
  expect_unsupported("MPI_Fetch_and_op", MPI_Fetch_and_op(NULL, NULL, MPI_INT, 0, 0, MPI_SUM, MPI_WIN_NULL));
  expect_unsupported("MPI_Compare_and_swap", MPI_Compare_and_swap(NULL, NULL, NULL, MPI_INT, 0, 0, MPI_WIN_NULL));
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
    MPI_Win win;
    int memory[4];
    MPI_Win_create(memory, sizeof memory, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    printf("FAILED: MPI_Win_create returned under MPI_ERRORS_ARE_FATAL\n");
    MPI_Finalize();
    return 0;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  call_every_declared_only_function();
  /* Still fully usable afterwards. */
  int one = 1, total = 0, size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (total != size) {
    ++wrong;
    printf("FAILED: allreduce after the unsupported calls gave %d\n", total);
  }
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (rank == 0) {
    MPI_Error_string(MPI_Win_free(NULL), message, &length);
    printf("example: %s\n", message);
  }
  printf("rank %d: declared-only functions: %d checked, %d wrong\n", rank, checked, wrong);
  MPI_Finalize();
  /* Every rank's own pass line, after MPI_Finalize (tests/job_verdict.py). */
  if (wrong == 0) printf("unsupported: rank %d passed\n", rank);
  return wrong == 0 ? 0 : 1;
}
