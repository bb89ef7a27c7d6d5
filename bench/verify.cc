#include "verify.hpp"

#include <cmath>

namespace bench {

const CollectiveBench& bench_for(Collective op) {
  switch (op) {
    case Collective::allreduce: return allreduce_bench();
    case Collective::broadcast: return broadcast_bench();
    case Collective::barrier: return barrier_bench();
    case Collective::reduce: return reduce_bench();
    case Collective::allgather: return allgather_bench();
    case Collective::reduce_scatter: return reduce_scatter_bench();
    case Collective::alltoall: return alltoall_bench();
    case Collective::gather: return gather_bench();
    case Collective::gatherv: return gatherv_bench();
    case Collective::scatter: return scatter_bench();
    case Collective::scatterv: return scatterv_bench();
    case Collective::allgatherv: return allgatherv_bench();
    case Collective::alltoallv: return alltoallv_bench();
    case Collective::scan: return scan_bench();
    case Collective::exscan: return exscan_bench();
  }
  return allreduce_bench();
}

Buffers::Buffers(const CollectiveBench& spec, const CallShape& shape, const Setup& setup, int rank, int ranks)
    : spec_(spec), shape_(shape), setup_(setup), rank_(rank), ranks_(ranks) {
  if (spec.for_rank != nullptr) spec.for_rank(shape_, rank, ranks);
  const size_t elem = chorus::datatype_size(setup.dtype);
  auto words = [&](size_t elems) { return (elems * elem + 7) / 8 + 1; };
  if (setup.in_place || spec.always_in_place) {
    recv_.assign(words(std::max(shape_.send_elems, shape_.recv_elems)), 0);
    auto* base = reinterpret_cast<uint8_t*>(recv_.data());
    send_ptr_ = base + spec.in_place_send_offset(shape_, rank) * elem;
    recv_ptr_ = base + spec.in_place_recv_offset(shape_, rank) * elem;
  } else {
    send_.assign(words(shape_.send_elems), 0);
    recv_.assign(words(shape_.recv_elems), 0);
    send_ptr_ = send_.data();
    recv_ptr_ = recv_.data();
  }
}

void Buffers::fill() {
  for (size_t i = 0; i < shape_.recv_elems; ++i) store(recv_ptr_, i, setup_.dtype, kSentinel);
  // Broadcast: only the root's buffer holds input.
  if (spec_.always_in_place && rank_ != setup_.root) return;
  void* send = spec_.always_in_place ? recv_ptr_ : send_ptr_;
  for (size_t i = 0; i < shape_.send_elems; ++i) {
    store(send, i, setup_.dtype, spec_.input(shape_, i, rank_, setup_.redop));
  }
}

uint64_t Buffers::count_wrong(FILE* out, int report) const {
  uint64_t wrong = 0;
  for (size_t i = 0; i < shape_.recv_elems; ++i) {
    double expected = spec_.expected(shape_, i, rank_, ranks_, setup_.root, setup_.redop, setup_.dtype);
    if (std::isnan(expected)) continue;
    double got = load(recv_ptr_, i, setup_.dtype);
    if (got == expected) continue;
    if (out != nullptr && wrong < static_cast<uint64_t>(report)) {
      std::fprintf(out, "rank %d: %s element %zu of %zu is %g, expected %g\n", rank_,
                   std::string(chorus::to_string(spec_.op)).c_str(), i, shape_.recv_elems, got, expected);
    }
    ++wrong;
  }
  return wrong;
}

Call Buffers::call() const {
  const void* send = spec_.always_in_place ? recv_ptr_ : send_ptr_;
  return Call{send, recv_ptr_, shape_.count, setup_.dtype, setup_.redop, setup_.root, &shape_};
}

void Buffers::corrupt_one_element() {
  if (shape_.recv_elems > 0) store(recv_ptr_, 0, setup_.dtype, kSentinel);
}

}  // namespace bench
