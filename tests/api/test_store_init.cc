// Communicator::init(rank, size, store): ranks numbered by the caller join
// over the caller's key/value store (here chorus' own TCP store, reached
// through the public KeyValueStore interface as a framework's store would
// be). Real forked processes over the native shm transport and libfabric
// tcp; every element of every result is checked.
#include "bootstrap/store.hpp"
#include "tests/listening_sockets.hpp"

#include <chorus/chorus.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using chorus::bootstrap::StoreClient;
using chorus::bootstrap::StoreServer;
using Clock = std::chrono::steady_clock;

constexpr const char* kSecret = "store-init-test";

// The caller's store: a KeyValueStore over a StoreClient, as the PyTorch
// backend wraps c10d::Store.
class ClientStore final : public chorus::KeyValueStore {
 public:
  explicit ClientStore(uint16_t port) : client_("127.0.0.1", port, kSecret, 20s) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override { client_.set(key, value); }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return client_.get_until(key, Clock::now() + timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override { return client_.add(key, delta); }
  bool check(const std::string& key) override { return client_.check(key); }

 private:
  StoreClient client_;
};

// Runs `body(rank)` in `size` forked processes; returns each one's exit
// status (0: every check passed). A child that does not finish in 60 s is killed.
std::vector<int> run_ranks(int size, const std::function<int(int rank)>& body) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      int status = 1;
      try {
        status = body(rank);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      }
      std::fflush(nullptr);
      _exit(status);
    }
    pids.push_back(pid);
  }
  std::vector<int> statuses;
  const auto deadline = Clock::now() + 60s;
  for (pid_t pid : pids) {
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) kill(pid, SIGKILL);
      usleep(10000);
    }
    statuses.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return statuses;
}

#define CHECK_OR_FAIL(condition, ...)                      \
  do {                                                     \
    if (!(condition)) {                                    \
      std::fprintf(stderr, "rank %d: ", rank);             \
      std::fprintf(stderr, __VA_ARGS__);                   \
      std::fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); \
      return 1;                                            \
    }                                                      \
  } while (0)

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
      CHECK_OR_FAIL(all[i] == static_cast<int64_t>(i / count), "allgather[%zu] = %lld", i, static_cast<long long>(all[i]));
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

struct Case {
  const char* transport;  // CHORUS_TRANSPORT
  int size;
};

class StoreInit : public ::testing::TestWithParam<Case> {};

TEST_P(StoreInit, JoinsOverTheCallersStoreWithoutAPortOfItsOwn) {
  const Case c = GetParam();
  StoreServer server("127.0.0.1", 0, kSecret);
  const uint16_t port = server.port();
  const std::vector<int> statuses = run_ranks(c.size, [&](int rank) {
    setenv("CHORUS_TRANSPORT", c.transport, 1);
    setenv("FI_TCP_IFACE", "lo", 1);
    auto store = std::make_shared<ClientStore>(port);
    chorus::StoreInitOptions options;
    options.timeout = 20s;
    options.key_prefix = std::string("job-") + c.transport;
    if (c.size == 4) options.progress = "caller";  // the other progress mode, as the PyTorch backend uses it
    chorus::Communicator comm = chorus::Communicator::init(rank, c.size, store, options);
    if (std::string(c.transport) == "shm") {
      // No store server, no port of chorus' own (the test's server socket is inherited from the fork).
      for (const auto& socket : chorus::testing::listening_sockets_of(getpid())) {
        CHECK_OR_FAIL(socket.port == port, "listens on %s:%u", socket.address.c_str(), static_cast<unsigned>(socket.port));
      }
    }
    if (exercise(comm, rank, c.size) != 0) return 1;
    comm.finalize();
    return 0;
  });
  for (int rank = 0; rank < c.size; ++rank) EXPECT_EQ(statuses[static_cast<size_t>(rank)], 0) << "rank " << rank;
  // Every key went under the caller's prefix.
  EXPECT_TRUE(server.get(std::string("job-") + c.transport + "/chorus/transport/0").has_value());
}

INSTANTIATE_TEST_SUITE_P(Transports, StoreInit,
                         ::testing::Values(Case{"shm", 3}, Case{"shm", 4}, Case{"ofi", 3}),
                         [](const auto& info) { return std::string(info.param.transport) + "_np" + std::to_string(info.param.size); });

TEST(StoreInitArguments, AreCheckedBeforeAnythingMoves) {
  StoreServer server("127.0.0.1", 0, kSecret);
  auto store = std::make_shared<ClientStore>(server.port());
  auto status_of = [](auto&& call) {
    try {
      call();
    } catch (const chorus::Error& e) {
      EXPECT_NE(std::string(e.what()).find("Communicator::init"), std::string::npos) << e.what();
      return e.status();
    }
    return chorus::Status::success;
  };
  EXPECT_EQ(status_of([&] { chorus::Communicator::init(2, 2, store); }), chorus::Status::invalid_argument);
  EXPECT_EQ(status_of([&] { chorus::Communicator::init(-1, 2, store); }), chorus::Status::invalid_argument);
  EXPECT_EQ(status_of([&] { chorus::Communicator::init(0, 2, nullptr); }), chorus::Status::invalid_argument);
  chorus::StoreInitOptions zero;
  zero.timeout = 0ms;
  EXPECT_EQ(status_of([&] { chorus::Communicator::init(0, 2, store, zero); }), chorus::Status::invalid_argument);
  chorus::StoreInitOptions progress;
  progress.progress = "sometimes";
  EXPECT_EQ(status_of([&] { chorus::Communicator::init(0, 2, store, progress); }), chorus::Status::invalid_argument);
}

// A rank killed without a word (no launcher watches these ranks): the
// others name it in about a second, far below the 20 s timeout.
TEST(StoreInitKilledRank, IsNamedBySurvivorsWithinSeconds) {
  StoreServer server("127.0.0.1", 0, kSecret);
  const uint16_t port = server.port();
  const std::vector<int> statuses = run_ranks(3, [&](int rank) {
    setenv("CHORUS_TRANSPORT", "shm", 1);
    auto store = std::make_shared<ClientStore>(port);
    chorus::StoreInitOptions options;
    options.timeout = 20s;
    chorus::Communicator comm = chorus::Communicator::init(rank, 3, store, options);
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
    return 1;
  });
  EXPECT_EQ(statuses, (std::vector<int>{0, 0, 128 + SIGKILL}));
}

// A rank that never joins: the others fail at the caller's timeout, naming it.
TEST(StoreInitMissingRank, TimesOutNamingTheRank) {
  StoreServer server("127.0.0.1", 0, kSecret);
  const uint16_t port = server.port();
  const auto start = Clock::now();
  const std::vector<int> statuses = run_ranks(2, [&](int rank) {
    setenv("CHORUS_TRANSPORT", "shm", 1);
    auto store = std::make_shared<ClientStore>(port);
    chorus::StoreInitOptions options;
    options.timeout = 2s;
    try {
      chorus::Communicator comm = chorus::Communicator::init(rank, 3, store, options);
    } catch (const chorus::Error& e) {
      const std::string message = e.what();
      CHECK_OR_FAIL(e.status() == chorus::Status::timeout, "status %d: %s", static_cast<int>(e.status()), e.what());
      // Rank 0 names the missing rank; the others say they wait for rank 0's gather.
      CHECK_OR_FAIL(rank != 0 || message.find("rank 2") != std::string::npos, "message: %s", e.what());
      return 0;
    }
    return 1;
  });
  EXPECT_EQ(statuses, (std::vector<int>{0, 0}));
  EXPECT_LT(Clock::now() - start, 15s);
}

}  // namespace
