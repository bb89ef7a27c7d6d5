// chorus-ud-between-calls: UD mode repairs a loss while the application
// computes outside chorus (docs/transport-ud.md, "Progress between calls").
// Two ranks over CHORUS_VERBS_MODE=ud with CHORUS_TEST_UD_DROP=0:0, so the
// first datagram rank 0 sends is lost on the wire:
//   1. rank 0 sends a message to rank 1 (that datagram), then computes for
//      --compute-ms without any chorus call. Rank 1 receives it. With the
//      progress thread (CHORUS_PROGRESS=thread) rank 0 retransmits at its
//      timer, and rank 1's receive takes well under a second; with
//      CHORUS_PROGRESS=caller (--expect-gap) it takes the whole computation.
//   2. meanwhile rank 1 sends to the computing rank 0, then waits for its
//      reply. Rank 0 must acknowledge while it computes, or rank 1's UD layer
//      gives up on it after half of CHORUS_TIMEOUT (run with a timeout under
//      twice --compute-ms to make that matter).
// Prints every failed check and "ud_between_calls: N checks, F failed".
#include <chorus/chorus.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

int g_checks = 0;
int g_failed = 0;

void check(bool ok, int rank, const std::string& what) {
  ++g_checks;
  if (!ok) {
    ++g_failed;
    std::printf("FAILED: rank %d: %s\n", rank, what.c_str());
  }
}

std::vector<unsigned char> message(size_t bytes, int seed) {
  std::vector<unsigned char> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<unsigned char>((i * 13 + static_cast<size_t>(seed) * 7) % 251);
  return data;
}

// CPU work with no chorus call.
void compute_for(std::chrono::milliseconds duration) {
  const auto until = Clock::now() + duration;
  volatile double sink = 0;
  while (Clock::now() < until) sink = sink + std::sqrt(static_cast<double>(sink) + 1.0);
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void usage() {
  std::printf(
      "Usage: chorusrun -n 2 --transport verbs -x CHORUS_VERBS_MODE=ud -x CHORUS_TEST_UD_DROP=0:0\n"
      "         chorus-ud-between-calls [--compute-ms MS] [--within-ms MS] [--expect-gap]\n\n"
      "Rank 0's first datagram is lost just before it computes for MS milliseconds\n"
      "without chorus calls; rank 1's receive of it must finish within --within-ms\n"
      "(default 1000: the progress thread retransmitted), or, with --expect-gap\n"
      "(CHORUS_PROGRESS=caller), only after the computation. Rank 1 also sends to the\n"
      "computing rank 0 and must not see it reported failed for want of acks.\n"
      "  --compute-ms MS   rank 0's computation (default 3000)\n"
      "  --within-ms MS    the most rank 1's first receive may take (default 1000)\n"
      "  --expect-gap      expect the receive to wait for the computation instead\n");
}

}  // namespace

int main(int argc, char** argv) {
  long compute_ms = 3000, within_ms = 1000;
  bool expect_gap = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage();
      return 0;
    }
    if (arg == "--compute-ms" && i + 1 < argc) {
      compute_ms = std::atol(argv[++i]);
    } else if (arg == "--within-ms" && i + 1 < argc) {
      within_ms = std::atol(argv[++i]);
    } else if (arg == "--expect-gap") {
      expect_gap = true;
    } else {
      std::fprintf(stderr, "chorus-ud-between-calls: unknown argument %s (see --help)\n", arg.c_str());
      return 2;
    }
  }
  int rank = -1;
  try {
    chorus::Communicator world = chorus::Communicator::init();
    rank = world.rank();
    if (world.size() != 2) {
      std::fprintf(stderr, "chorus-ud-between-calls: needs exactly 2 ranks, got %d\n", world.size());
      return 2;
    }
    // Small: one datagram each, so the lost one is the whole message.
    constexpr size_t kBytes = 200;
    constexpr int kFirst = 1, kToComputing = 2, kReply = 3;
    if (rank == 0) {
      world.send(message(kBytes, kFirst).data(), kBytes, 1, kFirst);  // its datagram is lost
      compute_for(std::chrono::milliseconds(compute_ms));
      std::vector<unsigned char> got(kBytes);
      world.recv(got.data(), kBytes, 1, kToComputing);
      check(got == message(kBytes, kToComputing), rank, "the message sent while rank 0 computed");
      world.send(message(kBytes, kReply).data(), kBytes, 1, kReply);
    } else {
      const auto start = Clock::now();
      std::vector<unsigned char> got(kBytes);
      world.recv(got.data(), kBytes, 0, kFirst);
      const double took = ms_since(start);
      check(got == message(kBytes, kFirst), rank, "the message whose datagram was lost");
      std::printf("rank 1: the lost message arrived after %.1f ms (rank 0 computes for %ld ms)\n", took, compute_ms);
      if (expect_gap) {
        check(took >= 0.8 * static_cast<double>(compute_ms), rank,
              "with caller progress the loss is repaired only after rank 0's computation");
      } else {
        check(took <= static_cast<double>(within_ms), rank,
              "the loss was repaired while rank 0 computed (took " + std::to_string(took) + " ms)");
      }
      world.send(message(kBytes, kToComputing).data(), kBytes, 0, kToComputing);
      world.recv(got.data(), kBytes, 0, kReply);
      check(got == message(kBytes, kReply), rank, "rank 0's reply after its computation");
    }
    world.barrier();
    world.finalize();
  } catch (const chorus::Error& e) {
    check(false, rank, std::string("chorus error: ") + e.what());
  }
  std::printf("rank %d: ud_between_calls: %d checks, %d failed\n", rank, g_checks, g_failed);
  return g_failed == 0 ? 0 : 1;
}
