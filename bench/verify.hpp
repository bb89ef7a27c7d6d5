// Buffers for one collective call, their input pattern, and the element-by-
// element check: shared by chorus-bench and the integration matrix.
#pragma once

#include "bench.hpp"

#include <cstdio>

namespace bench {

const CollectiveBench& bench_for(Collective op);

struct Setup {
  DataType dtype = DataType::float32;
  ReduceOp redop = ReduceOp::sum;
  int root = 0;
  bool in_place = false;
};

class Buffers {
 public:
  Buffers(const CollectiveBench& spec, const CallShape& shape, const Setup& setup, int rank, int ranks);
  // Sentinel in every receive element, then this rank's input in the send
  // region (which may lie inside the receive buffer when in place).
  void fill();
  // Wrong elements on this rank; the first `report` are described on `out`.
  uint64_t count_wrong(FILE* out, int report) const;
  Call call() const;
  // Test-only: spoils one received element, to prove checks catch it.
  void corrupt_one_element();

 private:
  const CollectiveBench& spec_;
  CallShape shape_;
  Setup setup_;
  int rank_, ranks_;
  std::vector<uint64_t> send_, recv_;  // uint64_t storage: 8-byte aligned
  void* send_ptr_ = nullptr;
  void* recv_ptr_ = nullptr;
};

}  // namespace bench
