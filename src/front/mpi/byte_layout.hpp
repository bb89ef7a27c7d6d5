// ByteLayout: how the blocks of a v- or w-collective lie in the user's
// buffer and in the bytes chorus moves (rooted.cc).
#pragma once

#include "mpi/internal.hpp"

#include <algorithm>

namespace chorus::mpi {

// Where the blocks of a v- or w-layout travel from or to, in bytes: the
// user's buffer itself where every type is contiguous, else a packed
// temporary (`packed`) whose blocks follow one another. It keeps copies of
// the types (an I-form's caller may free them before the request
// completes) and of the counts, so it can unpack after the call returned.
struct ByteLayout {
  std::vector<size_t> counts, displs;  // bytes chorus moves per rank, and where in base()
  std::vector<size_t> element_counts;  // elements per rank
  std::vector<size_t> user_offsets;    // bytes from the start of the user's buffer per rank
  std::vector<Datatype> types;         // one for all ranks, or one per rank (w-forms)
  bool direct = true;
  Bytes packed;

  // v-forms: displacements in elements of `type`.
  ByteLayout(std::vector<size_t> element_counts_in, const std::vector<size_t>& element_displs, const Datatype& type)
      : element_counts(std::move(element_counts_in)), types{type} {
    user_offsets.resize(element_displs.size());
    for (size_t r = 0; r < element_displs.size(); ++r) {
      user_offsets[r] = element_displs[r] * static_cast<size_t>(type.extent);
    }
    lay_out();
  }
  // w-forms: displacements in bytes, a type per rank.
  ByteLayout(std::vector<size_t> element_counts_in, std::vector<size_t> byte_displs, std::vector<Datatype> per_rank)
      : element_counts(std::move(element_counts_in)), user_offsets(std::move(byte_displs)), types(std::move(per_rank)) {
    lay_out();
  }
  const Datatype& type(size_t rank) const { return types.size() == 1 ? types[0] : types[rank]; }
  // The buffer chorus reads or writes: the user's, or the packed temporary.
  std::byte* base(void* user) { return direct ? static_cast<std::byte*>(user) : packed.data(); }
  std::byte* block(void* user, size_t rank) { return base(user) + displs[rank]; }
  // Packed temporary <-> user memory, block by block (not for `skip`).
  void unpack_into(void* user, size_t skip = SIZE_MAX) const {
    if (direct) return;
    for (size_t r = 0; r < counts.size(); ++r) {
      if (r != skip) unpack(packed.data() + displs[r], element_counts[r], type(r), user_block(user, r));
    }
  }
  void pack_from(const void* user) {
    if (direct) return;
    for (size_t r = 0; r < counts.size(); ++r) pack_one(user, r);
  }
  void pack_one(const void* user, size_t rank) {
    if (!direct) pack(user_block(const_cast<void*>(user), rank), element_counts[rank], type(rank), packed.data() + displs[rank]);
  }

 private:
  static std::byte* user_block_of(void* user, size_t offset) { return static_cast<std::byte*>(user) + offset; }
  std::byte* user_block(void* user, size_t rank) const { return user_block_of(user, user_offsets[rank]); }
  void lay_out() {
    const size_t ranks = element_counts.size();
    counts.resize(ranks);
    displs.resize(ranks);
    direct = std::all_of(types.begin(), types.end(), [](const Datatype& t) { return t.contiguous(); });
    size_t offset = 0;
    for (size_t r = 0; r < ranks; ++r) {
      counts[r] = packed_bytes(element_counts[r], type(r));
      displs[r] = direct ? user_offsets[r] : offset;
      offset += counts[r];
    }
    if (!direct) packed.resize(offset);
  }
};

}  // namespace chorus::mpi
