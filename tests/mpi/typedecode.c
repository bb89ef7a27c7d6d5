/*
 * Datatype decoding and the distributed-array type: MPI_Type_get_envelope
 * and MPI_Type_get_contents of every constructor (contiguous, vector,
 * hvector, indexed, hindexed, indexed_block, hindexed_block, struct,
 * subarray, darray, resized, dup), decoded recursively: a derived argument
 * comes back as a new type, whose size and extent are the original's and
 * which is freed; one whose handle was freed before decoding still comes
 * back. A struct's extent rounds up to its alignment (hvector too).
 * MPI_Type_create_darray in BLOCK, CYCLIC(k), NONE, default and given
 * arguments, C and Fortran order, a process that holds nothing: each
 * rank's elements of a global array, packed, checked against an ownership
 * rule computed here element by element. What rank 0 prints is the same
 * under Open MPI; every rank checks.
 */
#include "report.h"

static int rank, size;

static const char* combiner_name(int combiner) {
  switch (combiner) {
    case MPI_COMBINER_NAMED: return "NAMED";
    case MPI_COMBINER_DUP: return "DUP";
    case MPI_COMBINER_CONTIGUOUS: return "CONTIGUOUS";
    case MPI_COMBINER_VECTOR: return "VECTOR";
    case MPI_COMBINER_HVECTOR: return "HVECTOR";
    case MPI_COMBINER_INDEXED: return "INDEXED";
    case MPI_COMBINER_HINDEXED: return "HINDEXED";
    case MPI_COMBINER_INDEXED_BLOCK: return "INDEXED_BLOCK";
    case MPI_COMBINER_HINDEXED_BLOCK: return "HINDEXED_BLOCK";
    case MPI_COMBINER_STRUCT: return "STRUCT";
    case MPI_COMBINER_SUBARRAY: return "SUBARRAY";
    case MPI_COMBINER_DARRAY: return "DARRAY";
    case MPI_COMBINER_RESIZED: return "RESIZED";
    default: return "another combiner";
  }
}

static void say0(const char* text) {
  if (rank == 0) say("%s", text);
}

/* Appends the decoding of `type` to `line`: a name, or COMBINER(ints; addresses; types). */
static void decode(MPI_Datatype type, char* line, size_t room, int* used) {
  int ni = -1, na = -1, nd = -1, combiner = -1;
  int code = MPI_Type_get_envelope(type, &ni, &na, &nd, &combiner);
  expect(code == MPI_SUCCESS, "get_envelope failed");
  if (combiner == MPI_COMBINER_NAMED) {
    char name[MPI_MAX_OBJECT_NAME];
    int length = 0;
    MPI_Type_get_name(type, name, &length);
    expect(ni == 0 && na == 0 && nd == 0, "a named type has %d %d %d arguments", ni, na, nd);
    *used += snprintf(line + *used, room - (size_t)*used, "%s", name);
    return;
  }
  int integers[64];
  MPI_Aint addresses[16];
  MPI_Datatype types[16];
  expect(ni <= 64 && na <= 16 && nd <= 16, "envelope too large: %d %d %d", ni, na, nd);
  if (ni > 64 || na > 16 || nd > 16) return;
  code = MPI_Type_get_contents(type, ni, na, nd, integers, addresses, types);
  expect(code == MPI_SUCCESS, "get_contents failed");
  *used += snprintf(line + *used, room - (size_t)*used, "%s(", combiner_name(combiner));
  for (int i = 0; i < ni; ++i) *used += snprintf(line + *used, room - (size_t)*used, i ? ",%d" : "%d", integers[i]);
  *used += snprintf(line + *used, room - (size_t)*used, ";");
  for (int i = 0; i < na; ++i) {
    *used += snprintf(line + *used, room - (size_t)*used, i ? ",%ld" : "%ld", (long)addresses[i]);
  }
  *used += snprintf(line + *used, room - (size_t)*used, ";");
  for (int i = 0; i < nd; ++i) {
    if (i) *used += snprintf(line + *used, room - (size_t)*used, ",");
    decode(types[i], line, room, used);
    int ti = 0, ta = 0, td = 0, tc = 0;
    MPI_Type_get_envelope(types[i], &ti, &ta, &td, &tc);
    if (tc != MPI_COMBINER_NAMED) {
      code = MPI_Type_free(&types[i]); /* a new type, ours to free */
      expect(code == MPI_SUCCESS && types[i] == MPI_DATATYPE_NULL, "freeing a decoded type");
    }
  }
  *used += snprintf(line + *used, room - (size_t)*used, ")");
}

static void show(const char* label, MPI_Datatype type) {
  char line[4096];
  int used = snprintf(line, sizeof line, "%s: ", label);
  decode(type, line, sizeof line, &used);
  int type_size = -1;
  MPI_Aint lb = -1, extent = -1;
  MPI_Type_size(type, &type_size);
  MPI_Type_get_extent(type, &lb, &extent);
  used += snprintf(line + used, sizeof line - (size_t)used, " size %d lb %ld extent %ld", type_size, (long)lb,
                   (long)extent);
  say0(line);
}

/* A decoded derived argument is a type of its own with the original's size and extent. */
static void decoded_copy(MPI_Datatype outer, MPI_Datatype original, const char* label) {
  int ni, na, nd, combiner;
  MPI_Type_get_envelope(outer, &ni, &na, &nd, &combiner);
  int integers[16];
  MPI_Aint addresses[16];
  MPI_Datatype types[16];
  /* Exact counts: Open MPI 4.1 reads array_of_datatypes up to max_datatypes. */
  MPI_Type_get_contents(outer, ni, na, nd, integers, addresses, types);
  MPI_Datatype inner = types[nd - 1];
  int s1 = -1, s2 = -2;
  MPI_Aint lb1, lb2, e1, e2;
  MPI_Type_size(inner, &s1);
  MPI_Type_get_extent(inner, &lb1, &e1);
  if (original != MPI_DATATYPE_NULL) {
    MPI_Type_size(original, &s2);
    MPI_Type_get_extent(original, &lb2, &e2);
    expect(s1 == s2 && lb1 == lb2 && e1 == e2, "%s: the decoded type differs: size %d/%d extent %ld/%ld", label, s1,
           s2, (long)e1, (long)e2);
  }
  expect(inner != original, "%s: a derived argument comes back as a new handle", label);
  /* Usable once committed: packs as the original would. */
  MPI_Type_commit(&inner);
  int position = 0;
  char packed[256], data[256];
  for (int i = 0; i < 256; ++i) data[i] = (char)i;
  const int code = MPI_Pack(data, 1, inner, packed, sizeof packed, &position, MPI_COMM_SELF);
  expect(code == MPI_SUCCESS && position == s1, "%s: packing the decoded type: %d bytes", label, position);
  MPI_Type_free(&inner);
}

static void constructors(void) {
  show("int", MPI_INT);
  MPI_Datatype contiguous, vector, hvector, indexed, hindexed, iblock, hiblock, strct, subarray, resized, dup;
  MPI_Type_contiguous(3, MPI_INT, &contiguous);
  show("contiguous", contiguous);
  MPI_Type_vector(2, 3, 4, MPI_DOUBLE, &vector);
  show("vector", vector);
  MPI_Type_create_hvector(2, 1, 100, vector, &hvector);
  show("hvector", hvector);
  decoded_copy(hvector, vector, "hvector");
  const int lengths[3] = {1, 2, 1}, displs[3] = {0, 3, 7};
  MPI_Type_indexed(3, lengths, displs, MPI_INT, &indexed);
  show("indexed", indexed);
  const int hlengths[2] = {2, 1};
  const MPI_Aint hdispls[2] = {0, 16};
  MPI_Type_create_hindexed(2, hlengths, hdispls, MPI_SHORT, &hindexed);
  show("hindexed", hindexed);
  const int bdispls[3] = {0, 4, 9};
  MPI_Type_create_indexed_block(3, 2, bdispls, MPI_FLOAT, &iblock);
  show("indexed_block", iblock);
  const MPI_Aint hbdispls[2] = {8, 40};
  MPI_Type_create_hindexed_block(2, 1, hbdispls, contiguous, &hiblock);
  show("hindexed_block", hiblock);
  const int slengths[3] = {1, 2, 1};
  const MPI_Aint sdispls[3] = {0, 8, 24};
  const MPI_Datatype stypes[3] = {MPI_INT, MPI_DOUBLE, indexed};
  MPI_Type_create_struct(3, slengths, sdispls, stypes, &strct);
  show("struct", strct);
  decoded_copy(strct, indexed, "struct");
  /* The extent rounds up to the alignment of the double: 16, not 9. */
  MPI_Datatype padded;
  const int plengths[2] = {1, 1};
  const MPI_Aint pdispls[2] = {0, 8};
  const MPI_Datatype ptypes[2] = {MPI_DOUBLE, MPI_CHAR};
  MPI_Type_create_struct(2, plengths, pdispls, ptypes, &padded);
  show("struct of a double and a char", padded);
  MPI_Type_free(&padded);
  const int sizes[2] = {4, 5}, subsizes[2] = {2, 3}, starts[2] = {1, 1};
  MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_INT, &subarray);
  show("subarray", subarray);
  MPI_Type_create_resized(MPI_INT, -4, 16, &resized);
  show("resized", resized);
  MPI_Type_dup(strct, &dup);
  show("dup", dup);

  /* The argument's handle freed first: the decoding still has it. */
  MPI_Datatype inner, outer;
  MPI_Type_vector(3, 1, 2, MPI_INT, &inner);
  MPI_Type_contiguous(2, inner, &outer);
  MPI_Type_free(&inner);
  show("contiguous of a freed vector", outer);
  decoded_copy(outer, MPI_DATATYPE_NULL, "freed");
  MPI_Type_free(&outer);

  /* Contents of a named type are refused. */
  int integers[1];
  MPI_Aint addresses[1];
  MPI_Datatype types[1];
  const int code = MPI_Type_get_contents(MPI_INT, 1, 1, 1, integers, addresses, types);
  expect(code != MPI_SUCCESS, "get_contents of MPI_INT must fail");
  say0(code != MPI_SUCCESS ? "get_contents of MPI_INT: refused" : "get_contents of MPI_INT: accepted");

  MPI_Datatype all[] = {contiguous, vector, hvector, indexed, hindexed, iblock, hiblock, strct, subarray, resized, dup};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) MPI_Type_free(&all[i]);
}

/* Whether process coordinate `c` of `p` holds index `i` of `g` (MPI-3.1 4.1.4). */
static int holds(int i, int g, int distrib, int darg, int p, int c) {
  if (distrib == MPI_DISTRIBUTE_NONE) return 1;
  if (distrib == MPI_DISTRIBUTE_BLOCK) {
    const int block = darg == MPI_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : darg;
    return i / block == c;
  }
  const int block = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
  return (i / block) % p == c;
}

/* Packs every process' part of an array whose element at linear memory
 * index m is m, and checks it holds exactly the expected indices in order. */
static void darray(const char* label, int ndims, const int gsizes[], const int distribs[], const int dargs[],
                   const int psizes[], int order) {
  int procs = 1, total = 1;
  for (int d = 0; d < ndims; ++d) procs *= psizes[d], total *= gsizes[d];
  int* global = malloc(sizeof(int) * (size_t)total);
  int* packed = malloc(sizeof(int) * (size_t)total + 1);
  int* expected = malloc(sizeof(int) * (size_t)total + 1);
  for (int m = 0; m < total; ++m) global[m] = m;
  for (int r = 0; r < procs; ++r) {
    MPI_Datatype type;
    int code = MPI_Type_create_darray(procs, r, ndims, gsizes, distribs, dargs, psizes, order, MPI_INT, &type);
    expect(code == MPI_SUCCESS, "%s: darray of rank %d", label, r);
    if (code != MPI_SUCCESS) continue;
    MPI_Type_commit(&type);
    int coords[8], rest = r;
    for (int d = ndims - 1; d >= 0; --d) coords[d] = rest % psizes[d], rest /= psizes[d];
    /* Expected: walk the array in memory order (row-major for C, column-major for Fortran). */
    int n = 0;
    for (int m = 0; m < total; ++m) {
      int index[8], left = m, mine = 1;
      if (order == MPI_ORDER_C) {
        for (int d = ndims - 1; d >= 0; --d) index[d] = left % gsizes[d], left /= gsizes[d];
      } else {
        for (int d = 0; d < ndims; ++d) index[d] = left % gsizes[d], left /= gsizes[d];
      }
      for (int d = 0; d < ndims; ++d) mine &= holds(index[d], gsizes[d], distribs[d], dargs[d], psizes[d], coords[d]);
      if (mine) expected[n++] = m;
    }
    int type_size = -1, position = 0;
    MPI_Aint lb = -1, extent = -1;
    MPI_Type_size(type, &type_size);
    MPI_Type_get_extent(type, &lb, &extent);
    expect(type_size == n * (int)sizeof(int) && lb == 0 && extent == (MPI_Aint)total * (MPI_Aint)sizeof(int),
           "%s rank %d: size %d lb %ld extent %ld, want %d elements", label, r, type_size, (long)lb, (long)extent, n);
    code = MPI_Pack(global, 1, type, packed, (int)sizeof(int) * total, &position, MPI_COMM_SELF);
    expect(code == MPI_SUCCESS && position == type_size, "%s rank %d: pack", label, r);
    expect(memcmp(packed, expected, sizeof(int) * (size_t)n) == 0, "%s rank %d: the elements differ", label, r);
    char line[4096];
    int used = snprintf(line, sizeof line, "%s rank %d of %d: size %d extent %ld:", label, r, procs, type_size,
                        (long)extent);
    for (int i = 0; i < type_size / (int)sizeof(int); ++i) {
      used += snprintf(line + used, sizeof line - (size_t)used, " %d", packed[i]);
    }
    if (type_size == 0) used += snprintf(line + used, sizeof line - (size_t)used, " -");
    say0(line);
    if (r == procs - 1) {
      used = snprintf(line, sizeof line, "%s decoded: ", label);
      decode(type, line, sizeof line, &used);
      say0(line);
    }
    MPI_Type_free(&type);
  }
  free(global);
  free(packed);
  free(expected);
}

static void darrays(void) {
  const int dflt = MPI_DISTRIBUTE_DFLT_DARG;
  {
    const int g[2] = {4, 6}, dist[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC}, darg[2] = {dflt, 2},
              p[2] = {2, 2};
    darray("block x cyclic(2) C", 2, g, dist, darg, p, MPI_ORDER_C);
    darray("block x cyclic(2) Fortran", 2, g, dist, darg, p, MPI_ORDER_FORTRAN);
  }
  {
    const int g[1] = {10}, dist[1] = {MPI_DISTRIBUTE_CYCLIC}, darg[1] = {dflt}, p[1] = {3};
    darray("cyclic", 1, g, dist, darg, p, MPI_ORDER_C);
  }
  {
    const int g[1] = {10}, dist[1] = {MPI_DISTRIBUTE_BLOCK}, darg[1] = {4}, p[1] = {3};
    darray("block(4)", 1, g, dist, darg, p, MPI_ORDER_C);
  }
  {
    const int g[1] = {9}, dist[1] = {MPI_DISTRIBUTE_BLOCK}, darg[1] = {5}, p[1] = {3};
    darray("block(5), the last empty", 1, g, dist, darg, p, MPI_ORDER_C);
  }
  {
    const int g[3] = {3, 4, 5}, dist[3] = {MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC},
              darg[3] = {dflt, dflt, 2}, p[3] = {1, 3, 2};
    darray("none x block x cyclic(2) C", 3, g, dist, darg, p, MPI_ORDER_C);
    darray("none x block x cyclic(2) Fortran", 3, g, dist, darg, p, MPI_ORDER_FORTRAN);
  }
  /* A grid that does not hold `size` processes is refused. */
  const int g[1] = {8}, dist[1] = {MPI_DISTRIBUTE_BLOCK}, darg[1] = {dflt}, p[1] = {3};
  MPI_Datatype type = MPI_DATATYPE_NULL;
  const int code = MPI_Type_create_darray(4, 0, 1, g, dist, darg, p, MPI_ORDER_C, MPI_INT, &type);
  expect(code != MPI_SUCCESS, "a 3-process grid for 4 processes must be refused");
  say0(code != MPI_SUCCESS ? "darray of a grid of the wrong size: refused" : "darray of a grid of the wrong size: accepted");
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  constructors();
  darrays();

  const int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("typedecode", failures);
  return failures == 0 ? 0 : 1;
}
