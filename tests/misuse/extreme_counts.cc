// chorus-extreme-counts: every collective, blocking and non-blocking, with
// counts whose byte sizes overflow or exceed any buffer (SIZE_MAX / k for
// k = 1..16, 2^61 and up, with 1- and 8-byte types). Each call must fail with
// Status::invalid_argument before any data moves, on every rank alike, and
// the communicator must stay usable (an argument error is not sticky).
// Prints "extreme_counts: N calls rejected, F wrong".
#include <chorus/chorus.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using chorus::Communicator;
using chorus::DataType;
using chorus::ReduceOp;

int main(int argc, char** argv) {
  if (argc > 1) {
    std::printf("Usage: chorusrun -n N chorus-extreme-counts\n\nCalls every collective with overflowing counts and "
                "expects a clear invalid-argument error from each.\n");
    return std::strcmp(argv[1], "--help") == 0 ? 0 : 2;
  }
  auto comm = Communicator::init();
  const int rank = comm.rank();
  std::vector<unsigned char> buffer(64);  // never touched: every call must be rejected first
  void* p = buffer.data();
  std::vector<size_t> counts;
  for (size_t k = 1; k <= 16; ++k) counts.push_back(SIZE_MAX / k);
  counts.push_back(size_t{1} << 61);
  counts.push_back((size_t{1} << 62) + 3);
  using Call = std::function<void(size_t, DataType)>;
  const std::vector<std::pair<std::string, Call>> calls = {
      {"allreduce", [&](size_t n, DataType t) { comm.allreduce(p, p, n, t, ReduceOp::sum); }},
      {"broadcast", [&](size_t n, DataType t) { comm.broadcast(p, n, t, 0); }},
      {"reduce", [&](size_t n, DataType t) { comm.reduce(p, p, n, t, ReduceOp::sum, 0); }},
      {"allgather", [&](size_t n, DataType t) { comm.allgather(p, p, n, t); }},
      {"reduce_scatter", [&](size_t n, DataType t) { comm.reduce_scatter(p, p, n, t, ReduceOp::sum); }},
      {"alltoall", [&](size_t n, DataType t) { comm.alltoall(p, p, n, t); }},
      {"iallreduce", [&](size_t n, DataType t) { comm.iallreduce(p, p, n, t, ReduceOp::sum).wait(); }},
      {"ibroadcast", [&](size_t n, DataType t) { comm.ibroadcast(p, n, t, 0).wait(); }},
      {"iallgather", [&](size_t n, DataType t) { comm.iallgather(p, p, n, t).wait(); }},
      {"ialltoall", [&](size_t n, DataType t) { comm.ialltoall(p, p, n, t).wait(); }},
      {"isend", [&](size_t n, DataType) { comm.isend(p, n, (rank + 1) % comm.size(), 1).wait(); }},
  };
  int rejected = 0, wrong = 0;
  for (const auto& [name, call] : calls) {
    for (DataType type : {DataType::int8, DataType::float64}) {
      for (size_t count : counts) {
        // isend takes bytes, limited to 2^60 whatever the rank count.
        if (name == "isend" && (type != DataType::int8 || count <= (size_t{1} << 60))) continue;
        try {
          call(count, type);
          ++wrong;
          std::printf("FAILED: rank %d: %s with count %zu of %s was accepted\n", rank, name.c_str(), count,
                      std::string(chorus::to_string(type)).c_str());
        } catch (const chorus::Error& e) {
          const bool ok = e.status() == chorus::Status::invalid_argument;
          if (ok) {
            ++rejected;
          } else {
            ++wrong;
            std::printf("FAILED: rank %d: %s with count %zu: %s\n", rank, name.c_str(), count, e.what());
          }
        }
      }
    }
  }
  std::vector<int32_t> check(10, 1);
  try {
    comm.allreduce(std::span<int32_t>(check), ReduceOp::sum);
  } catch (const chorus::Error& e) {
    ++wrong;
    std::printf("FAILED: rank %d: the communicator is unusable after argument errors: %s\n", rank, e.what());
  }
  if (check[0] != comm.size()) ++wrong;
  std::printf("extreme_counts: %d calls rejected, %d wrong\n", rejected, wrong);
  comm.finalize();
  // Every rank's own pass line, after finalize (tests/job_verdict.py).
  if (wrong == 0 && rejected > 0) std::printf("chorus-extreme-counts: rank %d passed\n", rank);
  return wrong == 0 ? 0 : 1;
}
