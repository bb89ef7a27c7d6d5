// The array types (MPI-3.1 4.1.3, 4.1.4): MPI_Type_create_subarray and
// MPI_Type_create_darray. Both lay out the elements one process holds of
// an n-dimensional array, row by row of the fastest dimension (the last in
// C order, the first in Fortran order), and span the whole array: lb 0,
// extent the array's bytes.
#include "mpi/internal.hpp"

#include <algorithm>
#include <climits>

namespace chorus::mpi {
namespace {

void check_new_type(MPI_Datatype* newtype) {
  if (newtype == nullptr) fail(MPI_ERR_ARG, "null newtype");
}

// The indices along one dimension of `global` elements that process
// coordinate `coordinate` of `processes` holds under `distribution`
// (MPI-3.1 4.1.4), in increasing order.
std::vector<int> held_indices(size_t d, int global, int distribution, int darg, int processes, int coordinate) {
  std::vector<int> held;
  if (distribution == MPI_DISTRIBUTE_NONE) {
    if (processes != 1) fail(MPI_ERR_ARG, "dimension ", d, " is not distributed but has ", processes, " processes");
    for (int i = 0; i < global; ++i) held.push_back(i);
    return held;
  }
  if (distribution != MPI_DISTRIBUTE_BLOCK && distribution != MPI_DISTRIBUTE_CYCLIC) {
    fail(MPI_ERR_ARG, "dimension ", d, ": distribution ", distribution, " is not BLOCK, CYCLIC or NONE");
  }
  if (darg != MPI_DISTRIBUTE_DFLT_DARG && darg <= 0) {
    fail(MPI_ERR_ARG, "dimension ", d, ": distribution argument ", darg, " is not positive");
  }
  if (distribution == MPI_DISTRIBUTE_BLOCK) {
    const long long block = darg == MPI_DISTRIBUTE_DFLT_DARG ? (global + processes - 1) / processes : darg;
    if (block * processes < global) {
      fail(MPI_ERR_ARG, "dimension ", d, ": blocks of ", block, " on ", processes, " processes hold less than ",
           global, " elements");
    }
    const long long first = coordinate * block, end = std::min<long long>(first + block, global);
    for (long long i = first; i < end; ++i) held.push_back(static_cast<int>(i));
    return held;
  }
  const int block = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
  for (int i = 0; i < global; ++i) {
    if ((i / block) % processes == coordinate) held.push_back(i);
  }
  return held;
}

}  // namespace
}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                             const int array_of_starts[], int order, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return call("MPI_Type_create_subarray", MPI_COMM_WORLD, [&] {
    const Datatype& old = use_any_type(oldtype, "oldtype");
    check_new_type(newtype);
    if (ndims <= 0) fail(MPI_ERR_ARG, "ndims ", ndims, " is not positive");
    if (array_of_sizes == nullptr || array_of_subsizes == nullptr || array_of_starts == nullptr) {
      fail(MPI_ERR_ARG, "null array_of_sizes, array_of_subsizes or array_of_starts");
    }
    if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN) fail(MPI_ERR_ARG, "order ", order, " is neither C nor Fortran");
    const auto dims = static_cast<size_t>(ndims);
    for (size_t d = 0; d < dims; ++d) {
      if (array_of_sizes[d] <= 0 || array_of_subsizes[d] <= 0 || array_of_subsizes[d] > array_of_sizes[d] ||
          array_of_starts[d] < 0 || array_of_starts[d] > array_of_sizes[d] - array_of_subsizes[d]) {
        fail(MPI_ERR_ARG, "dimension ", d, ": size ", array_of_sizes[d], ", subsize ", array_of_subsizes[d], ", start ",
             array_of_starts[d], " (need 0 < subsize <= size and 0 <= start <= size - subsize)");
      }
    }
    // Dimension k from the fastest-varying: the last in C order, the first in Fortran order.
    auto dim = [&](size_t k) { return order == MPI_ORDER_C ? dims - 1 - k : k; };
    std::vector<MPI_Aint> stride(dims);  // bytes between neighbours along dimension k
    MPI_Aint bytes = old.extent;
    for (size_t k = 0; k < dims; ++k) {
      stride[k] = bytes;
      bytes *= array_of_sizes[dim(k)];
    }
    // One piece per row of the fastest dimension, in memory order.
    std::vector<Piece> pieces;
    std::vector<int> index(dims, 0);  // position inside the subarray, dimensions 1.. (k = 0 is the row)
    while (true) {
      MPI_Aint offset = 0;
      for (size_t k = 0; k < dims; ++k) offset += (array_of_starts[dim(k)] + (k == 0 ? 0 : index[k])) * stride[k];
      pieces.push_back(Piece{&old, offset, static_cast<size_t>(array_of_subsizes[dim(0)])});
      size_t k = 1;
      while (k < dims && ++index[k] == array_of_subsizes[dim(k)]) index[k++] = 0;
      if (k == dims) break;
    }
    // The type spans the whole array (MPI-3.1 4.1.3): lb 0, extent its size.
    std::vector<int> integers{ndims};
    for (const int* array : {array_of_sizes, array_of_subsizes, array_of_starts}) {
      integers.insert(integers.end(), array, array + ndims);
    }
    integers.push_back(order);
    *newtype = with_recipe(derive(pieces, std::make_pair(MPI_Aint{0}, bytes)), MPI_COMBINER_SUBARRAY,
                           std::move(integers), {}, {oldtype});
  });
}

int MPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[], const int array_of_distribs[],
                           const int array_of_dargs[], const int array_of_psizes[], int order, MPI_Datatype oldtype,
                           MPI_Datatype* newtype) {
  return call("MPI_Type_create_darray", MPI_COMM_WORLD, [&] {
    const Datatype& old = use_any_type(oldtype, "oldtype");
    check_new_type(newtype);
    if (size <= 0 || rank < 0 || rank >= size) fail(MPI_ERR_ARG, "rank ", rank, " is not in a group of ", size);
    if (ndims <= 0) fail(MPI_ERR_ARG, "ndims ", ndims, " is not positive");
    if (array_of_gsizes == nullptr || array_of_distribs == nullptr || array_of_dargs == nullptr ||
        array_of_psizes == nullptr) {
      fail(MPI_ERR_ARG, "null array_of_gsizes, array_of_distribs, array_of_dargs or array_of_psizes");
    }
    if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN) fail(MPI_ERR_ARG, "order ", order, " is neither C nor Fortran");
    const auto dims = static_cast<size_t>(ndims);
    long long grid = 1;
    for (size_t d = 0; d < dims; ++d) {
      if (array_of_gsizes[d] <= 0 || array_of_psizes[d] <= 0) {
        fail(MPI_ERR_ARG, "dimension ", d, ": size ", array_of_gsizes[d], ", processes ", array_of_psizes[d],
             " (both must be positive)");
      }
      grid *= array_of_psizes[d];
      if (grid > size) break;
    }
    if (grid != size) fail(MPI_ERR_ARG, "the process grid does not hold ", size, " processes");
    // The process grid is row-major whatever the array's order (MPI-3.1 4.1.4).
    std::vector<int> coordinate(dims);
    for (size_t d = dims, rest = static_cast<size_t>(rank); d-- > 0;) {
      coordinate[d] = static_cast<int>(rest % static_cast<size_t>(array_of_psizes[d]));
      rest /= static_cast<size_t>(array_of_psizes[d]);
    }
    std::vector<std::vector<int>> held(dims);
    for (size_t d = 0; d < dims; ++d) {
      held[d] = held_indices(d, array_of_gsizes[d], array_of_distribs[d], array_of_dargs[d], array_of_psizes[d],
                             coordinate[d]);
    }
    // Dimension k from the fastest-varying, as in subarray.
    auto dim = [&](size_t k) { return order == MPI_ORDER_C ? dims - 1 - k : k; };
    std::vector<MPI_Aint> stride(dims);
    MPI_Aint bytes = old.extent;
    for (size_t k = 0; k < dims; ++k) {
      stride[k] = bytes;
      if (array_of_gsizes[dim(k)] > LLONG_MAX / std::max<MPI_Aint>(bytes, 1)) fail(MPI_ERR_ARG, "the array overflows");
      bytes *= array_of_gsizes[dim(k)];
    }
    std::vector<Piece> pieces;
    const bool empty = std::any_of(held.begin(), held.end(), [](const std::vector<int>& h) { return h.empty(); });
    std::vector<size_t> index(dims, 0);  // position in held[dim(k)], dimensions 1..
    while (!empty) {
      MPI_Aint row = 0;
      for (size_t k = 1; k < dims; ++k) row += held[dim(k)][index[k]] * stride[k];
      // The row's held indices, as runs of neighbours.
      const std::vector<int>& fastest = held[dim(0)];
      for (size_t i = 0; i < fastest.size();) {
        size_t j = i + 1;
        while (j < fastest.size() && fastest[j] == fastest[j - 1] + 1) ++j;
        pieces.push_back(Piece{&old, row + fastest[i] * stride[0], j - i});
        i = j;
      }
      size_t k = 1;
      while (k < dims && ++index[k] == held[dim(k)].size()) index[k++] = 0;
      if (k >= dims) break;
    }
    std::vector<int> integers{size, rank, ndims};
    for (const int* array : {array_of_gsizes, array_of_distribs, array_of_dargs, array_of_psizes}) {
      integers.insert(integers.end(), array, array + ndims);
    }
    integers.push_back(order);
    *newtype = with_recipe(derive(pieces, std::make_pair(MPI_Aint{0}, bytes)), MPI_COMBINER_DARRAY,
                           std::move(integers), {}, {oldtype});
  });
}

}  // extern "C"
