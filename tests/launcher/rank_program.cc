// A rank for the launcher tests. Modes:
//   env            print CHORUS_* and the variable named by $SHOW_VAR
//   exit CODE      exit with CODE (rank 1 only; others sleep until stopped)
//   late CODE      rank 1 exits with CODE at once; the others say so after 0.5 s and exit 0
//   sleep          print the pid, then sleep until signalled (reports the signal)
//   partial        print a line without a newline
//   store          connect to the job's store, set and read a key
//   listen         print every address the job's store listens on
#include "bootstrap/store.hpp"
#include "tests/listening_sockets.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {
volatile sig_atomic_t g_signal = 0;
void on_signal(int s) { g_signal = s; }
int rank() { return std::atoi(std::getenv("CHORUS_RANK") ? std::getenv("CHORUS_RANK") : "-1"); }
}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "env";
  if (mode == "env") {
    const char* names[] = {"CHORUS_RANK", "CHORUS_SIZE", "CHORUS_LOCAL_RANK", "CHORUS_LOCAL_SIZE", "CHORUS_STORE_ADDR",
                           "CHORUS_JOB_ID", "CHORUS_TIMEOUT", "CHORUS_OFI_PROVIDER", "FI_TCP_IFACE"};
    for (const char* name : names) std::printf("%s=%s\n", name, std::getenv(name) ? std::getenv(name) : "(unset)");
    if (const char* extra = std::getenv("SHOW_VAR")) {
      std::printf("%s=%s\n", extra, std::getenv(extra) ? std::getenv(extra) : "(unset)");
    }
    std::printf("SECRET_LENGTH=%zu\n", std::strlen(std::getenv("CHORUS_JOB_SECRET") ? std::getenv("CHORUS_JOB_SECRET") : ""));
    return 0;
  }
  if (mode == "exit") {
    if (rank() == 1) return std::atoi(argv[2]);
    sleep(30);
    return 0;
  }
  if (mode == "late") {
    if (rank() == 1) return std::atoi(argv[2]);
    usleep(500000);
    std::printf("rank %d finished after the failure\n", rank());
    return 0;
  }
  if (mode == "sleep") {
    std::signal(SIGTERM, on_signal);
    std::signal(SIGUSR1, on_signal);
    std::printf("pid %d\n", getpid());
    std::fflush(stdout);
    for (int i = 0; i < 300 && g_signal == 0; ++i) usleep(100000);
    std::printf("got signal %d\n", static_cast<int>(g_signal));
    return g_signal == SIGUSR1 ? 0 : 3;
  }
  if (mode == "partial") {
    std::printf("no newline here");
    return 0;
  }
  if (mode == "store") {
    std::string address = std::getenv("CHORUS_STORE_ADDR");
    auto colon = address.rfind(':');
    chorus::bootstrap::StoreClient client(address.substr(0, colon), static_cast<uint16_t>(std::stoi(address.substr(colon + 1))),
                                          std::getenv("CHORUS_JOB_SECRET"), std::chrono::seconds(10));
    client.set("hello/" + std::to_string(rank()), {'o', 'k'});
    auto other = client.get("hello/" + std::to_string((rank() + 1) % std::atoi(std::getenv("CHORUS_SIZE"))));
    std::printf("store says %s\n", std::string(other.begin(), other.end()).c_str());
    return 0;
  }
  if (mode == "listen") {
    std::string address = std::getenv("CHORUS_STORE_ADDR");
    auto port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
    for (const auto& socket : chorus::testing::listening_sockets()) {
      if (socket.port == port) std::printf("store listens on %s:%u\n", socket.address.c_str(), unsigned{socket.port});
    }
    return 0;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
