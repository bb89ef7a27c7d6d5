// Element access and expected values for chorus-bench's verification.
#include "bench.hpp"

#include <algorithm>

#include <cmath>
#include <cstring>

namespace bench {

namespace {

// float16 <-> float for the values used here (normal numbers and zero).
uint16_t to_half(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  uint32_t sign = (bits >> 16) & 0x8000u;
  int exponent = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = bits & 0x7fffffu;
  if ((bits & 0x7fffffffu) == 0) return static_cast<uint16_t>(sign);
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow: inf
  if (exponent <= 0) return static_cast<uint16_t>(sign);             // too small for the bench's values
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13));
}

float from_half(uint16_t half) {
  uint32_t sign = (half & 0x8000u) << 16;
  uint32_t exponent = (half >> 10) & 0x1f;
  uint32_t mantissa = half & 0x3ffu;
  uint32_t bits;
  if (exponent == 0 && mantissa == 0) {
    bits = sign;
  } else if (exponent == 31) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent == 0) {
    return (sign ? -1.0f : 1.0f) * std::ldexp(static_cast<float>(mantissa), -24);
  } else {
    bits = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

uint16_t to_bfloat(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);  // exact for the small integers used
}

float from_bfloat(uint16_t bf) {
  uint32_t bits = static_cast<uint32_t>(bf) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

template <class T>
T* as(void* buffer) {
  return static_cast<T*>(buffer);
}
template <class T>
const T* as(const void* buffer) {
  return static_cast<const T*>(buffer);
}

// Integers wrap like the library's kernels (two's complement).
template <class T>
void store_integer(void* buffer, size_t index, double value) {
  as<T>(buffer)[index] = static_cast<T>(static_cast<uint64_t>(static_cast<int64_t>(value)));
}

}  // namespace

double load(const void* buffer, size_t index, DataType dtype) {
  switch (dtype) {
    case DataType::int8: return as<int8_t>(buffer)[index];
    case DataType::uint8: return as<uint8_t>(buffer)[index];
    case DataType::int16: return as<int16_t>(buffer)[index];
    case DataType::uint16: return as<uint16_t>(buffer)[index];
    case DataType::int32: return as<int32_t>(buffer)[index];
    case DataType::uint32: return as<uint32_t>(buffer)[index];
    case DataType::int64: return static_cast<double>(as<int64_t>(buffer)[index]);
    case DataType::uint64: return static_cast<double>(as<uint64_t>(buffer)[index]);
    case DataType::float16: return from_half(as<uint16_t>(buffer)[index]);
    case DataType::bfloat16: return from_bfloat(as<uint16_t>(buffer)[index]);
    case DataType::float32: return as<float>(buffer)[index];
    case DataType::float64: return as<double>(buffer)[index];
  }
  return NAN;
}

void store(void* buffer, size_t index, DataType dtype, double value) {
  switch (dtype) {
    case DataType::int8: return store_integer<int8_t>(buffer, index, value);
    case DataType::uint8: return store_integer<uint8_t>(buffer, index, value);
    case DataType::int16: return store_integer<int16_t>(buffer, index, value);
    case DataType::uint16: return store_integer<uint16_t>(buffer, index, value);
    case DataType::int32: return store_integer<int32_t>(buffer, index, value);
    case DataType::uint32: return store_integer<uint32_t>(buffer, index, value);
    case DataType::int64: return store_integer<int64_t>(buffer, index, value);
    case DataType::uint64: return store_integer<uint64_t>(buffer, index, value);
    case DataType::float16: as<uint16_t>(buffer)[index] = to_half(static_cast<float>(value)); return;
    case DataType::bfloat16: as<uint16_t>(buffer)[index] = to_bfloat(static_cast<float>(value)); return;
    case DataType::float32: as<float>(buffer)[index] = static_cast<float>(value); return;
    case DataType::float64: as<double>(buffer)[index] = value; return;
  }
}

double as_stored(double value, DataType dtype) {
  alignas(8) unsigned char cell[8];
  store(cell, 0, dtype, value);
  return load(cell, 0, dtype);
}

double input_value(int rank, size_t index, ReduceOp op) {
  if (op == ReduceOp::prod) return (static_cast<size_t>(rank) + index) % 5 == 0 ? 2.0 : 1.0;
  return static_cast<double>((static_cast<size_t>(rank) + index) % 8 + 1);
}

double reduced_value(int ranks, size_t index, ReduceOp op, DataType dtype) {
  double result = input_value(0, index, op);
  for (int r = 1; r < ranks; ++r) {
    double v = input_value(r, index, op);
    switch (op) {
      case ReduceOp::sum: result += v; break;
      case ReduceOp::prod: result *= v; break;
      case ReduceOp::min: result = std::min(result, v); break;
      case ReduceOp::max: result = std::max(result, v); break;
    }
  }
  return as_stored(result, dtype);
}

CallShape same_count_shape(size_t bytes, size_t element_size, int) {
  size_t count = bytes / element_size;
  return {count, count, count};
}

CallShape per_rank_block_shape(size_t bytes, size_t element_size, int ranks) {
  size_t count = bytes / element_size / static_cast<size_t>(ranks);
  return {count, count, count * static_cast<size_t>(ranks)};
}

size_t no_offset(const CallShape&, int) { return 0; }
size_t own_block_offset(const CallShape& shape, int rank) { return static_cast<size_t>(rank) * shape.count; }

double plain_input(const CallShape&, size_t index, int rank, ReduceOp op) { return input_value(rank, index, op); }

double per_rank_bus_factor(int ranks) { return static_cast<double>(ranks - 1) / ranks; }

size_t varied_count(size_t base, int rank) { return rank % 3 == 1 ? 0 : base + static_cast<size_t>(rank); }

size_t pair_count(size_t base, int i, int j) { return (i + j) % 4 == 3 ? 0 : base + static_cast<size_t>((i * j) % 3); }

size_t gapped_displs(const std::vector<size_t>& counts, std::vector<size_t>& displs) {
  displs.resize(counts.size());
  size_t extent = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    displs[r] = extent;
    extent += counts[r] + 1;
  }
  return extent;
}

CallShape varied_shape(size_t bytes, size_t element_size, int ranks, bool receive_side) {
  CallShape shape;
  const size_t base = bytes / element_size / static_cast<size_t>(ranks);
  std::vector<size_t>& counts = receive_side ? shape.recv_counts : shape.send_counts;
  std::vector<size_t>& displs = receive_side ? shape.recv_displs : shape.send_displs;
  for (int r = 0; r < ranks; ++r) counts.push_back(varied_count(base, r));
  (receive_side ? shape.recv_elems : shape.send_elems) = gapped_displs(counts, displs);
  return shape;
}

int block_of(const std::vector<size_t>& counts, const std::vector<size_t>& displs, size_t index, size_t& offset) {
  for (size_t r = 0; r < counts.size(); ++r) {
    if (index >= displs[r] && index < displs[r] + counts[r]) {
      offset = index - displs[r];
      return static_cast<int>(r);
    }
  }
  return -1;
}

double varied_gathered(const CallShape& shape, size_t index, DataType dtype) {
  size_t offset = 0;
  const int source = block_of(shape.recv_counts, shape.recv_displs, index, offset);
  return source < 0 ? kSentinel : as_stored(input_value(source, offset, ReduceOp::sum), dtype);
}

bool ranks_split_by_host(chorus::Communicator& comm) {
  // reduce_scatter has no board: its automatic choice is hierarchical
  // exactly where the ranks split by host.
  return comm.selected_algorithm(Collective::reduce_scatter, 1 << 20) == "hierarchical";
}

namespace {
// Ranks on the host with the fewest of the communicator's ranks.
int smallest_host(chorus::Communicator& comm) {
  const int mine = comm.host();
  std::vector<int> hosts(static_cast<size_t>(comm.size()));
  comm.allgather(&mine, hosts.data(), 1, DataType::int32);
  std::vector<int> ranks_on(static_cast<size_t>(comm.size()) + 1, 0);
  for (int host : hosts) ++ranks_on[static_cast<size_t>(std::clamp(host, 0, comm.size()))];
  int smallest = comm.size();
  for (int count : ranks_on) {
    if (count > 0) smallest = std::min(smallest, count);
  }
  return smallest;
}
}  // namespace

std::vector<std::string> algorithms_that_apply(chorus::Communicator& comm, Collective op) {
  std::vector<std::string> names;
  const bool split = ranks_split_by_host(comm);
  // multi_leader with a host of one rank is the leader form (hierarchical).
  const bool several_leaders = split && op == Collective::allreduce && smallest_host(comm) >= 2;
  for (std::string& name : comm.algorithms(op)) {
    if (name == "hierarchical" && !split) continue;
    if (name == "multi_leader" && !several_leaders) continue;
    names.push_back(std::move(name));
  }
  return names;
}

}  // namespace bench
