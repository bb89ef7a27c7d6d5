// The reduction kernel table (docs/architecture.md §7): dtype x op, written as plain
// loops over restrict pointers so the compiler vectorises them. fp16/bf16 are
// computed in fp32 and rounded to nearest-even on store.
#pragma once

#include <chorus/chorus.hpp>

#include <cstddef>

namespace chorus::coll {

// inout[i] = inout[i] (op) in[i] for i < count.
void reduce_inplace(void* inout, const void* in, size_t count, DataType dtype, ReduceOp op);
// out[i] = a[i] (op) b[i]; out may alias a or b.
void reduce_into(void* out, const void* a, const void* b, size_t count, DataType dtype, ReduceOp op);

// fp16/bf16 conversions (round to nearest even; NaN preserved).
float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);
float bfloat_to_float(uint16_t bits);
uint16_t float_to_bfloat(float value);

}  // namespace chorus::coll
