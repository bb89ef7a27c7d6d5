// Inputs and expected values shared by the algorithm tests: small integers,
// so float sums are exact in any order; products of 1s and 2s. And the cases
// of those tests: their names, and the dtype and op suite they share.
#pragma once

#include "collectives/collectives.hpp"

#include <chorus/chorus.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <tuple>

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

// One case of an algorithm test: an algorithm of a collective on `ranks`
// ranks. `count` is the elements of the whole buffer (test_algorithms.cc) or
// per rank (test_block_algorithms.cc; the v-variants: the base of the
// per-rank counts).
struct AlgorithmCase {
  Collective op;
  std::string algorithm;
  int ranks;
  size_t count;
  bool in_place;
  DataType dtype = DataType::float32;
  ReduceOp redop = ReduceOp::sum;
};

inline std::string name_of(const AlgorithmCase& c) {
  return std::string(to_string(c.op)) + "/" + c.algorithm + " n=" + std::to_string(c.ranks) + " count=" +
         std::to_string(c.count) + (c.in_place ? " in-place " : " ") + std::string(to_string(c.dtype)) + " " +
         std::string(to_string(c.redop));
}

// The gtest name of a case, for INSTANTIATE_TEST_SUITE_P.
struct CaseName {
  std::string operator()(const ::testing::TestParamInfo<AlgorithmCase>& info) const {
    return test_name(name_of(info.param), info.index);
  }
};

// A collective with one dtype and one reduction op.
using DtypeAndOp = std::tuple<Collective, DataType, ReduceOp>;

// Each collective of `ops` with every dtype family and op these tests use.
template <class... Ops>
auto with_every_dtype_and_op(Ops... ops) {
  return ::testing::Combine(::testing::Values(ops...),
                            ::testing::Values(DataType::float32, DataType::float64, DataType::int32, DataType::uint8),
                            ::testing::Values(ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max));
}

// `run_case` for every algorithm of the collective, with the dtype and op,
// on 5 ranks and 37 elements, out of place and in place.
inline void run_every_algorithm(const DtypeAndOp& param, void (*run_case)(const AlgorithmCase&)) {
  const auto& [op, dtype, redop] = param;
  for (const coll::Algorithm* algorithm : coll::algorithms(op)) {
    for (bool in_place : {false, true}) run_case({op, std::string(algorithm->name), 5, 37, in_place, dtype, redop});
  }
}

}  // namespace chorus::testing

// Defines `Suite`: run_every_algorithm() through this file's run_case() for
// each collective given, instantiated as DtypesAndOps/Suite.
#define CHORUS_EVERY_DTYPE_AND_OP(Suite, ...)                                                              \
  class Suite : public ::testing::TestWithParam<chorus::testing::DtypeAndOp> {};                          \
  TEST_P(Suite, EveryElementCorrect) { chorus::testing::run_every_algorithm(GetParam(), run_case); }      \
  INSTANTIATE_TEST_SUITE_P(DtypesAndOps, Suite, chorus::testing::with_every_dtype_and_op(__VA_ARGS__))
