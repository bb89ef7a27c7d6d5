// A failed operation gives the application its buffer back (docs/errors.md,
// "Buffers after a failure"): once rank 0's communicator has failed, rank 1
// may no longer read the send buffer rank 0 exposed for a rendezvous.
//
// Rank 0 starts a rendezvous isend to rank 1, then waits for a message rank 1
// never sends, so its communicator fails (CHORUS_TIMEOUT). It then overwrites
// the buffer, as an application reusing or freeing it would. Only now does
// rank 1 post the matching receive: it must fail naming rank 0, and none of
// the overwritten bytes may reach it. Before the engine withdrew failed
// operations' registrations, the receive completed with them.
#include <chorus/chorus.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBytes = 1 << 20;  // far past every transport's eager limit
constexpr uint8_t kSent = 0xA5, kAfterFailure = 0x5A, kUntouched = 0;

void usage(FILE* out) {
  std::fprintf(out,
               "usage: chorusrun -n 2 [transport options] chorus-withdrawn-buffer DIR\n"
               "Checks that a rank whose communicator failed no longer serves reads of the\n"
               "send buffer it had exposed. DIR: a directory both ranks use for two marker\n"
               "files (rank 0 failed; rank 1 posted its receive). Exit status 0: held.\n");
}

void touch(const std::filesystem::path& file) { std::ofstream(file) << "x"; }

bool wait_for(const std::filesystem::path& file, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!std::filesystem::exists(file)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

int run_rank0(chorus::Communicator& comm, const std::filesystem::path& dir) {
  std::vector<uint8_t> payload(kBytes, kSent);
  std::optional<chorus::Request> send = comm.isend(payload.data(), payload.size(), 1, 1);
  int never = 0;
  try {
    comm.recv(&never, sizeof never, 1, 2);
    std::printf("rank 0: FAILED: a receive of a message nobody sent completed\n");
    return 1;
  } catch (const chorus::Error& e) {
    std::printf("rank 0: communicator failed as intended: %s\n", e.what());
  }
  std::fill(payload.begin(), payload.end(), kAfterFailure);
  touch(dir / "rank0-failed");
  if (!wait_for(dir / "rank1-posted", std::chrono::seconds(20))) {
    std::printf("rank 0: FAILED: rank 1 never posted its receive\n");
    return 1;
  }
  // Rank 1's read arrives while the communicator lingers on its way out.
  send.reset();
  return 0;
}

int run_rank1(chorus::Communicator& comm, const std::filesystem::path& dir) {
  if (!wait_for(dir / "rank0-failed", std::chrono::seconds(30))) {
    std::printf("rank 1: FAILED: rank 0 never reported its failure\n");
    return 1;
  }
  std::vector<uint8_t> received(kBytes, kUntouched);
  chorus::Request recv = comm.irecv(received.data(), received.size(), 0, 1);
  touch(dir / "rank1-posted");
  std::string error;
  try {
    recv.wait();
  } catch (const chorus::Error& e) {
    error = e.what();
  }
  const auto leaked = std::count(received.begin(), received.end(), kAfterFailure);
  const auto delivered = std::count(received.begin(), received.end(), kSent);
  std::printf("rank 1: receive %s; bytes of the overwritten buffer received: %ld, of the original: %ld\n",
              error.empty() ? "completed" : ("failed: " + error).c_str(), static_cast<long>(leaked),
              static_cast<long>(delivered));
  if (error.empty()) {
    std::printf("rank 1: FAILED: the receive completed from a buffer its sender had given back\n");
    return 1;
  }
  if (error.find("rank 0") == std::string::npos) {
    std::printf("rank 1: FAILED: the error does not name rank 0\n");
    return 1;
  }
  if (leaked != 0) {
    std::printf("rank 1: FAILED: bytes written after rank 0's failure reached rank 1\n");
    return 1;
  }
  std::printf("rank 1: withdrawn_buffer: OK\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage(argc == 2 ? stdout : stderr);
    return argc == 2 ? 0 : 2;
  }
  const std::filesystem::path dir = argv[1];
  try {
    // Markers of an earlier run must not count: rank 0 clears them before
    // init, which rank 1 cannot pass without it.
    if (const char* rank = std::getenv("CHORUS_RANK"); rank != nullptr && std::string(rank) == "0") {
      std::filesystem::create_directories(dir);
      std::filesystem::remove(dir / "rank0-failed");
      std::filesystem::remove(dir / "rank1-posted");
    }
    chorus::Communicator comm = chorus::Communicator::init();
    if (comm.size() != 2) {
      std::fprintf(stderr, "chorus-withdrawn-buffer: needs exactly 2 ranks, got %d\n", comm.size());
      return 2;
    }
    const int rank = comm.rank();
    const int status = rank == 0 ? run_rank0(comm, dir) : run_rank1(comm, dir);
    // Every rank's own pass line, at its very end (tests/job_verdict.py).
    if (status == 0) std::printf("chorus-withdrawn-buffer: rank %d passed\n", rank);
    return status;
  } catch (const std::exception& e) {
    std::printf("rank ?: FAILED: %s\n", e.what());
    return 1;
  }
}
