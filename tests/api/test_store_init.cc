// Communicator::init(rank, size, store): ranks numbered by the caller join
// over the caller's key/value store (here chorus' own TCP store, reached
// through the public KeyValueStore interface as a framework's store would
// be). Each rank is a real process (chorus-store-init-rank, started fresh
// with posix_spawn: a child merely forked from this multithreaded process
// could hang on a lock the store server's thread held at the fork) over the
// native shm transport and libfabric tcp; every element of every result is
// checked by the rank.
#include "bootstrap/store.hpp"
#include "tests/api/client_store.hpp"

#include <chorus/chorus.hpp>

#include <gtest/gtest.h>

#include <spawn.h>
#include <sys/wait.h>
#include <csignal>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

using namespace std::chrono_literals;
using chorus::bootstrap::StoreServer;
using Clock = std::chrono::steady_clock;

using chorus::testing::ClientStore;
constexpr const char* kSecret = chorus::testing::kStoreInitSecret;

// Starts `ranks` processes of chorus-store-init-rank with `arguments` plus
// --rank R --size `size` --port `port`; returns each one's exit status (0:
// every check passed; 128+N: killed by signal N). A rank that does not
// finish in 60 s is killed.
std::vector<int> run_ranks(int ranks, int size, uint16_t port, const std::vector<std::string>& arguments) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < ranks; ++rank) {
    std::vector<std::string> words{STORE_INIT_RANK_PROGRAM};
    words.insert(words.end(), arguments.begin(), arguments.end());
    for (const std::string& word : {std::string("--rank"), std::to_string(rank), std::string("--size"),
                                    std::to_string(size), std::string("--port"), std::to_string(port)}) {
      words.push_back(word);
    }
    std::vector<char*> argv;
    for (std::string& word : words) argv.push_back(word.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int error = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ);
    EXPECT_EQ(error, 0) << "posix_spawn " << argv[0] << ": " << std::strerror(error);
    if (error == 0) pids.push_back(pid);
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

struct Case {
  const char* transport;  // CHORUS_TRANSPORT
  int size;
};

class StoreInit : public ::testing::TestWithParam<Case> {};

TEST_P(StoreInit, JoinsOverTheCallersStoreWithoutAPortOfItsOwn) {
  const Case c = GetParam();
  StoreServer server("127.0.0.1", 0, kSecret);
  const std::string prefix = std::string("job-") + c.transport;
  std::vector<std::string> arguments{"--scenario", "exercise", "--transport", c.transport, "--prefix", prefix};
  if (c.size == 4) {  // the other progress mode, as the PyTorch backend uses it
    arguments.insert(arguments.end(), {"--progress", "caller"});
  }
  const std::vector<int> statuses = run_ranks(c.size, c.size, server.port(), arguments);
  EXPECT_EQ(statuses, std::vector<int>(static_cast<size_t>(c.size), 0));
  // Every key went under the caller's prefix.
  EXPECT_TRUE(server.get(prefix + "/chorus/transport/0").has_value());
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
  const std::vector<int> statuses = run_ranks(3, 3, server.port(), {"--scenario", "killed_rank"});
  EXPECT_EQ(statuses, (std::vector<int>{0, 0, 128 + SIGKILL}));
}

// A rank that never joins: the others fail at the caller's timeout, naming it.
TEST(StoreInitMissingRank, TimesOutNamingTheRank) {
  StoreServer server("127.0.0.1", 0, kSecret);
  const auto start = Clock::now();
  const std::vector<int> statuses =
      run_ranks(2, 3, server.port(), {"--scenario", "missing_rank", "--timeout-ms", "2000"});
  EXPECT_EQ(statuses, (std::vector<int>{0, 0}));
  EXPECT_LT(Clock::now() - start, 15s);
}

}  // namespace
