// chorus-nonblocking: non-blocking collectives and point-to-point between
// real processes (docs/nonblocking.md). Each round posts 72 operations of
// every kind (iallreduce, ibroadcast, ireduce, iallgather, ireduce_scatter,
// ialltoall, ibarrier, isend/irecv), sizes from 0 B to 8 MiB across the eager
// limit and rendezvous chunking, in and out of place, four dtypes, on the
// world communicator and a dup of it at once, with blocking collectives
// interleaved; then waits for them in reverse order, in a random order that
// differs per rank, or with wait_any/test_any, and verifies every element;
// then 32 rooted, v- and prefix ones (igather .. iexscan, 4 sizes) at once.
// Then: operations complete with no chorus call while the application only
// computes (with CHORUS_PROGRESS=thread), and a destroyed unfinished request
// still completes. Prints every failed check and
// "nonblocking: N checks, F failed".
#include <chorus/chorus.hpp>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using chorus::Collective;
using chorus::Communicator;
using chorus::DataType;
using chorus::ReduceOp;
using chorus::Message;
using chorus::Received;
using chorus::Request;
using chorus::Status;
using chorus::kAnySource;

int g_checks = 0;
int g_failed = 0;
int g_rank = 0;

void check(bool ok, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failed;
    if (g_failed <= 20) std::printf("FAILED: rank %d: %s\n", g_rank, what.c_str());
  }
}

// Small integers, so float sums are exact in any order.
int value(int rank, size_t i, int seed) { return static_cast<int>((i * 31 + static_cast<size_t>(rank) * 17 + static_cast<size_t>(seed) * 7) % 19) - 9; }

// One posted operation: its buffers (bytes), its request, and how to check.
struct Posted {
  virtual ~Posted() = default;  // BlockPosted is owned through unique_ptr<Posted>
  std::string name;
  Request request;
  std::vector<unsigned char> send, recv;
  std::function<void(Posted&)> verify;
};

template <class T>
T* as(std::vector<unsigned char>& bytes) {
  return reinterpret_cast<T*>(bytes.data());
}

template <class T>
DataType dtype_of() {
  return chorus::datatype_of<T>();
}

template <class T>
void fill(std::vector<unsigned char>& bytes, size_t count, int rank, int seed) {
  bytes.assign(std::max<size_t>(1, count) * sizeof(T), 0);
  for (size_t i = 0; i < count; ++i) as<T>(bytes)[i] = static_cast<T>(value(rank, i, seed));
}

// Compares `count` elements at `got` with expected(i); one check per buffer.
template <class T>
void expect(const Posted& op, const T* got, size_t count, const std::function<double(size_t)>& expected) {
  for (size_t i = 0; i < count; ++i) {
    if (static_cast<double>(got[i]) != expected(i)) {
      check(false, op.name + ": element " + std::to_string(i) + " is " + std::to_string(static_cast<double>(got[i])) +
                       ", expected " + std::to_string(expected(i)));
      return;
    }
  }
  check(true, op.name);
}

template <class T>
std::unique_ptr<Posted> post_collective(Communicator& comm, int kind, size_t count, int seed, bool in_place) {
  const int rank = comm.rank(), size = comm.size();
  auto op = std::make_unique<Posted>();
  const auto n = static_cast<size_t>(size);
  const int root = seed % size;
  auto sum_over = [size, seed](size_t i) {
    double total = 0;
    for (int r = 0; r < size; ++r) total += value(r, i, seed);
    return total;
  };
  switch (kind) {
    case 0: {  // allreduce sum
      op->name = "iallreduce " + std::to_string(count) + (in_place ? " in place" : "");
      fill<T>(op->send, count, rank, seed);
      op->recv.assign(op->send.size(), 0);
      void* out = in_place ? op->send.data() : op->recv.data();
      op->request = comm.iallreduce(op->send.data(), out, count, dtype_of<T>(), ReduceOp::sum);
      op->verify = [count, in_place, sum_over](Posted& p) {
        expect<T>(p, as<T>(in_place ? p.send : p.recv), count, sum_over);
      };
      break;
    }
    case 1: {  // allreduce max
      op->name = "iallreduce max " + std::to_string(count);
      fill<T>(op->send, count, rank, seed);
      op->recv.assign(op->send.size(), 0);
      op->request = comm.iallreduce(op->send.data(), op->recv.data(), count, dtype_of<T>(), ReduceOp::max);
      op->verify = [count, size, seed](Posted& p) {
        expect<T>(p, as<T>(p.recv), count, [&](size_t i) {
          int best = value(0, i, seed);
          for (int r = 1; r < size; ++r) best = std::max(best, value(r, i, seed));
          return static_cast<double>(best);
        });
      };
      break;
    }
    case 2: {  // broadcast
      op->name = "ibroadcast " + std::to_string(count) + " root " + std::to_string(root);
      fill<T>(op->send, count, rank == root ? root : -1000, seed);
      op->request = comm.ibroadcast(op->send.data(), count, dtype_of<T>(), root);
      op->verify = [count, root, seed](Posted& p) {
        expect<T>(p, as<T>(p.send), count, [&](size_t i) { return static_cast<double>(value(root, i, seed)); });
      };
      break;
    }
    case 3: {  // reduce to a root
      op->name = "ireduce " + std::to_string(count) + " root " + std::to_string(root) + (in_place ? " in place" : "");
      fill<T>(op->send, count, rank, seed);
      op->recv.assign(op->send.size(), 0);
      const bool here_in_place = in_place && rank == root;
      void* out = here_in_place ? op->send.data() : op->recv.data();
      op->request = comm.ireduce(op->send.data(), out, count, dtype_of<T>(), ReduceOp::sum, root);
      op->verify = [count, rank, root, here_in_place, sum_over](Posted& p) {
        if (rank == root) expect<T>(p, as<T>(here_in_place ? p.send : p.recv), count, sum_over);
      };
      break;
    }
    case 4: {  // allgather
      op->name = "iallgather " + std::to_string(count) + (in_place ? " in place" : "");
      op->recv.assign(std::max<size_t>(1, count * n) * sizeof(T), 0);
      fill<T>(op->send, count, rank, seed);
      const void* in = op->send.data();
      if (in_place) {
        std::memcpy(op->recv.data() + static_cast<size_t>(rank) * count * sizeof(T), op->send.data(), count * sizeof(T));
        in = op->recv.data() + static_cast<size_t>(rank) * count * sizeof(T);
      }
      op->request = comm.iallgather(in, op->recv.data(), count, dtype_of<T>());
      op->verify = [count, n, seed](Posted& p) {
        expect<T>(p, as<T>(p.recv), count * n,
                  [&](size_t i) { return static_cast<double>(value(static_cast<int>(i / count), i % count, seed)); });
      };
      break;
    }
    case 5: {  // reduce_scatter
      op->name = "ireduce_scatter " + std::to_string(count);
      fill<T>(op->send, count * n, rank, seed);
      op->recv.assign(std::max<size_t>(1, count) * sizeof(T), 0);
      op->request = comm.ireduce_scatter(op->send.data(), op->recv.data(), count, dtype_of<T>(), ReduceOp::sum);
      op->verify = [count, rank, sum_over](Posted& p) {
        expect<T>(p, as<T>(p.recv), count,
                  [&](size_t i) { return sum_over(static_cast<size_t>(rank) * count + i); });
      };
      break;
    }
    case 6: {  // alltoall: block b of rank r is value(r, b*count + i)
      op->name = "ialltoall " + std::to_string(count);
      fill<T>(op->send, count * n, rank, seed);
      op->recv.assign(std::max<size_t>(1, count * n) * sizeof(T), 0);
      op->request = comm.ialltoall(op->send.data(), op->recv.data(), count, dtype_of<T>());
      op->verify = [count, n, rank, seed](Posted& p) {
        expect<T>(p, as<T>(p.recv), count * n, [&](size_t i) {
          const size_t from = i / count, j = i % count;
          return static_cast<double>(value(static_cast<int>(from), static_cast<size_t>(rank) * count + j, seed));
        });
      };
      break;
    }
    default: {
      op->name = "ibarrier";
      op->request = comm.ibarrier();
      op->verify = [](Posted& p) { check(!p.request.active(), "ibarrier completed"); };
      break;
    }
  }
  return op;
}

std::unique_ptr<Posted> post_exchange(Communicator& comm, size_t bytes, int tag, bool send_side) {
  const int rank = comm.rank(), size = comm.size();
  auto op = std::make_unique<Posted>();
  const int to = (rank + 1) % size, from = (rank + size - 1) % size;
  if (send_side) {
    op->name = "isend " + std::to_string(bytes) + " tag " + std::to_string(tag);
    op->send.resize(std::max<size_t>(1, bytes));
    for (size_t i = 0; i < bytes; ++i) op->send[i] = static_cast<unsigned char>(value(rank, i, tag) + 9);
    op->request = comm.isend(op->send.data(), bytes, to, tag);
    op->verify = [](Posted& p) { check(!p.request.active(), p.name + " completed"); };
  } else {
    op->name = "irecv " + std::to_string(bytes) + " tag " + std::to_string(tag);
    op->recv.assign(std::max<size_t>(1, bytes) + 8, 0xEE);
    op->request = comm.irecv(op->recv.data(), op->recv.size(), from, tag);
    op->verify = [bytes, from, tag](Posted& p) {
      const chorus::Received& got = p.request.received();
      check(got.source == from && got.tag == tag && got.bytes == bytes,
            p.name + ": received source " + std::to_string(got.source) + " tag " + std::to_string(got.tag) + " bytes " +
                std::to_string(got.bytes));
      expect<unsigned char>(p, p.recv.data(), bytes, [&](size_t i) { return static_cast<double>(value(from, i, tag) + 9); });
    };
  }
  return op;
}

// Sizes in elements, across the 16 KiB eager limit and the 1 MiB rendezvous chunk.
constexpr size_t kCounts[] = {0, 1, 13, 1000, 4100, 70000, 300000};

size_t count_of(int k) { return kCounts[static_cast<size_t>(k / 9 + k) % std::size(kCounts)]; }

std::unique_ptr<Posted> post_one(Communicator& world, Communicator& dup, int k, int round) {
  const int seed = round * 100 + k;
  Communicator& comm = k % 5 == 4 ? dup : world;
  const int kind = k % 9;
  size_t count = count_of(k);
  if (kind >= 4 && kind <= 6) count = std::min<size_t>(count, 70000);  // times the rank count
  if (kind == 7) return post_exchange(comm, count * 3, seed, true);
  // The receive of the message operation k - 1 sent, on its communicator.
  if (kind == 8) return post_exchange((k - 1) % 5 == 4 ? dup : world, count_of(k - 1) * 3, seed - 1, false);
  const bool in_place = k % 3 == 0;
  switch (k % 4) {
    case 0: return post_collective<float>(comm, kind, count, seed, in_place);
    case 1: return post_collective<int32_t>(comm, kind, count, seed, in_place);
    case 2: return post_collective<double>(comm, kind, count, seed, in_place);
    default: return post_collective<int64_t>(comm, kind, count, seed, in_place);
  }
}

void blocking_check(Communicator& world, int seed) {
  const int size = world.size();
  std::vector<int32_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = value(world.rank(), i, seed);
  world.allreduce(std::span<int32_t>(data), ReduceOp::sum);
  bool ok = true;
  for (size_t i = 0; i < data.size() && ok; ++i) {
    int32_t total = 0;
    for (int r = 0; r < size; ++r) total += value(r, i, seed);
    ok = data[i] == total;
  }
  check(ok, "blocking allreduce between non-blocking posts");
}

int g_operations = 72;  // per round, before the 8 MiB one
long g_compute_ms = 0;  // progress_without_calls' computation (0: 150 ms per rank)

void round_of_operations(Communicator& world, Communicator& dup, int round, const std::string& order) {
  const int kOperations = g_operations;
  std::vector<std::unique_ptr<Posted>> posted;
  for (int k = 0; k < kOperations; ++k) {
    posted.push_back(post_one(world, dup, k, round));
    if (k % 16 == 15) blocking_check(world, round * 1000 + k);
  }
  // The 8 MiB one: several rendezvous chunks, outstanding with all the others.
  posted.push_back(post_collective<float>(world, 0, (8u << 20) / sizeof(float), round, false));

  std::vector<size_t> indices(posted.size());
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = i;
  if (order == "reverse") {
    std::reverse(indices.begin(), indices.end());
  } else if (order == "random") {
    std::mt19937 rng(static_cast<unsigned>(1234 + world.rank() * 77 + round));  // differs per rank
    std::shuffle(indices.begin(), indices.end(), rng);
  }
  if (order == "any") {
    std::vector<Request> requests;
    for (auto& op : posted) requests.push_back(std::move(op->request));
    size_t remaining = requests.size();
    while (remaining > 0) {
      std::optional<size_t> done = chorus::test_any(requests);
      if (!done) done = chorus::wait_any(requests);
      if (*done >= requests.size()) break;
      posted[*done]->request = std::move(requests[*done]);  // empty, but keeps received()
      posted[*done]->verify(*posted[*done]);
      --remaining;
    }
    check(remaining == 0, "wait_any/test_any completed every operation");
    return;
  }
  for (size_t index : indices) {
    posted[index]->request.wait();
    posted[index]->verify(*posted[index]);
  }
}

// The rooted, v- and prefix collectives (igather .. iexscan): every kind
// at several sizes, on both communicators, outstanding together with a
// broadcast and waited for in reverse; every element checked. Rank r's
// v-block holds count + r elements (rank r and j exchange count + r + 2j
// in ialltoallv), with one element of gap between blocks.
struct BlockPosted : Posted {
  std::vector<size_t> counts, displs, send_counts, send_displs;
};

// Counts per rank and gapped displacements (one element between blocks).
void gapped(const std::vector<size_t>& counts, std::vector<size_t>& displs) {
  displs.resize(counts.size());
  size_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    displs[r] = at;
    at += counts[r] + 1;
  }
}

template <class T>
std::unique_ptr<BlockPosted> post_block(Communicator& comm, int kind, size_t count, int seed) {
  const int rank = comm.rank(), size = comm.size();
  const auto n = static_cast<size_t>(size), me = static_cast<size_t>(rank);
  const int root = seed % size;
  auto op = std::make_unique<BlockPosted>();
  auto block_of = [count](size_t r) { return count + r; };
  auto sum_upto = [seed](int last, size_t i) {  // ranks 0..last
    double total = 0;
    for (int q = 0; q <= last; ++q) total += value(q, i, seed);
    return total;
  };
  const std::string size_text = " " + std::to_string(count) + " root " + std::to_string(root);
  switch (kind) {
    case 0: {  // igather: block r of the root's recv is rank r's data
      op->name = "igather" + size_text;
      fill<T>(op->send, count, rank, seed);
      op->recv.assign(std::max<size_t>(1, count * n) * sizeof(T), 0);
      op->request = comm.igather(op->send.data(), op->recv.data(), count, dtype_of<T>(), root);
      op->verify = [count, n, rank, root, seed](Posted& p) {
        if (rank != root) return;
        expect<T>(p, as<T>(p.recv), count * n,
                  [&](size_t i) { return static_cast<double>(value(static_cast<int>(i / count), i % count, seed)); });
      };
      break;
    }
    case 1:    // igatherv
    case 4: {  // iallgatherv: rank r's block_of(r) elements at displs[r]
      const bool all = kind == 4;
      op->name = std::string(all ? "iallgatherv" : "igatherv") + size_text;
      for (size_t r = 0; r < n; ++r) op->counts.push_back(block_of(r));
      gapped(op->counts, op->displs);
      fill<T>(op->send, block_of(me), rank, seed);
      op->recv.assign((op->displs.back() + op->counts.back() + 1) * sizeof(T), 0);
      op->request = all ? comm.iallgatherv(op->send.data(), block_of(me), op->recv.data(), op->counts, op->displs,
                                           dtype_of<T>())
                        : comm.igatherv(op->send.data(), block_of(me), op->recv.data(), op->counts, op->displs,
                                        dtype_of<T>(), root);
      op->verify = [all, rank, root, seed, n](Posted& posted) {
        auto& p = static_cast<BlockPosted&>(posted);
        if (!all && rank != root) return;
        for (size_t r = 0; r < n; ++r) {
          expect<T>(p, as<T>(p.recv) + p.displs[r], p.counts[r],
                    [&](size_t i) { return static_cast<double>(value(static_cast<int>(r), i, seed)); });
        }
      };
      break;
    }
    case 2: {  // iscatter: rank r gets block r of the root's send
      op->name = "iscatter" + size_text;
      op->send.assign(std::max<size_t>(1, count * n) * sizeof(T), 0);
      if (rank == root) {
        for (size_t i = 0; i < count * n; ++i) as<T>(op->send)[i] = static_cast<T>(value(static_cast<int>(i / count), i % count, seed));
      }
      op->recv.assign(std::max<size_t>(1, count) * sizeof(T), 0);
      op->request = comm.iscatter(op->send.data(), op->recv.data(), count, dtype_of<T>(), root);
      op->verify = [count, rank, seed](Posted& p) {
        expect<T>(p, as<T>(p.recv), count, [&](size_t i) { return static_cast<double>(value(rank, i, seed)); });
      };
      break;
    }
    case 3: {  // iscatterv: rank r gets block_of(r) elements from displs[r]
      op->name = "iscatterv" + size_text;
      for (size_t r = 0; r < n; ++r) op->send_counts.push_back(block_of(r));
      gapped(op->send_counts, op->send_displs);
      op->send.assign((op->send_displs.back() + op->send_counts.back() + 1) * sizeof(T), 0);
      if (rank == root) {
        for (size_t r = 0; r < n; ++r) {
          for (size_t i = 0; i < op->send_counts[r]; ++i) {
            as<T>(op->send)[op->send_displs[r] + i] = static_cast<T>(value(static_cast<int>(r), i, seed));
          }
        }
      }
      op->recv.assign(std::max<size_t>(1, block_of(me)) * sizeof(T), 0);
      op->request = comm.iscatterv(op->send.data(), op->send_counts, op->send_displs, op->recv.data(), block_of(me),
                                   dtype_of<T>(), root);
      op->verify = [rank, seed, me, block_of](Posted& p) {
        expect<T>(p, as<T>(p.recv), block_of(me), [&](size_t i) { return static_cast<double>(value(rank, i, seed)); });
      };
      break;
    }
    case 5: {  // ialltoallv: rank i sends count + i + 2j elements to rank j, value(i, j * 1000 + k)
      op->name = "ialltoallv" + size_text;
      for (size_t j = 0; j < n; ++j) op->send_counts.push_back(count + me + 2 * j);
      for (size_t i = 0; i < n; ++i) op->counts.push_back(count + i + 2 * me);
      gapped(op->send_counts, op->send_displs);
      gapped(op->counts, op->displs);
      op->send.assign((op->send_displs.back() + op->send_counts.back() + 1) * sizeof(T), 0);
      for (size_t j = 0; j < n; ++j) {
        for (size_t k = 0; k < op->send_counts[j]; ++k) {
          as<T>(op->send)[op->send_displs[j] + k] = static_cast<T>(value(rank, j * 1000 + k, seed));
        }
      }
      op->recv.assign((op->displs.back() + op->counts.back() + 1) * sizeof(T), 0);
      op->request = comm.ialltoallv(op->send.data(), op->send_counts, op->send_displs, op->recv.data(), op->counts,
                                    op->displs, dtype_of<T>());
      op->verify = [me, seed, n](Posted& posted) {
        auto& p = static_cast<BlockPosted&>(posted);
        for (size_t i = 0; i < n; ++i) {
          expect<T>(p, as<T>(p.recv) + p.displs[i], p.counts[i],
                    [&](size_t k) { return static_cast<double>(value(static_cast<int>(i), me * 1000 + k, seed)); });
        }
      };
      break;
    }
    case 6:    // iscan
    default: {  // iexscan (rank 0's result is undefined: not checked)
      const bool exclusive = kind != 6;
      op->name = std::string(exclusive ? "iexscan " : "iscan ") + std::to_string(count);
      fill<T>(op->send, count, rank, seed);
      op->recv.assign(op->send.size(), 0);
      op->request = exclusive ? comm.iexscan(op->send.data(), op->recv.data(), count, dtype_of<T>(), ReduceOp::sum)
                              : comm.iscan(op->send.data(), op->recv.data(), count, dtype_of<T>(), ReduceOp::sum);
      op->verify = [count, rank, exclusive, sum_upto](Posted& p) {
        if (exclusive && rank == 0) return;
        expect<T>(p, as<T>(p.recv), count, [&](size_t i) { return sum_upto(exclusive ? rank - 1 : rank, i); });
      };
      break;
    }
  }
  return op;
}

void block_round(Communicator& world, Communicator& dup, int round) {
  std::vector<std::unique_ptr<Posted>> posted;
  int k = 0;
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}, size_t{70000}}) {
    for (int kind = 0; kind < 8; ++kind, ++k) {
      Communicator& comm = k % 3 == 2 ? dup : world;
      const int seed = round * 100 + k;
      switch (k % 3) {
        case 0: posted.push_back(post_block<float>(comm, kind, count, seed)); break;
        case 1: posted.push_back(post_block<int32_t>(comm, kind, count, seed)); break;
        default: posted.push_back(post_block<double>(comm, kind, count, seed)); break;
      }
    }
    posted.push_back(post_collective<float>(world, 2, count, round * 100 + k, false));  // an ibroadcast among them
  }
  for (auto it = posted.rbegin(); it != posted.rend(); ++it) {
    (*it)->request.wait();
    (*it)->verify(**it);
  }
}

// With a progress thread, operations finish while the application computes
// and makes no chorus call: after a pause, one test() finds them done.
void progress_without_calls(Communicator& world) {
  std::vector<float> a(200000), b(3000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(value(world.rank(), i, 5));
  for (size_t i = 0; i < b.size(); ++i) b[i] = 1.0f;
  Request first = world.iallreduce(std::span<float>(a), ReduceOp::sum);
  Request second = world.iallreduce(std::span<float>(b), ReduceOp::sum);
  // More ranks than cores share the CPUs with their progress threads: compute longer.
  const long compute_ms = g_compute_ms > 0 ? g_compute_ms : 150L * std::max(2, world.size());
  // Measured in this thread's own CPU time, not wall time: on a loaded host
  // (CI beside a CPU burner, load 40) 750 ms of wall time gave this thread
  // and the progress threads too little CPU, and the check failed with
  // nothing wrong. A progress thread that never runs still fails it; the
  // wall-time cap only bounds the test.
  auto thread_cpu_ms = [] {
    timespec now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) * 1000.0 + static_cast<double>(now.tv_nsec) / 1e6;
  };
  const double cpu_start = thread_cpu_ms();
  const auto wall_cap = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  volatile double sink = 0;
  while (thread_cpu_ms() - cpu_start < static_cast<double>(compute_ms) && std::chrono::steady_clock::now() < wall_cap) {
    for (int i = 0; i < 1000; ++i) sink = sink + std::sqrt(static_cast<double>(sink) + 1.0);
  }
  const bool first_done = first.test(), second_done = second.test();
  check(first_done && second_done, "operations completed while the application computed without chorus calls");
  first.wait();
  second.wait();
  check(b[0] == static_cast<float>(world.size()) && b.back() == static_cast<float>(world.size()),
        "progressed allreduce result");
}

// A request destroyed unfinished still completes (at the latest when the
// communicator is finalized: `data` is checked after that); later calls work.
void detached_request(Communicator& world, std::vector<int64_t>& data) {
  {
    Request dropped = world.iallreduce(std::span<int64_t>(data), ReduceOp::sum);
  }
  std::vector<int64_t> after(10, 2);
  world.allreduce(std::span<int64_t>(after), ReduceOp::sum);  // ordered after the detached one
  check(after[0] == 2 * world.size(), "blocking call after a detached request");
  Request fence = world.ibarrier();
  fence.wait();
  world.barrier();
}

// Receives whose requests are destroyed before their messages come still
// land: Progress adopts a listed point-to-point operation whose Request
// goes (docs/nonblocking.md, "Who owns an operation"). One eager, one by
// rendezvous; checked after finalize, as `data` above.
void detached_receives(Communicator& world, std::vector<int64_t>& small, std::vector<int64_t>& large) {
  const int left = (world.rank() + world.size() - 1) % world.size();
  const int right = (world.rank() + 1) % world.size();
  {
    Request dropped_small = world.irecv(small.data(), small.size() * sizeof(int64_t), left, 77);
    Request dropped_large = world.irecv(large.data(), large.size() * sizeof(int64_t), left, 78);
  }
  world.barrier();  // every rank's receives are posted and dropped before a message is sent
  const std::vector<int64_t> mine(large.size(), world.rank() + 1);
  world.send(mine.data(), small.size() * sizeof(int64_t), right, 77);
  world.send(mine.data(), large.size() * sizeof(int64_t), right, 78);
  world.barrier();
}

// Matched probes take their message (eager and rendezvous), which only
// their imrecv/mrecv gets; a receive nothing matched is withdrawn by
// cancel() and the message sent later reaches the next receive; a receive
// whose message came, and a send, are not withdrawn (docs/api.md).
void matched_probes_and_cancel(Communicator& world) {
  const int left = (world.rank() + world.size() - 1) % world.size();
  const int right = (world.rank() + 1) % world.size();
  const std::vector<int64_t> small(8, world.rank() + 1), large(50000, world.rank() + 1);  // eager, rendezvous
  const int64_t from_left = left + 1;
  Request sends[3] = {world.isend(small.data(), small.size() * sizeof(int64_t), right, 90),
                      world.isend(large.data(), large.size() * sizeof(int64_t), right, 90),
                      world.isend(small.data(), sizeof(int64_t), right, 91)};
  Message first = world.mprobe(left, 90);
  check(first.info.source == left && first.info.tag == 90 && first.info.bytes == small.size() * sizeof(int64_t),
        "mprobe took the first message");
  std::optional<Message> second;
  while (!second) second = world.improbe(kAnySource, 90);
  check(second->info.source == left && second->info.bytes == large.size() * sizeof(int64_t),
        "improbe took the second message");
  int64_t other = 0;
  const Received got_other = world.recv(&other, sizeof other, left, 91);
  check(got_other.tag == 91 && other == from_left, "a receive after the matched probes");
  std::vector<int64_t> large_in(large.size(), -1), small_in(small.size(), -1);
  const Received got_large = world.mrecv(*second, large_in.data(), large_in.size() * sizeof(int64_t));
  check(second->id == 0 && got_large.source == left && got_large.bytes == large.size() * sizeof(int64_t) &&
            std::all_of(large_in.begin(), large_in.end(), [&](int64_t v) { return v == from_left; }),
        "mrecv of a rendezvous message");
  Request small_recv = world.imrecv(first, small_in.data(), small_in.size() * sizeof(int64_t));
  small_recv.wait();
  check(first.id == 0 && small_recv.received().bytes == small.size() * sizeof(int64_t) &&
            std::all_of(small_in.begin(), small_in.end(), [&](int64_t v) { return v == from_left; }),
        "imrecv of an eager message");
  bool spent = false;
  try {
    (void)world.imrecv(first, small_in.data(), small_in.size() * sizeof(int64_t));
  } catch (const chorus::Error& e) {
    spent = e.status() == Status::invalid_argument;
  }
  check(spent, "a spent message is refused");
  wait_all(sends);

  int64_t withdrawn = -1;
  Request unmatched = world.irecv(&withdrawn, sizeof withdrawn, left, 92);
  check(unmatched.cancel() && !unmatched.active() && unmatched.received().source == -1,
        "cancel withdrew a receive nothing matched");
  world.barrier();
  const int64_t mine = world.rank() + 1;
  Request late = world.isend(&mine, sizeof mine, right, 92);
  int64_t next = -1;
  world.recv(&next, sizeof next, left, 92);
  late.wait();
  check(next == from_left && withdrawn == -1, "the message after a cancel reached the next receive");

  int64_t arrived = -1, after = -1;
  Request matched = world.irecv(&arrived, sizeof arrived, left, 93);
  Request both[2] = {world.isend(&mine, sizeof mine, right, 93), world.isend(&mine, sizeof mine, right, 94)};
  world.recv(&after, sizeof after, left, 94);  // so 93, sent before it, has matched
  check(!matched.cancel() && !both[0].cancel(), "cancel leaves a matched receive and a send alone");
  matched.wait();
  wait_all(both);
  check(arrived == from_left && after == from_left, "a receive cancel refused completed");
  world.barrier();
}

void usage() {
  std::printf(
      "Usage: chorusrun -n N chorus-nonblocking [--rounds R] [--compute-ms MS] [--no-thread-check]\n\n"
      "Posts 73 non-blocking operations of every kind per round on two communicators,\n"
      "waits for them in reverse, random and wait_any order, and verifies every element;\n"
      "then matched probes and cancelled receives.\n"
      "  --rounds R          rounds of each wait order (default 1)\n"
      "  --operations K      operations per round besides the 8 MiB allreduce (default 72)\n"
      "  --compute-ms MS     how long the application computes without chorus calls while\n"
      "                      two operations must complete (default 150 per rank; longer on\n"
      "                      slow, oversubscribed machines such as the emulated lab)\n"
      "  --no-thread-check   skip the check that operations progress with no chorus call\n"
      "                      (for CHORUS_PROGRESS=caller, where they do not)\n");
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 1;
  bool thread_check = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage();
      return 0;
    }
    if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else if (arg == "--operations" && i + 1 < argc) {
      g_operations = std::atoi(argv[++i]);
    } else if (arg == "--compute-ms" && i + 1 < argc) {
      g_compute_ms = std::atol(argv[++i]);
    } else if (arg == "--no-thread-check") {
      thread_check = false;
    } else {
      std::fprintf(stderr, "chorus-nonblocking: unknown argument %s (see --help)\n", arg.c_str());
      return 2;
    }
  }
  try {
    Communicator world = Communicator::init();
    g_rank = world.rank();
    Communicator dup = world.dup();
    int round = 0;
    for (int r = 0; r < rounds; ++r) {
      for (const char* order : {"reverse", "random", "any"}) round_of_operations(world, dup, round++, order);
      block_round(world, dup, round++);
    }
    if (thread_check) progress_without_calls(world);
    std::vector<int64_t> detached(50000, 1);
    detached_request(world, detached);
    std::vector<int64_t> small(8, -1), large(50000, -1);  // 400 KB: a rendezvous on every transport
    detached_receives(world, small, large);
    matched_probes_and_cancel(world);
    const int size = world.size();
    const int64_t from_left = (world.rank() + size - 1) % size + 1;
    dup.finalize();
    world.finalize();
    check(detached[0] == size && detached.back() == size, "a detached request's operation completed by finalize");
    check(std::all_of(small.begin(), small.end(), [&](int64_t v) { return v == from_left; }),
          "a detached eager receive landed");
    check(std::all_of(large.begin(), large.end(), [&](int64_t v) { return v == from_left; }),
          "a detached rendezvous receive landed");
  } catch (const chorus::Error& e) {
    check(false, std::string("chorus error: ") + e.what());
  }
  std::printf("nonblocking: %d checks, %d failed\n", g_checks, g_failed);
  // Every rank's own pass line, after finalize (tests/job_verdict.py).
  if (g_failed == 0 && g_checks > 0) std::printf("chorus-nonblocking: rank %d passed\n", g_rank);
  return g_failed == 0 ? 0 : 1;
}
