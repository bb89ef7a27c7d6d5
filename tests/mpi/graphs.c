/*
 * Graph and distributed-graph topologies: MPI_Graph_create (a ring whose
 * nodes name each neighbour once per side, so with 1 or 2 ranks a node
 * names one rank twice, and a star that leaves the last rank out),
 * MPI_Graphdims_get, MPI_Graph_get, MPI_Graph_neighbors(_count),
 * MPI_Graph_map, MPI_Dist_graph_create_adjacent (a weighted and an
 * unweighted directed ring), MPI_Dist_graph_create (every edge named by
 * rank 0), MPI_Dist_graph_neighbors(_count), MPI_Topo_test, and the
 * neighbourhood collectives on each (block j to the j-th destination, block
 * i from the i-th source; a rank named twice gets and sends its blocks in
 * order). MPI_Dist_graph_create leaves the order of a rank's neighbours to
 * the MPI, so that case prints them sorted. Every result is checked; what
 * is printed is the same under Open MPI.
 */
#include "report.h"

static int rank, size;

/* MPI_UNWEIGHTED through a volatile read: as a constant address, gcc's
 * -Wstringop-overflow takes it for an array of size 0. */
static int* unweighted(void) {
  static int* volatile value;
  value = MPI_UNWEIGHTED;
  return value;
}

static int compare_ints(const void* a, const void* b) { return *(const int*)a - *(const int*)b; }

static void print_list(char* line, size_t room, int* used, const char* label, const int* values, int n) {
  *used += snprintf(line + *used, room - (size_t)*used, label[0] ? " %s=" : " ", label);
  for (int i = 0; i < n; ++i) *used += snprintf(line + *used, room - (size_t)*used, i ? ",%d" : "%d", values[i]);
  if (n == 0) *used += snprintf(line + *used, room - (size_t)*used, "-");
}

/* Neighbourhood collectives where `sources` and `destinations` are this
 * rank's lists, and each rank's lists are known to all (`lists_of`). */
typedef void (*lists_fn)(int who, int* in, int* in_n, int* out, int* out_n);

static void exchange(MPI_Comm comm, const char* label, lists_fn lists_of) {
  int in[16], out[16], in_n = 0, out_n = 0;
  lists_of(rank, in, &in_n, out, &out_n);
  int gathered[16], sent[16], got[16];
  for (int i = 0; i < 16; ++i) gathered[i] = -1, got[i] = -1, sent[i] = rank * 100 + i;
  const int mine = rank * 10 + 7;
  int code = MPI_Neighbor_allgather(&mine, 1, MPI_INT, gathered, 1, MPI_INT, comm);
  expect(code == MPI_SUCCESS, "%s: neighbor_allgather", label);
  code = MPI_Neighbor_alltoall(sent, 1, MPI_INT, got, 1, MPI_INT, comm);
  expect(code == MPI_SUCCESS, "%s: neighbor_alltoall", label);
  for (int i = 0; i < in_n; ++i) {
    const int from = in[i];
    expect(gathered[i] == from * 10 + 7, "%s: allgather block %d from %d: %d", label, i, from, gathered[i]);
    /* The t-th time `from` is among my sources pairs with the t-th time I
     * am among its destinations. */
    int t = 0;
    for (int j = 0; j < i; ++j) t += in[j] == from;
    int their_in[16], their_out[16], their_in_n = 0, their_out_n = 0, position = -1;
    lists_of(from, their_in, &their_in_n, their_out, &their_out_n);
    for (int j = 0, seen = 0; j < their_out_n; ++j) {
      if (their_out[j] == rank && seen++ == t) {
        position = j;
        break;
      }
    }
    expect(got[i] == from * 100 + position, "%s: alltoall block %d from %d: %d, wanted %d", label, i, from, got[i],
           from * 100 + position);
  }
}

/* The ring graph: node r's edges are left then right. */
static void ring_lists(int who, int* in, int* in_n, int* out, int* out_n) {
  in[0] = out[0] = (who + size - 1) % size;
  in[1] = out[1] = (who + 1) % size;
  *in_n = *out_n = 2;
}

/* The star: node 0 to every other node of the graph, each of them to 0. */
static int star_nodes;
static void star_lists(int who, int* in, int* in_n, int* out, int* out_n) {
  int n = 0;
  if (who == 0) {
    for (int r = 1; r < star_nodes; ++r) in[n] = out[n] = r, ++n;
  } else {
    in[0] = out[0] = 0, n = 1;
  }
  *in_n = *out_n = n;
}

/* Directed ring: from the left, to the right. */
static void directed_lists(int who, int* in, int* in_n, int* out, int* out_n) {
  in[0] = (who + size - 1) % size;
  out[0] = (who + 1) % size;
  *in_n = *out_n = 1;
}

static void describe_graph(MPI_Comm graph, const char* label) {
  int status = -1, nnodes = -1, nedges = -1, count = -1, neighbours[16];
  MPI_Topo_test(graph, &status);
  MPI_Graphdims_get(graph, &nnodes, &nedges);
  MPI_Graph_neighbors_count(graph, rank, &count);
  MPI_Graph_neighbors(graph, rank, 16, neighbours);
  expect(status == MPI_GRAPH, "%s: topo_test %d", label, status);
  char line[300];
  int used = snprintf(line, sizeof line, "%s: rank %d: %d nodes, %d edges, neighbours", label, rank, nnodes, nedges);
  print_list(line, sizeof line, &used, "", neighbours, count);
  say("%s", line);
  if (rank == 0) {
    int index[16], edges[64];
    MPI_Graph_get(graph, 16, 64, index, edges);
    used = snprintf(line, sizeof line, "%s: graph_get", label);
    print_list(line, sizeof line, &used, "index", index, nnodes);
    print_list(line, sizeof line, &used, "edges", edges, nedges);
    say("%s", line);
  }
}

static void graphs(void) {
  /* The ring. */
  int index[16], edges[64];
  for (int r = 0; r < size; ++r) {
    index[r] = 2 * (r + 1);
    edges[2 * r] = (r + size - 1) % size;
    edges[2 * r + 1] = (r + 1) % size;
  }
  MPI_Comm ring;
  MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &ring);
  describe_graph(ring, "ring graph");
  exchange(ring, "ring graph", ring_lists);
  int ndims = -1;
  const int not_cart = MPI_Cartdim_get(ring, &ndims);
  expect(not_cart != MPI_SUCCESS, "cartdim_get on a graph must fail");
  MPI_Comm_free(&ring);

  /* The star, one rank short when there are two or more. */
  star_nodes = size > 1 ? size - 1 : 1;
  int n = 0;
  for (int r = 0; r < star_nodes; ++r) {
    if (r == 0) {
      for (int k = 1; k < star_nodes; ++k) edges[n++] = k;
    } else {
      edges[n++] = 0;
    }
    index[r] = n;
  }
  int newrank = -5;
  MPI_Graph_map(MPI_COMM_WORLD, star_nodes, index, edges, &newrank);
#ifdef CHORUS_MPI
  const int mapped = newrank == (rank < star_nodes ? rank : MPI_UNDEFINED);
#else
  const int mapped = rank >= star_nodes || newrank == rank; /* Open MPI 4.1 returns the rank outside, too */
#endif
  expect(mapped, "graph_map gave %d", newrank);
  MPI_Comm star;
  MPI_Graph_create(MPI_COMM_WORLD, star_nodes, index, edges, 0, &star);
  if (rank >= star_nodes) {
    expect(star == MPI_COMM_NULL, "rank %d is outside the star", rank);
    say("star graph: rank %d outside", rank);
    return;
  }
  describe_graph(star, "star graph");
  exchange(star, "star graph", star_lists);
  MPI_Comm_free(&star);
}

static void dist_graphs(void) {
  const int left = (rank + size - 1) % size, right = (rank + 1) % size;
  for (int weighted = 0; weighted <= 1; ++weighted) {
    const char* label = weighted ? "weighted directed ring" : "directed ring";
    const int in_weight = left + 1, out_weight = rank + 1;
    MPI_Comm ring;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, weighted ? &in_weight : unweighted(), 1, &right,
                                   weighted ? &out_weight : unweighted(), MPI_INFO_NULL, 0, &ring);
    int status = -1, indegree = -1, outdegree = -1, is_weighted = -1;
    MPI_Topo_test(ring, &status);
    MPI_Dist_graph_neighbors_count(ring, &indegree, &outdegree, &is_weighted);
    int sources[4] = {-1}, destinations[4] = {-1}, sw[4] = {-1}, dw[4] = {-1};
    MPI_Dist_graph_neighbors(ring, 4, sources, weighted ? sw : unweighted(), 4, destinations,
                             weighted ? dw : unweighted());
    expect(status == MPI_DIST_GRAPH && indegree == 1 && outdegree == 1 && is_weighted == weighted &&
               sources[0] == left && destinations[0] == right && (!weighted || (sw[0] == left + 1 && dw[0] == rank + 1)),
           "%s: %d %d %d %d src %d dst %d", label, status, indegree, outdegree, is_weighted, sources[0], destinations[0]);
    say("%s: rank %d from %d to %d, weighted %d, weights %d %d", label, rank, sources[0], destinations[0], is_weighted,
        weighted ? sw[0] : 0, weighted ? dw[0] : 0);
    exchange(ring, label, directed_lists);
    /* The v-form on it: two ints from the left. */
    int out2[2] = {rank, rank + 50}, in2[3] = {-1, -1, -1}, two = 2, zero = 0, one = 1;
    MPI_Neighbor_alltoallv(out2, &two, &zero, MPI_INT, in2, &two, &one, MPI_INT, ring);
    expect(in2[0] == -1 && in2[1] == left && in2[2] == left + 50, "%s: alltoallv %d %d %d", label, in2[0], in2[1],
           in2[2]);
    MPI_Comm_free(&ring);
  }

  /* Rank 0 names every edge: r -> r+1 and r -> r+2. */
  int n = 0, sources[16], degrees[16], destinations[32];
  if (rank == 0) {
    for (int r = 0; r < size; ++r) {
      sources[n] = r;
      degrees[n] = 2;
      destinations[2 * n] = (r + 1) % size;
      destinations[2 * n + 1] = (r + 2) % size;
      ++n;
    }
  }
  MPI_Comm spread;
  MPI_Dist_graph_create(MPI_COMM_WORLD, n, sources, degrees, destinations, unweighted(), MPI_INFO_NULL, 0, &spread);
  int indegree = -1, outdegree = -1, is_weighted = -1;
  MPI_Dist_graph_neighbors_count(spread, &indegree, &outdegree, &is_weighted);
  int in[16], out[16];
  MPI_Dist_graph_neighbors(spread, 16, in, unweighted(), 16, out, unweighted());
  int gathered[16];
  const int mine = rank * 10 + 7;
  for (int i = 0; i < 16; ++i) gathered[i] = -1;
  MPI_Neighbor_allgather(&mine, 1, MPI_INT, gathered, 1, MPI_INT, spread);
  int ok = indegree == 2 && outdegree == 2 && is_weighted == 0;
  for (int i = 0; i < indegree && i < 16; ++i) ok &= gathered[i] == in[i] * 10 + 7;
  expect(ok, "dist_graph_create: degrees %d %d, weighted %d", indegree, outdegree, is_weighted);
  qsort(in, (size_t)indegree, sizeof(int), compare_ints);
  qsort(out, (size_t)outdegree, sizeof(int), compare_ints);
  qsort(gathered, (size_t)indegree, sizeof(int), compare_ints);
  char line[300];
  int used = snprintf(line, sizeof line, "dist_graph_create: rank %d", rank);
  print_list(line, sizeof line, &used, "sources", in, indegree);
  print_list(line, sizeof line, &used, "destinations", out, outdegree);
  print_list(line, sizeof line, &used, "gathered", gathered, indegree);
  say("%s", line);
  int status = -1, count = -1;
  MPI_Topo_test(spread, &status);
  const int not_graph = MPI_Graph_neighbors_count(spread, rank, &count);
  expect(status == MPI_DIST_GRAPH && not_graph != MPI_SUCCESS, "a distributed graph is not a graph");
  MPI_Comm_free(&spread);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  graphs();
  dist_graphs();
  const int failures = report_finish(MPI_COMM_WORLD);
  MPI_Finalize();
  report_passed("graphs", failures);
  return failures == 0 ? 0 : 1;
}
