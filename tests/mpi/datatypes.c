/*
 * Derived datatypes with collectives and point-to-point: a struct built
 * from MPI_Get_address displacements and resized to the C struct's size
 * (bcast, gather, allgather, alltoall of arrays of it), an hvector column
 * resized to one double so an allgather of columns fills a matrix, an
 * indexed upper triangle, indexed_block, hindexed and hindexed_block
 * layouts, MPI_Type_dup of the struct in a ring of MPI_Sendrecv, names,
 * and the bounds every query reports (size, extent, true extent, their _x
 * forms). Every element is checked; what is printed is the same under
 * Open MPI.
 */
#include <stddef.h>

#include "report.h"

static int rank, size;

struct particle {
  int id;
  double position[3];
  char tag;
};

static struct particle make(int owner, int i) {
  struct particle p;
  memset(&p, 0, sizeof p);
  p.id = owner * 100 + i;
  for (int d = 0; d < 3; ++d) p.position[d] = owner + i * 0.5 + d * 0.25;
  p.tag = (char)('a' + (owner + i) % 26);
  return p;
}

static int same(const struct particle* a, const struct particle* b) {
  return a->id == b->id && a->position[0] == b->position[0] && a->position[1] == b->position[1] &&
         a->position[2] == b->position[2] && a->tag == b->tag;
}

static MPI_Datatype particle_type(void) {
  struct particle sample;
  memset(&sample, 0, sizeof sample);
  MPI_Aint base, displacements[3];
  MPI_Get_address(&sample, &base);
  MPI_Get_address(&sample.id, &displacements[0]);
  MPI_Get_address(&sample.position, &displacements[1]);
  MPI_Get_address(&sample.tag, &displacements[2]);
  for (int i = 0; i < 3; ++i) displacements[i] = MPI_Aint_diff(displacements[i], base);
  int lengths[3] = {1, 3, 1};
  MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR}, packed, resized;
  MPI_Type_create_struct(3, lengths, displacements, types, &packed);
  MPI_Type_create_resized(packed, 0, (MPI_Aint)sizeof(struct particle), &resized);
  MPI_Type_free(&packed);
  MPI_Type_commit(&resized);
  return resized;
}

static void structs(void) {
  enum { N = 5, MAXRANKS = 16 };
  MPI_Datatype particle = particle_type();
  int type_size = -1;
  MPI_Aint lb = -1, extent = -1, true_lb = -1, true_extent = -1;
  MPI_Type_size(particle, &type_size);
  MPI_Type_get_extent(particle, &lb, &extent);
  MPI_Type_get_true_extent(particle, &true_lb, &true_extent);
  MPI_Count size_x = -1, lb_x = -1, extent_x = -1, true_lb_x = -1, true_extent_x = -1;
  MPI_Type_size_x(particle, &size_x);
  MPI_Type_get_extent_x(particle, &lb_x, &extent_x);
  MPI_Type_get_true_extent_x(particle, &true_lb_x, &true_extent_x);
  const MPI_Aint want_true = (MPI_Aint)offsetof(struct particle, tag) + 1;
  expect(type_size == 29 && lb == 0 && extent == (MPI_Aint)sizeof(struct particle) && true_lb == 0 &&
             true_extent == want_true,
         "particle: size %d lb %ld extent %ld true lb %ld true extent %ld", type_size, (long)lb, (long)extent,
         (long)true_lb, (long)true_extent);
  expect(size_x == type_size && lb_x == lb && extent_x == extent && true_lb_x == true_lb &&
             true_extent_x == true_extent,
         "the _x queries agree");
  say("particle: size %d, extent %ld, true extent %ld", type_size, (long)extent, (long)true_extent);

  const int root = size > 1 ? 1 : 0;
  struct particle mine[N], bcast[N], gathered[N * MAXRANKS], everyone[N * MAXRANKS], sent[MAXRANKS], got[MAXRANKS];
  for (int i = 0; i < N; ++i) mine[i] = make(rank, i), bcast[i] = rank == root ? make(root, i + 10) : make(-1, 0);
  for (int j = 0; j < size; ++j) sent[j] = make(rank, 50 + j);
  memset(gathered, 0, sizeof gathered);
  memset(everyone, 0, sizeof everyone);
  MPI_Bcast(bcast, N, particle, root, MPI_COMM_WORLD);
  MPI_Gather(mine, N, particle, gathered, N, particle, root, MPI_COMM_WORLD);
  MPI_Allgather(mine, N, particle, everyone, N, particle, MPI_COMM_WORLD);
  MPI_Alltoall(sent, 1, particle, got, 1, particle, MPI_COMM_WORLD);
  int ok = 1;
  for (int i = 0; i < N; ++i) {
    struct particle want = make(root, i + 10);
    ok &= same(&bcast[i], &want);
  }
  for (int r = 0; r < size; ++r) {
    for (int i = 0; i < N; ++i) {
      struct particle want = make(r, i);
      ok &= same(&everyone[r * N + i], &want);
      if (rank == root) ok &= same(&gathered[r * N + i], &want);
    }
    struct particle want = make(r, 50 + rank);
    ok &= same(&got[r], &want);
  }
  expect(ok, "bcast, gather, allgather and alltoall of particles");
  say("particles: bcast id %d tag %c, allgather last id %d, alltoall from rank 0 id %d", bcast[N - 1].id,
      bcast[N - 1].tag, everyone[size * N - 1].id, got[0].id);

  /* A dup travels like the original, around a ring. */
  MPI_Datatype copy;
  MPI_Type_dup(particle, &copy);
  MPI_Type_set_name(copy, "particle copy");
  char name[MPI_MAX_OBJECT_NAME];
  int length = 0;
  MPI_Type_get_name(copy, name, &length);
  expect(strcmp(name, "particle copy") == 0 && length == 13, "type name \"%s\"", name);
  struct particle from_left;
  MPI_Sendrecv(&mine[0], 1, copy, (rank + 1) % size, 7, &from_left, 1, copy, (rank + size - 1) % size, 7,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  struct particle want = make((rank + size - 1) % size, 0);
  expect(same(&from_left, &want), "sendrecv of a dup'd particle");
  say("ring of a dup: from the left id %d", from_left.id);
  MPI_Type_free(&copy);
  MPI_Type_free(&particle);
}

/* Columns of a row-major matrix: rank r owns column r; an allgather of one
 * column type resized to one double puts every column in place. */
static void columns(void) {
  enum { ROWS = 4, MAXRANKS = 16 };
  double column[ROWS], matrix[ROWS][MAXRANKS];
  for (int i = 0; i < ROWS; ++i) column[i] = rank * 10.0 + i;
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < MAXRANKS; ++j) matrix[i][j] = -1;
  MPI_Datatype strided, one_column;
  MPI_Type_create_hvector(ROWS, 1, (MPI_Aint)(sizeof(double) * (size_t)size), MPI_DOUBLE, &strided);
  MPI_Type_create_resized(strided, 0, (MPI_Aint)sizeof(double), &one_column);
  MPI_Type_commit(&one_column);
  /* The matrix is read with `size` columns per row: a compact ROWS x size block. */
  double* compact = &matrix[0][0];
  MPI_Allgather(column, ROWS, MPI_DOUBLE, compact, 1, one_column, MPI_COMM_WORLD);
  int ok = 1;
  for (int i = 0; i < ROWS; ++i)
    for (int j = 0; j < size; ++j) ok &= compact[i * size + j] == j * 10.0 + i;
  MPI_Aint lb, extent;
  MPI_Type_get_extent(one_column, &lb, &extent);
  expect(ok && extent == (MPI_Aint)sizeof(double), "allgather of columns into a row-major matrix");
  say("columns: row 1 ends %g, extent %ld", compact[1 * size + size - 1], (long)extent);
  MPI_Type_free(&strided);
  MPI_Type_free(&one_column);
}

/* Indexed layouts, broadcast from rank 0. */
static void indexed(void) {
  enum { N = 4 };
  int triangle[N][N], lengths[N], displs[N];
  for (int i = 0; i < N; ++i) {
    lengths[i] = N - i;
    displs[i] = i * N + i;
    for (int j = 0; j < N; ++j) triangle[i][j] = rank == 0 ? 100 + i * N + j : -1;
  }
  MPI_Datatype upper, blocks, hblocks, hindexed;
  MPI_Type_indexed(N, lengths, displs, MPI_INT, &upper);
  int block_displs[2] = {0, 10};
  MPI_Type_create_indexed_block(2, 3, block_displs, MPI_INT, &blocks);
  MPI_Aint byte_displs[2] = {0, 10 * (MPI_Aint)sizeof(int)};
  MPI_Type_create_hindexed_block(2, 3, byte_displs, MPI_INT, &hblocks);
  int h_lengths[2] = {2, 1};
  MPI_Type_create_hindexed(2, h_lengths, byte_displs, MPI_INT, &hindexed);
  MPI_Type_commit(&upper);
  MPI_Type_commit(&blocks);
  MPI_Type_commit(&hblocks);
  MPI_Type_commit(&hindexed);
  MPI_Bcast(triangle, 1, upper, 0, MPI_COMM_WORLD);
  int a[16], b[16], c[16];
  for (int i = 0; i < 16; ++i) a[i] = b[i] = c[i] = rank == 0 ? 200 + i : -1;
  MPI_Bcast(a, 1, blocks, 0, MPI_COMM_WORLD);
  MPI_Bcast(b, 1, hblocks, 0, MPI_COMM_WORLD);
  MPI_Bcast(c, 1, hindexed, 0, MPI_COMM_WORLD);
  int ok = 1;
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) ok &= triangle[i][j] == (j >= i || rank == 0 ? 100 + i * N + j : -1);
  for (int i = 0; i < 16; ++i) {
    const int in_blocks = i < 3 || (i >= 10 && i < 13);
    const int in_h = i < 2 || i == 10;
    ok &= a[i] == (in_blocks || rank == 0 ? 200 + i : -1) && b[i] == a[i];
    ok &= c[i] == (in_h || rank == 0 ? 200 + i : -1);
  }
  int sizes[4];
  MPI_Aint extents[4], lb;
  MPI_Datatype all[4] = {upper, blocks, hblocks, hindexed};
  for (int t = 0; t < 4; ++t) {
    MPI_Type_size(all[t], &sizes[t]);
    MPI_Type_get_extent(all[t], &lb, &extents[t]);
  }
  expect(ok, "indexed, indexed_block, hindexed_block and hindexed broadcasts");
  say("indexed: sizes %d %d %d %d, extents %ld %ld %ld %ld", sizes[0], sizes[1], sizes[2], sizes[3], (long)extents[0],
      (long)extents[1], (long)extents[2], (long)extents[3]);
  for (int t = 0; t < 4; ++t) MPI_Type_free(&all[t]);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "--help") == 0) {
    if (rank == 0) printf("usage: datatypes (under mpirun/chorusrun, 1..16 ranks): checks derived datatypes\n");
    MPI_Finalize();
    return 0;
  }
  if (size > 16) {
    if (rank == 0) printf("FAILED: datatypes runs on at most 16 ranks\n");
    MPI_Finalize();
    return 1;
  }
  structs();
  columns();
  indexed();
  int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("datatypes", failures);
  return failures == 0 ? 0 : 1;
}
