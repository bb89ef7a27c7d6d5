// Inputs and expected values shared by the algorithm tests: small integers,
// so float sums are exact in any order; products of 1s and 2s.
#pragma once

#include <chorus/chorus.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

namespace chorus::testing {

inline double input(int rank, size_t index, ReduceOp op) {
  if (op == ReduceOp::prod) return (static_cast<size_t>(rank) + index) % 5 == 0 ? 2.0 : 1.0;
  return static_cast<double>((static_cast<size_t>(rank) + index) % 8 + 1);
}

inline double reduced(int ranks, size_t index, ReduceOp op) {
  double value = input(0, index, op);
  for (int r = 1; r < ranks; ++r) {
    double v = input(r, index, op);
    value = op == ReduceOp::sum ? value + v : op == ReduceOp::prod ? value * v : op == ReduceOp::min ? std::min(value, v) : std::max(value, v);
  }
  return value;
}

// Typed element access for the dtypes these tests use.
struct Typed {
  DataType dtype;
  void set(void* buffer, size_t i, double v) const {
    switch (dtype) {
      case DataType::float32: static_cast<float*>(buffer)[i] = static_cast<float>(v); break;
      case DataType::float64: static_cast<double*>(buffer)[i] = v; break;
      case DataType::int32: static_cast<int32_t*>(buffer)[i] = static_cast<int32_t>(v); break;
      case DataType::uint8: static_cast<uint8_t*>(buffer)[i] = static_cast<uint8_t>(v); break;
      default: FAIL() << "dtype not used here";
    }
  }
  double get(const void* buffer, size_t i) const {
    switch (dtype) {
      case DataType::float32: return static_cast<const float*>(buffer)[i];
      case DataType::float64: return static_cast<const double*>(buffer)[i];
      case DataType::int32: return static_cast<const int32_t*>(buffer)[i];
      case DataType::uint8: return static_cast<const uint8_t*>(buffer)[i];
      default: return NAN;
    }
  }
};

// A gtest parameter name from a case's description: alphanumerics and '_'
// only, made unique by the case's index.
inline std::string test_name(std::string description, size_t index) {
  for (char& ch : description) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return description + "_" + std::to_string(index);
}

}  // namespace chorus::testing
