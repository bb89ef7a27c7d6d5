// The reduction kernel table: every dtype x op against values computed
// independently, with vector tails; fp16/bf16 conversions at their edges.
#include "collectives/reduce_kernels.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace chorus;
using namespace chorus::coll;

namespace {

template <class T, bool = std::is_integral_v<T>>
struct UnsignedOf {
  using type = T;
};
template <class T>
struct UnsignedOf<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <class T>
T expected_of(T a, T b, ReduceOp op) {
  using U = typename UnsignedOf<T>::type;
  switch (op) {
    case ReduceOp::sum:
      if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(static_cast<U>(a)) + static_cast<U>(b));
      else return a + b;
    case ReduceOp::prod:
      if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(static_cast<U>(a)) * static_cast<U>(b));
      else return a * b;
    case ReduceOp::min: return std::min(a, b);
    case ReduceOp::max: return std::max(a, b);
  }
  return T{};
}

template <class T>
void check_type(DataType dtype) {
  for (size_t length : {0, 1, 7, 8, 33, 1000}) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      auto op = static_cast<ReduceOp>(o);
      std::vector<T> a(length), b(length), out(length);
      for (size_t i = 0; i < length; ++i) {
        // Includes negatives and values that overflow 8/16-bit sums and products.
        a[i] = static_cast<T>(static_cast<int64_t>(i * 37 % 251) - (std::is_signed_v<T> ? 100 : 0));
        b[i] = static_cast<T>(static_cast<int64_t>(i * 91 % 199) - (std::is_signed_v<T> ? 50 : 0));
      }
      reduce_into(out.data(), a.data(), b.data(), length, dtype, op);
      std::vector<T> inout = a;
      reduce_inplace(inout.data(), b.data(), length, dtype, op);
      for (size_t i = 0; i < length; ++i) {
        T want = expected_of(a[i], b[i], op);
        ASSERT_EQ(out[i], want) << to_string(dtype) << " " << to_string(op) << " length " << length << " i " << i;
        ASSERT_EQ(inout[i], want) << to_string(dtype) << " " << to_string(op) << " in place, i " << i;
      }
    }
  }
}

}  // namespace

TEST(Kernels, IntegersAndFloats) {
  check_type<int8_t>(DataType::int8);
  check_type<uint8_t>(DataType::uint8);
  check_type<int16_t>(DataType::int16);
  check_type<uint16_t>(DataType::uint16);
  check_type<int32_t>(DataType::int32);
  check_type<uint32_t>(DataType::uint32);
  check_type<int64_t>(DataType::int64);
  check_type<uint64_t>(DataType::uint64);
  check_type<float>(DataType::float32);
  check_type<double>(DataType::float64);
}

TEST(Kernels, SixteenBitFloatsComputeInFloat) {
  for (DataType dtype : {DataType::float16, DataType::bfloat16}) {
    auto to16 = dtype == DataType::float16 ? float_to_half : float_to_bfloat;
    auto from16 = dtype == DataType::float16 ? half_to_float : bfloat_to_float;
    for (int o = 0; o < kNumReduceOps; ++o) {
      auto op = static_cast<ReduceOp>(o);
      const size_t length = 300;  // more than one 256-element block
      std::vector<uint16_t> a(length), b(length), out(length);
      for (size_t i = 0; i < length; ++i) {
        a[i] = to16(static_cast<float>(i % 17) - 8.0f);
        b[i] = to16(static_cast<float>(i % 5) + 0.5f);
      }
      reduce_into(out.data(), a.data(), b.data(), length, dtype, op);
      for (size_t i = 0; i < length; ++i) {
        float x = from16(a[i]), y = from16(b[i]);
        float want = op == ReduceOp::sum ? x + y : op == ReduceOp::prod ? x * y : op == ReduceOp::min ? std::min(x, y) : std::max(x, y);
        ASSERT_EQ(from16(out[i]), want) << to_string(dtype) << " " << to_string(op) << " i " << i;
      }
    }
  }
}

TEST(Kernels, HalfConversions) {
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);                 // largest finite
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);                 // rounds down
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);                 // tie rounds to even: inf
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_half(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);    // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000);    // tie to even: 0
  EXPECT_EQ(float_to_half(std::ldexp(3.0f, -25)), 0x0002);    // 1.5 ulp: tie to even 2
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);    // smallest normal
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie: stays even
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie: up to even
  for (uint32_t bits = 0; bits < 0x7c00; ++bits) {  // every finite positive half round-trips
    ASSERT_EQ(float_to_half(half_to_float(static_cast<uint16_t>(bits))), bits) << bits;
  }
  EXPECT_EQ(half_to_float(0x0001), std::ldexp(1.0f, -24));
}

TEST(Kernels, BfloatConversions) {
  EXPECT_EQ(float_to_bfloat(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat(-0.0f), 0x8000);
  EXPECT_EQ(bfloat_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bfloat(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(bfloat_to_float(float_to_bfloat(std::nanf("")))));
  EXPECT_EQ(float_to_bfloat(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie: stays even
  EXPECT_EQ(float_to_bfloat(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie: up to even
  EXPECT_EQ(float_to_bfloat(256.0f), 0x4380);
}

TEST(Kernels, InvalidValuesAreRejected) {
  float a = 1, b = 2;
  EXPECT_THROW(reduce_inplace(&a, &b, 1, static_cast<DataType>(42), ReduceOp::sum), Error);
  EXPECT_THROW(reduce_inplace(&a, &b, 1, DataType::float32, static_cast<ReduceOp>(9)), Error);
}
