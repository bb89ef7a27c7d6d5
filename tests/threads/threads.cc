// chorus-threads: several application threads calling chorus at once
// (docs/api.md, "Threads"). Between real processes, under chorusrun.
//
//   --case pair    the case that deadlocked (issue 42): on each rank, thread A
//                  sends a rendezvous-sized message to its partner (rank ^ 1)
//                  with isend and waits on it; thread B posts the irecv for the
//                  partner's message a little later and waits. A waiting
//                  thread that kept the session lock would keep B from
//                  posting on both sides: a stall, which chorusrun's
//                  --timeout ends as a failure. --runs N rounds.
//   --case stress  --threads T per rank, each with its own communicator (a
//                  dup of the world, made in order before the threads
//                  start), --iters N rounds each of: a blocking allreduce, an
//                  iallreduce waited on, a broadcast from a round-robin root,
//                  an eager and a rendezvous isend/irecv ring exchange (on the
//                  world communicator, all threads at once, each with its own
//                  tag), an allgather and a barrier; every element checked.
//
// Every rank prints "threads: <case>: N checks, F failed" and the process
// exits 1 if any check on any rank failed (the ranks agree on the count in a
// last allreduce, so a rank that saw nothing wrong still exits 1 when a peer
// did), 2 on a usage error.
#include <chorus/chorus.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using chorus::Communicator;
using chorus::DataType;
using chorus::ReduceOp;
using chorus::Request;

std::atomic<long> g_checks{0};
std::atomic<long> g_failed{0};
int g_rank = 0;
std::mutex g_print;

void check(bool ok, const std::string& what) {
  g_checks.fetch_add(1);
  if (!ok && g_failed.fetch_add(1) < 20) {
    std::lock_guard lock(g_print);
    std::printf("FAILED: rank %d: %s\n", g_rank, what.c_str());
    std::fflush(stdout);
  }
}

// Small integers: float sums are exact in any order.
int value(int rank, size_t i, int seed) { return static_cast<int>((i * 31 + rank * 17 + seed * 7) % 19) - 9; }

void fill(std::vector<int>& buffer, int rank, int seed) {
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = value(rank, i, seed);
}

bool holds(const std::vector<int>& buffer, int rank, int seed) {
  for (size_t i = 0; i < buffer.size(); ++i) {
    if (buffer[i] != value(rank, i, seed)) return false;
  }
  return true;
}

// Each thread: isend + wait; the other: a later irecv + wait.
void pair_case(Communicator& world, int runs) {
  const int partner = world.rank() ^ 1;
  if (partner >= world.size()) return;  // the odd rank out sits this one out
  const size_t ints = 256 * 1024;       // 1 MiB: rendezvous on every transport
  for (int run = 0; run < runs; ++run) {
    std::vector<int> out(ints), in(ints, 0);
    fill(out, world.rank(), run);
    std::thread sender([&] {
      try {
        Request request = world.isend(out.data(), out.size() * sizeof(int), partner, run);
        request.wait();
      } catch (const chorus::Error& e) {
        check(false, "pair run " + std::to_string(run) + ": the sending thread: " + e.what());
      }
    });
    std::thread receiver([&] {
      try {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        Request request = world.irecv(in.data(), in.size() * sizeof(int), partner, run);
        request.wait();
      } catch (const chorus::Error& e) {
        check(false, "pair run " + std::to_string(run) + ": the receiving thread: " + e.what());
      }
    });
    sender.join();
    receiver.join();
    check(holds(in, partner, run), "pair run " + std::to_string(run) + ": the partner's message");
  }
}

void stress_thread(Communicator& world, Communicator& mine, int thread, int threads, int iters) {
  const int rank = world.rank(), size = world.size();
  const int next = (rank + 1) % size, previous = (rank + size - 1) % size;
  const std::string who = "thread " + std::to_string(thread) + " ";
  for (int it = 0; it < iters; ++it) {
    const int seed = it * threads + thread;
    const size_t count = 1 + static_cast<size_t>((seed * 997) % 20000);  // eager and rendezvous sizes
    // Blocking allreduce.
    std::vector<int> mine_values(count), sum(count, 0);
    fill(mine_values, rank, seed);
    mine.allreduce(mine_values.data(), sum.data(), count, DataType::int32, ReduceOp::sum);
    bool ok = true;
    for (size_t i = 0; i < count && ok; ++i) {
      int expected = 0;
      for (int r = 0; r < size; ++r) expected += value(r, i, seed);
      ok = sum[i] == expected;
    }
    check(ok, who + "allreduce iteration " + std::to_string(it));
    // Non-blocking allreduce, in place.
    std::vector<int> in_place(count);
    fill(in_place, rank, seed + 1);
    Request reduce = mine.iallreduce(in_place.data(), in_place.data(), count, DataType::int32, ReduceOp::max);
    reduce.wait();
    ok = true;
    for (size_t i = 0; i < count && ok; ++i) {
      int expected = value(0, i, seed + 1);
      for (int r = 1; r < size; ++r) expected = std::max(expected, value(r, i, seed + 1));
      ok = in_place[i] == expected;
    }
    check(ok, who + "iallreduce iteration " + std::to_string(it));
    // Broadcast from a round-robin root.
    const int root = seed % size;
    std::vector<int> broadcast(count);
    if (rank == root) fill(broadcast, root, seed + 2);
    mine.broadcast(broadcast.data(), count, DataType::int32, root);
    check(holds(broadcast, root, seed + 2), who + "broadcast iteration " + std::to_string(it));
    // A ring exchange on the world communicator, every thread at once with
    // its own tag: one eager-sized message and one rendezvous-sized.
    for (size_t ints : {size_t{16}, size_t{64 * 1024}}) {
      std::vector<int> out(ints), in(ints, 0);
      fill(out, rank, seed + 3);
      const int tag = thread * 2 + (ints > 16 ? 1 : 0);
      Request receive = world.irecv(in.data(), ints * sizeof(int), previous, tag);
      Request send = world.isend(out.data(), ints * sizeof(int), next, tag);
      if (it % 2 == 0) {
        send.wait();
        receive.wait();
      } else {
        receive.wait();
        send.wait();
      }
      check(holds(in, previous, seed + 3), who + std::to_string(ints * 4) + "-byte ring message iteration " +
                                               std::to_string(it));
    }
    // Allgather and a barrier.
    std::vector<int> block(4), all(4 * static_cast<size_t>(size));
    fill(block, rank, seed + 4);
    mine.allgather(block.data(), all.data(), 4, DataType::int32);
    ok = true;
    for (int r = 0; r < size && ok; ++r) {
      for (size_t i = 0; i < 4; ++i) ok = ok && all[static_cast<size_t>(r) * 4 + i] == value(r, i, seed + 4);
    }
    check(ok, who + "allgather iteration " + std::to_string(it));
    mine.barrier();
  }
}

void stress_case(Communicator& world, int threads, int iters) {
  std::vector<Communicator> communicators;
  for (int t = 0; t < threads; ++t) communicators.push_back(world.dup());  // in order on every rank
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      try {
        stress_thread(world, communicators[static_cast<size_t>(t)], t, threads, iters);
      } catch (const chorus::Error& e) {
        check(false, "thread " + std::to_string(t) + " threw: " + e.what());
      }
    });
  }
  for (auto& thread : running) thread.join();
  for (auto& communicator : communicators) communicator.finalize();
}

int usage(const char* problem) {
  if (problem != nullptr) std::fprintf(stderr, "chorus-threads: %s\n", problem);
  std::fprintf(problem != nullptr ? stderr : stdout,
               "Usage: chorusrun -n N chorus-threads --case pair|stress [--runs N] [--threads T] [--iters N]\n\n"
               "  --case pair     two threads per rank: a rendezvous isend+wait and a later irecv+wait\n"
               "  --case stress   T threads per rank, each with its own communicator, mixed calls\n"
               "  --runs N        rounds of the pair case (default 20)\n"
               "  --threads T     threads per rank in the stress case (default 4)\n"
               "  --iters N       rounds per thread in the stress case (default 30)\n");
  return problem != nullptr ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string which;
  int runs = 20, threads = 4, iters = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto number = [&](int& out) {
      if (i + 1 >= argc) return false;
      out = std::atoi(argv[++i]);
      return out > 0;
    };
    if (arg == "--help" || arg == "-h") return usage(nullptr);
    if (arg == "--case" && i + 1 < argc) {
      which = argv[++i];
    } else if ((arg == "--runs" && number(runs)) || (arg == "--threads" && number(threads)) ||
               (arg == "--iters" && number(iters))) {
    } else {
      return usage(("unknown or incomplete argument " + arg).c_str());
    }
  }
  if (which != "pair" && which != "stress") return usage("--case pair or --case stress is needed");
  try {
    Communicator world = Communicator::init();
    g_rank = world.rank();
    const auto start = std::chrono::steady_clock::now();
    if (which == "pair") {
      pair_case(world, runs);
    } else {
      stress_case(world, threads, iters);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    long failed = g_failed.load();
    long everyone = 0;
    world.allreduce(&failed, &everyone, 1, DataType::int64, ReduceOp::sum);
    std::printf("threads: %s: %ld checks, %ld failed (%ld on any rank) in %.2f s\n", which.c_str(), g_checks.load(),
                failed, everyone, seconds);
    world.finalize();
    // A rank that checked nothing did not run its part: a failure, except
    // the odd rank out of the pair case.
    const bool ran = g_checks.load() > 0 || (which == "pair" && (world.rank() ^ 1) >= world.size());
    // Every rank's own pass line, after finalize (tests/job_verdict.py).
    if (everyone == 0 && ran) std::printf("chorus-threads: rank %d passed\n", g_rank);
    return everyone == 0 && ran ? 0 : 1;
  } catch (const chorus::Error& e) {
    std::printf("FAILED: rank %d: %s\n", g_rank, e.what());
    return 1;
  }
}
