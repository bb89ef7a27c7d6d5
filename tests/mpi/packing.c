/*
 * Explicit packing, element counts and subarrays: MPI_Pack, MPI_Unpack,
 * MPI_Pack_size, MPI_Get_elements(_x), MPI_Type_create_subarray (C and
 * Fortran order). Every rank sends to the next and receives from the
 * previous (one rank: itself); every element is checked. Only values both
 * chorus and Open MPI must give are printed (pack sizes may differ between
 * implementations; positions are checked against them, not printed).
 */
#include "report.h"

static int rank, size;

/* A packed message: an int, a column of a 4x4 double matrix (vector type) and 6 chars. */
static void pack_unpack(void) {
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  double matrix[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) matrix[i][j] = 100.0 * rank + 10 * i + j;
  int tag = 1000 + rank;
  char word[6] = {'c', 'h', 'o', 'r', 'u', (char)('0' + rank % 10)};
  MPI_Datatype column;
  MPI_Type_vector(4, 1, 4, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);

  int s_int = -1, s_column = -1, s_chars = -1;
  MPI_Pack_size(1, MPI_INT, MPI_COMM_WORLD, &s_int);
  MPI_Pack_size(1, column, MPI_COMM_WORLD, &s_column);
  MPI_Pack_size(6, MPI_CHAR, MPI_COMM_WORLD, &s_chars);
  const int capacity = s_int + s_column + s_chars;
  expect(s_int >= 4 && s_column >= 32 && s_chars >= 6, "pack sizes %d %d %d", s_int, s_column, s_chars);
  char* out = malloc((size_t)capacity);
  char* in = malloc((size_t)capacity);
  int position = 0;
  MPI_Pack(&tag, 1, MPI_INT, out, capacity, &position, MPI_COMM_WORLD);
  MPI_Pack(&matrix[0][2], 1, column, out, capacity, &position, MPI_COMM_WORLD);
  MPI_Pack(word, 6, MPI_CHAR, out, capacity, &position, MPI_COMM_WORLD);
  expect(position > 0 && position <= capacity, "position %d after packing, capacity %d", position, capacity);

  MPI_Status status;
  MPI_Sendrecv(out, position, MPI_PACKED, next, 7, in, capacity, MPI_PACKED, previous, 7, MPI_COMM_WORLD, &status);
  int received = -1;
  MPI_Get_count(&status, MPI_PACKED, &received);
  int got_tag = -1, at = 0;
  double got_column[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) got_column[i][j] = -1;
  char got_word[6] = {0};
  MPI_Unpack(in, received, &at, &got_tag, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Unpack(in, received, &at, &got_column[0][1], 1, column, MPI_COMM_WORLD);
  MPI_Unpack(in, received, &at, got_word, 6, MPI_CHAR, MPI_COMM_WORLD);
  int ok = got_tag == 1000 + previous && at == received;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) ok &= got_column[i][j] == (j == 1 ? 100.0 * previous + 10 * i + 2 : -1);
  ok &= memcmp(got_word, "choru", 5) == 0 && got_word[5] == (char)('0' + previous % 10);
  expect(ok, "unpacked from rank %d: tag %d, position %d of %d", previous, got_tag, at, received);

  /* Unpacking past the end is an error that names it (errors returned, not fatal). */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int past = received;
  int rc = MPI_Unpack(in, received, &past, &got_tag, 1, MPI_INT, MPI_COMM_WORLD);
  int error_class = -1;
  MPI_Error_class(rc, &error_class);
  expect(rc != MPI_SUCCESS && past == received, "unpacking past the end: rc %d, position %d", rc, past);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  say("pack/unpack: tag %d, column %g %g %g %g, word %.6s from rank %d", got_tag, got_column[0][1], got_column[1][1],
      got_column[2][1], got_column[3][1], got_word, previous);
  MPI_Type_free(&column);
  free(out);
  free(in);
}

/* Five doubles received with a type of two doubles: MPI_Get_count is
 * MPI_UNDEFINED (2.5 elements), MPI_Get_elements 5. */
static void element_counts(void) {
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  double send[5], recv[6] = {0};
  for (int i = 0; i < 5; ++i) send[i] = rank + i / 10.0;
  MPI_Datatype pair;
  MPI_Type_contiguous(2, MPI_DOUBLE, &pair);
  MPI_Type_commit(&pair);
  MPI_Status status;
  MPI_Sendrecv(send, 5, MPI_DOUBLE, next, 8, recv, 3, pair, previous, 8, MPI_COMM_WORLD, &status);
  int count = -2, elements = -2;
  MPI_Count elements_x = -2;
  MPI_Get_count(&status, pair, &count);
  MPI_Get_elements(&status, pair, &elements);
  MPI_Get_elements_x(&status, pair, &elements_x);
  int whole = -2;
  MPI_Get_elements(&status, MPI_DOUBLE, &whole);
  expect(count == MPI_UNDEFINED && elements == 5 && elements_x == 5 && whole == 5 && recv[4] == previous + 0.4,
         "get_count %d, get_elements %d, _x %lld, as doubles %d", count, elements, (long long)elements_x, whole);
  say("element counts: get_count %s, get_elements %d, get_elements_x %lld", count == MPI_UNDEFINED ? "undefined" : "?",
      elements, (long long)elements_x);
  MPI_Type_free(&pair);
}

/* A 2x3x2 block of a 4x5x6 int array, in C and in Fortran order. */
static void subarrays(int order) {
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  const int sizes[3] = {4, 5, 6}, subsizes[3] = {2, 3, 2}, starts[3] = {1, 1, 3};
  int array[4 * 5 * 6], block[12];
  for (int i = 0; i < 120; ++i) array[i] = 1000 * rank + i;
  MPI_Datatype sub;
  MPI_Type_create_subarray(3, sizes, subsizes, starts, order, MPI_INT, &sub);
  MPI_Type_commit(&sub);
  int type_size = -1;
  MPI_Aint lb = -1, extent = -1;
  MPI_Type_size(sub, &type_size);
  MPI_Type_get_extent(sub, &lb, &extent);
  MPI_Sendrecv(array, 1, sub, next, 9, block, 12, MPI_INT, previous, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  /* The element at subarray index (a, b, c): C order a*30 + b*6 + c, Fortran order a + b*4 + c*20. */
  int ok = type_size == 48 && lb == 0 && extent == 480, k = 0;
  if (order == MPI_ORDER_C) {
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b)
        for (int c = 0; c < 2; ++c) ok &= block[k++] == 1000 * previous + (1 + a) * 30 + (1 + b) * 6 + (3 + c);
  } else {
    for (int c = 0; c < 2; ++c)
      for (int b = 0; b < 3; ++b)
        for (int a = 0; a < 2; ++a) ok &= block[k++] == 1000 * previous + (1 + a) + (1 + b) * 4 + (3 + c) * 20;
  }
  expect(ok, "subarray (%s order): size %d, lb %ld, extent %ld, first %d", order == MPI_ORDER_C ? "C" : "Fortran",
         type_size, (long)lb, (long)extent, block[0]);
  /* Received through the subarray type: only its elements change. */
  int target[120];
  for (int i = 0; i < 120; ++i) target[i] = -1;
  MPI_Sendrecv(block, 12, MPI_INT, previous, 10, target, 1, sub, next, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  int changed = 0;
  for (int i = 0; i < 120; ++i) changed += target[i] != -1;
  expect(changed == 12, "a receive through the subarray wrote %d elements, not 12", changed);
  say("subarray %s order: size %d, extent %ld, first %d, received back into %d elements",
      order == MPI_ORDER_C ? "C" : "Fortran", type_size, (long)extent, block[0] - 1000 * previous, changed);
  MPI_Type_free(&sub);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    if (rank == 0) printf("usage: packing (under mpirun/chorusrun, any ranks): checks MPI_Pack/Unpack/Pack_size, "
                          "MPI_Get_elements and subarray types\n");
    MPI_Finalize();
    return 0;
  }
  pack_unpack();
  element_counts();
  subarrays(MPI_ORDER_C);
  subarrays(MPI_ORDER_FORTRAN);
  int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("packing", failures);
  return failures == 0 ? 0 : 1;
}
