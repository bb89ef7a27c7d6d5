// Reduction operations: the predefined ops, user ops (MPI_Op_create), which
// op applies to which type (MPI-3.1 5.9.2), the local reduction kernels, the
// mapping onto chorus' own collectives, and the rank-ordered combination of
// gathered contributions used when chorus cannot compute an op itself
// (icollectives.cc starts those reductions, blocking or not).
#include "mpi/internal.hpp"

#include <algorithm>
#include <complex>
#include <cstring>
#include <type_traits>

namespace chorus::mpi {

namespace {

constexpr chorus_mpi_op predefined(const char* name, OpKind kind) {
  return chorus_mpi_op{kOpMagic, name, kind, nullptr, true, true};
}

bool is_integer(Basic b) { return b <= Basic::u64; }
bool is_floating(Basic b) { return b == Basic::f32 || b == Basic::f64 || b == Basic::f80; }
bool is_complex(Basic b) { return b == Basic::c32 || b == Basic::c64; }
bool is_pair(Basic b) { return b >= Basic::float_int && b <= Basic::long_double_int; }

bool applies(OpKind op, Basic b) {
  switch (op) {
    case OpKind::sum:
    case OpKind::prod: return is_integer(b) || is_floating(b) || is_complex(b);
    case OpKind::min:
    case OpKind::max: return is_integer(b) || is_floating(b);
    case OpKind::land:
    case OpKind::lor:
    case OpKind::lxor: return is_integer(b) || b == Basic::boolean;
    case OpKind::band:
    case OpKind::bor:
    case OpKind::bxor: return is_integer(b) || b == Basic::byte;
    case OpKind::minloc:
    case OpKind::maxloc: return is_pair(b);
    default: return false;  // replace / no_op: one-sided only; user: checked elsewhere
  }
}

// inout[i] = f(in[i], inout[i]) over n elements of T.
template <class T, class F>
void combine(const void* in, void* inout, size_t n, F f) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (size_t i = 0; i < n; ++i) b[i] = f(a[i], b[i]);
}

template <class T>
void integer_kernel(OpKind op, const void* in, void* inout, size_t n) {
  // Wrap-around arithmetic without undefined behaviour: compute in an
  // unsigned type at least as wide as unsigned int (no promotion to int).
  using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
  switch (op) {
    case OpKind::sum: return combine<T>(in, inout, n, [](T a, T b) { return static_cast<T>(Wide(a) + Wide(b)); });
    case OpKind::prod: return combine<T>(in, inout, n, [](T a, T b) { return static_cast<T>(Wide(a) * Wide(b)); });
    case OpKind::min: return combine<T>(in, inout, n, [](T a, T b) { return std::min(a, b); });
    case OpKind::max: return combine<T>(in, inout, n, [](T a, T b) { return std::max(a, b); });
    case OpKind::land: return combine<T>(in, inout, n, [](T a, T b) { return static_cast<T>(a != 0 && b != 0); });
    case OpKind::lor: return combine<T>(in, inout, n, [](T a, T b) { return static_cast<T>(a != 0 || b != 0); });
    case OpKind::lxor: return combine<T>(in, inout, n, [](T a, T b) { return static_cast<T>((a != 0) != (b != 0)); });
    case OpKind::band: return combine<T>(in, inout, n, [](T a, T b) { return static_cast<T>(a & b); });
    case OpKind::bor: return combine<T>(in, inout, n, [](T a, T b) { return static_cast<T>(a | b); });
    case OpKind::bxor: return combine<T>(in, inout, n, [](T a, T b) { return static_cast<T>(a ^ b); });
    default: fail(MPI_ERR_INTERN, "integer kernel called for an op it does not implement");
  }
}

template <class T>
void floating_kernel(OpKind op, const void* in, void* inout, size_t n) {
  switch (op) {
    case OpKind::sum: return combine<T>(in, inout, n, [](T a, T b) { return a + b; });
    case OpKind::prod: return combine<T>(in, inout, n, [](T a, T b) { return a * b; });
    case OpKind::min: return combine<T>(in, inout, n, [](T a, T b) { return std::min(a, b); });
    case OpKind::max: return combine<T>(in, inout, n, [](T a, T b) { return std::max(a, b); });
    default: fail(MPI_ERR_INTERN, "floating-point kernel called for an op it does not implement");
  }
}

template <class T>
void complex_kernel(OpKind op, const void* in, void* inout, size_t n) {
  if (op == OpKind::sum) return combine<T>(in, inout, n, [](T a, T b) { return a + b; });
  if (op == OpKind::prod) return combine<T>(in, inout, n, [](T a, T b) { return a * b; });
  fail(MPI_ERR_INTERN, "complex kernel called for an op it does not implement");
}

// C _Bool and MPI_BYTE as bytes.
void byte_kernel(OpKind op, const void* in, void* inout, size_t n) {
  using B = uint8_t;
  switch (op) {
    case OpKind::land: return combine<B>(in, inout, n, [](B a, B b) { return B(a != 0 && b != 0); });
    case OpKind::lor: return combine<B>(in, inout, n, [](B a, B b) { return B(a != 0 || b != 0); });
    case OpKind::lxor: return combine<B>(in, inout, n, [](B a, B b) { return B((a != 0) != (b != 0)); });
    case OpKind::band: return combine<B>(in, inout, n, [](B a, B b) { return B(a & b); });
    case OpKind::bor: return combine<B>(in, inout, n, [](B a, B b) { return B(a | b); });
    case OpKind::bxor: return combine<B>(in, inout, n, [](B a, B b) { return B(a ^ b); });
    default: fail(MPI_ERR_INTERN, "byte kernel called for an op it does not implement");
  }
}

template <class V>
struct ValueIndex {
  V value;
  int index;
};

// MPI-3.1 5.9.4: the extreme value, and on a tie the smaller index.
template <class V>
void location_kernel(OpKind op, const void* in, void* inout, size_t n) {
  using P = ValueIndex<V>;
  const bool want_min = op == OpKind::minloc;
  combine<P>(in, inout, n, [want_min](P a, P b) {
    if (a.value == b.value) return a.index < b.index ? a : b;
    const bool a_wins = want_min ? a.value < b.value : a.value > b.value;
    return a_wins ? a : b;
  });
}

void apply_predefined(OpKind op, Basic basic, const void* in, void* inout, size_t n) {
  switch (basic) {
    case Basic::i8: return integer_kernel<int8_t>(op, in, inout, n);
    case Basic::u8: return integer_kernel<uint8_t>(op, in, inout, n);
    case Basic::i16: return integer_kernel<int16_t>(op, in, inout, n);
    case Basic::u16: return integer_kernel<uint16_t>(op, in, inout, n);
    case Basic::i32: return integer_kernel<int32_t>(op, in, inout, n);
    case Basic::u32: return integer_kernel<uint32_t>(op, in, inout, n);
    case Basic::i64: return integer_kernel<int64_t>(op, in, inout, n);
    case Basic::u64: return integer_kernel<uint64_t>(op, in, inout, n);
    case Basic::f32: return floating_kernel<float>(op, in, inout, n);
    case Basic::f64: return floating_kernel<double>(op, in, inout, n);
    case Basic::f80: return floating_kernel<long double>(op, in, inout, n);
    case Basic::c32: return complex_kernel<std::complex<float>>(op, in, inout, n);
    case Basic::c64: return complex_kernel<std::complex<double>>(op, in, inout, n);
    case Basic::boolean:
    case Basic::byte: return byte_kernel(op, in, inout, n);
    case Basic::float_int: return location_kernel<float>(op, in, inout, n);
    case Basic::double_int: return location_kernel<double>(op, in, inout, n);
    case Basic::long_int: return location_kernel<long>(op, in, inout, n);
    case Basic::two_int: return location_kernel<int>(op, in, inout, n);
    case Basic::short_int: return location_kernel<short>(op, in, inout, n);
    case Basic::long_double_int: return location_kernel<long double>(op, in, inout, n);
    case Basic::opaque: break;
  }
  fail(MPI_ERR_INTERN, "no kernel for this datatype");
}

const chorus_mpi_op& use_op(MPI_Op op) {
  if (op == MPI_OP_NULL) fail(MPI_ERR_OP, "op is MPI_OP_NULL");
  if (op->magic != kOpMagic) fail(MPI_ERR_OP, "op is not a valid MPI_Op (freed?)");
  return *op;
}

}  // namespace

void check_op(MPI_Op op, const Datatype& type) {
  const chorus_mpi_op& o = use_op(op);
  if (o.kind == OpKind::user) return;  // the user function decides what it accepts
  if (o.kind == OpKind::replace || o.kind == OpKind::no_op) {
    fail(MPI_ERR_OP, o.name, " is for one-sided accumulate operations only");
  }
  if (!applies(o.kind, type.basic)) {
    fail(MPI_ERR_OP, o.name, " is not defined for ", *type.name != '\0' ? type.name : "this derived datatype",
         " (MPI-3.1 section 5.9.2)");
  }
}

void reduce_local(MPI_Op op, const Datatype& type, const void* in, void* inout, size_t count) {
  const chorus_mpi_op& o = *op;
  if (o.kind != OpKind::user) return apply_predefined(o.kind, type.basic, in, inout, count * type.basic_count);
  int length = static_cast<int>(count);
  MPI_Datatype handle = const_cast<MPI_Datatype>(&type);
  if (type.contiguous()) {
    // Our own buffers: the function may treat `in` as writable, as MPI allows.
    o.function(const_cast<void*>(in), inout, &length, &handle);
    return;
  }
  // The function expects the user's memory layout: unpack, apply, pack.
  const size_t span = count == 0 ? 0 : static_cast<size_t>(type.extent) * count;
  Bytes in_memory(span), inout_memory(span);
  unpack(in, count, type, in_memory.data());
  unpack(inout, count, type, inout_memory.data());
  o.function(in_memory.data(), inout_memory.data(), &length, &handle);
  pack(inout_memory.data(), count, type, inout);
}

std::optional<FastPath> fast_path(MPI_Op op, const Datatype& type) {
  std::optional<chorus::ReduceOp> chorus_op;
  switch (op->kind) {
    case OpKind::sum: chorus_op = chorus::ReduceOp::sum; break;
    case OpKind::prod: chorus_op = chorus::ReduceOp::prod; break;
    case OpKind::min: chorus_op = chorus::ReduceOp::min; break;
    case OpKind::max: chorus_op = chorus::ReduceOp::max; break;
    default: return std::nullopt;
  }
  std::optional<chorus::DataType> dtype;
  switch (type.basic) {
    case Basic::i8: dtype = chorus::DataType::int8; break;
    case Basic::u8: dtype = chorus::DataType::uint8; break;
    case Basic::i16: dtype = chorus::DataType::int16; break;
    case Basic::u16: dtype = chorus::DataType::uint16; break;
    case Basic::i32: dtype = chorus::DataType::int32; break;
    case Basic::u32: dtype = chorus::DataType::uint32; break;
    case Basic::i64: dtype = chorus::DataType::int64; break;
    case Basic::u64: dtype = chorus::DataType::uint64; break;
    case Basic::f32: dtype = chorus::DataType::float32; break;
    case Basic::f64: dtype = chorus::DataType::float64; break;
    default: return std::nullopt;
  }
  return FastPath{*dtype, *chorus_op, type.basic_count};
}

Bytes combine_in_rank_order(const Bytes& blocks, int size, size_t count, const Datatype& type, MPI_Op op) {
  const size_t block = packed_bytes(count, type);
  Bytes result(blocks.end() - static_cast<std::ptrdiff_t>(block), blocks.end());
  for (int r = size - 2; r >= 0; --r) {
    reduce_local(op, type, blocks.data() + static_cast<size_t>(r) * block, result.data(), count);  // x[r] op result
  }
  return result;
}

}  // namespace chorus::mpi

using namespace chorus::mpi;

extern "C" {
struct chorus_mpi_op chorus_mpi_sum = predefined("MPI_SUM", OpKind::sum);
struct chorus_mpi_op chorus_mpi_prod = predefined("MPI_PROD", OpKind::prod);
struct chorus_mpi_op chorus_mpi_min = predefined("MPI_MIN", OpKind::min);
struct chorus_mpi_op chorus_mpi_max = predefined("MPI_MAX", OpKind::max);
struct chorus_mpi_op chorus_mpi_land = predefined("MPI_LAND", OpKind::land);
struct chorus_mpi_op chorus_mpi_lor = predefined("MPI_LOR", OpKind::lor);
struct chorus_mpi_op chorus_mpi_lxor = predefined("MPI_LXOR", OpKind::lxor);
struct chorus_mpi_op chorus_mpi_band = predefined("MPI_BAND", OpKind::band);
struct chorus_mpi_op chorus_mpi_bor = predefined("MPI_BOR", OpKind::bor);
struct chorus_mpi_op chorus_mpi_bxor = predefined("MPI_BXOR", OpKind::bxor);
struct chorus_mpi_op chorus_mpi_minloc = predefined("MPI_MINLOC", OpKind::minloc);
struct chorus_mpi_op chorus_mpi_maxloc = predefined("MPI_MAXLOC", OpKind::maxloc);
struct chorus_mpi_op chorus_mpi_replace = predefined("MPI_REPLACE", OpKind::replace);
struct chorus_mpi_op chorus_mpi_no_op = predefined("MPI_NO_OP", OpKind::no_op);

int MPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op) {
  return call("MPI_Op_create", MPI_COMM_WORLD, [&] {
    if (user_fn == nullptr) fail(MPI_ERR_ARG, "null user function");
    if (op == nullptr) fail(MPI_ERR_ARG, "null op");
    *op = new chorus_mpi_op{kOpMagic, "user-defined op", OpKind::user, user_fn, commute != 0, false};
  });
}

int MPI_Op_free(MPI_Op* op) {
  return call("MPI_Op_free", MPI_COMM_WORLD, [&] {
    if (op == nullptr) fail(MPI_ERR_ARG, "null op pointer");
    const chorus_mpi_op& o = use_op(*op);
    if (o.predefined) fail(MPI_ERR_OP, o.name, " is predefined and cannot be freed");
    (*op)->magic = 0;
    delete *op;
    *op = MPI_OP_NULL;
  });
}

int MPI_Op_commutative(MPI_Op op, int* commute) {
  return call("MPI_Op_commutative", MPI_COMM_WORLD, [&] {
    const chorus_mpi_op& o = use_op(op);
    if (commute == nullptr) fail(MPI_ERR_ARG, "null commute");
    *commute = o.commutative ? 1 : 0;
  });
}

}  // extern "C"
