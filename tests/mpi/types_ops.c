/*
 * Datatypes and reduction operations: the name, size and extent of every
 * predefined datatype; contiguous and vector types in collectives and
 * point-to-point (MPI_Get_count); every predefined op on the types it is
 * defined for (long double, complex, C _Bool, value-index pairs included);
 * commutative and non-commutative user ops in reduce, allreduce, scan,
 * exscan and reduce_scatter (non-commutative ones must combine in rank
 * order), also on a non-contiguous type.
 */
#include <complex.h>
#include <stdbool.h>
#include <stdint.h>

#include "report.h"

static int rank, size;

#define TYPE(t) {t, #t}
static void predefined_types(void) {
  struct {
    MPI_Datatype type;
    const char* spelled;
  } types[] = {TYPE(MPI_CHAR), TYPE(MPI_SIGNED_CHAR), TYPE(MPI_UNSIGNED_CHAR), TYPE(MPI_BYTE), TYPE(MPI_SHORT),
               TYPE(MPI_UNSIGNED_SHORT), TYPE(MPI_INT), TYPE(MPI_UNSIGNED), TYPE(MPI_LONG), TYPE(MPI_UNSIGNED_LONG),
               TYPE(MPI_LONG_LONG), TYPE(MPI_LONG_LONG_INT), TYPE(MPI_UNSIGNED_LONG_LONG), TYPE(MPI_FLOAT),
               TYPE(MPI_DOUBLE), TYPE(MPI_LONG_DOUBLE), TYPE(MPI_C_BOOL), TYPE(MPI_INT8_T), TYPE(MPI_INT16_T),
               TYPE(MPI_INT32_T), TYPE(MPI_INT64_T), TYPE(MPI_UINT8_T), TYPE(MPI_UINT16_T), TYPE(MPI_UINT32_T),
               TYPE(MPI_UINT64_T), TYPE(MPI_DOUBLE_COMPLEX), TYPE(MPI_C_DOUBLE_COMPLEX), TYPE(MPI_C_FLOAT_COMPLEX),
               TYPE(MPI_FLOAT_INT), TYPE(MPI_DOUBLE_INT), TYPE(MPI_LONG_INT), TYPE(MPI_2INT), TYPE(MPI_SHORT_INT),
               TYPE(MPI_LONG_DOUBLE_INT), TYPE(MPI_AINT), TYPE(MPI_OFFSET), TYPE(MPI_COUNT), TYPE(MPI_WCHAR),
               TYPE(MPI_PACKED)};
  for (unsigned i = 0; i < sizeof types / sizeof types[0]; ++i) {
    char name[MPI_MAX_OBJECT_NAME];
    int length = -1, type_size = -1;
    MPI_Aint lb = -1, extent = -1;
    MPI_Type_get_name(types[i].type, name, &length);
    MPI_Type_size(types[i].type, &type_size);
    MPI_Type_get_extent(types[i].type, &lb, &extent);
    expect(length == (int)strlen(name), "name length of %s", types[i].spelled);
    if (rank == 0) {
      say("%-24s name %-24s size %2d lb %ld extent %2ld", types[i].spelled, name, type_size, (long)lb, (long)extent);
    }
  }
}

static void derived_types(void) {
  MPI_Datatype triple, strided, pairs_of_strided;
  MPI_Type_contiguous(3, MPI_INT, &triple);
  MPI_Type_vector(3, 2, 4, MPI_DOUBLE, &strided); /* 3 blocks of 2 doubles, 4 apart */
  MPI_Type_commit(&triple);
  MPI_Type_commit(&strided);
  MPI_Type_contiguous(2, strided, &pairs_of_strided);
  MPI_Type_commit(&pairs_of_strided);
  int type_size;
  MPI_Aint lb, extent;
  MPI_Type_size(strided, &type_size);
  MPI_Type_get_extent(strided, &lb, &extent);
  say("vector(3,2,4,double): size %d extent %ld", type_size, (long)extent);
  MPI_Type_size(pairs_of_strided, &type_size);
  MPI_Type_get_extent(pairs_of_strided, &lb, &extent);
  say("contiguous(2, vector): size %d extent %ld", type_size, (long)extent);

  /* Bcast of two strided elements: only the blocks move. */
  double grid[20];
  for (int i = 0; i < 20; ++i) grid[i] = rank == 1 % size ? 100.0 + i : -(double)i;
  MPI_Bcast(grid, 1, pairs_of_strided, 1 % size, MPI_COMM_WORLD);
  char line[256];
  int used = 0;
  for (int i = 0; i < 20; ++i) used += snprintf(line + used, sizeof line - (size_t)used, " %g", grid[i]);
  say("bcast vector:%s", line);

  /* Predefined ops on derived types: MPI-3.1 allows them for types of one
   * basic type; Open MPI refuses (MPI_ERR_OP), so only chorus checks them,
   * and only a failure prints (the outputs must stay identical). */
#ifdef CHORUS_MPI
  for (int i = 0; i < 10; ++i) grid[i] = (double)(rank + i);
  double out[10];
  for (int i = 0; i < 10; ++i) out[i] = -1;
  MPI_Allreduce(grid, out, 1, strided, MPI_SUM, MPI_COMM_WORLD);
  int strided_ok = 1;
  for (int i = 0; i < 10; ++i) {
    int in_block = (i % 4) < 2;
    strided_ok &= out[i] == (in_block ? (double)(size * (size - 1) / 2 + size * i) : -1.0);
  }
  if (!strided_ok) say("FAILED: allreduce over a vector type");
  int triples_in[6] = {rank, rank + 1, rank + 2, 2 * rank, 2 * rank + 1, 2 * rank + 2}, triple_max[6];
  MPI_Allreduce(triples_in, triple_max, 2, triple, MPI_MAX, MPI_COMM_WORLD);
  if (triple_max[0] != size - 1 || triple_max[5] != 2 * size) say("FAILED: allreduce over a contiguous type");
#endif
  int triples[6] = {rank, rank + 1, rank + 2, 2 * rank, 2 * rank + 1, 2 * rank + 2};
  int ok = 1;

  /* Allgather into a strided receive type; gather with a contiguous one. */
  double mine[2] = {rank * 10.0, rank * 10.0 + 1}, gathered[8 * 4];
  for (int i = 0; i < 8 * 4; ++i) gathered[i] = -1;
  MPI_Datatype two_of_four;
  MPI_Type_vector(1, 2, 4, MPI_DOUBLE, &two_of_four); /* extent 2 doubles */
  MPI_Type_commit(&two_of_four);
  MPI_Allgather(mine, 2, MPI_DOUBLE, gathered, 1, two_of_four, MPI_COMM_WORLD);
  ok = 1;
  for (int r = 0; r < size; ++r) ok &= gathered[2 * r] == r * 10.0 && gathered[2 * r + 1] == r * 10.0 + 1;
  expect(ok, "allgather into a vector type");
  int all_triples[3 * 8];
  MPI_Gather(triples, 1, triple, all_triples, 3, MPI_INT, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    ok = 1;
    for (int r = 0; r < size; ++r) ok &= all_triples[3 * r] == r && all_triples[3 * r + 2] == r + 2;
    expect(ok, "gather of a contiguous type");
  }
  int exchange[2 * 3 * 8], exchanged[2 * 3 * 8];
  for (int i = 0; i < 3 * size; ++i) exchange[i] = rank * 1000 + i;
  MPI_Alltoall(exchange, 1, triple, exchanged, 3, MPI_INT, MPI_COMM_WORLD);
  ok = 1;
  for (int r = 0; r < size; ++r) ok &= exchanged[3 * r] == r * 1000 + 3 * rank;
  expect(ok, "alltoall of a contiguous type");

  /* Point-to-point: a strided message counts as 6 doubles on arrival. */
  if (size >= 2 && rank < 2) {
    double row[10];
    for (int i = 0; i < 10; ++i) row[i] = rank == 0 ? i + 0.5 : -1;
    if (rank == 0) {
      MPI_Send(row, 1, strided, 1, 3, MPI_COMM_WORLD);
      MPI_Send(row, 1, strided, 1, 4, MPI_COMM_WORLD);
    } else {
      double packed[6];
      MPI_Status status;
      int as_doubles = -1, as_vectors = -1, as_triples = -1;
      MPI_Recv(packed, 6, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD, &status);
      MPI_Get_count(&status, MPI_DOUBLE, &as_doubles);
      MPI_Get_count(&status, strided, &as_vectors);
      MPI_Get_count(&status, triple, &as_triples); /* 48 bytes are not whole triples of ints */
      expect(packed[0] == 0.5 && packed[2] == 4.5 && packed[5] == 9.5, "strided send received as doubles");
      say("strided message: %d doubles, %d vectors, triples undefined: %d", as_doubles, as_vectors,
          as_triples == MPI_UNDEFINED);
      MPI_Recv(row, 1, strided, 0, 4, MPI_COMM_WORLD, &status);
      expect(row[1] == 1.5 && row[2] == -1 && row[4] == 4.5, "strided send received strided");
    }
  }
  /* A type built from a freed one stays usable. */
  MPI_Type_free(&strided);
  expect(strided == MPI_DATATYPE_NULL, "type_free sets MPI_DATATYPE_NULL");
  for (int i = 0; i < 20; ++i) grid[i] = rank == 0 ? i : 0;
  MPI_Bcast(grid, 1, pairs_of_strided, 0, MPI_COMM_WORLD);
  /* Second element: 10 doubles on, blocks at 10, 14 and 18. */
  expect(grid[14] == 14 && grid[15] == 15 && grid[12] == (rank == 0 ? 12 : 0), "derived type after its base was freed");
  MPI_Type_free(&pairs_of_strided);
  MPI_Type_free(&triple);
  MPI_Type_free(&two_of_four);
}

static void integer_ops(void) {
  MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_LAND, MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
  const char* names[] = {"sum", "prod", "min", "max", "land", "lor", "lxor", "band", "bor", "bxor"};
  int in[4] = {rank + 1, rank == 0 ? 0 : 3, 6 << rank, -(rank + 2)};
  unsigned char bytes_in[2] = {(unsigned char)(0xf0 | rank), (unsigned char)(1u << rank)};
  for (int o = 0; o < 10; ++o) {
    int out[4];
    MPI_Allreduce(in, out, 4, MPI_INT, ops[o], MPI_COMM_WORLD);
    say("int %-4s: %d %d %d %d", names[o], out[0], out[1], out[2], out[3]);
    if (o >= 7) {
      unsigned char b[2], uc[2];
      MPI_Allreduce(bytes_in, b, 2, MPI_BYTE, ops[o], MPI_COMM_WORLD);
      MPI_Allreduce(bytes_in, uc, 2, MPI_UNSIGNED_CHAR, ops[o], MPI_COMM_WORLD);
      say("byte %s: %02x %02x, unsigned char: %02x %02x", names[o], b[0], b[1], uc[0], uc[1]);
    }
  }
  /* Fixed-width types. */
  int8_t i8 = (int8_t)(rank - 2), i8s;
  uint16_t u16 = (uint16_t)(60000 + rank), u16m;
  int64_t i64 = (int64_t)rank << 40, i64s;
  uint64_t u64 = UINT64_MAX - (uint64_t)rank, u64m;
  MPI_Allreduce(&i8, &i8s, 1, MPI_INT8_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&u16, &u16m, 1, MPI_UINT16_T, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&i64, &i64s, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&u64, &u64m, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  say("int8 sum %d, uint16 max %u, int64 sum %lld, uint64 min %llu", i8s, u16m, (long long)i64s,
      (unsigned long long)u64m);
  MPI_Aint aint = 1000 + rank, aint_sum;
  MPI_Allreduce(&aint, &aint_sum, 1, MPI_AINT, MPI_SUM, MPI_COMM_WORLD);
  expect(aint_sum == 1000 * size + size * (size - 1) / 2, "aint sum");
}

static void other_ops(void) {
  /* C _Bool: logical ops. */
  bool flags[2] = {rank != 1, rank == 0}, land[2], lor[2], lxor[2];
  MPI_Allreduce(flags, land, 2, MPI_C_BOOL, MPI_LAND, MPI_COMM_WORLD);
  MPI_Allreduce(flags, lor, 2, MPI_C_BOOL, MPI_LOR, MPI_COMM_WORLD);
  MPI_Allreduce(flags, lxor, 2, MPI_C_BOOL, MPI_LXOR, MPI_COMM_WORLD);
  say("bool land %d %d lor %d %d lxor %d %d", land[0], land[1], lor[0], lor[1], lxor[0], lxor[1]);

  /* long double: sum and max, also to a non-zero root. */
  long double ld = 0.5L * (rank + 1), ld_sum = 0, ld_max = 0;
  MPI_Allreduce(&ld, &ld_sum, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Reduce(&ld, &ld_max, 1, MPI_LONG_DOUBLE, MPI_MAX, size - 1, MPI_COMM_WORLD);
  expect(ld_sum == 0.25L * size * (size + 1), "long double sum");
  say("long double sum %.2Lf", ld_sum);
  if (rank == size - 1) say("long double max at root %.2Lf", ld_max);

  /* Complex: sum and product. */
  double _Complex z = (double)(rank + 1) + (double)rank * I, z_sum, z_prod;
  MPI_Allreduce(&z, &z_sum, 1, MPI_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&z, &z_prod, 1, MPI_C_DOUBLE_COMPLEX, MPI_PROD, MPI_COMM_WORLD);
  float _Complex fz = (float)rank - 1.0f * I, fz_sum;
  MPI_Allreduce(&fz, &fz_sum, 1, MPI_C_FLOAT_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
  say("complex sum %g%+gi prod %g%+gi float sum %g%+gi", creal(z_sum), cimag(z_sum), creal(z_prod), cimag(z_prod),
      crealf(fz_sum), cimagf(fz_sum));

  /* MINLOC / MAXLOC, ties resolved to the lower index. */
  struct {
    double value;
    int index;
  } d_in[2] = {{(double)(rank % 2), rank}, {(double)(rank * 3 % size), rank}}, d_min[2], d_max[2];
  MPI_Allreduce(d_in, d_min, 2, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
  MPI_Allreduce(d_in, d_max, 2, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  say("double_int minloc (%g,%d) (%g,%d) maxloc (%g,%d) (%g,%d)", d_min[0].value, d_min[0].index, d_min[1].value,
      d_min[1].index, d_max[0].value, d_max[0].index, d_max[1].value, d_max[1].index);
  expect(d_min[0].value == 0 && d_min[0].index == 0, "minloc tie goes to the lowest index");
  struct {
    int value;
    int index;
  } i_in = {10 - rank % 3, rank}, i_max = {0, 0};
  MPI_Reduce(&i_in, &i_max, 1, MPI_2INT, MPI_MAXLOC, 2 % size, MPI_COMM_WORLD);
  if (rank == 2 % size) say("2int maxloc at root: (%d,%d)", i_max.value, i_max.index);
  struct {
    float value;
    int index;
  } f_in = {(float)(rank - 1) * (float)(rank - 1), rank}, f_min;
  MPI_Allreduce(&f_in, &f_min, 1, MPI_FLOAT_INT, MPI_MINLOC, MPI_COMM_WORLD);
  struct {
    long value;
    int index;
  } l_in = {-(long)rank, 100 + rank}, l_max;
  MPI_Allreduce(&l_in, &l_max, 1, MPI_LONG_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  say("float_int minloc (%g,%d) long_int maxloc (%ld,%d)", f_min.value, f_min.index, l_max.value, l_max.index);
}

/* A commutative user op: element-wise maximum of absolute values. */
static void max_abs(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) {
    int x = a[i] < 0 ? -a[i] : a[i], y = b[i] < 0 ? -b[i] : b[i];
    b[i] = x > y ? x : y;
  }
}

/* A non-commutative one: digit strings. (v1, s1) . (v2, s2) = (v1 * s2 + v2,
 * s1 * s2), so rank r contributing digit r + 1 gives "123...". Elements are
 * two long longs, either contiguous or 16 bytes apart (g_strided_digits). */
static MPI_Datatype g_strided_digits;
static void concatenate(void* in, void* inout, int* len, MPI_Datatype* type) {
  const int stride = *type == g_strided_digits ? 3 : 2; /* in long longs */
  long long* a = in;
  long long* b = inout;
  for (int i = 0; i < *len; ++i) {
    long long* x = a + stride * i;
    long long* y = b + stride * i;
    long long scale_x = x[stride - 1], scale_y = y[stride - 1];
    y[0] = x[0] * scale_y + y[0];
    y[stride - 1] = scale_x * scale_y;
  }
}

static void user_ops(void) {
  MPI_Op abs_max, concat;
  MPI_Op_create(max_abs, 1, &abs_max);
  MPI_Op_create(concatenate, 0, &concat);
  int commutes[3] = {-1, -1, -1};
  MPI_Op_commutative(abs_max, &commutes[0]);
  MPI_Op_commutative(concat, &commutes[1]);
  MPI_Op_commutative(MPI_SUM, &commutes[2]);
  expect(commutes[0] == 1 && commutes[1] == 0 && commutes[2] == 1, "MPI_Op_commutative: %d %d %d", commutes[0],
         commutes[1], commutes[2]);
  say("op commutative: user %d, user non-commutative %d, MPI_SUM %d", commutes[0], commutes[1], commutes[2]);
  int values[3] = {rank - 3, 2 * rank, -7 * (rank % 2)}, result[3];
  MPI_Allreduce(values, result, 3, MPI_INT, abs_max, MPI_COMM_WORLD);
  say("user commutative allreduce: %d %d %d", result[0], result[1], result[2]);

  MPI_Datatype digits;
  MPI_Type_contiguous(2, MPI_LONG_LONG, &digits);
  MPI_Type_commit(&digits);
  MPI_Type_vector(2, 1, 2, MPI_LONG_LONG, &g_strided_digits);
  MPI_Type_commit(&g_strided_digits);
  long long expected = 0;
  for (int r = 0; r < size; ++r) expected = expected * 10 + r + 1;

  long long mine[2] = {rank + 1, 10}, all[2] = {0, 0};
  MPI_Allreduce(mine, all, 1, digits, concat, MPI_COMM_WORLD);
  expect(all[0] == expected, "non-commutative allreduce in rank order: %lld", all[0]);
  say("user non-commutative allreduce: %lld", all[0]);
  all[0] = 0;
  MPI_Reduce(mine, all, 1, digits, concat, size - 1, MPI_COMM_WORLD);
  if (rank == size - 1) {
    expect(all[0] == expected, "non-commutative reduce to the last rank");
    say("user non-commutative reduce at root: %lld", all[0]);
  }
  MPI_Scan(mine, all, 1, digits, concat, MPI_COMM_WORLD);
  say("user non-commutative scan: %lld", all[0]);
  all[0] = -1;
  MPI_Exscan(mine, all, 1, digits, concat, MPI_COMM_WORLD);
  if (rank > 0) say("user non-commutative exscan: %lld", all[0]);
  /* In place, and on the strided type (the function sees the memory layout). */
  long long inout[2] = {rank + 1, 10};
  MPI_Allreduce(MPI_IN_PLACE, inout, 1, digits, concat, MPI_COMM_WORLD);
  expect(inout[0] == expected, "non-commutative allreduce in place");
  long long strided_in[3] = {rank + 1, -5, 10}, strided_out[3] = {0, -9, 0};
  MPI_Allreduce(strided_in, strided_out, 1, g_strided_digits, concat, MPI_COMM_WORLD);
  expect(strided_out[0] == expected && strided_out[1] == -9, "non-commutative allreduce on a vector type");
  say("user op on a vector type: %lld (gap %lld)", strided_out[0], strided_out[1]);

  /* Reduce-scatter with a user op: block r of every rank combined in rank order. */
  long long blocks[2 * 8 * 2], block[2 * 2];
  for (int r = 0; r < size; ++r) {
    blocks[2 * r] = (rank + r) % 10;
    blocks[2 * r + 1] = 10;
  }
  MPI_Reduce_scatter_block(blocks, block, 1, digits, concat, MPI_COMM_WORLD);
  say("user reduce_scatter_block: %lld", block[0]);
  int counts[8];
  for (int r = 0; r < size; ++r) counts[r] = r == 0 ? 2 : 1;
  long long uneven[2 * 9];
  for (int i = 0; i < size + 1; ++i) {
    uneven[2 * i] = (rank + i) % 10;
    uneven[2 * i + 1] = 10;
  }
  MPI_Reduce_scatter(uneven, block, counts, digits, concat, MPI_COMM_WORLD);
  if (rank == 0) say("user reduce_scatter (2 elements): %lld %lld", block[0], block[2]);
  else say("user reduce_scatter: %lld", block[0]);

  MPI_Op_free(&abs_max);
  MPI_Op_free(&concat);
  expect(abs_max == MPI_OP_NULL && concat == MPI_OP_NULL, "op_free sets MPI_OP_NULL");
  MPI_Type_free(&digits);
  MPI_Type_free(&g_strided_digits);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 8) MPI_Abort(MPI_COMM_WORLD, 2);
  predefined_types();
  derived_types();
  integer_ops();
  other_ops();
  user_ops();
  int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("types_ops", failures);
  return failures == 0 ? 0 : 1;
}
