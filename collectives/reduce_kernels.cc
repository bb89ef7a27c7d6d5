// The dtype x op kernel table. Plain loops over __restrict pointers: GCC
// vectorises them at -O2/-O3 (this file is built with -O3). Integer sum and
// prod are computed in the unsigned type so overflow wraps without UB.
#include "collectives/reduce_kernels.hpp"

#include "common/error.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>

namespace chorus::coll {

namespace {

// The unsigned counterpart of an integer type (floats map to themselves).
template <class T, bool = std::is_integral_v<T>>
struct UnsignedOf {
  using type = T;
};
template <class T>
struct UnsignedOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using Unsigned = typename UnsignedOf<T>::type;

template <class T, ReduceOp Op>
inline T apply(T a, T b) {
  if constexpr (Op == ReduceOp::sum) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<Unsigned<T>>(static_cast<Unsigned<T>>(a) + static_cast<Unsigned<T>>(b)));
    } else {
      return a + b;
    }
  } else if constexpr (Op == ReduceOp::prod) {
    if constexpr (std::is_integral_v<T>) {
      // Promote to at least unsigned int so small types do not go through int.
      using Wide = std::common_type_t<Unsigned<T>, unsigned>;
      return static_cast<T>(static_cast<Wide>(static_cast<Unsigned<T>>(a)) * static_cast<Wide>(static_cast<Unsigned<T>>(b)));
    } else {
      return a * b;
    }
  } else if constexpr (Op == ReduceOp::min) {
    return b < a ? b : a;
  } else {
    return a < b ? b : a;
  }
}

template <class T, ReduceOp Op>
void kernel(void* out_raw, const void* a_raw, const void* b_raw, size_t count) {
  // out may alias a or b exactly (in place); element-wise, so that is safe.
  T* out = static_cast<T*>(out_raw);
  const T* a = static_cast<const T*>(a_raw);
  const T* b = static_cast<const T*>(b_raw);
  for (size_t i = 0; i < count; ++i) out[i] = apply<T, Op>(a[i], b[i]);
}

// 16-bit floats: widen a block to fp32, reduce, narrow (round to nearest even).
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float), ReduceOp Op>
void kernel16(void* out_raw, const void* a_raw, const void* b_raw, size_t count) {
  auto* out = static_cast<uint16_t*>(out_raw);
  const auto* a = static_cast<const uint16_t*>(a_raw);
  const auto* b = static_cast<const uint16_t*>(b_raw);
  constexpr size_t kBlock = 256;
  float wa[kBlock], wb[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    size_t n = std::min(kBlock, count - start);
    for (size_t i = 0; i < n; ++i) {
      wa[i] = Widen(a[start + i]);
      wb[i] = Widen(b[start + i]);
    }
    for (size_t i = 0; i < n; ++i) wa[i] = apply<float, Op>(wa[i], wb[i]);
    for (size_t i = 0; i < n; ++i) out[start + i] = Narrow(wa[i]);
  }
}

using Kernel = void (*)(void*, const void*, const void*, size_t);

template <class T>
constexpr std::array<Kernel, kNumReduceOps> row() {
  return {kernel<T, ReduceOp::sum>, kernel<T, ReduceOp::prod>, kernel<T, ReduceOp::min>, kernel<T, ReduceOp::max>};
}

template <float (*W)(uint16_t), uint16_t (*N)(float)>
constexpr std::array<Kernel, kNumReduceOps> row16() {
  return {kernel16<W, N, ReduceOp::sum>, kernel16<W, N, ReduceOp::prod>, kernel16<W, N, ReduceOp::min>,
          kernel16<W, N, ReduceOp::max>};
}

// Indexed by DataType value, then ReduceOp value.
const std::array<std::array<Kernel, kNumReduceOps>, kNumDataTypes> kTable = {
    row<int8_t>(),  row<uint8_t>(),  row<int16_t>(), row<uint16_t>(),
    row<int32_t>(), row<uint32_t>(), row<int64_t>(), row<uint64_t>(),
    row16<half_to_float, float_to_half>(), row16<bfloat_to_float, float_to_bfloat>(),
    row<float>(),   row<double>()};

Kernel lookup(DataType dtype, ReduceOp op) {
  auto d = static_cast<unsigned>(dtype);
  auto o = static_cast<unsigned>(op);
  if (d >= static_cast<unsigned>(kNumDataTypes)) fail(Status::invalid_argument, "reduce: invalid datatype value ", d);
  if (o >= static_cast<unsigned>(kNumReduceOps)) fail(Status::invalid_argument, "reduce: invalid op value ", o);
  return kTable[d][o];
}

uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float bits_float(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

}  // namespace

void reduce_inplace(void* inout, const void* in, size_t count, DataType dtype, ReduceOp op) {
  lookup(dtype, op)(inout, inout, in, count);
}

void reduce_into(void* out, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op) {
  lookup(dtype, op)(out, a, b, count);
}

float half_to_float(uint16_t half) {
  uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1fu;
  uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0x1f) return bits_float(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN (payload kept)
  if (exponent != 0) return bits_float(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return bits_float(sign);
  // Subnormal: value = mantissa * 2^-24, exact in fp32.
  float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;
  return sign ? -magnitude : magnitude;
}

uint16_t float_to_half(float value) {
  uint32_t bits = float_bits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or NaN; keep NaN quiet and non-zero
    return static_cast<uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u | ((magnitude >> 13) & 0x3ffu) : 0));
  }
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504: inf
  if (magnitude < 0x38800000u) {
    // Result is subnormal (or zero): value / 2^-24, rounded to nearest even.
    float scaled = bits_float(magnitude) * 16777216.0f;  // exact: multiplying by a power of two
    uint32_t whole = static_cast<uint32_t>(scaled);
    float fraction = scaled - static_cast<float>(whole);
    if (fraction > 0.5f || (fraction == 0.5f && (whole & 1u))) ++whole;
    return static_cast<uint16_t>(sign | whole);
  }
  // Normal: rebias the exponent, round the 13 dropped mantissa bits to nearest even.
  uint32_t rebased = magnitude - (112u << 23);
  uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

float bfloat_to_float(uint16_t bits) { return bits_float(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_bfloat(float value) {
  uint32_t bits = float_bits(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

}  // namespace chorus::coll
