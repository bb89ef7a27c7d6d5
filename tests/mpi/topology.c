/*
 * Cartesian process topologies: MPI_Dims_create (free and constrained
 * dimensions, and a product that does not divide), MPI_Cart_create (grids
 * of every rank and smaller ones, periodic and not, 1 to 3 dimensions),
 * MPI_Cart_get/coords/rank/shift/sub/map, MPI_Cartdim_get, MPI_Topo_test,
 * MPI_Comm_dup of a Cartesian communicator, a halo exchange by
 * MPI_Sendrecv along every dimension, and the neighbourhood collectives
 * MPI_Neighbor_allgather/alltoall (MPI_INT, and a strided vector type).
 * Ranks are not reordered (reorder = 0), so the printed coordinates and
 * neighbours are the same under Open MPI and chorus. Every result is
 * checked and printed.
 */
#include "report.h"

static int world_rank, world_size;

static void dims_create(void) {
  if (world_rank != 0) return;
  char line[256];
  for (int ndims = 1; ndims <= 4; ++ndims) {
    int used = snprintf(line, sizeof line, "dims_create ndims %d:", ndims), pending = 0;
    for (int nnodes = 1; nnodes <= 30; ++nnodes) {
      int dims[4] = {0, 0, 0, 0};
      const int code = MPI_Dims_create(nnodes, ndims, dims);
      int product = 1, ordered = 1;
      for (int i = 0; i < ndims; ++i) product *= dims[i], ordered &= i == 0 || dims[i] <= dims[i - 1];
      expect(code == MPI_SUCCESS && product == nnodes && ordered, "dims_create(%d, %d)", nnodes, ndims);
      used += snprintf(line + used, sizeof line - (size_t)used, " %d=", nnodes);
      pending = 1;
      for (int i = 0; i < ndims; ++i) used += snprintf(line + used, sizeof line - (size_t)used, i ? "x%d" : "%d", dims[i]);
      if (used > 180) {
        say("%s", line);
        used = snprintf(line, sizeof line, "dims_create ndims %d (cont.):", ndims);
        pending = 0;
      }
    }
    if (pending) say("%s", line);
  }
  /* Larger counts and given dimensions. */
  const struct {
    int nnodes, ndims, dims[4];
  } cases[] = {{72, 3, {0, 0, 0, 0}},  {360, 4, {0, 0, 0, 0}}, {1024, 3, {0, 0, 0, 0}}, {97, 2, {0, 0, 0, 0}},
               {12, 3, {0, 3, 0, 0}},  {16, 3, {2, 0, 0, 0}},  {24, 2, {0, 4, 0, 0}},  {6, 2, {2, 3, 0, 0}},
               {210, 4, {0, 0, 0, 0}}, {48, 4, {0, 0, 2, 0}}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    int dims[4];
    memcpy(dims, cases[c].dims, sizeof dims);
    const int code = MPI_Dims_create(cases[c].nnodes, cases[c].ndims, dims);
    int product = 1;
    for (int i = 0; i < cases[c].ndims; ++i) product *= dims[i];
    expect(code == MPI_SUCCESS && product == cases[c].nnodes, "dims_create case %zu", c);
    say("dims_create(%d, %d, given %d,%d,%d,%d) -> %d,%d,%d,%d", cases[c].nnodes, cases[c].ndims, cases[c].dims[0],
        cases[c].dims[1], cases[c].dims[2], cases[c].dims[3], cases[c].ndims > 0 ? dims[0] : 0,
        cases[c].ndims > 1 ? dims[1] : 0, cases[c].ndims > 2 ? dims[2] : 0, cases[c].ndims > 3 ? dims[3] : 0);
  }
  /* 10 nodes cannot have a dimension of 3. */
  int bad[2] = {3, 0};
  const int code = MPI_Dims_create(10, 2, bad);
  expect(code != MPI_SUCCESS, "dims_create(10, {3, 0}) must fail");
  say("dims_create(10, {3,0}): %s", report_class_name(code));
}

/* Every value the topology gives this rank, checked against arithmetic on
 * the coordinates, and printed. */
static void describe(MPI_Comm cart, const char* label, int ndims, const int dims[], const int periods[]) {
  int rank, size, status = -1, got_ndims = -1;
  MPI_Comm_rank(cart, &rank);
  MPI_Comm_size(cart, &size);
  MPI_Topo_test(cart, &status);
  MPI_Cartdim_get(cart, &got_ndims);
  expect(status == MPI_CART && got_ndims == ndims, "%s: topo_test %d, cartdim %d", label, status, got_ndims);
  int got_dims[3] = {0}, got_periods[3] = {0}, coords[3] = {0}, coords2[3] = {0};
  MPI_Cart_get(cart, 3, got_dims, got_periods, coords);
  MPI_Cart_coords(cart, rank, 3, coords2);
  int expected = 0, same = 1;
  for (int i = 0; i < ndims; ++i) {
    expected = expected * dims[i] + coords[i];
    same &= got_dims[i] == dims[i] && (got_periods[i] != 0) == (periods[i] != 0) && coords2[i] == coords[i];
  }
  expect(same && expected == rank, "%s: cart_get and cart_coords disagree with rank %d", label, rank);
  int back = -1;
  MPI_Cart_rank(cart, coords, &back);
  expect(back == rank, "%s: cart_rank of my coordinates is %d, not %d", label, back, rank);
  char line[256];
  int used = snprintf(line, sizeof line, "%s: rank %d of %d at (", label, rank, size);
  for (int i = 0; i < ndims; ++i) used += snprintf(line + used, sizeof line - (size_t)used, i ? ",%d" : "%d", coords[i]);
  used += snprintf(line + used, sizeof line - (size_t)used, ") shifts");
  for (int d = 0; d < ndims; ++d) {
    const int disps[] = {1, -1, 2};
    for (int k = 0; k < 3; ++k) {
      int source = -7, dest = -7;
      MPI_Cart_shift(cart, d, disps[k], &source, &dest);
      /* The same neighbours by coordinate arithmetic. */
      int c[3];
      memcpy(c, coords, sizeof c);
      c[d] = coords[d] + disps[k];
      int want_dest = MPI_PROC_NULL, want_source = MPI_PROC_NULL;
      if (periods[d] || (c[d] >= 0 && c[d] < dims[d])) MPI_Cart_rank(cart, c, &want_dest);
      c[d] = coords[d] - disps[k];
      if (periods[d] || (c[d] >= 0 && c[d] < dims[d])) MPI_Cart_rank(cart, c, &want_source);
      expect(source == want_source && dest == want_dest, "%s: shift(%d, %d) gave %d,%d, wanted %d,%d", label, d,
             disps[k], source, dest, want_source, want_dest);
      used += snprintf(line + used, sizeof line - (size_t)used, " d%d%+d:%d>%d", d, disps[k], source, dest);
    }
  }
  say("%s", line);

  /* A halo exchange along each dimension: what arrives is the source's rank. */
  for (int d = 0; d < ndims; ++d) {
    int source, dest, incoming = -5;
    MPI_Cart_shift(cart, d, 1, &source, &dest);
    MPI_Sendrecv(&rank, 1, MPI_INT, dest, 40 + d, &incoming, 1, MPI_INT, source, 40 + d, cart, MPI_STATUS_IGNORE);
    expect(incoming == (source == MPI_PROC_NULL ? -5 : source), "%s: halo along %d got %d from %d", label, d,
           incoming, source);
  }

  /* Neighbourhood collectives: block k from (and to) neighbour k. */
  int neighbours[6], count = 0;
  for (int d = 0; d < ndims; ++d) {
    MPI_Cart_shift(cart, d, 1, &neighbours[2 * d], &neighbours[2 * d + 1]);
    count += 2;
  }
  int mine[2] = {rank * 10, rank * 10 + 1}, gathered[12], sent[12], exchanged[12];
  for (int i = 0; i < 12; ++i) gathered[i] = -1, exchanged[i] = -1, sent[i] = rank * 100 + i;
  int code = MPI_Neighbor_allgather(mine, 2, MPI_INT, gathered, 2, MPI_INT, cart);
  expect(code == MPI_SUCCESS, "%s: neighbor_allgather: %s", label, report_class_name(code));
  code = MPI_Neighbor_alltoall(sent, 2, MPI_INT, exchanged, 2, MPI_INT, cart);
  expect(code == MPI_SUCCESS, "%s: neighbor_alltoall: %s", label, report_class_name(code));
  used = snprintf(line, sizeof line, "%s: rank %d neighbours", label, rank);
  for (int k = 0; k < count; ++k) {
    const int from = neighbours[k];
    /* What neighbour k sent toward this rank: its block for the opposite side. */
    const int opposite = k ^ 1;
    const int want0 = from == MPI_PROC_NULL ? -1 : from * 10, want1 = from == MPI_PROC_NULL ? -1 : from * 10 + 1;
    const int wanta = from == MPI_PROC_NULL ? -1 : from * 100 + 2 * opposite;
    const int wantb = from == MPI_PROC_NULL ? -1 : from * 100 + 2 * opposite + 1;
    expect(gathered[2 * k] == want0 && gathered[2 * k + 1] == want1, "%s: allgather block %d: %d,%d", label, k,
           gathered[2 * k], gathered[2 * k + 1]);
    expect(exchanged[2 * k] == wanta && exchanged[2 * k + 1] == wantb, "%s: alltoall block %d: %d,%d", label, k,
           exchanged[2 * k], exchanged[2 * k + 1]);
    used += snprintf(line + used, sizeof line - (size_t)used, " %d[%d,%d|%d,%d]", from, gathered[2 * k],
                     gathered[2 * k + 1], exchanged[2 * k], exchanged[2 * k + 1]);
  }
  say("%s", line);

  /* A strided type on both sides: every other int of 4. */
  MPI_Datatype every_other;
  MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  int strided_in[3] = {rank, -9, rank + 1000}, strided_out[6 * 3 + 1];
  for (int i = 0; i < 19; ++i) strided_out[i] = -3;
  MPI_Aint lb, extent;
  MPI_Type_get_extent(every_other, &lb, &extent);
  code = MPI_Neighbor_allgather(strided_in, 1, every_other, strided_out, 1, every_other, cart);
  expect(code == MPI_SUCCESS, "%s: strided neighbor_allgather: %s", label, report_class_name(code));
  const int stride = (int)(extent / (MPI_Aint)sizeof(int));
  for (int k = 0; k < count; ++k) {
    const int from = neighbours[k];
    const int* block = strided_out + k * stride;
    const int ok = from == MPI_PROC_NULL ? block[0] == -3 && block[2] == -3 : block[0] == from && block[2] == from + 1000;
    expect(ok && block[1] == -3, "%s: strided block %d from %d: %d,%d,%d", label, k, from, block[0], block[1], block[2]);
  }
  MPI_Type_free(&every_other);

  /* The v-forms: gaps between the blocks, and a count per direction (a
   * block sent down is 1 int, up 2: so one from below is 2, from above 1). */
  int counts2[6], gaps[6], vgathered[18];
  for (int i = 0; i < 18; ++i) vgathered[i] = -1;
  for (int k = 0; k < count; ++k) counts2[k] = 2, gaps[k] = 3 * k;
  code = MPI_Neighbor_allgatherv(mine, 2, MPI_INT, vgathered, counts2, gaps, MPI_INT, cart);
  expect(code == MPI_SUCCESS, "%s: neighbor_allgatherv: %s", label, report_class_name(code));
  int scounts[6], sdispls[6], rcounts[6], rdispls[6], vsent[24], vgot[24];
  for (int i = 0; i < 24; ++i) vsent[i] = rank * 100 + (i / 4) * 10 + i % 4, vgot[i] = -1;
  for (int k = 0; k < count; ++k) {
    scounts[k] = 1 + (k & 1), rcounts[k] = (k & 1) == 0 ? 2 : 1;
    sdispls[k] = 4 * k, rdispls[k] = 4 * k;
  }
  code = MPI_Neighbor_alltoallv(vsent, scounts, sdispls, MPI_INT, vgot, rcounts, rdispls, MPI_INT, cart);
  expect(code == MPI_SUCCESS, "%s: neighbor_alltoallv: %s", label, report_class_name(code));
  /* The w-form: an int sent down and a double up, at byte offsets 16 k. */
  unsigned char wsend[96], wrecv[96];
  int wcounts[6];
  MPI_Aint wsdispls[6], wrdispls[6];
  MPI_Datatype wstypes[6], wrtypes[6];
  memset(wrecv, 0xff, sizeof wrecv);
  for (int k = 0; k < count; ++k) {
    wcounts[k] = 1, wsdispls[k] = 16 * k, wrdispls[k] = 16 * k;
    wstypes[k] = (k & 1) == 0 ? MPI_INT : MPI_DOUBLE;
    wrtypes[k] = (k & 1) == 0 ? MPI_DOUBLE : MPI_INT;
    if ((k & 1) == 0) {
      const int v = rank * 1000 + k;
      memcpy(wsend + 16 * k, &v, sizeof v);
    } else {
      const double v = rank + 0.5 * k;
      memcpy(wsend + 16 * k, &v, sizeof v);
    }
  }
  code = MPI_Neighbor_alltoallw(wsend, wcounts, wsdispls, wstypes, wrecv, wcounts, wrdispls, wrtypes, cart);
  expect(code == MPI_SUCCESS, "%s: neighbor_alltoallw: %s", label, report_class_name(code));
  used = snprintf(line, sizeof line, "%s: rank %d v/w", label, rank);
  for (int k = 0; k < count; ++k) {
    const int from = neighbours[k], none = from == MPI_PROC_NULL;
    const int* g = vgathered + 3 * k;
    expect(none ? g[0] == -1 && g[1] == -1 : g[0] == from * 10 && g[1] == from * 10 + 1, "%s: allgatherv block %d",
           label, k);
    expect(k == count - 1 ? 1 : g[2] == -1, "%s: allgatherv wrote into the gap after block %d", label, k);
    const int* v = vgot + 4 * k;
    int ok = 1;
    for (int j = 0; j < 4; ++j) ok &= v[j] == (none || j >= rcounts[k] ? -1 : from * 100 + (k ^ 1) * 10 + j);
    expect(ok, "%s: alltoallv block %d: %d %d %d %d", label, k, v[0], v[1], v[2], v[3]);
    double dv = 0;
    int iv = 0;
    if ((k & 1) == 0) memcpy(&dv, wrecv + 16 * k, sizeof dv);
    else memcpy(&iv, wrecv + 16 * k, sizeof iv);
    const int wok = none ? wrecv[16 * k] == 0xff
                         : ((k & 1) == 0 ? dv == from + 0.5 * (k ^ 1) : iv == from * 1000 + (k ^ 1));
    expect(wok, "%s: alltoallw block %d", label, k);
    /* The double is shown doubled, as an int (k ^ 1 is odd: from + 0.5 k). */
    used += snprintf(line + used, sizeof line - (size_t)used, " %d[%d|%d,%d|%d%s]", from, g[0], v[0], v[1],
                     none ? -1 : ((k & 1) == 0 ? (int)(dv * 2) : iv), (k & 1) == 0 ? "/2" : "");
  }
  say("%s", line);

  /* A duplicate keeps the topology. */
  MPI_Comm dup;
  MPI_Comm_dup(cart, &dup);
  int dup_status = -1, dup_dims[3] = {0}, dup_periods[3] = {0}, dup_coords[3] = {0};
  MPI_Topo_test(dup, &dup_status);
  MPI_Cart_get(dup, 3, dup_dims, dup_periods, dup_coords);
  expect(dup_status == MPI_CART && memcmp(dup_coords, coords, sizeof coords) == 0, "%s: the dup's topology", label);
  MPI_Comm_free(&dup);
}

static void sub_grids(MPI_Comm cart, const char* label, int ndims) {
  for (int keep = 0; keep < ndims; ++keep) {
    int remain[3] = {0, 0, 0};
    remain[keep] = 1;
    MPI_Comm line;
    MPI_Cart_sub(cart, remain, &line);
    int rank, size, sub_ndims = -1, dims[1] = {0}, periods[1] = {0}, coords[1] = {0}, parent_rank, sum = 0;
    MPI_Comm_rank(line, &rank);
    MPI_Comm_size(line, &size);
    MPI_Cartdim_get(line, &sub_ndims);
    MPI_Cart_get(line, 1, dims, periods, coords);
    MPI_Comm_rank(cart, &parent_rank);
    MPI_Allreduce(&parent_rank, &sum, 1, MPI_INT, MPI_SUM, line);
    expect(sub_ndims == 1 && dims[0] == size && coords[0] == rank, "%s: sub %d: ndims %d dims %d coords %d", label,
           keep, sub_ndims, dims[0], coords[0]);
    say("%s: sub keeping %d: rank %d of %d, periodic %d, parent ranks sum %d", label, keep, rank, size, periods[0], sum);
    MPI_Comm_free(&line);
  }
  /* Nothing kept: a grid of one rank. */
  int none[3] = {0, 0, 0}, size = -1, sub_ndims = -1;
  MPI_Comm alone;
  MPI_Cart_sub(cart, none, &alone);
  MPI_Comm_size(alone, &size);
  MPI_Cartdim_get(alone, &sub_ndims);
  expect(size == 1 && sub_ndims == 0, "%s: sub keeping nothing: size %d, ndims %d", label, size, sub_ndims);
  MPI_Comm_free(&alone);
}

static void grid(const char* label, int ndims, const int dims[], const int periods[]) {
  int members = 1, newrank = -1;
  for (int i = 0; i < ndims; ++i) members *= dims[i];
  MPI_Cart_map(MPI_COMM_WORLD, ndims, dims, periods, &newrank);
  /* A rank outside the grid gets MPI_UNDEFINED (MPI-3.1 7.5.8); Open MPI 4.1
   * returns its rank, so only chorus is held to that. */
#ifdef CHORUS_MPI
  expect(newrank == (world_rank < members ? world_rank : MPI_UNDEFINED), "%s: cart_map gave %d", label, newrank);
#else
  expect(world_rank >= members || newrank == world_rank, "%s: cart_map gave %d", label, newrank);
#endif
  MPI_Comm cart;
  const int code = MPI_Cart_create(MPI_COMM_WORLD, ndims, dims, periods, 0, &cart);
  expect(code == MPI_SUCCESS, "%s: cart_create: %s", label, report_class_name(code));
  if (world_rank >= members) {
    expect(cart == MPI_COMM_NULL, "%s: rank %d is outside the grid but got a communicator", label, world_rank);
    say("%s: rank %d outside the grid", label, world_rank);
    return;
  }
  describe(cart, label, ndims, dims, periods);
  sub_grids(cart, label, ndims);
  MPI_Comm_free(&cart);
}

static void errors(void) {
  int status = -1;
  MPI_Topo_test(MPI_COMM_WORLD, &status);
  expect(status == MPI_UNDEFINED, "world's topo_test %d", status);
  int coords[2];
  int code = MPI_Cart_coords(MPI_COMM_WORLD, 0, 2, coords);
  say("cart_coords on a communicator without a topology: %s", report_class_name(code));
  expect(code != MPI_SUCCESS, "cart_coords without a topology must fail");
  const int too_many[1] = {world_size + 1}, periodic[1] = {1};
  MPI_Comm cart = MPI_COMM_NULL;
  code = MPI_Cart_create(MPI_COMM_WORLD, 1, too_many, periodic, 0, &cart);
  say("cart_create of %d ranks on %d: %s", world_size + 1, world_size, report_class_name(code));
  expect(code != MPI_SUCCESS, "a grid larger than the communicator must be refused");
  int mine = 1, theirs[2];
  code = MPI_Neighbor_allgather(&mine, 1, MPI_INT, theirs, 1, MPI_INT, MPI_COMM_WORLD);
  /* Refused by both; Open MPI 4.1 says MPI_ERR_INTERN, chorus MPI_ERR_TOPOLOGY. */
  say("neighbor_allgather without a topology: %s", code == MPI_SUCCESS ? "accepted" : "refused");
#ifdef CHORUS_MPI
  const int named_right = strcmp(report_class_name(code), "MPI_ERR_TOPOLOGY") == 0;
#else
  const int named_right = 1;
#endif
  expect(code != MPI_SUCCESS && named_right, "neighbor_allgather without a topology: %s", report_class_name(code));
  /* A periodic coordinate wraps in cart_rank; a non-periodic one is refused. */
  const int ring_dims[1] = {world_size}, ring_periods[1] = {1}, line_periods[1] = {0};
  MPI_Cart_create(MPI_COMM_WORLD, 1, ring_dims, ring_periods, 0, &cart);
  int wrapped = -1, outside[1] = {world_size + 1}, negative[1] = {-1};
  MPI_Cart_rank(cart, outside, &wrapped);
  int wrapped_negative = -1;
  MPI_Cart_rank(cart, negative, &wrapped_negative);
  expect(wrapped == 1 % world_size && wrapped_negative == world_size - 1, "ring cart_rank wraps: %d %d", wrapped,
         wrapped_negative);
  MPI_Comm_free(&cart);
  MPI_Cart_create(MPI_COMM_WORLD, 1, ring_dims, line_periods, 0, &cart);
  code = MPI_Cart_rank(cart, outside, &wrapped);
  say("cart_rank outside a non-periodic line: %s", report_class_name(code));
  expect(code != MPI_SUCCESS, "cart_rank outside a non-periodic line must fail");
  MPI_Comm_free(&cart);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  dims_create();
  int dims2[2] = {0, 0}, periods2[2] = {1, 0};
  MPI_Dims_create(world_size, 2, dims2);
  grid("2d torus-by-line", 2, dims2, periods2);
  int ring[1] = {world_size}, ring_periodic[1] = {1};
  grid("ring", 1, ring, ring_periodic);
  int dims3[3] = {0, 0, 0}, open3[3] = {0, 0, 0};
  MPI_Dims_create(world_size, 3, dims3);
  grid("3d open", 3, dims3, open3);
  int smaller[2] = {world_size > 1 ? world_size - 1 : 1, 1}, periods_both[2] = {1, 1};
  grid("smaller grid", 2, smaller, periods_both);
  errors();

  const int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("topology", failures);
  return failures == 0 ? 0 : 1;
}
