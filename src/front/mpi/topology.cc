// Process topologies (MPI-3.1 chapter 7): MPI_Dims_create, the MPI_Cart_*
// calls, MPI_Topo_test, and whom the neighbourhood collectives
// (neighbourhood.cc) of every kind of topology exchange with (the graph
// kinds are made in graph_topology.cc). A topology is
// the communicator's shape only: ranks are never reordered (`reorder` is
// allowed to be ignored, and Open MPI's default topology component ignores
// it too), so rank r of the new communicator is rank r of the old one
// (docs/mpi.md, "Process topologies").
#include "mpi/internal.hpp"

#include <algorithm>
#include <climits>
#include <tuple>

namespace chorus::mpi {
namespace {

// Dimensions beyond this are refused: the neighbourhood collectives' tags
// (kTagNeighbor + 2 * dimension + 1) and every array below stay small.
constexpr int kMaxDims = 64;

void check_ndims(int ndims, const char* role) {
  if (ndims < 0 || ndims > kMaxDims) fail(MPI_ERR_DIMS, role, " ", ndims, " is not in 0..", kMaxDims);
}

const CartTopology& cart_of(MPI_Comm comm) {
  if (!comm->cart) fail(MPI_ERR_TOPOLOGY, "the communicator has no Cartesian topology");
  return *comm->cart;
}

// The number of ranks a grid of `dims` holds; MPI_ERR_DIMS if an extent is
// not positive, MPI_ERR_ARG if the grid is larger than `available` ranks.
int grid_size(int ndims, const int dims[], int available) {
  if (ndims > 0 && dims == nullptr) fail(MPI_ERR_ARG, "null dims");
  long long product = 1;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] <= 0) fail(MPI_ERR_DIMS, "dims[", i, "] = ", dims[i], " is not positive");
    product *= dims[i];
    if (product > available) {
      fail(MPI_ERR_ARG, "a grid of ", ndims, " dimensions needs more ranks than the communicator's ", available);
    }
  }
  return static_cast<int>(product);
}

// Row-major: the last dimension varies fastest.
std::vector<int> coords_of(const CartTopology& cart, int rank) {
  std::vector<int> coords(cart.dims.size());
  for (size_t i = cart.dims.size(); i-- > 0;) {
    coords[i] = rank % cart.dims[i];
    rank /= cart.dims[i];
  }
  return coords;
}

// The rank at `coords` (a periodic dimension wraps; a coordinate outside a
// non-periodic one is MPI_PROC_NULL if `outside_is_null`, else an error).
int rank_at(const CartTopology& cart, const int coords[], bool outside_is_null) {
  int rank = 0;
  for (size_t i = 0; i < cart.dims.size(); ++i) {
    const int extent = cart.dims[i];
    int at = coords[i];
    if (at < 0 || at >= extent) {
      if (!cart.periods[i]) {
        if (outside_is_null) return MPI_PROC_NULL;
        fail(MPI_ERR_ARG, "coordinate ", at, " of dimension ", i, " is outside 0..", extent - 1,
             " and the dimension is not periodic");
      }
      at = ((at % extent) + extent) % extent;
    }
    rank = rank * extent + at;
  }
  return rank;
}

// The two neighbours of `rank` along `dimension` at distance `disp`.
std::pair<int, int> shifted(const CartTopology& cart, int rank, int dimension, int disp) {
  std::vector<int> coords = coords_of(cart, rank);
  const int here = coords[static_cast<size_t>(dimension)];
  coords[static_cast<size_t>(dimension)] = here - disp;
  const int source = rank_at(cart, coords.data(), true);
  coords[static_cast<size_t>(dimension)] = here + disp;
  const int dest = rank_at(cart, coords.data(), true);
  return {source, dest};
}

}  // namespace

NeighbourPlan plan_of(MPI_Comm comm, int rank) {
  NeighbourPlan plan;
  if (comm->cart) {
    const CartTopology& cart = *comm->cart;
    for (size_t d = 0; d < cart.dims.size(); ++d) {
      const auto [below, above] = shifted(cart, rank, static_cast<int>(d), 1);
      plan.from.insert(plan.from.end(), {below, above});
      // From below it travelled up (+ 1); from above, down.
      plan.from_tags.insert(plan.from_tags.end(), {kTagNeighbor + static_cast<int>(2 * d) + 1,
                                                   kTagNeighbor + static_cast<int>(2 * d)});
      plan.to_tags.insert(plan.to_tags.end(), {kTagNeighbor + static_cast<int>(2 * d),
                                               kTagNeighbor + static_cast<int>(2 * d) + 1});
    }
    plan.to = plan.from;
    return plan;
  }
  if (!comm->graph) fail(MPI_ERR_TOPOLOGY, "the communicator has no process topology");
  plan.from = comm->graph->sources;
  plan.to = comm->graph->destinations;
  plan.from_tags.assign(plan.from.size(), kTagGraphNeighbor);
  plan.to_tags.assign(plan.to.size(), kTagGraphNeighbor);
  return plan;
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

// Greedy, as Open MPI's: every prime factor of what the free dimensions
// must hold, the largest first, multiplies the free dimension that is
// smallest so far; the free dimensions are then sorted, largest first.
int MPI_Dims_create(int nnodes, int ndims, int dims[]) {
  return call("MPI_Dims_create", MPI_COMM_WORLD, [&] {
    if (nnodes <= 0) fail(MPI_ERR_ARG, "nnodes ", nnodes, " is not positive");
    check_ndims(ndims, "ndims");
    if (ndims > 0 && dims == nullptr) fail(MPI_ERR_ARG, "null dims");
    int fixed = 1;  // the product of the given dimensions
    std::vector<size_t> free_dims;
    for (int i = 0; i < ndims; ++i) {
      if (dims[i] < 0) fail(MPI_ERR_DIMS, "dims[", i, "] = ", dims[i], " is negative");
      if (dims[i] == 0) {
        free_dims.push_back(static_cast<size_t>(i));
        continue;
      }
      if (dims[i] > nnodes / fixed) fail(MPI_ERR_DIMS, "the given dims hold more than nnodes ", nnodes);
      fixed *= dims[i];
    }
    if (nnodes % fixed != 0) fail(MPI_ERR_DIMS, "nnodes ", nnodes, " is not a multiple of the given dims' ", fixed);
    int rest = nnodes / fixed;
    if (free_dims.empty()) {
      if (rest != 1) fail(MPI_ERR_DIMS, "every dimension is given and their product is not nnodes ", nnodes);
      return;
    }
    std::vector<int> primes;  // rest's prime factors, smallest first
    for (int p = 2; static_cast<long long>(p) * p <= rest; ++p) {
      while (rest % p == 0) primes.push_back(p), rest /= p;
    }
    if (rest > 1) primes.push_back(rest);
    std::vector<int> made(free_dims.size(), 1);
    for (auto prime = primes.rbegin(); prime != primes.rend(); ++prime) {
      *std::min_element(made.begin(), made.end()) *= *prime;
    }
    std::sort(made.begin(), made.end(), std::greater<int>());
    for (size_t i = 0; i < free_dims.size(); ++i) dims[free_dims[i]] = made[i];
  });
}

int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm* comm_cart) {
  (void)reorder;  // ranks keep their order (the file's comment)
  return call("MPI_Cart_create", comm_old, [&] {
    Comm c = use_comm(comm_old);
    if (comm_cart == nullptr) fail(MPI_ERR_ARG, "null comm_cart");
    *comm_cart = MPI_COMM_NULL;
    check_ndims(ndims, "ndims");
    if (ndims > 0 && periods == nullptr) fail(MPI_ERR_ARG, "null periods");
    const int members = grid_size(ndims, dims, c.size);
    auto cart = std::make_shared<CartTopology>();
    cart->dims.assign(dims, dims + ndims);
    for (int i = 0; i < ndims; ++i) cart->periods.push_back(periods[i] != 0);
    // Collective over comm_old: the ranks past the grid get MPI_COMM_NULL.
    MPI_Comm made = split_comm(comm_old, c, c.rank < members ? 0 : MPI_UNDEFINED, c.rank);
    if (made != MPI_COMM_NULL) made->cart = std::move(cart);
    *comm_cart = made;
  });
}

int MPI_Cartdim_get(MPI_Comm comm, int* ndims) {
  return call("MPI_Cartdim_get", comm, [&] {
    use_comm(comm);
    if (ndims == nullptr) fail(MPI_ERR_ARG, "null ndims");
    *ndims = static_cast<int>(cart_of(comm).dims.size());
  });
}

int MPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
  return call("MPI_Cart_get", comm, [&] {
    Comm c = use_comm(comm);
    const CartTopology& cart = cart_of(comm);
    if (maxdims < 0) fail(MPI_ERR_ARG, "maxdims ", maxdims, " is negative");
    const size_t shown = std::min(static_cast<size_t>(maxdims), cart.dims.size());
    if (shown > 0 && (dims == nullptr || periods == nullptr || coords == nullptr)) {
      fail(MPI_ERR_ARG, "null dims, periods or coords");
    }
    const std::vector<int> mine = coords_of(cart, c.rank);
    for (size_t i = 0; i < shown; ++i) {
      dims[i] = cart.dims[i];
      periods[i] = cart.periods[i] ? 1 : 0;
      coords[i] = mine[i];
    }
  });
}

int MPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
  return call("MPI_Cart_rank", comm, [&] {
    use_comm(comm);
    const CartTopology& cart = cart_of(comm);
    if (rank == nullptr || (!cart.dims.empty() && coords == nullptr)) fail(MPI_ERR_ARG, "null coords or rank");
    *rank = rank_at(cart, coords, false);
  });
}

int MPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  return call("MPI_Cart_coords", comm, [&] {
    Comm c = use_comm(comm);
    const CartTopology& cart = cart_of(comm);
    if (rank < 0 || rank >= c.size) fail(MPI_ERR_RANK, "rank ", rank, " is not in 0..", c.size - 1);
    if (maxdims < static_cast<int>(cart.dims.size())) {
      fail(MPI_ERR_ARG, "maxdims ", maxdims, " is less than the topology's ", cart.dims.size(), " dimensions");
    }
    if (!cart.dims.empty() && coords == nullptr) fail(MPI_ERR_ARG, "null coords");
    const std::vector<int> found = coords_of(cart, rank);
    std::copy(found.begin(), found.end(), coords);
  });
}

int MPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest) {
  return call("MPI_Cart_shift", comm, [&] {
    Comm c = use_comm(comm);
    const CartTopology& cart = cart_of(comm);
    if (rank_source == nullptr || rank_dest == nullptr) fail(MPI_ERR_ARG, "null rank_source or rank_dest");
    if (direction < 0 || direction >= static_cast<int>(cart.dims.size())) {
      fail(MPI_ERR_ARG, "direction ", direction, " is not a dimension of the topology (0..",
           static_cast<int>(cart.dims.size()) - 1, ")");
    }
    std::tie(*rank_source, *rank_dest) = shifted(cart, c.rank, direction, disp);
  });
}

// Collective: each rank joins the ranks that share its coordinates in the
// dimensions left out, ordered as in the parent (row-major over the kept
// dimensions is the parent's order).
int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
  return call("MPI_Cart_sub", comm, [&] {
    Comm c = use_comm(comm);
    const CartTopology& cart = cart_of(comm);
    if (newcomm == nullptr || (!cart.dims.empty() && remain_dims == nullptr)) {
      fail(MPI_ERR_ARG, "null remain_dims or newcomm");
    }
    *newcomm = MPI_COMM_NULL;
    const std::vector<int> mine = coords_of(cart, c.rank);
    auto kept = std::make_shared<CartTopology>();
    int color = 0;
    for (size_t i = 0; i < cart.dims.size(); ++i) {
      if (remain_dims[i] != 0) {
        kept->dims.push_back(cart.dims[i]);
        kept->periods.push_back(cart.periods[i]);
      } else {
        color = color * cart.dims[i] + mine[i];
      }
    }
    MPI_Comm made = split_comm(comm, c, color, c.rank);
    made->cart = std::move(kept);
    *newcomm = made;
  });
}

int MPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int* newrank) {
  (void)periods;  // the mapping keeps ranks in place, whatever wraps
  return call("MPI_Cart_map", comm, [&] {
    Comm c = use_comm(comm);
    if (newrank == nullptr) fail(MPI_ERR_ARG, "null newrank");
    check_ndims(ndims, "ndims");
    *newrank = c.rank < grid_size(ndims, dims, c.size) ? c.rank : MPI_UNDEFINED;
  });
}

int MPI_Topo_test(MPI_Comm comm, int* status) {
  return call("MPI_Topo_test", comm, [&] {
    use_comm(comm);
    if (status == nullptr) fail(MPI_ERR_ARG, "null status");
    *status = comm->cart ? MPI_CART : comm->graph ? comm->graph->kind : MPI_UNDEFINED;
  });
}

}  // extern "C"
