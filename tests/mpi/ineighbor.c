/*
 * The non-blocking neighbourhood collectives: MPI_Ineighbor_allgather,
 * _alltoall, _allgatherv, _alltoallv and _alltoallw, all five outstanding
 * at once, on a periodic ring (at 1 and 2 ranks both neighbours are one
 * rank), a 2-d grid periodic in one dimension only (MPI_PROC_NULL at the
 * open edges), and a distributed graph that names each neighbour twice.
 * Each round is completed another way: MPI_Waitall, an MPI_Testall loop,
 * MPI_Waitany, MPI_Waitsome, MPI_Wait one by one. The receive type of the
 * allgather is a strided vector freed before the request completes; the
 * w-form receives an int from one side and a double from the other. Every
 * element is checked against what its sender sent; what is printed is the
 * same under Open MPI.
 *
 * Where both neighbours along a periodic dimension are one rank (extent 1
 * or 2), chorus pairs blocks by direction, as its blocking forms and Open
 * MPI 4.1's blocking forms do: the block from below is the one the sender
 * sent up. Open MPI 4.1's non-blocking forms pair them in posting order
 * (from below: the one sent down). Each is checked against its own rule,
 * and those blocks print only their sender.
 */
#include "report.h"

static int rank, size;

enum { kMaxNeighbours = 8, kRounds = 5 };

/* This rank's neighbour lists, and for each source k where its sender put
 * the block: (the sender, its destination index). */
struct Neighbourhood {
  const char* label;
  MPI_Comm comm;
  int in_n, out_n;
  int in[kMaxNeighbours], out[kMaxNeighbours];
  int sender_index[kMaxNeighbours];
  int one_rank_both_ways[kMaxNeighbours]; /* a periodic dimension of extent 1 or 2 */
};

/* Values each sender puts in its blocks (destination index j). */
static int gather_value(int who, int i) { return who * 10 + i; }
static int block_value(int who, int j, int i) { return who * 100 + j * 10 + i; }
static int v_count(int j) { return j % 2 + 1; }
static int w_int(int who, int j) { return who * 1000 + j; }
static double w_double(int who, int j) { return who + 0.25 * j; }

struct Buffers {
  int gathered[3 * kMaxNeighbours];   /* a strided vector of 2 ints per block: ints 3k and 3k + 2 */
  int exchanged[2 * kMaxNeighbours];  /* 2 ints per block */
  int vgathered[2 * kMaxNeighbours];  /* 1 int at element 2k */
  int vgot[4 * kMaxNeighbours];       /* v_count ints at 4k */
  unsigned char wgot[16 * kMaxNeighbours];
  /* what is sent */
  int mine[2], blocks[2 * kMaxNeighbours], one, vsent[4 * kMaxNeighbours];
  unsigned char wsent[16 * kMaxNeighbours];
};

static void fill(struct Buffers* b, const struct Neighbourhood* n) {
  for (int i = 0; i < 3 * kMaxNeighbours; ++i) b->gathered[i] = -1;
  for (int i = 0; i < 2 * kMaxNeighbours; ++i) b->exchanged[i] = -1, b->vgathered[i] = -1;
  for (int i = 0; i < 4 * kMaxNeighbours; ++i) b->vgot[i] = -1;
  memset(b->wgot, 0xff, sizeof b->wgot);
  b->mine[0] = gather_value(rank, 0), b->mine[1] = gather_value(rank, 1);
  b->one = rank * 7 + 3;
  for (int j = 0; j < n->out_n; ++j) {
    b->blocks[2 * j] = block_value(rank, j, 0), b->blocks[2 * j + 1] = block_value(rank, j, 1);
    for (int i = 0; i < 4; ++i) b->vsent[4 * j + i] = block_value(rank, j, i);
    if (j % 2 == 0) {
      const int v = w_int(rank, j);
      memcpy(b->wsent + 16 * j, &v, sizeof v);
    } else {
      const double v = w_double(rank, j);
      memcpy(b->wsent + 16 * j, &v, sizeof v);
    }
  }
}

/* Starts the five collectives; requests[0..4]. */
static void start_all(struct Buffers* b, const struct Neighbourhood* n, MPI_Request requests[5]) {
  MPI_Datatype every_other;
  MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  int codes[5];
  codes[0] = MPI_Ineighbor_allgather(b->mine, 2, MPI_INT, b->gathered, 1, every_other, n->comm, &requests[0]);
  MPI_Type_free(&every_other); /* the request keeps what it needs */
  codes[1] = MPI_Ineighbor_alltoall(b->blocks, 2, MPI_INT, b->exchanged, 2, MPI_INT, n->comm, &requests[1]);
  int counts[kMaxNeighbours], displs[kMaxNeighbours];
  for (int k = 0; k < n->in_n; ++k) counts[k] = 1, displs[k] = 2 * k;
  codes[2] = MPI_Ineighbor_allgatherv(&b->one, 1, MPI_INT, b->vgathered, counts, displs, MPI_INT, n->comm,
                                      &requests[2]);
  int scounts[kMaxNeighbours], sdispls[kMaxNeighbours], rcounts[kMaxNeighbours], rdispls[kMaxNeighbours];
  for (int j = 0; j < n->out_n; ++j) scounts[j] = v_count(j), sdispls[j] = 4 * j;
  for (int k = 0; k < n->in_n; ++k) rcounts[k] = v_count(n->sender_index[k]), rdispls[k] = 4 * k;
  codes[3] = MPI_Ineighbor_alltoallv(b->vsent, scounts, sdispls, MPI_INT, b->vgot, rcounts, rdispls, MPI_INT,
                                     n->comm, &requests[3]);
  int wscounts[kMaxNeighbours], wrcounts[kMaxNeighbours];
  MPI_Aint wsdispls[kMaxNeighbours], wrdispls[kMaxNeighbours];
  MPI_Datatype wstypes[kMaxNeighbours], wrtypes[kMaxNeighbours];
  for (int j = 0; j < n->out_n; ++j) {
    wscounts[j] = 1, wsdispls[j] = 16 * j, wstypes[j] = j % 2 == 0 ? MPI_INT : MPI_DOUBLE;
  }
  for (int k = 0; k < n->in_n; ++k) {
    wrcounts[k] = 1, wrdispls[k] = 16 * k, wrtypes[k] = n->sender_index[k] % 2 == 0 ? MPI_INT : MPI_DOUBLE;
  }
  codes[4] = MPI_Ineighbor_alltoallw(b->wsent, wscounts, wsdispls, wstypes, b->wgot, wrcounts, wrdispls, wrtypes,
                                     n->comm, &requests[4]);
  for (int i = 0; i < 5; ++i) expect(codes[i] == MPI_SUCCESS, "%s: start %d: %s", n->label, i, report_class_name(codes[i]));
}

/* Completes the five requests the way round `round` does. */
static void complete_all(MPI_Request requests[5], int round, const char* label) {
  int code = MPI_SUCCESS;
  if (round == 0) {
    code = MPI_Waitall(5, requests, MPI_STATUSES_IGNORE);
  } else if (round == 1) {
    int flag = 0, polls = 0;
    while (!flag && code == MPI_SUCCESS) code = MPI_Testall(5, requests, &flag, MPI_STATUSES_IGNORE), ++polls;
    expect(polls >= 1, "%s: testall polled", label);
  } else if (round == 2) {
    int indices_ok = 1;
    for (int done = 0; done < 5 && code == MPI_SUCCESS; ++done) {
      int index = MPI_UNDEFINED;
      code = MPI_Waitany(5, requests, &index, MPI_STATUS_IGNORE);
      indices_ok &= index >= 0 && index < 5;
    }
    expect(indices_ok, "%s: waitany gave an index out of 0..4", label);
  } else if (round == 3) {
    /* One check however many calls it takes: the count printed must not depend on timing. */
    int done = 0, outcounts_ok = 1;
    while (done < 5 && code == MPI_SUCCESS) {
      int outcount = 0, indices[5];
      code = MPI_Waitsome(5, requests, &outcount, indices, MPI_STATUSES_IGNORE);
      outcounts_ok &= outcount >= 1;
      done += outcount > 0 ? outcount : 5;
    }
    expect(outcounts_ok, "%s: waitsome gave an outcount below 1", label);
  } else {
    for (int i = 4; i >= 0 && code == MPI_SUCCESS; --i) code = MPI_Wait(&requests[i], MPI_STATUS_IGNORE);
  }
  expect(code == MPI_SUCCESS, "%s: round %d completion: %s", label, round, report_class_name(code));
  for (int i = 0; i < 5; ++i) expect(requests[i] == MPI_REQUEST_NULL, "%s: round %d request %d left", label, round, i);
}

static void check(const struct Buffers* b, const struct Neighbourhood* n, int round) {
  char line[2048];
  int used = snprintf(line, sizeof line, "%s round %d: rank %d", n->label, round, rank);
  for (int k = 0; k < n->in_n; ++k) {
    const int from = n->in[k], j = n->sender_index[k], none = from == MPI_PROC_NULL;
    const int* g = b->gathered + 3 * k;
    expect(none ? g[0] == -1 && g[2] == -1 : g[0] == gather_value(from, 0) && g[2] == gather_value(from, 1),
           "%s: allgather block %d from %d: %d,%d", n->label, k, from, g[0], g[2]);
    expect(g[1] == -1, "%s: allgather wrote into the stride of block %d", n->label, k);
    const int* e = b->exchanged + 2 * k;
    expect(none ? e[0] == -1 && e[1] == -1 : e[0] == block_value(from, j, 0) && e[1] == block_value(from, j, 1),
           "%s: alltoall block %d from %d: %d,%d", n->label, k, from, e[0], e[1]);
    const int* vg = b->vgathered + 2 * k;
    expect((none ? vg[0] == -1 : vg[0] == from * 7 + 3) && vg[1] == -1, "%s: allgatherv block %d: %d,%d", n->label,
           k, vg[0], vg[1]);
    const int* v = b->vgot + 4 * k;
    int ok = 1;
    for (int i = 0; i < 4; ++i) ok &= v[i] == (none || i >= v_count(j) ? -1 : block_value(from, j, i));
    expect(ok, "%s: alltoallv block %d from %d: %d %d %d %d", n->label, k, from, v[0], v[1], v[2], v[3]);
    int wi = 0;
    double wd = 0;
    if (!none && j % 2 == 0) memcpy(&wi, b->wgot + 16 * k, sizeof wi);
    if (!none && j % 2 == 1) memcpy(&wd, b->wgot + 16 * k, sizeof wd);
    expect(none ? b->wgot[16 * k] == 0xff : (j % 2 == 0 ? wi == w_int(from, j) : wd == w_double(from, j)),
           "%s: alltoallw block %d from %d", n->label, k, from);
    if (n->one_rank_both_ways[k]) {
      used += snprintf(line + used, sizeof line - (size_t)used, " %d[both ways]", from);
      continue;
    }
    /* The double is printed times 4, as an int. */
    used += snprintf(line + used, sizeof line - (size_t)used, " %d[%d,%d|%d,%d|%d|%d,%d|%d]", from, g[0], g[2], e[0],
                     e[1], vg[0], v[0], v[1], none ? -1 : (j % 2 == 0 ? wi : (int)(wd * 4)));
  }
  say("%s", line);
}

static void exercise(const struct Neighbourhood* n) {
  struct Buffers b;
  for (int round = 0; round < kRounds; ++round) {
    fill(&b, n);
    MPI_Request requests[5];
    start_all(&b, n, requests);
    complete_all(requests, round, n->label);
    check(&b, n, round);
  }
  MPI_Request requests[5];
  fill(&b, n);
  start_all(&b, n, requests);
  complete_all(requests, 0, n->label);
  check(&b, n, kRounds);
  MPI_Barrier(n->comm);
}

/* A block shorter than the receiver expects: under chorus the request's
 * wait says MPI_ERR_TRUNCATE and frees it; Open MPI takes a short message
 * as complete, so only chorus is held to the error. */
static void short_block(const struct Neighbourhood* n) {
  int sent[kMaxNeighbours] = {0}, got[2 * kMaxNeighbours];
  int scounts[kMaxNeighbours], sdispls[kMaxNeighbours], rcounts[kMaxNeighbours], rdispls[kMaxNeighbours];
  for (int j = 0; j < n->out_n; ++j) scounts[j] = 1, sdispls[j] = j;
  for (int k = 0; k < n->in_n; ++k) rcounts[k] = 2, rdispls[k] = 2 * k;
  MPI_Request request;
  int code = MPI_Ineighbor_alltoallv(sent, scounts, sdispls, MPI_INT, got, rcounts, rdispls, MPI_INT, n->comm,
                                     &request);
  expect(code == MPI_SUCCESS, "%s: short block start: %s", n->label, report_class_name(code));
  code = MPI_Wait(&request, MPI_STATUS_IGNORE);
  int real_sources = 0;
  for (int k = 0; k < n->in_n; ++k) real_sources += n->in[k] != MPI_PROC_NULL;
#ifdef CHORUS_MPI
  const int refused = strcmp(report_class_name(code), "MPI_ERR_TRUNCATE") == 0;
#else
  const int refused = 1;
#endif
  expect(real_sources == 0 ? code == MPI_SUCCESS : refused, "%s: short block: %s", n->label, report_class_name(code));
  expect(request == MPI_REQUEST_NULL, "%s: short block left its request", n->label);
  MPI_Barrier(n->comm);
}

static void cart_neighbourhood(struct Neighbourhood* n, const char* label, int ndims, int dims[], int periods[]) {
  MPI_Cart_create(MPI_COMM_WORLD, ndims, dims, periods, 0, &n->comm);
  n->label = label;
  n->in_n = n->out_n = 2 * ndims;
  for (int d = 0; d < ndims; ++d) MPI_Cart_shift(n->comm, d, 1, &n->in[2 * d], &n->in[2 * d + 1]);
  for (int k = 0; k < 2 * ndims; ++k) {
    n->out[k] = n->in[k];
    n->one_rank_both_ways[k] = periods[k / 2] && dims[k / 2] <= 2;
    n->sender_index[k] = k ^ 1; /* from below it is the sender's block sent up */
#ifndef CHORUS_MPI
    if (n->one_rank_both_ways[k]) n->sender_index[k] = k;
#endif
  }
}

/* MPI_UNWEIGHTED through a volatile read: as a constant address, gcc's
 * -Wstringop-overread takes it for an array of size 0. */
static int* unweighted(void) {
  static int* volatile value;
  value = MPI_UNWEIGHTED;
  return value;
}

/* A directed ring with each edge twice: the t-th block from the left is
 * the left neighbour's t-th block to the right. */
static void doubled_ring(struct Neighbourhood* n) {
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  n->label = "doubled ring";
  n->in_n = n->out_n = 2;
  n->in[0] = n->in[1] = left;
  n->out[0] = n->out[1] = right;
  n->sender_index[0] = 0, n->sender_index[1] = 1;
  n->one_rank_both_ways[0] = n->one_rank_both_ways[1] = 0;
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, n->in, unweighted(), 2, n->out, unweighted(), MPI_INFO_NULL, 0,
                                 &n->comm);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  struct Neighbourhood all[3];
  int ring_dims[1] = {size}, ring_periods[1] = {1};
  cart_neighbourhood(&all[0], "ring", 1, ring_dims, ring_periods);
  int grid_dims[2] = {0, 0}, grid_periods[2] = {1, 0};
  MPI_Dims_create(size, 2, grid_dims);
  cart_neighbourhood(&all[1], "2d torus-by-line", 2, grid_dims, grid_periods);
  doubled_ring(&all[2]);
  for (int i = 0; i < 3; ++i) {
    MPI_Comm_set_errhandler(all[i].comm, MPI_ERRORS_RETURN);
    exercise(&all[i]);
    short_block(&all[i]);
    MPI_Comm_free(&all[i].comm);
  }

  const int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("ineighbor", failures);
  return failures == 0 ? 0 : 1;
}
