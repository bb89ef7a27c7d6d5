// One rank of the Communicator::init(rank, size, store) tests
// (test_store_init.cc). The test starts each rank as a fresh process
// (fork + exec): a child merely forked from the gtest process would inherit
// the state of the store server's thread (locks held at the fork, ASan's
// allocator among them) and could hang before it ran a line of chorus.
// The rank reaches the caller's store, chorus' own TCP store, through the
// public KeyValueStore interface, as a framework's store would be.
// Exit status 0: every check passed; 1: a check failed (stderr says which).
#include "bootstrap/store.hpp"
#include "tests/api/client_store.hpp"
#include "tests/listening_sockets.hpp"

#include <chorus/chorus.hpp>

#include <cerrno>
#include <csignal>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using chorus::testing::ClientStore;

struct Arguments {
  std::string scenario;
  int rank = -1;
  int size = 0;
  uint16_t port = 0;
  std::string transport = "shm";
  std::string progress;  // empty: the default
  std::string key_prefix;
  std::chrono::milliseconds timeout = 20s;
};

#define CHECK_OR_FAIL(condition, ...)                         \
  do {                                                        \
    if (!(condition)) {                                       \
      std::fprintf(stderr, "rank %d: ", rank);                \
      std::fprintf(stderr, __VA_ARGS__);                      \
      std::fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); \
      return 1;                                               \
    }                                                         \
  } while (0)

chorus::Communicator join(const Arguments& args) {
  setenv("CHORUS_TRANSPORT", args.transport.c_str(), 1);
  auto store = std::make_shared<ClientStore>(args.port);
  chorus::StoreInitOptions options;
  options.timeout = args.timeout;
  if (!args.key_prefix.empty()) options.key_prefix = args.key_prefix;
  if (!args.progress.empty()) options.progress = args.progress;
  return chorus::Communicator::init(args.rank, args.size, store, options);
}

// Collectives, a non-blocking one, point-to-point and a split over a
// communicator made from the store; every element checked.
int exercise(chorus::Communicator& comm, int rank, int size) {
  CHECK_OR_FAIL(comm.rank() == rank && comm.size() == size, "rank/size %d/%d", comm.rank(), comm.size());
  CHECK_OR_FAIL(comm.local_rank() == rank && comm.local_size() == size, "local layout %d/%d", comm.local_rank(),
                comm.local_size());
  for (size_t count : {size_t{1}, size_t{1001}, size_t{300000}}) {  // eager and rendezvous
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((rank + 1) * (i % 97));
    comm.allreduce(std::span<float>(data), chorus::ReduceOp::sum);
    const float ranks_sum = static_cast<float>(size * (size + 1) / 2);
    for (size_t i = 0; i < count; ++i) {
      CHECK_OR_FAIL(data[i] == ranks_sum * static_cast<float>(i % 97), "allreduce[%zu] = %f", i, data[i]);
    }
    std::vector<int64_t> mine(count, rank), all(count * static_cast<size_t>(size));
    chorus::Request request = comm.iallgather(mine.data(), all.data(), count, chorus::DataType::int64);
    request.wait();
    for (size_t i = 0; i < all.size(); ++i) {
      CHECK_OR_FAIL(all[i] == static_cast<int64_t>(i / count), "allgather[%zu] = %lld", i,
                    static_cast<long long>(all[i]));
    }
  }
  // A ring of point-to-point messages.
  int received = -1;
  chorus::Request incoming = comm.irecv(&received, sizeof received, (rank + size - 1) % size, 7);
  comm.send(&rank, sizeof rank, (rank + 1) % size, 7);
  incoming.wait();
  CHECK_OR_FAIL(received == (rank + size - 1) % size, "ring received %d", received);
  std::optional<chorus::Communicator> evens = comm.split(rank % 2, rank);
  int value = 1;
  evens->allreduce(std::span<int>(&value, 1), chorus::ReduceOp::sum);
  CHECK_OR_FAIL(value == (size + 1 - rank % 2) / 2, "split allreduce %d", value);
  evens->finalize();
  return 0;
}

// The whole API over a communicator made from the store.
int joins_and_exercises(const Arguments& args) {
  const int rank = args.rank;
  chorus::Communicator comm = join(args);
  if (args.transport == "shm") {
    // No store server, no port of chorus' own: the only listening socket a
    // shm rank may hold is the test's store socket, should it be inherited.
    for (const auto& socket : chorus::testing::listening_sockets_of(getpid())) {
      CHECK_OR_FAIL(socket.port == args.port, "listens on %s:%u", socket.address.c_str(),
                    static_cast<unsigned>(socket.port));
    }
  }
  if (exercise(comm, rank, args.size) != 0) return 1;
  comm.finalize();
  return 0;
}

// Rank 2 is killed without a word (no launcher watches these ranks): the
// others name it in about a second, far below the timeout.
int survives_a_killed_rank(const Arguments& args) {
  const int rank = args.rank;
  chorus::Communicator comm = join(args);
  comm.barrier();
  if (rank == 2) kill(getpid(), SIGKILL);
  const auto start = Clock::now();
  std::vector<float> data(100000, 1.0f);
  try {
    for (int i = 0; i < 1000000; ++i) comm.allreduce(std::span<float>(data), chorus::ReduceOp::sum);
  } catch (const chorus::Error& e) {
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    CHECK_OR_FAIL(e.status() == chorus::Status::peer_failed && e.peer() == 2, "after %.2f s: %s", seconds, e.what());
    CHECK_OR_FAIL(std::string(e.what()).find("rank 2 (pid") != std::string::npos, "message: %s", e.what());
    CHECK_OR_FAIL(seconds < 5, "named after %.2f s: %s", seconds, e.what());
    sleep(1);  // the other survivor still finds this rank alive
    return 0;
  }
  CHECK_OR_FAIL(false, "a million allreduces finished although rank 2 was killed");
}

// A rank of the job never joins: this one fails at the timeout; rank 0,
// which gathers, names the missing rank.
int times_out_on_a_missing_rank(const Arguments& args) {
  const int rank = args.rank;
  try {
    chorus::Communicator comm = join(args);
  } catch (const chorus::Error& e) {
    const std::string message = e.what();
    CHECK_OR_FAIL(e.status() == chorus::Status::timeout, "status %d: %s", static_cast<int>(e.status()), e.what());
    CHECK_OR_FAIL(rank != 0 || message.find("rank 2") != std::string::npos, "message: %s", e.what());
    return 0;
  }
  CHECK_OR_FAIL(false, "joined a job of %d ranks although a rank is missing", args.size);
}

void usage(FILE* out) {
  std::fprintf(out,
               "Usage: chorus-store-init-rank --scenario NAME --rank R --size N --port P [options]\n"
               "One rank of test_store_init: joins a job with Communicator::init(rank, size, store)\n"
               "over chorus' TCP store at 127.0.0.1:P and runs a scenario; exit 0 when every check passed.\n"
               "  --scenario NAME   exercise | killed_rank | missing_rank\n"
               "  --transport T     CHORUS_TRANSPORT for the rank (default shm)\n"
               "  --progress MODE   StoreInitOptions::progress (default: the library's)\n"
               "  --prefix P        StoreInitOptions::key_prefix\n"
               "  --timeout-ms MS   StoreInitOptions::timeout (default 20000)\n"
               "  --help            this text\n");
}

// Parses a whole non-negative number or returns -1.
long number_or_negative(const char* text) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  return (errno != 0 || end == text || *end != '\0' || value < 0) ? -1 : value;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "chorus-store-init-rank: %s needs a value; see --help\n", flag.c_str());
      return 2;
    }
    const char* value = argv[++i];
    if (flag == "--scenario") {
      args.scenario = value;
    } else if (flag == "--rank") {
      args.rank = static_cast<int>(number_or_negative(value));
    } else if (flag == "--size") {
      args.size = static_cast<int>(number_or_negative(value));
    } else if (flag == "--port") {
      const long port = number_or_negative(value);
      args.port = static_cast<uint16_t>(port > 0 && port < 65536 ? port : 0);
    } else if (flag == "--transport") {
      args.transport = value;
    } else if (flag == "--progress") {
      args.progress = value;
    } else if (flag == "--prefix") {
      args.key_prefix = value;
    } else if (flag == "--timeout-ms") {
      args.timeout = std::chrono::milliseconds(number_or_negative(value));
    } else {
      std::fprintf(stderr, "chorus-store-init-rank: unknown argument \"%s\"; see --help\n", flag.c_str());
      return 2;
    }
  }
  if (args.rank < 0 || args.size <= 0 || args.port == 0 || args.timeout <= 0ms) {
    std::fprintf(stderr, "chorus-store-init-rank: --rank, --size, --port and --timeout-ms need valid values; see --help\n");
    return 2;
  }
  try {
    if (args.scenario == "exercise") return joins_and_exercises(args);
    if (args.scenario == "killed_rank") return survives_a_killed_rank(args);
    if (args.scenario == "missing_rank") return times_out_on_a_missing_rank(args);
    std::fprintf(stderr, "chorus-store-init-rank: unknown scenario \"%s\"; see --help\n", args.scenario.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", args.rank, e.what());
    return 1;
  }
}
