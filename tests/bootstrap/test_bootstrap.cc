// Bootstrap: all_gather and barrier across ranks that are threads or real
// forked processes, the rank-0 port file, and timeouts that name the rank.
#include "bootstrap/departures.hpp"
#include "bootstrap/port_file.hpp"
#include "bootstrap/store.hpp"
#include "tests/bootstrap/helpers.hpp"
#include "tests/listening_sockets.hpp"

#include <fcntl.h>
#include <fstream>
#include <functional>
#include <latch>
#include <mutex>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>

using namespace chorus;
using namespace chorus::bootstrap;
using namespace chorus::bootstrap::testing;

namespace {

constexpr auto kTimeout = milliseconds(10000);

std::string unique_job_id(const std::string& what) {
  static int counter = 0;
  return concat("test-", what, "-", ::getpid(), "-", ++counter);
}

JobInfo job_for(int rank, int size, const std::string& job_id) {
  JobInfo job;
  job.rank = rank;
  job.size = size;
  job.local_rank = rank;
  job.local_size = size;
  job.launcher = "mpirun";
  job.rank0_serves = true;
  job.job_id = job_id;
  job.secret = "secret-" + job_id;
  return job;
}

Bytes blob_of(int rank, int round) { return bytes_of(concat("rank-", rank, "-round-", round, std::string(rank, '#'))); }

// What every rank does: gathers twice under one prefix (fresh values each
// time), and passes the same barrier twice.
void exercise(Bootstrap& boot, int rank, int size) {
  for (int round = 0; round < 2; ++round) {
    auto blobs = boot.all_gather("addresses", blob_of(rank, round));
    if (static_cast<int>(blobs.size()) != size) throw Error(Status::internal, concat("got ", blobs.size(), " blobs"));
    for (int r = 0; r < size; ++r) {
      if (blobs[static_cast<size_t>(r)] != blob_of(r, round)) {
        throw Error(Status::internal, concat("rank ", rank, " round ", round, ": wrong blob from rank ", r, ": ",
                                             text_of(blobs[static_cast<size_t>(r)])));
      }
    }
    boot.barrier("setup");
  }
  // After the barrier every rank's increment is visible.
  boot.store().add("after-barrier", 1);
  boot.barrier("counted");
  int64_t total = boot.store().add("after-barrier", 0);
  if (total != size) throw Error(Status::internal, concat("rank ", rank, " saw ", total, " of ", size, " increments"));
}

// A forked rank of a launcher-style job: exercise() through the store the
// launcher's variables name; rank 0, whose process serves that store, leaves
// last, once every other rank has said it is leaving.
void exercise_and_leave(const JobInfo& job, int rank, int size) {
  Bootstrap boot(job, kTimeout);
  exercise(boot, rank, size);
  boot.barrier("leave");
  if (rank != 0) {
    boot.store().set(concat("left/", rank), {});
    return;
  }
  std::vector<std::string> keys;
  for (int r = 1; r < size; ++r) keys.push_back(concat("left/", r));
  boot.store().wait(keys);
}

// Runs `body(rank)` on `size` threads and rethrows the first failure.
void run_threads(int size, const std::function<void(int)>& body) {
  std::mutex mutex;
  std::exception_ptr failure;
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// Forks `size` children, each running `child(rank)` with exit status 0 on
// success; kills them all if they are not done within `limit`.
void run_processes(int size, const std::function<void(int)>& child, milliseconds limit = milliseconds(20000)) {
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      int status = 0;
      try {
        child(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d failed: %s\n", r, e.what());
        status = 1;
      }
      std::fflush(stderr);
      ::_exit(status);
    }
    pids.push_back(pid);
  }
  const auto deadline = Clock::now() + limit;
  for (size_t i = 0; i < pids.size(); ++i) {
    int status = 0;
    pid_t done = 0;
    while ((done = ::waitpid(pids[i], &status, WNOHANG)) == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    if (done == 0) {
      for (pid_t pid : pids) ::kill(pid, SIGKILL);
      for (pid_t pid : pids) ::waitpid(pid, nullptr, 0);
      FAIL() << "rank " << i << " did not finish within " << limit.count() << " ms";
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << i << " failed (status " << status << ")";
  }
}

}  // namespace

TEST(Bootstrap, ThreadsFindRankZeroThroughThePortFile) {
  constexpr int kSize = 5;
  const std::string id = unique_job_id("threads");
  std::latch done(kSize);
  run_threads(kSize, [&](int rank) {
    Bootstrap boot(job_for(rank, kSize, id), kTimeout);
    exercise(boot, rank, kSize);
    // Rank 0 serves the store: it leaves last.
    done.count_down();
    done.wait();
  });
  EXPECT_NE(::access(port_file::path_for(id).c_str(), F_OK), 0) << "rank 0 left its port file behind";
}

TEST(Bootstrap, SingleRankJobServesItself) {
  ScopedJobEnv env;
  JobInfo job = detect_job();
  Bootstrap boot(job, kTimeout);
  auto blobs = boot.all_gather("solo", bytes_of("me"));
  ASSERT_EQ(blobs.size(), 1u);
  EXPECT_EQ(text_of(blobs[0]), "me");
  boot.barrier("solo");
  boot.barrier("solo");
}

TEST(Bootstrap, ForkedMpirunStyleProcesses) {
  constexpr int kSize = 4;
  const std::string jobid = unique_job_id("ompi");
  run_processes(kSize, [&](int rank) {
    ScopedJobEnv env({{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
                      {"OMPI_COMM_WORLD_SIZE", std::to_string(kSize)},
                      {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(rank)},
                      {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(kSize)},
                      {"OMPI_MCA_ess_base_jobid", jobid}});
    exercise_and_leave(detect_job(), rank, kSize);
  });
}

TEST(Bootstrap, ForkedTorchrunStyleProcessesUseMasterAddrAndPort) {
  constexpr int kSize = 3;
  const uint16_t port = static_cast<uint16_t>(unused_port() - 1);  // the store's port, MASTER_PORT+1, is free
  const std::string run_id = unique_job_id("torch");  // before fork: every rank must share it
  run_processes(kSize, [&](int rank) {
    ScopedJobEnv env({{"RANK", std::to_string(rank)},
                      {"WORLD_SIZE", std::to_string(kSize)},
                      {"LOCAL_RANK", std::to_string(rank)},
                      {"LOCAL_WORLD_SIZE", std::to_string(kSize)},
                      {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", std::to_string(port)},
                      {"TORCHELASTIC_RUN_ID", run_id}});
    JobInfo job = detect_job();
    // torchrun's agent store holds MASTER_PORT: chorus serves at the next port.
    if (job.store_port != port + 1) throw Error(Status::internal, "MASTER_PORT+1 was not used");
    exercise_and_leave(job, rank, kSize);
  });
}

// The store of a job that never said where to listen is reachable from this
// host only: every socket this process listens on is bound to 127.0.0.1.
void expect_listening_on_loopback_only(const std::string& what) {
  auto sockets = chorus::testing::listening_sockets_of(::getpid());
  EXPECT_FALSE(sockets.empty()) << what << ": the store listens nowhere";
  for (const auto& socket : sockets) {
    EXPECT_EQ(socket.address, "127.0.0.1") << what << ": the store listens on " << socket.address << ":" << socket.port;
  }
}

TEST(Bootstrap, SingleHostStoresListenOnLoopbackOnly) {
  {
    ScopedJobEnv env;
    Bootstrap boot(detect_job(), kTimeout);
    expect_listening_on_loopback_only("single-rank job");
  }
  {
    // Rank 0 of an mpirun job without CHORUS_STORE_ADDR (port file mode).
    Bootstrap boot(job_for(0, 2, unique_job_id("loopback")), kTimeout);
    expect_listening_on_loopback_only("mpirun-style rank 0");
  }
}

TEST(Bootstrap, AllGatherTimeoutNamesTheMissingRank) {
  // Rank 0 of a 2-rank job whose rank 1 never comes.
  Bootstrap boot(job_for(0, 2, unique_job_id("missing")), milliseconds(300));
  try {
    boot.all_gather("transport", bytes_of("x"));
    FAIL() << "all_gather returned without rank 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::timeout);
    EXPECT_EQ(e.peer(), 1);
    EXPECT_NE(std::string(e.what()).find("rank 1's value never arrived"), std::string::npos) << e.what();
  }
  try {
    boot.barrier("alone");
    FAIL() << "barrier returned without rank 1";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::timeout);
    EXPECT_NE(std::string(e.what()).find("only 1 of 2 ranks arrived"), std::string::npos) << e.what();
  }
}

TEST(Bootstrap, RankWithoutRankZeroTimesOutNamingThePortFile) {
  const std::string id = unique_job_id("no-rank0");
  try {
    Bootstrap boot(job_for(1, 2, id), milliseconds(200));
    FAIL() << "rank 1 connected without a rank 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::timeout);
    EXPECT_NE(std::string(e.what()).find(port_file::path_for(id)), std::string::npos) << e.what();
  }
}

TEST(PortFile, PublishThenWaitFor) {
  const std::string path = port_file::path_for(unique_job_id("file"));
  port_file::publish(path, 4321);
  EXPECT_EQ(port_file::wait_for(path, milliseconds(100)), 4321);
  port_file::publish(path, 1234);  // replaced atomically
  EXPECT_EQ(port_file::wait_for(path, milliseconds(100)), 1234);
  port_file::remove(path);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
}

TEST(PortFile, ContentsMustBeOnePortAndANewline) {
  EXPECT_EQ(port_file::parse_port("40123\n", "f"), 40123);
  EXPECT_EQ(port_file::parse_port("1\n", "f"), 1);
  EXPECT_EQ(port_file::parse_port("65535\n", "f"), 65535);
  for (std::string_view bad : {"", "\n", "40123", "0\n", "65536\n", "-1\n", " 1\n", "1 \n", "1\n\n", "12x\n",
                               "4294967297\n", "99999999999999999999\n"}) {
    try {
      port_file::parse_port(bad, "/tmp/the-file");
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::bootstrap);
      EXPECT_NE(std::string(e.what()).find("/tmp/the-file does not hold a port"), std::string::npos) << e.what();
    }
  }
}

TEST(PackedGather, RoundTripsAndRefusesMalformedValues) {
  std::vector<Bytes> blobs = {bytes_of("a"), {}, bytes_of("ccc")};
  Bytes value = packed::pack(blobs);
  EXPECT_EQ(packed::unpack(value, 3, "k"), blobs);
  auto refused = [](const Bytes& bad, int size, const std::string& why) {
    try {
      packed::unpack(bad, size, "job/x/all");
      ADD_FAILURE() << "accepted a value that should fail with: " << why;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::bootstrap);
      EXPECT_NE(std::string(e.what()).find("packed all_gather value job/x/all " + why), std::string::npos) << e.what();
    }
  };
  refused(value, 4, "is truncated");                               // fewer ranks than the job has
  refused(value, 2, "has trailing bytes");                         // more ranks than the job has
  refused(Bytes(value.begin(), value.end() - 1), 3, "is truncated");  // last blob cut short
  refused(Bytes{0, 0, 0}, 1, "is truncated");                      // not even a length
  refused(Bytes{0xff, 0xff, 0xff, 0xff, 'x'}, 1, "is truncated");  // a length far past the end
}

TEST(PortFile, JobIdsBecomeSafeFileNames) {
  std::string path = port_file::path_for("prterun-host-4242@1/../x y");
  EXPECT_EQ(path.rfind("/tmp/chorus-store-prterun-host-4242_1_.._x_y-", 0), 0u) << path;
  std::string long_path = port_file::path_for(std::string(300, 'a'));
  EXPECT_LT(long_path.size(), 200u);
  EXPECT_NE(long_path, port_file::path_for(std::string(300, 'a') + "b"));
}

TEST(PortFile, RefusesAFileOthersCanWrite) {
  const std::string path = port_file::path_for(unique_job_id("perm"));
  port_file::publish(path, 4321);
  ASSERT_EQ(::chmod(path.c_str(), 0666), 0);
  try {
    port_file::wait_for(path, milliseconds(100));
    FAIL() << "a world-writable port file was trusted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::bootstrap);
    EXPECT_NE(std::string(e.what()).find("writable only by it"), std::string::npos) << e.what();
  }
  port_file::remove(path);
}

TEST(PortFile, WaitForTimesOutNamingThePath) {
  const std::string path = port_file::path_for(unique_job_id("absent"));
  auto start = Clock::now();
  try {
    port_file::wait_for(path, milliseconds(150));
    FAIL() << "found a file that does not exist";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::timeout);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_GE(elapsed_since(start), milliseconds(150));
}

// --- Startup papercuts (issue 21) ----------------------------------------------

namespace {

std::string read_text(const std::string& path) {
  std::ifstream file(path);
  return std::string(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

// Runs `body` in this (forked) process with stderr going to `path`.
void with_stderr_to(const std::string& path, const std::function<void()>& body) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || ::dup2(fd, STDERR_FILENO) < 0) throw Error(Status::internal, "redirecting stderr failed");
  ::close(fd);
  body();
}

// The error `body` throws; fails the process if it throws none.
Error error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e;
  }
  throw Error(Status::internal, "no error was thrown");
}

void expect_in(const std::string& text, const std::string& fragment) {
  if (text.find(fragment) == std::string::npos) {
    throw Error(Status::internal, concat("expected \"", fragment, "\" in: ", text));
  }
}

}  // namespace

// WORLD_SIZE 3, 4, 3: every rank fails in the first exchange, at once,
// naming both values (it used to be "packed all_gather value ... is
// truncated" on some ranks and CHORUS_TIMEOUT on the others).
TEST(Startup, RanksThatDisagreeOnTheSizeAllFailAtOnceNamingBoth) {
  const uint16_t port = unused_port();
  const auto start = Clock::now();
  run_processes(3, [&](int rank) {
    ScopedJobEnv env({{"RANK", std::to_string(rank)},
                      {"WORLD_SIZE", rank == 1 ? "4" : "3"},
                      {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", std::to_string(port)}});
    Bootstrap boot(detect_job(), milliseconds(20000));
    Error e = error_of([&] { boot.all_gather("chorus/host", bytes_of("host")); });
    if (e.status() != Status::config) throw Error(Status::internal, concat("wrong status: ", e.what()));
    expect_in(e.what(), "the ranks disagree on the job's size: rank 0 has WORLD_SIZE=3, rank 1 has WORLD_SIZE=4");
  });
  EXPECT_LT(elapsed_since(start), milliseconds(5000)) << "a rank waited for its timeout";
}

// Rank 0 of 3 whose ranks 1 and 2 never start: every second (with this short
// timeout) it says which ranks are missing, and that ranks on other hosts
// need MASTER_ADDR/MASTER_PORT, before timing out.
TEST(Startup, WaitingRankZeroSaysWhichRanksAreMissing) {
  const std::string log = ::testing::TempDir() + "/startup_missing.log";
  const std::string id = unique_job_id("missing-ranks");
  const auto start = Clock::now();
  run_processes(1, [&](int) {
    with_stderr_to(log, [&] {
      Bootstrap boot(job_for(0, 3, id), milliseconds(2500));
      Error e = error_of([&] { boot.all_gather("chorus/host", bytes_of("host")); });
      if (e.status() != Status::timeout) throw Error(Status::internal, concat("wrong status: ", e.what()));
    });
  });
  EXPECT_LT(elapsed_since(start), milliseconds(6000));
  const std::string said = read_text(log);
  EXPECT_NE(said.find("still waiting for ranks 1, 2 of 3 to join the job"), std::string::npos) << said;
  EXPECT_NE(said.find("set MASTER_ADDR and MASTER_PORT"), std::string::npos) << said;
}

// A rank whose rank 0 never writes the port file says so, with the hint.
TEST(Startup, RankWaitingForThePortFileSaysSo) {
  const std::string log = ::testing::TempDir() + "/startup_port_file.log";
  const std::string id = unique_job_id("no-port-file");
  run_processes(1, [&](int) {
    with_stderr_to(log, [&] { error_of([&] { Bootstrap boot(job_for(1, 2, id), milliseconds(2500)); }); });
  });
  const std::string said = read_text(log);
  EXPECT_NE(said.find("still waiting for rank 0 to publish the store's port in " + port_file::path_for(id)),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("set MASTER_ADDR and MASTER_PORT"), std::string::npos) << said;
}

// Something else listens where the store should be (torchrun's own store at
// MASTER_PORT): it accepts, reads HELLO, and never answers. The rank fails in
// seconds, saying so, not after CHORUS_TIMEOUT.
TEST(Startup, SilentForeignListenerFailsFast) {
  net::Fd foreign = net::listen_on("127.0.0.1", 0);  // the kernel accepts into the backlog; nobody answers
  const auto start = Clock::now();
  try {
    StoreClient client("127.0.0.1", net::local_port(foreign.get()), "secret", milliseconds(30000));
    FAIL() << "a listener that never answered was taken for a store";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::bootstrap);
    EXPECT_NE(std::string(e.what()).find("is not a chorus bootstrap store"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MASTER_PORT"), std::string::npos) << e.what();
  }
  EXPECT_LT(elapsed_since(start), milliseconds(5000));
}

TEST(Startup, TalkingForeignListenerFailsAtOnce) {
  net::Fd foreign = net::listen_on("127.0.0.1", 0);
  std::thread server([&] {
    pollfd ready{foreign.get(), POLLIN, 0};
    ::poll(&ready, 1, 5000);  // the listener is non-blocking
    const int fd = ::accept(foreign.get(), nullptr, nullptr);
    const std::string answer = "HTTP/1.1 400 Bad Request\r\n\r\n";
    (void)!::write(fd, answer.data(), answer.size());
    ::close(fd);
  });
  const auto start = Clock::now();
  try {
    StoreClient client("127.0.0.1", net::local_port(foreign.get()), "secret", milliseconds(30000));
    ADD_FAILURE() << "an HTTP server was taken for a store";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a chorus bootstrap store"), std::string::npos) << e.what();
  }
  server.join();
  EXPECT_LT(elapsed_since(start), milliseconds(1000));
}

// --- Departures: what a rank that left tells the others -------------------------

namespace {

Departure departure(int rank, bool failed, std::vector<std::pair<uint32_t, uint64_t>> calls) {
  return Departure{rank, failed, failed ? "allreduce on rank 1 failed: boom" : "called finalize()", std::move(calls)};
}

CurrentCall collective(const std::vector<int>& members, uint64_t calls) {
  return CurrentCall{0, calls, members, -1, "allreduce"};
}

}  // namespace

TEST(Departures, RecordsRoundTripAndMalformedOnesAreRefused) {
  Departure d = departure(7, true, {{0, 12}, {3, 1}});
  d.how = "error text\nwith a newline: kept";
  std::optional<Departure> back = decode_departure(encode(d));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->rank, 7);
  EXPECT_TRUE(back->failed);
  EXPECT_EQ(back->how, d.how);
  EXPECT_EQ(back->calls_on(3), 1u);
  EXPECT_EQ(back->calls_on(0), 12u);
  EXPECT_EQ(back->calls_on(9), 0u);
  // A launcher's record of a rank that ended without a word: failed, and said as it is.
  Departure gone = departure(3, true, {});
  gone.ended_unannounced = true;
  gone.how = "exited with status 0 without finalize() (pid 42 on h0), while the others still ran";
  std::optional<Departure> gone_back = decode_departure(encode(gone));
  ASSERT_TRUE(gone_back.has_value());
  EXPECT_TRUE(gone_back->failed);
  EXPECT_TRUE(gone_back->ended_unannounced);
  EXPECT_EQ(gone_back->describe(), "rank 3 " + gone.how);
  EXPECT_FALSE(back->ended_unannounced);
  EXPECT_EQ(back->describe(), "rank 7 left the job after an error: " + d.how);
  for (const char* bad : {"", "rank x\nfailed 0\ncalls \nhow y", "rank 1\nfailed 3\ncalls \nhow y",
                          "rank 1\nfailed 0\ncalls 0:\nhow y", "rank 1\nfailed 0\ncalls 0:1\nwho y"}) {
    EXPECT_FALSE(decode_departure(bytes_of(bad)).has_value()) << bad;
  }
}

TEST(Departures, ARankTheLauncherSawEndBlocksEveryCallThatNeedsIt) {
  const std::vector<int> everyone = {0, 1, 2};
  Departure gone = departure(1, true, {});
  gone.ended_unannounced = true;
  gone.how = "exited with status 0 without finalize() (pid 42 on h0), while the others still ran";
  auto blocked = departure_blocking({gone}, collective(everyone, 7), 0);
  ASSERT_TRUE(blocked.has_value());
  EXPECT_EQ(blocked->peer(), 1);
  EXPECT_EQ(blocked->status(), Status::peer_failed);
  EXPECT_NE(std::string(blocked->what()).find("rank 1 exited with status 0 without finalize()"), std::string::npos)
      << blocked->what();
}

// A rank that left after an error another rank caused (a closed connection
// from rank 3) is named by its cause: survivors name the first rank that
// failed, as under chorusrun's record (docs/errors.md), and the record
// keeps the cause through the store.
TEST(Departures, ARankThatLeftBecauseOfAnotherNamesThatRank) {
  const std::vector<int> everyone = {0, 1, 2, 3};
  Departure left = departure(1, true, {{0, 20}});
  left.how = "allreduce on rank 1 failed: tcp: receiving from rank 3: closed the connection";
  left.cause = 3;
  std::optional<Departure> back = decode_departure(encode(left));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->cause, 3);
  EXPECT_EQ(back->how, left.how);
  EXPECT_EQ(back->calls_on(0), 20u);
  EXPECT_EQ(decode_departure(encode(departure(1, true, {})))->cause, -1);
  EXPECT_FALSE(decode_departure(bytes_of("rank 1\nfailed 1\ncalls \ncause x\nhow y")).has_value());
  EXPECT_FALSE(decode_departure(bytes_of("rank 1\nfailed 1\ncalls \ncause 3")).has_value());
  auto blocked = departure_blocking({*back}, collective(everyone, 20), 0);
  ASSERT_TRUE(blocked.has_value());
  EXPECT_EQ(blocked->peer(), 3);
  EXPECT_NE(std::string(blocked->what()).find("rank 1 left the job after an error: " + left.how), std::string::npos)
      << blocked->what();
  // The cause itself asking: it is named by the rank that left.
  EXPECT_EQ(departure_blocking({*back}, collective(everyone, 20), 3)->peer(), 1);
}

TEST(Departures, OnlyARankThatNeverJoinsTheCallBlocksIt) {
  const std::vector<int> everyone = {0, 1, 2};
  // Rank 2 finalized after 1 call; rank 0 is in call 2: blocked, naming rank 2.
  auto blocked = departure_blocking({departure(2, false, {{0, 1}})}, collective(everyone, 2), 0);
  ASSERT_TRUE(blocked.has_value());
  EXPECT_EQ(blocked->peer(), 2);
  EXPECT_EQ(blocked->status(), Status::peer_failed);
  EXPECT_NE(std::string(blocked->what()).find("rank 2 left the job (called finalize()) after 1 collective call"),
            std::string::npos)
      << blocked->what();
  // It took part in call 2 (rank 0 waits on a slow third rank): not blocked.
  EXPECT_FALSE(departure_blocking({departure(2, false, {{0, 2}})}, collective(everyone, 2), 0).has_value());
  // Not a member of the communicator of the call: not blocked.
  EXPECT_FALSE(departure_blocking({departure(2, false, {{0, 0}})}, collective({0, 1}, 2), 0).has_value());
  // Failed inside call 2 itself: blocked; failed in a later call: not.
  EXPECT_TRUE(departure_blocking({departure(1, true, {{0, 2}})}, collective(everyone, 2), 0).has_value());
  EXPECT_FALSE(departure_blocking({departure(1, true, {{0, 3}})}, collective(everyone, 2), 0).has_value());
  // Point-to-point: a receive from the rank that left, or from any source
  // once every other member has left.
  EXPECT_TRUE(departure_blocking({departure(2, false, {})}, CurrentCall{0, 0, everyone, 2, "recv"}, 0).has_value());
  EXPECT_FALSE(departure_blocking({departure(2, false, {})}, CurrentCall{0, 0, everyone, 1, "recv"}, 0).has_value());
  EXPECT_FALSE(departure_blocking({departure(2, false, {})}, CurrentCall{0, 0, everyone, -1, "recv"}, 0).has_value());
  EXPECT_TRUE(departure_blocking({departure(1, false, {}), departure(2, false, {})}, CurrentCall{0, 0, everyone, -1, "recv"},
                                 0)
                  .has_value());
}
