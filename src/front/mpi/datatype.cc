// Datatypes: the predefined ones, derived types (contiguous, vector,
// hvector, indexed, hindexed, indexed_block, hindexed_block, struct,
// resized, dup; subarray and darray are in array_types.cc), and packing
// between a buffer's memory layout and the packed bytes that travel.
//
// A type is described by the memory layout of one element (a list of blocks,
// in type-map order; none means the element is `extent` contiguous bytes)
// and the basic element type predefined reductions see. Predefined types,
// including the value-index pairs, are contiguous: their padding travels
// with them (MPI_DOUBLE_INT is 12 bytes of data but 16 on the wire), so
// packed and memory layouts coincide for them.
#include "mpi/internal.hpp"
#include "common/copy.hpp"

#include <algorithm>
#include <climits>
#include <complex>
#include <optional>
#include <cstdio>
#include <cstring>
#include <type_traits>

namespace chorus::mpi {

namespace {

template <class T>
constexpr Basic integer_basic() {
  static_assert(std::is_integral_v<T>);
  constexpr bool is_signed = std::is_signed_v<T>;
  switch (sizeof(T)) {
    case 1: return is_signed ? Basic::i8 : Basic::u8;
    case 2: return is_signed ? Basic::i16 : Basic::u16;
    case 4: return is_signed ? Basic::i32 : Basic::u32;
    default: return is_signed ? Basic::i64 : Basic::u64;
  }
}

template <class V>
struct ValueIndex {
  V value;
  int index;
};

// A predefined type: one contiguous element of `extent` bytes holding `size` bytes of data.
chorus_mpi_datatype predefined(const char* name, Basic basic, size_t size, size_t extent, size_t alignment) {
  return chorus_mpi_datatype{kTypeMagic, name, basic, 1, static_cast<int>(size), static_cast<MPI_Aint>(extent),
                             extent, true, true, {}, 0, {}, {}, alignment};
}

template <class T>
chorus_mpi_datatype scalar(const char* name, Basic basic) {
  return predefined(name, basic, sizeof(T), sizeof(T), alignof(T));
}

template <class V>
chorus_mpi_datatype pair(const char* name, Basic basic) {
  return predefined(name, basic, sizeof(V) + sizeof(int), sizeof(ValueIndex<V>), alignof(ValueIndex<V>));
}

// Appends `block` to `blocks`, merging it into the previous one when adjacent.
void append(std::vector<Block>& blocks, Block block) {
  if (block.length == 0) return;
  if (!blocks.empty() && blocks.back().offset + static_cast<MPI_Aint>(blocks.back().length) == block.offset) {
    blocks.back().length += block.length;
    return;
  }
  blocks.push_back(block);
}

// The blocks of one element of `type` shifted by `offset`, appended.
void append_element(std::vector<Block>& blocks, const Datatype& type, MPI_Aint offset) {
  if (type.contiguous()) return append(blocks, Block{offset, type.packed_size});
  for (const Block& block : type.blocks) append(blocks, Block{offset + block.offset, block.length});
}

}  // namespace

TypePtr derive(const std::vector<Piece>& pieces, std::optional<std::pair<MPI_Aint, MPI_Aint>> bounds) {
  auto type = std::make_unique<chorus_mpi_datatype>();
  type->magic = kTypeMagic;
  type->name = "";
  type->basic = pieces.empty() ? Basic::opaque : pieces.front().type->basic;
  type->basic_count = 0;
  type->predefined = false;
  type->committed = false;
  type->packed_size = 0;
  type->alignment = 1;
  long long size = 0;
  MPI_Aint lb = 0, ub = 0;
  bool first = true;
  for (const Piece& piece : pieces) {
    const Datatype& old = *piece.type;
    // Predefined reductions need one basic type throughout.
    if (old.basic != type->basic) type->basic = Basic::opaque;
    type->alignment = std::max(type->alignment, old.alignment);
    type->basic_count += piece.count * old.basic_count;
    type->packed_size += piece.count * old.packed_size;
    size += static_cast<long long>(piece.count) * old.size;
    if (size > INT_MAX) fail(MPI_ERR_ARG, "the type would hold more than INT_MAX bytes");
    for (size_t i = 0; i < piece.count; ++i) {
      append_element(type->blocks, old, piece.displacement + static_cast<MPI_Aint>(i) * old.extent);
    }
    if (piece.count == 0) continue;
    const MPI_Aint low = piece.displacement + old.lb;
    const MPI_Aint high = low + static_cast<MPI_Aint>(piece.count - 1) * old.extent + old.extent;
    lb = first ? low : std::min(lb, low);
    ub = first ? high : std::max(ub, high);
    first = false;
  }
  type->size = static_cast<int>(size);
  type->lb = bounds ? bounds->first : lb;
  const auto align = static_cast<MPI_Aint>(type->alignment);
  type->extent = bounds ? bounds->second : (ub - lb + align - 1) / align * align;
  const bool one_piece = type->blocks.size() == 1 && type->blocks[0].offset == 0 &&
                         static_cast<MPI_Aint>(type->blocks[0].length) == type->extent && type->lb == 0;
  if (one_piece || type->packed_size == 0) type->blocks.clear();
  if (type->packed_size == 0) type->extent = std::max<MPI_Aint>(type->extent, 0);
  return type;
}

namespace {

// `elements` elements of `old` at the given element offsets (in units of
// old's extent): contiguous, vector, indexed.
TypePtr derive(const Datatype& old, const std::vector<MPI_Aint>& element_offsets, MPI_Aint extent_elements) {
  std::vector<Piece> pieces;
  pieces.reserve(element_offsets.size());
  for (MPI_Aint index : element_offsets) pieces.push_back(Piece{&old, index * old.extent, 1});
  return derive(pieces, std::make_pair(old.lb, extent_elements * old.extent));
}

void check_new_type(MPI_Datatype* newtype) {
  if (newtype == nullptr) fail(MPI_ERR_ARG, "null newtype");
}

// The pieces of the indexed family and struct: `count` blocks, each of
// lengths[i] (or *same_length) elements of old (or types[i]) at
// displacement displs[i] * unit (int displacements) or byte_displs[i].
std::vector<Piece> indexed_pieces(int count, const int* lengths, const int* same_length, const int* displs,
                                  const MPI_Aint* byte_displs, const Datatype* old, const MPI_Datatype* types,
                                  MPI_Aint unit) {
  const size_t n = use_count(count, "count");
  if (n > 0 && lengths == nullptr && same_length == nullptr) fail(MPI_ERR_ARG, "null array_of_blocklengths");
  if (n > 0 && displs == nullptr && byte_displs == nullptr) fail(MPI_ERR_ARG, "null array_of_displacements");
  std::vector<Piece> pieces;
  for (size_t i = 0; i < n; ++i) {
    const size_t length = use_count(same_length != nullptr ? *same_length : lengths[i], "blocklength");
    const Datatype& type = old != nullptr ? *old : use_any_type(types[i], "array_of_types[i]");
    const MPI_Aint displacement = displs != nullptr ? static_cast<MPI_Aint>(displs[i]) * unit : byte_displs[i];
    pieces.push_back(Piece{&type, displacement, length});
  }
  return pieces;
}

// The lowest and highest byte one element of `type` touches.
std::pair<MPI_Aint, MPI_Aint> true_bounds(const Datatype& type) {
  if (type.contiguous()) return {0, type.predefined ? type.size : type.extent};
  MPI_Aint low = type.blocks.front().offset, high = low;
  for (const Block& block : type.blocks) {
    low = std::min(low, block.offset);
    high = std::max(high, block.offset + static_cast<MPI_Aint>(block.length));
  }
  return {low, high};
}

}  // namespace

const Datatype& use_any_type(MPI_Datatype datatype, const char* role) {
  if (datatype == MPI_DATATYPE_NULL) fail(MPI_ERR_TYPE, role, " is MPI_DATATYPE_NULL");
  if (datatype->magic != kTypeMagic) fail(MPI_ERR_TYPE, role, " is not a valid datatype (freed?)");
  return *datatype;
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {
// Sizes and names as MPI-3.1 (and Open MPI) report them; MPI_LONG_LONG and
// MPI_C_FLOAT_COMPLEX are synonyms of the types named here.
struct chorus_mpi_datatype chorus_mpi_char = scalar<char>("MPI_CHAR", integer_basic<char>());
struct chorus_mpi_datatype chorus_mpi_signed_char = scalar<signed char>("MPI_SIGNED_CHAR", Basic::i8);
struct chorus_mpi_datatype chorus_mpi_unsigned_char = scalar<unsigned char>("MPI_UNSIGNED_CHAR", Basic::u8);
struct chorus_mpi_datatype chorus_mpi_byte = scalar<unsigned char>("MPI_BYTE", Basic::byte);
struct chorus_mpi_datatype chorus_mpi_short = scalar<short>("MPI_SHORT", integer_basic<short>());
struct chorus_mpi_datatype chorus_mpi_unsigned_short =
    scalar<unsigned short>("MPI_UNSIGNED_SHORT", integer_basic<unsigned short>());
struct chorus_mpi_datatype chorus_mpi_int = scalar<int>("MPI_INT", integer_basic<int>());
struct chorus_mpi_datatype chorus_mpi_unsigned = scalar<unsigned>("MPI_UNSIGNED", integer_basic<unsigned>());
struct chorus_mpi_datatype chorus_mpi_long = scalar<long>("MPI_LONG", integer_basic<long>());
struct chorus_mpi_datatype chorus_mpi_unsigned_long =
    scalar<unsigned long>("MPI_UNSIGNED_LONG", integer_basic<unsigned long>());
struct chorus_mpi_datatype chorus_mpi_long_long_int =
    scalar<long long>("MPI_LONG_LONG_INT", integer_basic<long long>());
struct chorus_mpi_datatype chorus_mpi_unsigned_long_long =
    scalar<unsigned long long>("MPI_UNSIGNED_LONG_LONG", integer_basic<unsigned long long>());
struct chorus_mpi_datatype chorus_mpi_float = scalar<float>("MPI_FLOAT", Basic::f32);
struct chorus_mpi_datatype chorus_mpi_double = scalar<double>("MPI_DOUBLE", Basic::f64);
struct chorus_mpi_datatype chorus_mpi_long_double = scalar<long double>("MPI_LONG_DOUBLE", Basic::f80);
struct chorus_mpi_datatype chorus_mpi_c_bool = scalar<bool>("MPI_C_BOOL", Basic::boolean);
struct chorus_mpi_datatype chorus_mpi_int8_t = scalar<int8_t>("MPI_INT8_T", Basic::i8);
struct chorus_mpi_datatype chorus_mpi_int16_t = scalar<int16_t>("MPI_INT16_T", Basic::i16);
struct chorus_mpi_datatype chorus_mpi_int32_t = scalar<int32_t>("MPI_INT32_T", Basic::i32);
struct chorus_mpi_datatype chorus_mpi_int64_t = scalar<int64_t>("MPI_INT64_T", Basic::i64);
struct chorus_mpi_datatype chorus_mpi_uint8_t = scalar<uint8_t>("MPI_UINT8_T", Basic::u8);
struct chorus_mpi_datatype chorus_mpi_uint16_t = scalar<uint16_t>("MPI_UINT16_T", Basic::u16);
struct chorus_mpi_datatype chorus_mpi_uint32_t = scalar<uint32_t>("MPI_UINT32_T", Basic::u32);
struct chorus_mpi_datatype chorus_mpi_uint64_t = scalar<uint64_t>("MPI_UINT64_T", Basic::u64);
struct chorus_mpi_datatype chorus_mpi_c_complex = scalar<std::complex<float>>("MPI_C_COMPLEX", Basic::c32);
struct chorus_mpi_datatype chorus_mpi_c_double_complex =
    scalar<std::complex<double>>("MPI_C_DOUBLE_COMPLEX", Basic::c64);
struct chorus_mpi_datatype chorus_mpi_double_complex = scalar<std::complex<double>>("MPI_DOUBLE_COMPLEX", Basic::c64);
struct chorus_mpi_datatype chorus_mpi_float_int = pair<float>("MPI_FLOAT_INT", Basic::float_int);
struct chorus_mpi_datatype chorus_mpi_double_int = pair<double>("MPI_DOUBLE_INT", Basic::double_int);
struct chorus_mpi_datatype chorus_mpi_long_int = pair<long>("MPI_LONG_INT", Basic::long_int);
struct chorus_mpi_datatype chorus_mpi_2int = pair<int>("MPI_2INT", Basic::two_int);
struct chorus_mpi_datatype chorus_mpi_short_int = pair<short>("MPI_SHORT_INT", Basic::short_int);
struct chorus_mpi_datatype chorus_mpi_long_double_int = pair<long double>("MPI_LONG_DOUBLE_INT", Basic::long_double_int);
struct chorus_mpi_datatype chorus_mpi_aint = scalar<MPI_Aint>("MPI_AINT", integer_basic<MPI_Aint>());
struct chorus_mpi_datatype chorus_mpi_offset = scalar<MPI_Offset>("MPI_OFFSET", integer_basic<MPI_Offset>());
struct chorus_mpi_datatype chorus_mpi_count = scalar<MPI_Count>("MPI_COUNT", integer_basic<MPI_Count>());
struct chorus_mpi_datatype chorus_mpi_wchar = scalar<wchar_t>("MPI_WCHAR", Basic::opaque);
struct chorus_mpi_datatype chorus_mpi_packed = scalar<unsigned char>("MPI_PACKED", Basic::opaque);
}

namespace chorus::mpi {

void refuse_type(MPI_Datatype datatype, const char* role) {
  use_any_type(datatype, role);
  fail(MPI_ERR_TYPE, role, " was not committed (MPI_Type_commit)");
}

void refuse_packed_bytes(size_t count) { fail(MPI_ERR_COUNT, "count ", count, " overflows"); }

void pack(const void* buffer, size_t count, const Datatype& type, void* packed) {
  auto* out = static_cast<std::byte*>(packed);
  if (type.contiguous()) {
    if (count != 0) copy_bytes(out, buffer, count * type.packed_size);
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const std::byte* base = element(buffer, i, type);
    for (const Block& block : type.blocks) {
      copy_bytes(out, base + block.offset, block.length);
      out += block.length;
    }
  }
}

void unpack(const void* packed, size_t count, const Datatype& type, void* buffer) {
  const auto* in = static_cast<const std::byte*>(packed);
  if (type.contiguous()) {
    if (count != 0) move_bytes(buffer, in, count * type.packed_size);
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    std::byte* base = element(buffer, i, type);
    for (const Block& block : type.blocks) {
      copy_bytes(base + block.offset, in, block.length);
      in += block.length;
    }
  }
}

Bytes pack_copy(const void* buffer, size_t count, const Datatype& type) {
  Bytes packed(packed_bytes(count, type));
  pack(buffer, count, type, packed.data());
  return packed;
}

PackedView packed_view(const void* buffer, size_t count, const Datatype& type) {
  if (type.contiguous()) return PackedView{buffer, packed_bytes(count, type), {}};
  Bytes storage = pack_copy(buffer, count, type);
  const void* data = storage.data();
  const size_t bytes = storage.size();
  return PackedView{data, bytes, std::move(storage)};
}

}  // namespace chorus::mpi

extern "C" {

int MPI_Type_size(MPI_Datatype datatype, int* size) {
  return call("MPI_Type_size", MPI_COMM_WORLD, [&] {
    const Datatype& type = use_any_type(datatype, "datatype");
    if (size == nullptr) fail(MPI_ERR_ARG, "null size");
    *size = type.size;
  });
}

int MPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent) {
  return call("MPI_Type_get_extent", MPI_COMM_WORLD, [&] {
    const Datatype& type = use_any_type(datatype, "datatype");
    if (lb == nullptr || extent == nullptr) fail(MPI_ERR_ARG, "null lb or extent");
    *lb = type.lb;
    *extent = type.extent;
  });
}

int MPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen) {
  return call("MPI_Type_get_name", MPI_COMM_WORLD, [&] {
    const Datatype& type = use_any_type(datatype, "datatype");
    if (type_name == nullptr || resultlen == nullptr) fail(MPI_ERR_ARG, "null type_name or resultlen");
    std::snprintf(type_name, MPI_MAX_OBJECT_NAME, "%s", type.user_name.empty() ? type.name : type.user_name.c_str());
    *resultlen = static_cast<int>(std::strlen(type_name));
  });
}

int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return call("MPI_Type_contiguous", MPI_COMM_WORLD, [&] {
    const size_t n = use_count(count, "count");
    const Datatype& old = use_any_type(oldtype, "oldtype");
    if (newtype == nullptr) fail(MPI_ERR_ARG, "null newtype");
    std::vector<MPI_Aint> offsets(n);
    for (size_t i = 0; i < n; ++i) offsets[i] = static_cast<MPI_Aint>(i);
    *newtype = with_recipe(derive(old, offsets, static_cast<MPI_Aint>(n)), MPI_COMBINER_CONTIGUOUS, {count}, {},
                           {oldtype});
  });
}

int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return call("MPI_Type_vector", MPI_COMM_WORLD, [&] {
    const size_t blocks = use_count(count, "count");
    const size_t length = use_count(blocklength, "blocklength");
    const Datatype& old = use_any_type(oldtype, "oldtype");
    if (newtype == nullptr) fail(MPI_ERR_ARG, "null newtype");
    // A negative stride would put blocks before the start of the element;
    // hvector with a negative byte stride or a resized type does that.
    if (stride < 0) fail(MPI_ERR_ARG, "negative stride ", stride, " is not supported by the chorus MPI subset");
    std::vector<MPI_Aint> offsets;
    offsets.reserve(blocks * length);
    for (size_t b = 0; b < blocks; ++b) {
      for (size_t i = 0; i < length; ++i) {
        offsets.push_back(static_cast<MPI_Aint>(b) * stride + static_cast<MPI_Aint>(i));
      }
    }
    const MPI_Aint extent = blocks == 0 ? 0 : static_cast<MPI_Aint>(blocks - 1) * stride + static_cast<MPI_Aint>(length);
    *newtype = with_recipe(derive(old, offsets, extent), MPI_COMBINER_VECTOR, {count, blocklength, stride}, {},
                           {oldtype});
  });
}

int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return call("MPI_Type_create_hvector", MPI_COMM_WORLD, [&] {
    const size_t blocks = use_count(count, "count");
    const size_t length = use_count(blocklength, "blocklength");
    const Datatype& old = use_any_type(oldtype, "oldtype");
    check_new_type(newtype);
    std::vector<Piece> pieces;
    for (size_t b = 0; b < blocks; ++b) pieces.push_back(Piece{&old, static_cast<MPI_Aint>(b) * stride, length});
    *newtype = with_recipe(derive(pieces), MPI_COMBINER_HVECTOR, {count, blocklength}, {stride}, {oldtype});
  });
}

int MPI_Type_indexed(int count, const int array_of_blocklengths[], const int array_of_displacements[],
                     MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return call("MPI_Type_indexed", MPI_COMM_WORLD, [&] {
    const Datatype& old = use_any_type(oldtype, "oldtype");
    check_new_type(newtype);
    TypePtr made = derive(indexed_pieces(count, array_of_blocklengths, nullptr, array_of_displacements, nullptr,
                                              &old, nullptr, old.extent));
    *newtype = with_recipe(std::move(made), MPI_COMBINER_INDEXED,
                           concat_ints(count, array_of_blocklengths, array_of_displacements), {}, {oldtype});
  });
}

int MPI_Type_create_hindexed(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                             MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return call("MPI_Type_create_hindexed", MPI_COMM_WORLD, [&] {
    const Datatype& old = use_any_type(oldtype, "oldtype");
    check_new_type(newtype);
    TypePtr made = derive(indexed_pieces(count, array_of_blocklengths, nullptr, nullptr, array_of_displacements,
                                              &old, nullptr, 1));
    *newtype = with_recipe(std::move(made), MPI_COMBINER_HINDEXED, concat_ints(count, array_of_blocklengths),
                           addresses_of(count, array_of_displacements), {oldtype});
  });
}

int MPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[], MPI_Datatype oldtype,
                                  MPI_Datatype* newtype) {
  return call("MPI_Type_create_indexed_block", MPI_COMM_WORLD, [&] {
    const Datatype& old = use_any_type(oldtype, "oldtype");
    check_new_type(newtype);
    TypePtr made = derive(indexed_pieces(count, nullptr, &blocklength, array_of_displacements, nullptr, &old,
                                              nullptr, old.extent));
    std::vector<int> integers = concat_ints(count, array_of_displacements);
    integers.insert(integers.begin() + 1, blocklength);
    *newtype = with_recipe(std::move(made), MPI_COMBINER_INDEXED_BLOCK, std::move(integers), {}, {oldtype});
  });
}

int MPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint array_of_displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return call("MPI_Type_create_hindexed_block", MPI_COMM_WORLD, [&] {
    const Datatype& old = use_any_type(oldtype, "oldtype");
    check_new_type(newtype);
    TypePtr made =
        derive(indexed_pieces(count, nullptr, &blocklength, nullptr, array_of_displacements, &old, nullptr, 1));
    *newtype = with_recipe(std::move(made), MPI_COMBINER_HINDEXED_BLOCK, {count, blocklength},
                           addresses_of(count, array_of_displacements), {oldtype});
  });
}

int MPI_Type_create_struct(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                           const MPI_Datatype array_of_types[], MPI_Datatype* newtype) {
  return call("MPI_Type_create_struct", MPI_COMM_WORLD, [&] {
    check_new_type(newtype);
    if (count > 0 && array_of_types == nullptr) fail(MPI_ERR_ARG, "null array_of_types");
    TypePtr made = derive(indexed_pieces(count, array_of_blocklengths, nullptr, nullptr, array_of_displacements,
                                              nullptr, array_of_types, 1));
    *newtype = with_recipe(std::move(made), MPI_COMBINER_STRUCT, concat_ints(count, array_of_blocklengths),
                           addresses_of(count, array_of_displacements),
                           std::vector<MPI_Datatype>(array_of_types, array_of_types + count));
  });
}

int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype* newtype) {
  return call("MPI_Type_create_resized", MPI_COMM_WORLD, [&] {
    const Datatype& old = use_any_type(oldtype, "oldtype");
    check_new_type(newtype);
    if (extent < 0) fail(MPI_ERR_ARG, "negative extent ", extent);
    *newtype = with_recipe(derive({Piece{&old, 0, 1}}, std::make_pair(lb, extent)), MPI_COMBINER_RESIZED, {},
                           {lb, extent}, {oldtype});
  });
}

int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return call("MPI_Type_dup", MPI_COMM_WORLD, [&] {
    const Datatype& old = use_any_type(oldtype, "oldtype");
    check_new_type(newtype);
    auto copy = std::make_unique<chorus_mpi_datatype>(old);
    copy->predefined = false;
    copy->committed = old.committed;  // MPI-3.1 4.1.10: the copy is committed if the original is
    copy->name = "";
    copy->recipe = make_recipe(MPI_COMBINER_DUP, {}, {}, {oldtype});
    MPI_Datatype made = copy.release();
    try {
      copy_attributes(oldtype, made);  // through each keyval's copy function
    } catch (...) {
      try {
        delete_attributes(made);
      } catch (...) {
        // The copy function's error is the one reported.
      }
      forget_attributes(made);
      made->magic = 0;
      delete made;
      throw;
    }
    *newtype = made;
  });
}

int MPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent) {
  return call("MPI_Type_get_true_extent", MPI_COMM_WORLD, [&] {
    const Datatype& type = use_any_type(datatype, "datatype");
    if (true_lb == nullptr || true_extent == nullptr) fail(MPI_ERR_ARG, "null true_lb or true_extent");
    const auto [low, high] = true_bounds(type);
    *true_lb = low;
    *true_extent = high - low;
  });
}

int MPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size) {
  return call("MPI_Type_size_x", MPI_COMM_WORLD, [&] {
    const Datatype& type = use_any_type(datatype, "datatype");
    if (size == nullptr) fail(MPI_ERR_ARG, "null size");
    *size = type.size;
  });
}

int MPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return call("MPI_Type_get_extent_x", MPI_COMM_WORLD, [&] {
    const Datatype& type = use_any_type(datatype, "datatype");
    if (lb == nullptr || extent == nullptr) fail(MPI_ERR_ARG, "null lb or extent");
    *lb = type.lb;
    *extent = type.extent;
  });
}

int MPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent) {
  return call("MPI_Type_get_true_extent_x", MPI_COMM_WORLD, [&] {
    const Datatype& type = use_any_type(datatype, "datatype");
    if (true_lb == nullptr || true_extent == nullptr) fail(MPI_ERR_ARG, "null true_lb or true_extent");
    const auto [low, high] = true_bounds(type);
    *true_lb = low;
    *true_extent = high - low;
  });
}

int MPI_Type_set_name(MPI_Datatype datatype, const char* type_name) {
  return call("MPI_Type_set_name", MPI_COMM_WORLD, [&] {
    use_any_type(datatype, "datatype");
    if (type_name == nullptr) fail(MPI_ERR_ARG, "null type_name");
    datatype->user_name.assign(type_name, strnlen(type_name, MPI_MAX_OBJECT_NAME - 1));
  });
}

int MPI_Get_address(const void* location, MPI_Aint* address) {
  return call("MPI_Get_address", MPI_COMM_WORLD, [&] {
    if (address == nullptr) fail(MPI_ERR_ARG, "null address");
    *address = reinterpret_cast<MPI_Aint>(location);
  });
}

MPI_Aint MPI_Aint_add(MPI_Aint base, MPI_Aint disp) { return base + disp; }
MPI_Aint MPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) { return addr1 - addr2; }

int MPI_Type_commit(MPI_Datatype* datatype) {
  return call("MPI_Type_commit", MPI_COMM_WORLD, [&] {
    if (datatype == nullptr) fail(MPI_ERR_ARG, "null datatype pointer");
    use_any_type(*datatype, "datatype");
    (*datatype)->committed = true;
  });
}

int MPI_Type_free(MPI_Datatype* datatype) {
  return call("MPI_Type_free", MPI_COMM_WORLD, [&] {
    if (datatype == nullptr) fail(MPI_ERR_ARG, "null datatype pointer");
    const Datatype& type = use_any_type(*datatype, "datatype");
    if (type.predefined) fail(MPI_ERR_TYPE, type.name, " is predefined and cannot be freed");
    delete_attributes(*datatype);  // a delete function's error leaves the type (MPI-3.1 6.7.4)
    // Types derived from this one copied its layout, so they stay valid.
    (*datatype)->magic = 0;
    delete *datatype;
    *datatype = MPI_DATATYPE_NULL;
  });
}

}  // extern "C"
