// chorus-matrix: inside one launch, every collective x algorithm x dtype x
// op x size (below, at and above the eager limit, and MiB sizes) x in-place /
// out-of-place x root, each result checked element by element. Prints every
// failing case and a summary; exits 0 only when nothing failed.
#include "verify.hpp"

#include <chorus/chorus.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace bench;
using chorus::Collective;
using chorus::DataType;
using chorus::ReduceOp;

constexpr size_t kEagerLimit = 16 * 1024;  // the library's default CHORUS_EAGER_LIMIT

struct Sweep {
  std::vector<DataType> dtypes;
  std::vector<size_t> byte_sizes;  // per call, as chorus-bench counts them
};

std::vector<DataType> all_dtypes() {
  std::vector<DataType> dtypes;
  for (int i = 0; i < chorus::kNumDataTypes; ++i) dtypes.push_back(static_cast<DataType>(i));
  return dtypes;
}

// How much of the matrix a launch runs.
//  full:       every dtype and op at small sizes; float32 and int32 at MiB
//              sizes (multi-chunk rendezvous).
//  every_size: what a transport sees: every collective, algorithm, size,
//              root and in-place choice, but the dtype and op product only
//              at small sizes (float32, int8; sum, min) and float32 sum at
//              MiB sizes. The dtype and op change nothing a transport does
//              with the bytes; the full matrix covers them on the host's
//              transports. A quarter to a third of the full matrix's time
//              where MiB sizes dominate (soft-RoCE; docs/testing.md).
//  quick:      every_size without the MiB sizes.
enum class Depth { full, every_size, quick };

// The sweeps of one depth: the small sizes with every dtype (full) or two;
// then the large ones as the full matrix or --every-size runs them.
std::vector<Sweep> by_depth(Depth depth, std::vector<size_t> small, Sweep full_large, Sweep every_size_large) {
  switch (depth) {
    case Depth::full:
      return {{all_dtypes(), std::move(small)}, std::move(full_large)};
    case Depth::every_size:
      return {{{DataType::float32, DataType::int8}, std::move(small)}, std::move(every_size_large)};
    case Depth::quick:
      break;
  }
  return {{{DataType::float32, DataType::int8}, std::move(small)}};
}

// Small sizes for every dtype and op; large ones for a few only (time).
std::vector<Sweep> sweeps(Depth depth, const CollectiveBench& spec, int ranks) {
  // Per-rank-block collectives take the whole buffer: scale so each rank's
  // block crosses the eager limit too.
  const bool per_rank_blocks = spec.op == Collective::allgather || spec.op == Collective::reduce_scatter ||
                               spec.op == Collective::alltoall || spec.op == Collective::gather ||
                               spec.op == Collective::gatherv || spec.op == Collective::scatter ||
                               spec.op == Collective::scatterv || spec.op == Collective::allgatherv ||
                               spec.op == Collective::alltoallv;
  size_t scale = per_rank_blocks ? static_cast<size_t>(ranks) : 1;
  if (spec.op >= Collective::gather) {
    // gather .. exscan: fewer sizes (CI time): empty, small, past the eager
    // limit for every dtype; one multi-chunk size.
    std::vector<size_t> few = {0, 24 * scale, (kEagerLimit + 8) * scale};
    Sweep multi_chunk{{DataType::float32}, {(1u << 20) * scale + 12}};
    return by_depth(depth, few, multi_chunk, multi_chunk);
  }
  std::vector<size_t> small = {0, 8 * scale, 24 * scale, (kEagerLimit - 8) * scale, kEagerLimit * scale,
                               (kEagerLimit + 8) * scale};
  std::vector<size_t> large = {(1u << 20) * scale, (3u << 20) + 12};
  return by_depth(depth, small, {{DataType::float32, DataType::int32}, large}, {{DataType::float32}, large});
}

std::vector<ReduceOp> ops_for(const CollectiveBench& spec, size_t bytes, Depth depth) {
  if (!spec.reduces) return {ReduceOp::sum};
  switch (depth) {
    case Depth::full:
      if (bytes > (1u << 20)) return {ReduceOp::sum, ReduceOp::min};
      return {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max};
    case Depth::every_size:
      if (bytes >= (1u << 20)) return {ReduceOp::sum};
      return {ReduceOp::sum, ReduceOp::min};
    case Depth::quick:
      break;
  }
  return {ReduceOp::sum, ReduceOp::min};
}

std::vector<int> roots_for(const CollectiveBench& spec, size_t bytes, int ranks) {
  if (!spec.rooted) return {0};
  if (bytes <= 64) {
    std::vector<int> all;
    for (int r = 0; r < ranks; ++r) all.push_back(r);
    return all;
  }
  return ranks > 1 ? std::vector<int>{0, ranks - 1} : std::vector<int>{0};
}

struct Counts {
  uint64_t cases = 0;
  uint64_t failed = 0;
};

// --algo: only the algorithms of these names (empty: every one).
bool wanted(const std::vector<std::string>& only, const std::string& algorithm) {
  if (only.empty()) return true;
  for (const std::string& name : only) {
    if (name == algorithm) return true;
  }
  return false;
}

void run_matrix(chorus::Communicator& comm, Depth depth, bool count_only, const std::vector<std::string>& only,
                Counts& counts) {
  if (!bench::ranks_split_by_host(comm) && comm.rank() == 0 && !count_only) {
    std::printf("chorus-matrix: the ranks are on one host, or one on each: the hierarchical algorithms are left "
                "out (they would run only their flat parts)\n");
  }
  for (int o = 0; o < chorus::kNumCollectives; ++o) {
    const CollectiveBench& spec = bench_for(static_cast<Collective>(o));
    for (const std::string& algorithm : bench::algorithms_that_apply(comm, spec.op)) {
      if (!wanted(only, algorithm)) continue;
      if (!count_only) comm.set_algorithm(spec.op, algorithm);
      for (const Sweep& sweep : sweeps(depth, spec, comm.size())) {
        for (DataType dtype : sweep.dtypes) {
          for (size_t bytes : sweep.byte_sizes) {
            if (spec.op == Collective::barrier && bytes != 0) continue;
            for (ReduceOp redop : ops_for(spec, bytes, depth)) {
              for (bool in_place : {false, true}) {
                if (in_place && (spec.always_in_place || spec.op == Collective::barrier)) continue;
                for (int root : roots_for(spec, bytes, comm.size())) {
                  ++counts.cases;
                  if (count_only) continue;
                  CallShape shape = spec.shape(bytes, chorus::datatype_size(dtype), comm.size());
                  Setup setup{dtype, redop, root, in_place};
                  Buffers buffers(spec, shape, setup, comm.rank(), comm.size());
                  buffers.fill();
                  spec.run(comm, buffers.call());
                  uint64_t wrong = buffers.count_wrong(stderr, 2);
                  if (wrong != 0) {
                    ++counts.failed;
                    std::fprintf(stderr, "FAILED: %s/%s %s %s %zu bytes root %d %s: %llu wrong elements on rank %d\n",
                                 std::string(chorus::to_string(spec.op)).c_str(), algorithm.c_str(),
                                 std::string(chorus::to_string(dtype)).c_str(),
                                 std::string(chorus::to_string(redop)).c_str(), bytes, root,
                                 in_place ? "in-place" : "out-of-place", static_cast<unsigned long long>(wrong),
                                 comm.rank());
                  }
                }
              }
            }
          }
        }
      }
      if (!count_only) comm.set_algorithm(spec.op, "auto");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  Depth depth = Depth::full;
  bool count_only = false;
  std::vector<std::string> only;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      depth = Depth::quick;
    } else if (std::strcmp(argv[i], "--every-size") == 0) {
      depth = Depth::every_size;
    } else if (std::strcmp(argv[i], "--list-count") == 0) {
      count_only = true;
    } else if (std::strcmp(argv[i], "--algo") == 0 && i + 1 < argc) {
      // Names, comma-separated, of any collective (a name two collectives
      // share runs in both).
      std::string list = argv[++i];
      for (size_t start = 0; start <= list.size();) {
        size_t comma = list.find(',', start);
        if (comma == std::string::npos) comma = list.size();
        if (comma > start) only.push_back(list.substr(start, comma - start));
        start = comma + 1;
      }
    } else if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
      std::printf("Usage: chorusrun -n N chorus-matrix [--quick | --every-size] [--algo NAMES] [--list-count]\n\n"
                  "Runs every collective x algorithm x dtype x op x size x in-place/out-of-place x root\n"
                  "and checks every element.\n"
                  "  --quick       two dtypes, two ops, small sizes only\n"
                  "  --every-size  every size (MiB ones too: multi-chunk rendezvous), but the dtype and op\n"
                  "                product only at small sizes (two each) and float32 sum at MiB sizes:\n"
                  "                what a transport sees, in a quarter to a third of the full matrix's time\n"
                  "  --algo NAMES  only the algorithms of these names (comma-separated; a name two\n"
                  "                collectives share runs in both), e.g. --algo rabenseifner,scatter_allgather\n"
                  "  --list-count  print how many cases a run holds and exit\n");
      return 0;
    } else {
      std::fprintf(stderr, "chorus-matrix: unknown argument \"%s\"; see --help\n", argv[i]);
      return 2;
    }
  }
  try {
    auto comm = chorus::Communicator::init();
    Counts counts;
    run_matrix(comm, depth, count_only, only, counts);
    uint64_t failed_anywhere = 0;
    comm.allreduce(&counts.failed, &failed_anywhere, 1, ReduceOp::sum);
    if (comm.rank() == 0) {
      std::printf("chorus-matrix: %d ranks, %s, %llu cases, %llu failed\n", comm.size(), comm.transport_name().c_str(),
                  static_cast<unsigned long long>(counts.cases), static_cast<unsigned long long>(failed_anywhere));
    }
    const int rank = comm.rank();
    comm.finalize();
    // Every rank's own pass line, after finalize (tests/job_verdict.py).
    if (failed_anywhere == 0) std::printf("chorus-matrix: rank %d passed\n", rank);
    return failed_anywhere == 0 ? 0 : 1;
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus-matrix: %s\n", e.what());
    return 1;
  }
}
