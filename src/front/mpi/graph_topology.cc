// Graph and distributed-graph topologies (MPI-3.1 7.5.3, 7.5.4): their
// constructors and queries. Their neighbourhood collectives are
// topology.cc's, over the sources and destinations kept here; ranks are
// never reordered (docs/mpi.md, "Process topologies").
#include "mpi/internal.hpp"

#include <algorithm>
#include <span>

namespace chorus::mpi {
namespace {

const GraphTopology& graph_of(MPI_Comm comm, int kind) {
  if (!comm->graph || comm->graph->kind != kind) {
    fail(MPI_ERR_TOPOLOGY, "the communicator has no ", kind == MPI_GRAPH ? "graph" : "distributed graph",
         " topology");
  }
  return *comm->graph;
}

// MPI_Graph_create's arguments: index[i] is the number of edges of nodes
// 0..i, each edge a node; MPI_ERR_ARG if not.
void check_graph(int nnodes, const int index[], const int edges[], int available) {
  if (nnodes < 0 || nnodes > available) {
    fail(MPI_ERR_ARG, "nnodes ", nnodes, " is not in 0..", available, " (the communicator's size)");
  }
  if (nnodes > 0 && index == nullptr) fail(MPI_ERR_ARG, "null index");
  for (int i = 0; i < nnodes; ++i) {
    if (index[i] < (i == 0 ? 0 : index[i - 1])) fail(MPI_ERR_ARG, "index[", i, "] = ", index[i], " decreases");
  }
  const int total = nnodes > 0 ? index[nnodes - 1] : 0;
  if (total > 0 && edges == nullptr) fail(MPI_ERR_ARG, "null edges");
  for (int e = 0; e < total; ++e) {
    if (edges[e] < 0 || edges[e] >= nnodes) fail(MPI_ERR_ARG, "edges[", e, "] = ", edges[e], " is not a node");
  }
}

// The neighbours of `rank` in a graph: its edges, in order.
std::span<const int> graph_neighbours(const GraphTopology& graph, int rank) {
  const size_t begin = rank == 0 ? 0 : static_cast<size_t>(graph.index[static_cast<size_t>(rank) - 1]);
  const size_t end = static_cast<size_t>(graph.index[static_cast<size_t>(rank)]);
  return {graph.edges.data() + begin, end - begin};
}

// A degree and its list of ranks (and weights) for MPI_Dist_graph_create_adjacent.
void adjacent_side(int degree, const int ranks[], const int weights[], int size, const char* role,
                   std::vector<int>& kept, std::vector<int>& kept_weights, bool& weighted) {
  if (degree < 0) fail(MPI_ERR_ARG, role, " degree ", degree, " is negative");
  if (degree > 0 && ranks == nullptr) fail(MPI_ERR_ARG, "null ", role, "s");
  for (int i = 0; i < degree; ++i) {
    if (ranks[i] < 0 || ranks[i] >= size) fail(MPI_ERR_RANK, role, " ", ranks[i], " is not a rank (0..", size - 1, ")");
  }
  kept.assign(ranks, ranks + degree);
  if (weights == MPI_UNWEIGHTED || weights == MPI_WEIGHTS_EMPTY) return;
  if (degree > 0 && weights == nullptr) fail(MPI_ERR_ARG, "null ", role, " weights");
  weighted = true;
  kept_weights.assign(weights, weights + degree);
}

}  // namespace
}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

// Collective: the ranks past the graph get MPI_COMM_NULL; ranks keep their place.
int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int index[], const int edges[], int reorder,
                     MPI_Comm* comm_graph) {
  (void)reorder;
  return call("MPI_Graph_create", comm_old, [&] {
    Comm c = use_comm(comm_old);
    if (comm_graph == nullptr) fail(MPI_ERR_ARG, "null comm_graph");
    *comm_graph = MPI_COMM_NULL;
    check_graph(nnodes, index, edges, c.size);
    auto graph = std::make_shared<GraphTopology>();
    graph->kind = MPI_GRAPH;
    graph->index.assign(index, index + nnodes);
    graph->edges.assign(edges, edges + (nnodes > 0 ? index[nnodes - 1] : 0));
    if (c.rank < nnodes) {
      const auto mine = graph_neighbours(*graph, c.rank);
      graph->sources.assign(mine.begin(), mine.end());
      graph->destinations = graph->sources;
    }
    MPI_Comm made = split_comm(comm_old, c, c.rank < nnodes ? 0 : MPI_UNDEFINED, c.rank);
    if (made != MPI_COMM_NULL) made->graph = std::move(graph);
    *comm_graph = made;
  });
}

int MPI_Graphdims_get(MPI_Comm comm, int* nnodes, int* nedges) {
  return call("MPI_Graphdims_get", comm, [&] {
    use_comm(comm);
    const GraphTopology& graph = graph_of(comm, MPI_GRAPH);
    if (nnodes == nullptr || nedges == nullptr) fail(MPI_ERR_ARG, "null nnodes or nedges");
    *nnodes = static_cast<int>(graph.index.size());
    *nedges = static_cast<int>(graph.edges.size());
  });
}

int MPI_Graph_get(MPI_Comm comm, int maxindex, int maxedges, int index[], int edges[]) {
  return call("MPI_Graph_get", comm, [&] {
    use_comm(comm);
    const GraphTopology& graph = graph_of(comm, MPI_GRAPH);
    if (maxindex < 0 || maxedges < 0) fail(MPI_ERR_ARG, "maxindex ", maxindex, " or maxedges ", maxedges, " is negative");
    const size_t indices = std::min(static_cast<size_t>(maxindex), graph.index.size());
    const size_t edge_count = std::min(static_cast<size_t>(maxedges), graph.edges.size());
    if ((indices > 0 && index == nullptr) || (edge_count > 0 && edges == nullptr)) fail(MPI_ERR_ARG, "null index or edges");
    std::copy_n(graph.index.begin(), indices, index);
    std::copy_n(graph.edges.begin(), edge_count, edges);
  });
}

int MPI_Graph_neighbors_count(MPI_Comm comm, int rank, int* nneighbors) {
  return call("MPI_Graph_neighbors_count", comm, [&] {
    Comm c = use_comm(comm);
    const GraphTopology& graph = graph_of(comm, MPI_GRAPH);
    if (rank < 0 || rank >= c.size) fail(MPI_ERR_RANK, "rank ", rank, " is not in 0..", c.size - 1);
    if (nneighbors == nullptr) fail(MPI_ERR_ARG, "null nneighbors");
    *nneighbors = static_cast<int>(graph_neighbours(graph, rank).size());
  });
}

int MPI_Graph_neighbors(MPI_Comm comm, int rank, int maxneighbors, int neighbors[]) {
  return call("MPI_Graph_neighbors", comm, [&] {
    Comm c = use_comm(comm);
    const GraphTopology& graph = graph_of(comm, MPI_GRAPH);
    if (rank < 0 || rank >= c.size) fail(MPI_ERR_RANK, "rank ", rank, " is not in 0..", c.size - 1);
    if (maxneighbors < 0) fail(MPI_ERR_ARG, "maxneighbors ", maxneighbors, " is negative");
    const auto mine = graph_neighbours(graph, rank);
    const size_t shown = std::min(static_cast<size_t>(maxneighbors), mine.size());
    if (shown > 0 && neighbors == nullptr) fail(MPI_ERR_ARG, "null neighbors");
    std::copy_n(mine.begin(), shown, neighbors);
  });
}

int MPI_Graph_map(MPI_Comm comm, int nnodes, const int index[], const int edges[], int* newrank) {
  return call("MPI_Graph_map", comm, [&] {
    Comm c = use_comm(comm);
    if (newrank == nullptr) fail(MPI_ERR_ARG, "null newrank");
    check_graph(nnodes, index, edges, c.size);
    *newrank = c.rank < nnodes ? c.rank : MPI_UNDEFINED;
  });
}

// Collective over comm_old, whose every rank is in the new communicator
// in its place; each passes its own edges.
int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[], const int sourceweights[],
                                   int outdegree, const int destinations[], const int destweights[], MPI_Info info,
                                   int reorder, MPI_Comm* comm_dist_graph) {
  (void)info, (void)reorder;  // no hint is acted on; ranks keep their place
  return call("MPI_Dist_graph_create_adjacent", comm_old, [&] {
    Comm c = use_comm(comm_old);
    if (comm_dist_graph == nullptr) fail(MPI_ERR_ARG, "null comm_dist_graph");
    *comm_dist_graph = MPI_COMM_NULL;
    auto graph = std::make_shared<GraphTopology>();
    graph->kind = MPI_DIST_GRAPH;
    adjacent_side(indegree, sources, sourceweights, c.size, "source", graph->sources, graph->source_weights,
                  graph->weighted);
    bool out_weighted = false;
    adjacent_side(outdegree, destinations, destweights, c.size, "destination", graph->destinations,
                  graph->destination_weights, out_weighted);
    graph->weighted = graph->weighted || out_weighted;
    MPI_Comm made = split_comm(comm_old, c, 0, c.rank);
    made->graph = std::move(graph);
    *comm_dist_graph = made;
  });
}

// Any rank may name any edge: each goes to its source (an outgoing edge)
// and its destination (an incoming one), in the order of the ranks that
// named them and then of their lists.
int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info, int reorder,
                          MPI_Comm* comm_dist_graph) {
  (void)info, (void)reorder;
  return call("MPI_Dist_graph_create", comm_old, [&] {
    Comm c = use_comm(comm_old);
    if (comm_dist_graph == nullptr) fail(MPI_ERR_ARG, "null comm_dist_graph");
    *comm_dist_graph = MPI_COMM_NULL;
    if (n < 0) fail(MPI_ERR_ARG, "n ", n, " is negative");
    if (n > 0 && (sources == nullptr || degrees == nullptr)) fail(MPI_ERR_ARG, "null sources or degrees");
    const bool weighted = weights != MPI_UNWEIGHTED && weights != MPI_WEIGHTS_EMPTY;
    // Per rank: the edges it must learn, as (is-outgoing, source, destination, weight).
    const size_t ranks = static_cast<size_t>(c.size);
    std::vector<std::vector<int32_t>> outbox(ranks);
    size_t next = 0;
    for (int i = 0; i < n; ++i) {
      if (sources[i] < 0 || sources[i] >= c.size) fail(MPI_ERR_RANK, "source ", sources[i], " is not a rank");
      if (degrees[i] < 0) fail(MPI_ERR_ARG, "degrees[", i, "] = ", degrees[i], " is negative");
      if (degrees[i] > 0 && destinations == nullptr) fail(MPI_ERR_ARG, "null destinations");
      if (degrees[i] > 0 && weighted && weights == nullptr) fail(MPI_ERR_ARG, "null weights");
      for (int j = 0; j < degrees[i]; ++j, ++next) {
        const int to = destinations[next];
        if (to < 0 || to >= c.size) fail(MPI_ERR_RANK, "destination ", to, " is not a rank");
        const int32_t weight = weighted ? weights[next] : 1;
        auto& out = outbox[static_cast<size_t>(sources[i])];
        out.insert(out.end(), {1, sources[i], to, weight});
        auto& in = outbox[static_cast<size_t>(to)];
        in.insert(in.end(), {0, sources[i], to, weight});
      }
    }
    std::vector<size_t> send_counts(ranks), send_displs(ranks), recv_counts(ranks), recv_displs(ranks);
    std::vector<int32_t> packed;
    for (size_t r = 0; r < ranks; ++r) {
      send_displs[r] = packed.size();
      send_counts[r] = outbox[r].size();
      packed.insert(packed.end(), outbox[r].begin(), outbox[r].end());
    }
    std::vector<uint64_t> counts_out(send_counts.begin(), send_counts.end()), counts_in(ranks);
    c.internal.alltoall(counts_out.data(), counts_in.data(), 1, chorus::DataType::uint64);
    size_t total = 0;
    for (size_t r = 0; r < ranks; ++r) recv_displs[r] = total, recv_counts[r] = counts_in[r], total += counts_in[r];
    std::vector<int32_t> learned(total);
    c.internal.alltoallv(packed.data(), send_counts, send_displs, learned.data(), recv_counts, recv_displs,
                         chorus::DataType::int32);
    // Whether any rank gave weights: MPI_Dist_graph_neighbors_count's flag.
    int32_t any_weighted = weighted ? 1 : 0, everyone = 0;
    c.internal.allreduce(&any_weighted, &everyone, 1, chorus::DataType::int32, chorus::ReduceOp::max);
    auto graph = std::make_shared<GraphTopology>();
    graph->kind = MPI_DIST_GRAPH;
    graph->weighted = everyone != 0;
    for (size_t e = 0; e + 3 < learned.size(); e += 4) {
      if (learned[e] == 1) {
        graph->destinations.push_back(learned[e + 2]);
        graph->destination_weights.push_back(learned[e + 3]);
      } else {
        graph->sources.push_back(learned[e + 1]);
        graph->source_weights.push_back(learned[e + 3]);
      }
    }
    if (!graph->weighted) graph->source_weights.clear(), graph->destination_weights.clear();
    MPI_Comm made = split_comm(comm_old, c, 0, c.rank);
    made->graph = std::move(graph);
    *comm_dist_graph = made;
  });
}

int MPI_Dist_graph_neighbors_count(MPI_Comm comm, int* indegree, int* outdegree, int* weighted) {
  return call("MPI_Dist_graph_neighbors_count", comm, [&] {
    use_comm(comm);
    const GraphTopology& graph = graph_of(comm, MPI_DIST_GRAPH);
    if (indegree == nullptr || outdegree == nullptr || weighted == nullptr) {
      fail(MPI_ERR_ARG, "null indegree, outdegree or weighted");
    }
    *indegree = static_cast<int>(graph.sources.size());
    *outdegree = static_cast<int>(graph.destinations.size());
    *weighted = graph.weighted ? 1 : 0;
  });
}

int MPI_Dist_graph_neighbors(MPI_Comm comm, int maxindegree, int sources[], int sourceweights[], int maxoutdegree,
                             int destinations[], int destweights[]) {
  return call("MPI_Dist_graph_neighbors", comm, [&] {
    use_comm(comm);
    const GraphTopology& graph = graph_of(comm, MPI_DIST_GRAPH);
    if (maxindegree < 0 || maxoutdegree < 0) fail(MPI_ERR_ARG, "maxindegree or maxoutdegree is negative");
    const size_t in = std::min(static_cast<size_t>(maxindegree), graph.sources.size());
    const size_t out = std::min(static_cast<size_t>(maxoutdegree), graph.destinations.size());
    if ((in > 0 && sources == nullptr) || (out > 0 && destinations == nullptr)) {
      fail(MPI_ERR_ARG, "null sources or destinations");
    }
    std::copy_n(graph.sources.begin(), in, sources);
    std::copy_n(graph.destinations.begin(), out, destinations);
    const bool want_weights = sourceweights != MPI_UNWEIGHTED && destweights != MPI_UNWEIGHTED;
    if (graph.weighted && want_weights) {
      if ((in > 0 && sourceweights == nullptr) || (out > 0 && destweights == nullptr)) fail(MPI_ERR_ARG, "null weights");
      if (!graph.source_weights.empty()) std::copy_n(graph.source_weights.begin(), in, sourceweights);
      if (!graph.destination_weights.empty()) std::copy_n(graph.destination_weights.begin(), out, destweights);
    }
  });
}

}  // extern "C"
