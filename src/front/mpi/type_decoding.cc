// Datatype decoding (MPI-3.1 4.1.13): MPI_Type_get_envelope and
// MPI_Type_get_contents, from the recipe every derived type keeps of how it
// was made (TypeRecipe). chorus flattens a derived type into its memory
// layout when it is made, so the recipe is the only record of the
// constructor; libraries that walk a type (MPI-IO's flattening, mpi4py's
// decode) read it.
#include "mpi/internal.hpp"

namespace chorus::mpi {

std::shared_ptr<const TypeRecipe> make_recipe(int combiner, std::vector<int> integers, std::vector<MPI_Aint> addresses,
                                              const std::vector<MPI_Datatype>& types) {
  auto recipe = std::make_shared<TypeRecipe>();
  recipe->combiner = combiner;
  recipe->integers = std::move(integers);
  recipe->addresses = std::move(addresses);
  recipe->types.reserve(types.size());
  for (MPI_Datatype type : types) {
    if (type->predefined) {
      // Lives as long as the library: held without ownership.
      recipe->types.emplace_back(std::shared_ptr<const chorus_mpi_datatype>(), type);
    } else {
      recipe->types.push_back(std::make_shared<const chorus_mpi_datatype>(*type));
    }
  }
  return recipe;
}

MPI_Datatype with_recipe(TypePtr made, int combiner, std::vector<int> integers, std::vector<MPI_Aint> addresses,
                         const std::vector<MPI_Datatype>& types) {
  made->recipe = make_recipe(combiner, std::move(integers), std::move(addresses), types);
  return made.release();
}

std::vector<int> concat_ints(int count, const int* first, const int* second) {
  std::vector<int> integers{count};
  if (count <= 0) return integers;
  integers.insert(integers.end(), first, first + count);
  if (second != nullptr) integers.insert(integers.end(), second, second + count);
  return integers;
}

std::vector<MPI_Aint> addresses_of(int count, const MPI_Aint* values) {
  if (count <= 0) return {};
  return std::vector<MPI_Aint>(values, values + count);
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {

int MPI_Type_get_envelope(MPI_Datatype datatype, int* num_integers, int* num_addresses, int* num_datatypes,
                          int* combiner) {
  return call("MPI_Type_get_envelope", MPI_COMM_WORLD, [&] {
    const Datatype& type = use_any_type(datatype, "datatype");
    if (num_integers == nullptr || num_addresses == nullptr || num_datatypes == nullptr || combiner == nullptr) {
      fail(MPI_ERR_ARG, "null num_integers, num_addresses, num_datatypes or combiner");
    }
    const TypeRecipe* recipe = type.recipe.get();
    *combiner = recipe == nullptr ? MPI_COMBINER_NAMED : recipe->combiner;
    *num_integers = recipe == nullptr ? 0 : static_cast<int>(recipe->integers.size());
    *num_addresses = recipe == nullptr ? 0 : static_cast<int>(recipe->addresses.size());
    *num_datatypes = recipe == nullptr ? 0 : static_cast<int>(recipe->types.size());
  });
}

// A derived argument type comes back as a new handle, which the caller
// frees (MPI-3.1 4.1.13); a predefined one as itself.
int MPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses, int max_datatypes,
                          int array_of_integers[], MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[]) {
  return call("MPI_Type_get_contents", MPI_COMM_WORLD, [&] {
    const Datatype& type = use_any_type(datatype, "datatype");
    if (!type.recipe) fail(MPI_ERR_TYPE, type.name, " is predefined (MPI_COMBINER_NAMED): it has no contents");
    const TypeRecipe& recipe = *type.recipe;
    auto check_room = [](int max, size_t needed, const void* array, const char* role) {
      if (max < 0 || static_cast<size_t>(max) < needed) {
        fail(MPI_ERR_ARG, role, ": room for ", max, " where MPI_Type_get_envelope said ", needed);
      }
      if (needed > 0 && array == nullptr) fail(MPI_ERR_ARG, "null ", role);
    };
    check_room(max_integers, recipe.integers.size(), array_of_integers, "array_of_integers");
    check_room(max_addresses, recipe.addresses.size(), array_of_addresses, "array_of_addresses");
    check_room(max_datatypes, recipe.types.size(), array_of_datatypes, "array_of_datatypes");
    // Every copy is made before any is handed out: a failure leaks none.
    std::vector<TypePtr> copies(recipe.types.size());
    for (size_t i = 0; i < recipe.types.size(); ++i) {
      if (!recipe.types[i]->predefined) copies[i] = std::make_unique<chorus_mpi_datatype>(*recipe.types[i]);
    }
    std::copy(recipe.integers.begin(), recipe.integers.end(), array_of_integers);
    std::copy(recipe.addresses.begin(), recipe.addresses.end(), array_of_addresses);
    for (size_t i = 0; i < recipe.types.size(); ++i) {
      array_of_datatypes[i] =
          copies[i] ? copies[i].release() : const_cast<MPI_Datatype>(recipe.types[i].get());  // predefined
    }
  });
}

}  // extern "C"
