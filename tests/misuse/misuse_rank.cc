// chorus-misuse: one rank of a misuse test. Every rank makes a collective
// call, and one rank (the "odd" rank, 1) gets it wrong in the way --case
// names. Each rank prints one line, "rank R: error: <text>" or
// "rank R: completed", and exits 3 on an error, 0 otherwise; the test script
// asserts which ranks report which text (docs/errors.md, "Misuse").
#include <chorus/chorus.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kOddRank = 1;
constexpr size_t kCount = 1024;
// --linger: how long a failed rank stays, and how soon every rank must know.
// The first is the larger, so a rank that learned only from another's exit
// is late.
constexpr int kLingerSeconds = 8;
constexpr int kToldWithinSeconds = 4;

using chorus::Communicator;
using chorus::DataType;
using chorus::ReduceOp;

void allreduce_ints(Communicator& comm, size_t count, DataType dtype = DataType::int32, ReduceOp op = ReduceOp::sum) {
  std::vector<int32_t> send(kCount + 1, comm.rank() + 1), recv(kCount + 1, 0);
  comm.allreduce(send.data(), recv.data(), count, dtype, op);
}

// Two threads on one communicator: rank 0's second thread calls barrier
// while its first is inside an allreduce that rank 1 joins late. The
// barrier must fail at once; the allreduce must still complete correctly.
int overlapping_threads(Communicator& comm) {
  const int rank = comm.rank();
  std::vector<int32_t> data(kCount, 1);
  if (rank != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    comm.allreduce(data.data(), data.data(), kCount, DataType::int32, ReduceOp::sum);
    comm.barrier();  // rank 0's main thread calls its barrier after the error
    std::printf("rank %d: completed\n", rank);
    return 0;
  }
  std::thread first([&] { comm.allreduce(data.data(), data.data(), kCount, DataType::int32, ReduceOp::sum); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::string refused;
  try {
    comm.barrier();
  } catch (const chorus::Error& e) {
    refused = e.what();
  }
  first.join();
  if (refused.empty()) {
    std::printf("rank 0: the overlapping barrier was not refused\n");
    return 4;
  }
  std::printf("rank 0: error: %s\n", refused.c_str());
  if (data.front() != comm.size() || data.back() != comm.size()) {
    std::printf("rank 0: WRONG RESULT %d after the refused call\n", data.front());
    return 5;
  }
  comm.barrier();  // the communicator is still usable
  std::printf("rank 0: completed\n");
  return 0;
}

// The odd rank's wrong call, by case name.
const std::map<std::string, std::function<void(Communicator&, bool odd)>>& cases() {
  static const std::map<std::string, std::function<void(Communicator&, bool)>> table = {
      {"count", [](Communicator& c, bool odd) { allreduce_ints(c, odd ? kCount + 1 : kCount); }},
      {"zero_count", [](Communicator& c, bool odd) { allreduce_ints(c, odd ? 0 : kCount); }},
      // On shm, 8 elements run on the board and kCount by messages.
      {"board_count", [](Communicator& c, bool odd) { allreduce_ints(c, odd ? 8 : kCount); }},
      {"board_op", [](Communicator& c, bool odd) { allreduce_ints(c, 8, DataType::int32, odd ? ReduceOp::max : ReduceOp::sum); }},
      {"board_root", [](Communicator& c, bool odd) {
         std::vector<int32_t> data(8, 7);
         c.broadcast(data.data(), 8, DataType::int32, odd ? 1 : 0);
       }},
      {"dtype", [](Communicator& c, bool odd) { allreduce_ints(c, kCount, odd ? DataType::float32 : DataType::int32); }},
      {"op", [](Communicator& c, bool odd) { allreduce_ints(c, kCount, DataType::int32, odd ? ReduceOp::max : ReduceOp::sum); }},
      {"root", [](Communicator& c, bool odd) {
         std::vector<int32_t> data(kCount, 7);
         c.broadcast(data.data(), kCount, DataType::int32, odd ? 1 : 0);
       }},
      {"collective", [](Communicator& c, bool odd) {
         if (!odd) return allreduce_ints(c, kCount);
         std::vector<int32_t> data(kCount, 7);
         c.broadcast(data.data(), kCount, DataType::int32, 0);
       }},
      {"gatherv_count", [](Communicator& c, bool odd) {
         // Per-rank counts are no part of the call check: the root's receive
         // catches a block larger than its recv_counts entry.
         std::vector<int32_t> send(kCount + 1, 7), recv(static_cast<size_t>(c.size()) * kCount, 0);
         const std::vector<size_t> counts(static_cast<size_t>(c.size()), kCount);
         c.gatherv(send.data(), odd ? kCount + 1 : kCount, recv.data(), counts, {}, DataType::int32, 0);
       }},
      {"algorithm", [](Communicator& c, bool odd) {
         c.set_algorithm(chorus::Collective::allreduce, odd ? "recursive_doubling" : "ring");
         allreduce_ints(c, kCount);
       }},
      // The communicator keeps a repeated call's algorithm with its shape
      // (count, datatype, op, root): set_algorithm between two calls of one
      // shape must still change the second's.
      {"algorithm_between_repeats", [](Communicator& c, bool odd) {
         c.set_algorithm(chorus::Collective::allreduce, "ring");
         allreduce_ints(c, kCount);
         if (odd) c.set_algorithm(chorus::Collective::allreduce, "recursive_doubling");
         allreduce_ints(c, kCount);
       }},
  };
  return table;
}

void usage(FILE* out) {
  std::fprintf(out,
               "Usage: chorusrun -n N chorus-misuse --case NAME\n\n"
               "Every rank makes one collective call; rank %d makes it wrongly:\n"
               "  count       allreduce with one element more\n"
               "  zero_count  allreduce with count 0\n"
               "  board_count allreduce of 8 elements (the shm board) where the others pass 1024 (messages)\n"
               "  board_op    allreduce of 8 elements with max where the others use sum (all on the shm board)\n"
               "  board_root  broadcast of 8 elements from root 1 where the others use root 0 (shm board)\n"
               "  dtype       allreduce of float32 where the others use int32\n"
               "  op          allreduce with max where the others use sum\n"
               "  root        broadcast from root 1 where the others use root 0\n"
               "  collective  broadcast where the others call allreduce\n"
               "  algorithm   allreduce forced to recursive_doubling where the others use ring\n"
               "  algorithm_between_repeats  every rank calls allreduce with ring; then rank %d forces\n"
               "              recursive_doubling and every rank makes the same call again\n"
               "  gatherv_count  gatherv sending one element more than the root's recv_counts entry\n"
               "  threads     (rank 0) a second thread calls barrier while the first is in allreduce\n"
               "--linger after the case: a rank that fails stays %d s before it exits, and a rank\n"
               "           that learns of the error over %d s after its call began says \"TOO LATE\"\n"
               "Each rank prints \"rank R: error: TEXT\" (exit 3) or \"rank R: completed\" (exit 0).\n",
               kOddRank, kOddRank, kLingerSeconds, kToldWithinSeconds);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  // --linger: a rank that saw the error stays alive kLingerSeconds before it
  // exits, so the others cannot learn of it in time from the launcher's
  // record of its exit (as under mpirun, or in a program that catches the
  // error and goes on).
  const bool linger = argc == 4 && std::strcmp(argv[3], "--linger") == 0;
  if ((argc != 3 && !linger) || std::strcmp(argv[1], "--case") != 0 ||
      (std::strcmp(argv[2], "threads") != 0 && cases().count(argv[2]) == 0)) {
    usage(stderr);
    return 2;
  }
  const std::string name = argv[2];
  auto comm = Communicator::init();
  const int rank = comm.rank();
  const auto started = std::chrono::steady_clock::now();
  try {
    if (name == "threads") return overlapping_threads(comm);
    cases().at(name)(comm, rank == kOddRank);
    // A rank that saw nothing wrong still notices the others failing. Two
    // barriers: on shm the first may complete on every rank before the one
    // that finds the disagreement has found it (it finds it at the end of
    // that barrier, after the others' slots; docs/algorithms.md "board");
    // the second then needs that rank, which has left.
    comm.barrier();
    comm.barrier();
  } catch (const chorus::Error& e) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("rank %d: error: %s\n", rank, e.what());
    if (linger && seconds > kToldWithinSeconds) {
      std::printf("rank %d: TOO LATE: learned of the error %.1f s after its call began (over %d s)\n", rank, seconds,
                  kToldWithinSeconds);
    }
    std::fflush(stdout);
    if (linger) std::this_thread::sleep_for(std::chrono::seconds(kLingerSeconds));
    return 3;
  }
  std::printf("rank %d: completed\n", rank);
  return 0;
}
