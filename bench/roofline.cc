// The memory model behind chorus-bench --roofline (roofline.hpp;
// docs/benchmarking.md, "Roofline"). Each algorithm's work is what its
// comment block in collectives/ says it receives and reduces, taken at its
// least: every received byte copied once (the shm transport's single-copy
// read; its eager rings copy twice), local copies only where the algorithm
// cannot avoid them (Bruck's rotation).
#include "roofline.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

// Best (least) seconds of `rounds` rounds of `repeats` copies of a into b
// (alternating the direction). `copies` false: this rank only takes part
// in before() and after().
template <class Before, class After>
double best_copy_seconds(std::vector<unsigned char>& a, std::vector<unsigned char>& b, int rounds, int repeats,
                         bool copies, Before&& before, After&& after) {
  double best = 0;
  for (int round = 0; round < rounds; ++round) {
    before();
    double seconds = 0;
    if (copies) {
      const auto start = Clock::now();
      for (int repeat = 0; repeat < repeats; ++repeat) {
        if (repeat % 2 == 0) {
          std::memcpy(b.data(), a.data(), a.size());
        } else {
          std::memcpy(a.data(), b.data(), a.size());
        }
      }
      seconds = std::chrono::duration<double>(Clock::now() - start).count();
    }
    seconds = after(seconds);
    if (round == 0 || seconds < best) best = seconds;
  }
  return best;
}

int ceil_log2(int n) {
  int levels = 0;
  while ((1 << levels) < n) ++levels;
  return levels;
}

int floor_pow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// A binomial tree over relative ranks 0..n-1 rooted at 0 (the scatter and
// gather trees of collectives/): the rank v > 0 hangs below v minus its
// lowest set bit and its subtree holds min(lowbit(v), n - v) ranks.
int subtree_ranks(int v, int n) { return std::min(v & -v, n - v); }

// Largest subtree below the root, and the most ranks' blocks that pass one
// after another along a root-to-leaf path (each level's whole subtree).
struct TreeShape {
  int largest_subtree = 0;
  int longest_path_blocks = 0;
};
TreeShape binomial_shape(int n) {
  TreeShape shape;
  for (int v = 1; v < n; ++v) {
    shape.largest_subtree = std::max(shape.largest_subtree, subtree_ranks(v, n));
    int path = 0;
    for (int u = v; u > 0; u &= u - 1) path += subtree_ranks(u, n);
    shape.longest_path_blocks = std::max(shape.longest_path_blocks, path);
  }
  return shape;
}

}  // namespace

CopyRate measure_copy_rate(chorus::Communicator& comm, size_t buffer_bytes) {
  buffer_bytes = std::max<size_t>(buffer_bytes, 4096);
  // Value-initialised: every page is touched before the first timed copy.
  std::vector<unsigned char> a(buffer_bytes, 1), b(buffer_bytes, 2);
  // A round copies about 16 MiB (a small buffer many times, staying in
  // cache as a collective's would), so the clock's resolution and the
  // barrier's skew stay small beside it.
  const int repeats = static_cast<int>(std::clamp<size_t>((size_t{16} << 20) / buffer_bytes, 2, 4096));
  constexpr int kRounds = 3;
  CopyRate rate;
  rate.buffer_bytes = buffer_bytes;
  const double bytes = static_cast<double>(buffer_bytes) * repeats;
  auto slowest = [&](double seconds) {
    double result = 0;
    comm.allreduce(&seconds, &result, 1, chorus::ReduceOp::max);
    return result;
  };
  // All at once: a round lasts as long as its slowest rank's copies.
  const double all = best_copy_seconds(a, b, kRounds, repeats, true, [&] { comm.barrier(); }, slowest);
  // Rank 0 alone, the others waiting in the allreduce that ends the round.
  const double one = best_copy_seconds(a, b, kRounds, repeats, comm.rank() == 0, [&] { comm.barrier(); }, slowest);
  rate.all_ranks = all > 0 ? bytes / all : 0;
  rate.one_rank = one > 0 ? bytes / one : 0;
  return rate;
}

std::optional<MemoryWork> memory_work(chorus::Collective op, const std::string& algorithm, size_t bytes, int ranks) {
  using chorus::Collective;
  const double s = static_cast<double>(bytes);
  const int n = ranks;
  if (n <= 1) return MemoryWork{};  // no algorithm runs: the call returns at once
  const double others = (n - 1) * s / n;  // the other ranks' share of S
  const int levels = ceil_log2(n);
  const int p = floor_pow2(n);
  const bool folded = p != n;  // recursive doubling / halving fold the extra ranks into partners
  const double per_rank = s / n;
  constexpr double kReduce = 1.5;  // a reduced byte: read twice, written once
  switch (op) {
    case Collective::broadcast:
      if (algorithm == "binomial") return MemoryWork{s, levels * s};  // whole buffer at every level
      if (algorithm == "linear") return MemoryWork{s, s};
      if (algorithm == "pipelined") return MemoryWork{s, s};  // the chain's fill (n - 2 chunks) not counted
      if (algorithm == "scatter_allgather") {
        // A rank is sent only the blocks it lacks: S in all. Along the
        // chain, the deepest scatter path, then the ring's (n-1) blocks.
        const TreeShape tree = binomial_shape(n);
        return MemoryWork{s, tree.longest_path_blocks * per_rank + others};
      }
      break;
    case Collective::allreduce:
      if (algorithm == "ring") return MemoryWork{kReduce * others + others, kReduce * others + others};
      if (algorithm == "rabenseifner") {
        const double halves = kReduce * (p - 1) * s / p + (p - 1) * s / p;
        return folded ? MemoryWork{kReduce * s + halves, kReduce * s + halves + s} : MemoryWork{halves, halves};
      }
      if (algorithm == "recursive_doubling") {
        const double exchanges = kReduce * ceil_log2(p) * s;
        return folded ? MemoryWork{kReduce * s + exchanges, kReduce * s + exchanges + s}
                      : MemoryWork{exchanges, exchanges};
      }
      if (algorithm == "tree") {
        // Two trees, each over half the vector: a rank inner in one reduces
        // its two children's halves and receives that half back, and
        // receives the other half as a leaf of the other.
        return MemoryWork{kReduce * s + s, kReduce * s / 2 + s / 2};
      }
      break;
    case Collective::reduce:
      if (algorithm == "binomial") return MemoryWork{kReduce * levels * s, kReduce * levels * s};  // the root
      break;
    case Collective::allgather:
      if (algorithm == "ring") return MemoryWork{others, others};
      if (algorithm == "bruck") return MemoryWork{others + s, others + s};  // + the rotation into place
      break;
    case Collective::reduce_scatter:
      if (algorithm == "ring") return MemoryWork{kReduce * others, kReduce * others};
      break;
    case Collective::alltoall:
      if (algorithm == "pairwise") return MemoryWork{others, others};
      break;
    case Collective::gather:
      if (algorithm == "linear" || algorithm == "binomial") return MemoryWork{others, others};  // the root
      break;
    case Collective::scatter: {
      if (algorithm == "linear") return MemoryWork{per_rank, per_rank};
      if (algorithm == "binomial") {
        const TreeShape tree = binomial_shape(n);
        return MemoryWork{tree.largest_subtree * per_rank, tree.longest_path_blocks * per_rank};
      }
      break;
    }
    default:
      break;
  }
  return std::nullopt;
}

double limit_seconds(const MemoryWork& work, const CopyRate& rate) {
  const double busiest = rate.all_ranks > 0 ? work.busiest_rank / rate.all_ranks : 0;
  const double chain = rate.one_rank > 0 ? work.chain / rate.one_rank : 0;
  return std::max(busiest, chain);
}

std::optional<double> op_limit_seconds(chorus::Collective op, size_t bytes, int ranks, const CopyRate& rate) {
  static const char* const kModelled[] = {"binomial", "linear",   "pipelined", "scatter_allgather",
                                          "ring",     "tree",     "rabenseifner", "recursive_doubling",
                                          "bruck",    "pairwise"};
  std::optional<double> least;
  for (const char* algorithm : kModelled) {
    auto work = memory_work(op, algorithm, bytes, ranks);
    if (!work) continue;
    const double seconds = limit_seconds(*work, rate);
    if (!least || seconds < *least) least = seconds;
  }
  return least;
}

}  // namespace bench
