// chorusrun as users run it: real processes, real signals, real store.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>

namespace {

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr together
  double seconds = 0;
};

std::string quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

Result run(const std::string& arguments) {
  auto start = std::chrono::steady_clock::now();
  std::string command = "timeout 60 " + quote(CHORUSRUN) + " " + arguments + " 2>&1";
  Result result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) result.output += buffer.data();
  int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

const std::string kRank = quote(RANK_PROGRAM);

bool contains(const std::string& text, const std::string& fragment) { return text.find(fragment) != std::string::npos; }

// Runs chorusrun with `arguments` and expects exit status `status` and each
// of `fragments` in the output; returns the result for further checks.
Result run_expecting(const std::string& arguments, int status, std::initializer_list<std::string> fragments) {
  Result r = run(arguments);
  EXPECT_EQ(r.status, status) << r.output;
  for (const std::string& fragment : fragments) {
    EXPECT_TRUE(contains(r.output, fragment)) << "no \"" << fragment << "\" in:\n" << r.output;
  }
  return r;
}

}  // namespace

TEST(Chorusrun, GivesEveryRankItsEnvironmentWithPrefixes) {
  Result r = run("-n 3 --timeout 7 --ofi-provider shm " + kRank + " env");
  ASSERT_EQ(r.status, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    std::string p = "[" + std::to_string(rank) + "] ";
    EXPECT_TRUE(contains(r.output, p + "CHORUS_RANK=" + std::to_string(rank) + "\n")) << r.output;
    EXPECT_TRUE(contains(r.output, p + "CHORUS_SIZE=3\n")) << r.output;
    EXPECT_TRUE(contains(r.output, p + "CHORUS_LOCAL_RANK=" + std::to_string(rank) + "\n")) << r.output;
    EXPECT_TRUE(contains(r.output, p + "CHORUS_LOCAL_SIZE=3\n")) << r.output;
    EXPECT_TRUE(contains(r.output, p + "CHORUS_TIMEOUT=7\n")) << r.output;
    EXPECT_TRUE(contains(r.output, p + "CHORUS_OFI_PROVIDER=shm\n")) << r.output;
    EXPECT_TRUE(contains(r.output, p + "FI_TCP_IFACE=lo\n")) << r.output;
    EXPECT_TRUE(contains(r.output, p + "SECRET_LENGTH=32\n")) << r.output;
  }
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(\[0\] CHORUS_STORE_ADDR=127\.0\.0\.1:[0-9]+)"))) << r.output;
}

TEST(Chorusrun, ExportsVariables) {
  setenv("CHORUS_TEST_FROM_PARENT", "inherited-value", 1);
  run_expecting("-n 2 -x SHOW_VAR=CHORUS_TEST_FROM_PARENT -x CHORUS_TEST_FROM_PARENT " + kRank + " env", 0,
                {"[1] CHORUS_TEST_FROM_PARENT=inherited-value"});
  Result r = run("--no-tag-output -n 1 -x SHOW_VAR=MY_SETTING -x MY_SETTING=42 " + kRank + " env");
  EXPECT_TRUE(contains(r.output, "\nMY_SETTING=42\n")) << r.output;
  EXPECT_FALSE(contains(r.output, "[0]")) << r.output;
}

// Inherited < chorusrun's own settings < -x, one value per name.
TEST(Chorusrun, VariablePrecedence) {
  setenv("CHORUS_TIMEOUT", "999", 1);
  Result r = run("-n 1 --timeout 7 " + kRank + " env");
  EXPECT_TRUE(contains(r.output, "[0] CHORUS_TIMEOUT=7\n")) << r.output;
  r = run("-n 1 --timeout 7 -x CHORUS_TIMEOUT=11 " + kRank + " env");
  EXPECT_TRUE(contains(r.output, "[0] CHORUS_TIMEOUT=11\n")) << r.output;
  unsetenv("CHORUS_TIMEOUT");
}

TEST(Chorusrun, PartialLastLineIsForwarded) {
  run_expecting("-n 2 " + kRank + " partial", 0, {"[0] no newline here\n", "[1] no newline here\n"});
}

TEST(Chorusrun, FailingRankStopsTheJobWithItsStatus) {
  Result r = run_expecting("-n 3 " + kRank + " exit 7", 7,
                           {"chorusrun: rank 1 (pid", "exited with status 7; stopping the other 2 ranks"});
  EXPECT_LT(r.seconds, 10) << "the sleeping ranks were not stopped";
}

TEST(Chorusrun, FailureGraceLetsTheOthersReport) {
  Result r = run_expecting("-n 3 --failure-grace 10 " + kRank + " late 5", 5,
                           {"[0] rank 0 finished after the failure", "[2] rank 2 finished after the failure"});
  EXPECT_LT(r.seconds, 8) << "the grace must end when every rank has ended";
  Result without = run("-n 3 " + kRank + " late 5");
  EXPECT_EQ(without.status, 5);
  EXPECT_FALSE(contains(without.output, "finished after the failure")) << without.output;
}

TEST(Chorusrun, KilledRankIsNamedAndNoProcessRemains) {
  std::string log = ::testing::TempDir() + "/chorusrun_kill.log";
  std::string command = "timeout 60 " + quote(CHORUSRUN) + " -n 3 --timeout 5 " + kRank + " sleep >" + log + " 2>&1 & echo $!";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char line[64] = {0};
  ASSERT_NE(fgets(line, sizeof line, pipe), nullptr);
  pclose(pipe);
  // Collect the ranks' pids from their output.
  std::vector<int> pids;
  for (int attempt = 0; attempt < 100 && pids.size() < 3; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pids.clear();
    FILE* file = fopen(log.c_str(), "r");
    if (file == nullptr) continue;
    char text[256];
    while (fgets(text, sizeof text, file) != nullptr) {
      int rank, pid;
      if (sscanf(text, "[%d] pid %d", &rank, &pid) == 2) pids.push_back(pid);
    }
    fclose(file);
  }
  ASSERT_EQ(pids.size(), 3u);
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(pids[1], SIGKILL), 0);
  // chorusrun stops the others (SIGTERM) and exits; all pids disappear.
  bool all_gone = false;
  while (!all_gone && std::chrono::steady_clock::now() - start < std::chrono::seconds(8)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    all_gone = true;
    for (int pid : pids) all_gone = all_gone && (kill(pid, 0) != 0);
  }
  EXPECT_TRUE(all_gone) << "rank processes remain";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  FILE* file = fopen(log.c_str(), "r");
  ASSERT_NE(file, nullptr);
  std::string output;
  char text[512];
  while (fgets(text, sizeof text, file) != nullptr) output += text;
  fclose(file);
  EXPECT_TRUE(std::regex_search(output, std::regex("rank [0-9] \\(pid [0-9]+ on localhost\\) was killed by signal 9"))) << output;
}

TEST(Chorusrun, ForwardsSignalsToRanks) {
  // SIGUSR1 to chorusrun reaches every rank, which then exits 0.
  std::string command = "sh -c " + quote(quote(CHORUSRUN) + " -n 2 " + kRank + " sleep & sleep 1; kill -USR1 $!; wait $!");
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char text[256];
  while (fgets(text, sizeof text, pipe) != nullptr) output += text;
  int status = pclose(pipe);
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_TRUE(contains(output, "[0] got signal 10")) << output;
  EXPECT_TRUE(contains(output, "[1] got signal 10")) << output;
}

TEST(Chorusrun, RemoteRanksGoThroughTheRemoteShell) {
  Result r = run("-n 3 --hosts nodeA:2,nodeB:1 --store-addr 127.0.0.1 --rsh " + quote(FAKE_RSH) + " " + kRank + " env");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "fake_rsh: host=nodeA")) << r.output;
  EXPECT_TRUE(contains(r.output, "fake_rsh: host=nodeB")) << r.output;
  EXPECT_TRUE(contains(r.output, "[2] CHORUS_LOCAL_RANK=0")) << r.output;  // first rank on nodeB
  EXPECT_TRUE(contains(r.output, "[1] CHORUS_LOCAL_SIZE=2")) << r.output;
}

TEST(Chorusrun, RanksReachTheStore) {
  run_expecting("-n 3 " + kRank + " store", 0, {"[0] store says ok", "[1] store says ok", "[2] store says ok"});
}

TEST(Chorusrun, BindChoiceReachesTheRanks) {
  run_expecting("-n 1 --bind=core -x SHOW_VAR=CHORUS_BIND " + kRank + " env", 0, {"[0] CHORUS_BIND=core"});
  run_expecting("-n 1 --bind none --report-bindings -x SHOW_VAR=CHORUS_REPORT_BINDINGS " + kRank + " env", 0,
                {"[0] CHORUS_REPORT_BINDINGS=1"});
}

// Listening addresses of the job's store, as its ranks saw them.
std::vector<std::string> store_listen_addresses(const std::string& output) {
  std::vector<std::string> addresses;
  static const std::regex line(R"(\[0\] store listens on (.*):[0-9]+\n)");
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it) addresses.push_back((*it)[1]);
  return addresses;
}

TEST(Chorusrun, SingleHostStoreListensOnLoopbackOnly) {
  Result r = run("-n 2 " + kRank + " listen");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(store_listen_addresses(r.output), std::vector<std::string>{"127.0.0.1"}) << r.output;
}

// The contrast: ranks on other hosts must reach the store, so it listens on
// every interface (the one case where it does).
TEST(Chorusrun, MultiHostStoreListensOnEveryInterface) {
  Result r = run("-n 2 --hosts nodeA:1,nodeB:1 --store-addr 127.0.0.1 --rsh " + quote(FAKE_RSH) + " " + kRank + " listen");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(store_listen_addresses(r.output), std::vector<std::string>{"0.0.0.0"}) << r.output;
}

TEST(Chorusrun, HelpAndVersion) {
  Result r = run("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* option : {"-n, --np", "--hosts", "--hostfile", "--rsh", "--store-addr", "--transport",
                             "--ofi-provider", "--timeout", "-x VAR", "--tag-output", "--bind", "--report-bindings",
                             "-np N", "--oversubscribe", "--map-by", "--bind-to", "--allow-run-as-root"}) {
    EXPECT_TRUE(contains(r.output, option)) << option;
  }
  EXPECT_TRUE(contains(run("--version").output, "chorusrun (chorus)"));
}

// What users of mpirun type (issue 21): -np N, -n2, --oversubscribe,
// --bind-to, --host, --map-by, --allow-run-as-root.
TEST(Chorusrun, AcceptsMpirunSpellings) {
  for (const char* ranks : {"-np 2", "-n2", "-np2", "-np=2", "--np=2"}) {
    Result r = run(std::string(ranks) + " --allow-run-as-root --oversubscribe " + kRank + " env");
    EXPECT_EQ(r.status, 0) << ranks << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "[1] CHORUS_SIZE=2\n")) << ranks << ": " << r.output;
  }
  Result bound = run("-np 1 --bind-to core -x SHOW_VAR=CHORUS_BIND " + kRank + " env");
  EXPECT_TRUE(contains(bound.output, "[0] CHORUS_BIND=core")) << bound.output;
  bound = run("-np 1 -bind-to none -x SHOW_VAR=CHORUS_BIND " + kRank + " env");
  EXPECT_TRUE(contains(bound.output, "[0] CHORUS_BIND=none")) << bound.output;
}

TEST(Chorusrun, HostMapByAndOversubscribeAsInMpirun) {
  const std::string remote = " --store-addr 127.0.0.1 --rsh " + quote(FAKE_RSH) + " ";
  // --map-by node: one rank per host in turn (0 on A, 1 on B, 2 on A).
  Result r = run("-np 3 --host nodeA:2,nodeB:2 --map-by node" + remote + kRank + " env");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[1] CHORUS_LOCAL_RANK=0\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "[1] CHORUS_LOCAL_SIZE=1\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "[2] CHORUS_LOCAL_RANK=1\n")) << r.output;
  // --oversubscribe: ranks beyond the slots go round-robin (rank 2 on A).
  r = run("-np 3 -H nodeA,nodeB --oversubscribe" + remote + kRank + " env");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "[2] CHORUS_LOCAL_RANK=1\n")) << r.output;
  EXPECT_TRUE(contains(r.output, "[0] CHORUS_LOCAL_SIZE=2\n")) << r.output;
}

// chorusrun hands every rank IPATH_NO_BACKTRACE=1, as mpirun does: PSM's
// library otherwise turns SIGSEGV, SIGINT, SIGTERM into exit(1).
TEST(Chorusrun, RanksGetIpathNoBacktrace) {
  Result r = run("-n 1 -x SHOW_VAR=IPATH_NO_BACKTRACE " + kRank + " env");
  EXPECT_TRUE(contains(r.output, "[0] IPATH_NO_BACKTRACE=1")) << r.output;
}

struct BadArguments {
  const char* arguments;
  const char* message;
};

class ChorusrunRejects : public ::testing::TestWithParam<BadArguments> {};

TEST_P(ChorusrunRejects, WithUsageErrorNamingTheProblem) {
  run_expecting(GetParam().arguments, 2, {std::string("chorusrun: ") + GetParam().message, "--help"});
}

INSTANTIATE_TEST_SUITE_P(
    EveryOption, ChorusrunRejects,
    ::testing::Values(BadArguments{"true", "the number of ranks is missing"},
                      BadArguments{"-n 0 true", "-n \"0\": expected a whole number from 1 to 4096"},
                      BadArguments{"-n abc true", "-n \"abc\": expected a whole number"},
                      BadArguments{"-n 5000 true", "-n \"5000\": expected a whole number from 1 to 4096"},
                      BadArguments{"-n", "-n needs a value"},
                      BadArguments{"-n 2", "no program to run"},
                      BadArguments{"-n 2 --frobnicate true", "unknown option \"--frobnicate\""},
                      BadArguments{"-n 2 --timeout never true", "--timeout \"never\": expected seconds"},
                      BadArguments{"-n 2 --timeout 0 true", "--timeout \"0\": expected seconds greater than 0"},
                      BadArguments{"-n 2 --transport carrier true", "--transport \"carrier\": expected one of auto, shm, tcp, ofi, verbs, inproc"},
                      BadArguments{"-n 2 --failure-grace later true", "--failure-grace \"later\": expected seconds"},
                      BadArguments{"-n 2 --bind socket true", "--bind \"socket\": expected one of nic, core, none"},
                      BadArguments{"-n 2 --bind=bogus true", "--bind \"bogus\": expected one of nic, core, none"},
                      BadArguments{"-n 2 --bind", "--bind needs a value"},
                      BadArguments{"-n 2 --report-bindings=yes true", "--report-bindings takes no value"},
                      BadArguments{"-n 2 --hosts 'a:x' true", "--hosts slots of a \"x\""},
                      BadArguments{"-n 2 --hosts 'bad host:2' true", "--hosts: \"bad host:2\" is not a host name"},
                      BadArguments{"-n 5 --hosts a:2,b:2 true", "-n 5 is more than the 4 slots"},
                      BadArguments{"-n 2 --hostfile /nonexistent/hosts true", "--hostfile \"/nonexistent/hosts\": cannot read it"},
                      BadArguments{"-n 2 -x '=oops' true", "-x \"=oops\": expected VAR or VAR=value"},
                      BadArguments{"-n 2 /nonexistent/program", "program \"/nonexistent/program\" is not an executable file"},
                      BadArguments{"-n 2 no-such-program-anywhere", "program \"no-such-program-anywhere\" was not found in PATH"},
                      BadArguments{"-n 2 --hosts far:2 true", "ranks on other hosts need --store-addr"},
                      BadArguments{"-np 2 --bind-to socket true", "--bind-to \"socket\": chorusrun binds each rank to one core"},
                      BadArguments{"-np 2 --map-by ppr:2:node true", "--map-by \"ppr:2:node\": chorusrun maps by slot"},
                      BadArguments{"-np 2 --mca btl self true", "--mca is Open MPI's: chorus reads CHORUS_* variables"},
                      BadArguments{"-np 2 -N 2 true", "-N is mpirun's: give the ranks per host as slots"},
                      BadArguments{"-np 2 -mca btl self true", "--mca is Open MPI's"}),
    [](const ::testing::TestParamInfo<BadArguments>& info) { return std::to_string(info.index); });
