/*
 * Environment and errors: MPI_Init_thread, MPI_Initialized, MPI_Finalized,
 * MPI_Query_thread, MPI_Is_thread_main, MPI_Get_version,
 * MPI_Get_library_version, MPI_Get_processor_name, MPI_Wtime, MPI_Wtick,
 * MPI_Alloc_mem/MPI_Free_mem, MPI_Error_class, MPI_Error_string,
 * MPI_Comm_set_errhandler/get_errhandler, and the error class every kind of
 * invalid call returns under MPI_ERRORS_RETURN (a truncated receive too).
 */
#include <unistd.h>

#include "report.h"

static int rank, size;

#define CLASS(c) {c, #c}
static const struct {
  int value;
  const char* name;
} classes[] = {CLASS(MPI_SUCCESS), CLASS(MPI_ERR_BUFFER), CLASS(MPI_ERR_COUNT), CLASS(MPI_ERR_TYPE),
               CLASS(MPI_ERR_TAG), CLASS(MPI_ERR_COMM), CLASS(MPI_ERR_RANK), CLASS(MPI_ERR_REQUEST),
               CLASS(MPI_ERR_ROOT), CLASS(MPI_ERR_GROUP), CLASS(MPI_ERR_OP), CLASS(MPI_ERR_TOPOLOGY),
               CLASS(MPI_ERR_DIMS), CLASS(MPI_ERR_ARG), CLASS(MPI_ERR_UNKNOWN), CLASS(MPI_ERR_TRUNCATE),
               CLASS(MPI_ERR_OTHER), CLASS(MPI_ERR_INTERN), CLASS(MPI_ERR_IN_STATUS), CLASS(MPI_ERR_PENDING),
               CLASS(MPI_ERR_NO_MEM), CLASS(MPI_ERR_SIZE), CLASS(MPI_ERR_UNSUPPORTED_OPERATION), CLASS(MPI_ERR_WIN),
               CLASS(MPI_ERR_RMA_SYNC)};
enum { NUM_CLASSES = sizeof classes / sizeof classes[0] };

static const char* class_name(int code) {
  int error_class = -1;
  if (MPI_Error_class(code, &error_class) != MPI_SUCCESS) return "(MPI_Error_class failed)";
  for (int i = 0; i < NUM_CLASSES; ++i) {
    if (classes[i].value == error_class) return classes[i].name;
  }
  return "(unlisted class)";
}

/* Records the class of an error code and checks its message is usable. */
static void say_error(const char* what, int code) {
  char message[MPI_MAX_ERROR_STRING];
  int length = -1;
  MPI_Error_string(code, message, &length);
  expect(code == MPI_SUCCESS || (length > 0 && length < MPI_MAX_ERROR_STRING && (int)strlen(message) == length),
         "error string of %s", what);
  say("%-40s %s", what, class_name(code));
}

static void environment(int provided) {
  int flag = -1, version = 0, subversion = 0, query = -1, main_thread = -1;
  expect(provided >= MPI_THREAD_FUNNELED && provided <= MPI_THREAD_MULTIPLE, "provided thread level");
  MPI_Query_thread(&query);
  MPI_Is_thread_main(&main_thread);
  say("provided >= FUNNELED: %d, query matches: %d, main thread: %d", provided >= MPI_THREAD_FUNNELED,
      query == provided, main_thread);
  MPI_Initialized(&flag);
  say("initialized: %d", flag);
  MPI_Finalized(&flag);
  say("finalized: %d", flag);
  MPI_Get_version(&version, &subversion);
  say("version %d.%d (MPI_VERSION %d.%d)", version, subversion, MPI_VERSION, MPI_SUBVERSION);
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(library, &length);
  expect(length > 0 && strlen(library) > 0, "library version");
  char name[MPI_MAX_PROCESSOR_NAME], host[256] = {0};
  MPI_Get_processor_name(name, &length);
  gethostname(host, sizeof host - 1);
  say("processor name is the host name: %d", strcmp(name, host) == 0 && (int)strlen(name) == length);
  double tick = MPI_Wtick(), start = MPI_Wtime();
  MPI_Barrier(MPI_COMM_WORLD);
  double end = MPI_Wtime();
  say("wtick in (0, 1ms]: %d, wtime monotonic: %d", tick > 0 && tick <= 1e-3, end >= start);
  int* memory = NULL;
  expect(MPI_Alloc_mem(64 * sizeof(int), MPI_INFO_NULL, &memory) == MPI_SUCCESS && memory != NULL, "alloc_mem");
  for (int i = 0; i < 64; ++i) memory[i] = i;
  int sum = 0;
  MPI_Allreduce(&memory[63], &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  expect(sum == 63 * size, "allreduce from MPI_Alloc_mem memory");
  expect(MPI_Free_mem(memory) == MPI_SUCCESS, "free_mem");
  say("MPI_MAX_ERROR_STRING >= 64: %d, MPI_MAX_OBJECT_NAME >= 32: %d", MPI_MAX_ERROR_STRING >= 64,
      MPI_MAX_OBJECT_NAME >= 32);
}

static void error_classes(void) {
  int ok = 1;
  for (int i = 0; i < NUM_CLASSES; ++i) {
    int error_class = -1;
    MPI_Error_class(classes[i].value, &error_class);
    ok &= error_class == classes[i].value;
    char message[MPI_MAX_ERROR_STRING];
    int length = -1;
    MPI_Error_string(classes[i].value, message, &length);
    ok &= length > 0 && length < MPI_MAX_ERROR_STRING;
  }
  expect(ok, "every error class is its own class and has a message");
  say("distinct classes: %d", MPI_ERR_TRUNCATE != MPI_ERR_OTHER && MPI_ERR_UNSUPPORTED_OPERATION > MPI_SUCCESS);
}

static void errors_return(void) {
  MPI_Errhandler handler;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler);
  expect(handler == MPI_ERRORS_RETURN, "errhandler set");
  MPI_Errhandler_free(&handler);
  int value = 1, out = 0;
  say_error("bcast with root = size", MPI_Bcast(&value, 1, MPI_INT, size, MPI_COMM_WORLD));
  say_error("reduce with root -1", MPI_Reduce(&value, &out, 1, MPI_INT, MPI_SUM, -1, MPI_COMM_WORLD));
  say_error("send to rank = size", MPI_Send(&value, 1, MPI_INT, size, 0, MPI_COMM_WORLD));
  say_error("send count -1", MPI_Send(&value, -1, MPI_INT, 0, 0, MPI_COMM_WORLD));
  say_error("send tag -5", MPI_Send(&value, 1, MPI_INT, 0, -5, MPI_COMM_WORLD));
  say_error("bcast of MPI_DATATYPE_NULL", MPI_Bcast(&value, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD));
  say_error("allreduce MPI_SUM on MPI_2INT", MPI_Allreduce(&value, &out, 1, MPI_2INT, MPI_SUM, MPI_COMM_WORLD));
  say_error("allreduce MPI_BAND on MPI_DOUBLE", MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD));
  say_error("allreduce with MPI_OP_NULL", MPI_Allreduce(&value, &out, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD));
  say_error("comm_size of MPI_COMM_NULL", MPI_Comm_size(MPI_COMM_NULL, &out));
  MPI_Comm world = MPI_COMM_WORLD;
  say_error("comm_free of MPI_COMM_WORLD", MPI_Comm_free(&world));
  MPI_Datatype predefined_type = MPI_INT;
  say_error("type_free of MPI_INT", MPI_Type_free(&predefined_type));
  MPI_Op predefined_op = MPI_MAX;
  say_error("op_free of MPI_MAX", MPI_Op_free(&predefined_op));
  MPI_Datatype uncommitted;
  MPI_Type_contiguous(2, MPI_INT, &uncommitted);
  say_error("send of an uncommitted type", MPI_Send(&value, 1, uncommitted, 0, 0, MPI_COMM_WORLD));
  MPI_Type_free(&uncommitted);
  say_error("a valid barrier", MPI_Barrier(MPI_COMM_WORLD));

  /* Truncation: 8 ints into room for 4. The communicator stays usable. */
  MPI_Comm copy;
  MPI_Comm_dup(MPI_COMM_WORLD, &copy);
  int eight[8] = {1, 2, 3, 4, 5, 6, 7, 8}, four[4];
  if (rank == 0) MPI_Send(eight, 8, MPI_INT, 1, 3, copy);
  if (rank == 1) say_error("receive of 8 ints into 4", MPI_Recv(four, 4, MPI_INT, 0, 3, copy, MPI_STATUS_IGNORE));
  say_error("barrier on that communicator afterwards", MPI_Barrier(copy));
  MPI_Comm_free(&copy);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

int main(int argc, char** argv) {
  int flag = -1, provided = -1;
  MPI_Initialized(&flag);
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) MPI_Abort(MPI_COMM_WORLD, 2);
  say("initialized before MPI_Init: %d", flag);
  environment(provided);
  error_classes();
  errors_return();
  int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  int initialized = -1, finalized = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (rank == 0) printf("after MPI_Finalize: initialized %d finalized %d\n", initialized, finalized);
  report_passed("env", failures);
  return failures == 0 ? 0 : 1;
}
