// copy-window: how long memcpy and chorus' copy_bytes take for one size at
// every distance (destination minus source, modulo 4 KiB) in a range.
//
// glibc 2.36 copies from 2 KiB up with `rep movsb` where the CPU has
// ERMS/FSRM; on AMD Zen that runs 10-25x slower when the destination starts
// 1..31 bytes after the source modulo 4 KiB. copy_bytes (common/copy.hpp)
// leaves that window to vector moves. This program shows the window on the
// machine it runs on, and what copy_bytes costs in and out of it
// (docs/performance.md, "Copies that rep movsb makes slow").
#include "common/copy.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Options {
  size_t bytes = 4096;
  int first = -8;
  int last = 72;
  int step = 4;
  int repeats = 2000;
};

void usage(FILE* out) {
  std::fprintf(out,
               "usage: copy-window [--bytes B] [--from D] [--to D] [--step S] [--repeats N]\n"
               "  Times memcpy and copy_bytes (chorus' copy, common/copy.hpp) of B bytes\n"
               "  (default 4096) with the destination D bytes after the source modulo 4 KiB,\n"
               "  for D from --from to --to (default -8..72) in steps of --step (4); each\n"
               "  time is the best of 5 means over N copies (default 2000). Pin it\n"
               "  (taskset -c 0) on a quiet machine. Prints: distance, memcpy us,\n"
               "  copy_bytes us, memcpy/copy_bytes.\n");
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      usage(stdout);
      std::exit(0);
    }
    if (i + 1 >= argc) return false;
    const long value = std::strtol(argv[++i], nullptr, 10);
    if (arg == "--bytes" && value > 0) o.bytes = static_cast<size_t>(value);
    else if (arg == "--from") o.first = static_cast<int>(value);
    else if (arg == "--to") o.last = static_cast<int>(value);
    else if (arg == "--step" && value > 0) o.step = static_cast<int>(value);
    else if (arg == "--repeats" && value > 0) o.repeats = static_cast<int>(value);
    else return false;
  }
  return o.first <= o.last;
}

using Copy = void* (*)(void*, const void*, size_t);

// Best of 5 means, in microseconds. `copy` is called through a volatile
// pointer so the compiler cannot replace memcpy by its own inline copy.
double time_copies(Copy function, void* dst, const void* src, size_t bytes, int repeats) {
  Copy volatile copy = function;
  double best = 1e30;
  for (int sample = 0; sample < 5; ++sample) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) {
      copy(dst, src, bytes);
      asm volatile("" ::: "memory");
    }
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / repeats);
  }
  return best;
}

void* chorus_copy(void* dst, const void* src, size_t bytes) {
  chorus::copy_bytes(dst, src, bytes);
  return dst;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    usage(stderr);
    return 2;
  }
  const size_t span = o.bytes + 2 * 4096;
  std::vector<unsigned char> source(span + 4096, 1), target(span + 8192, 2);
  // The source at the start of a page; destinations at a page start plus the distance.
  auto page_up = [](unsigned char* p) {
    return reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(p) + 4095) & ~uintptr_t{4095});
  };
  unsigned char* src = page_up(source.data());
  unsigned char* page = page_up(target.data()) + 4096;
  std::printf("# copy-window: %zu bytes, destination minus source modulo 4 KiB from %d to %d\n", o.bytes, o.first,
              o.last);
  std::printf("%9s %11s %14s %8s\n", "distance", "memcpy(us)", "copy_bytes(us)", "ratio");
  for (int d = o.first; d <= o.last; d += o.step) {
    unsigned char* dst = page + d;  // d may be negative: one page of room before
    const double plain = time_copies(&std::memcpy, dst, src, o.bytes, o.repeats);
    const double ours = time_copies(&chorus_copy, dst, src, o.bytes, o.repeats);
    if (std::memcmp(dst, src, o.bytes) != 0) {
      std::fprintf(stderr, "copy-window: the copy at distance %d is wrong\n", d);
      return 1;
    }
    std::printf("%9d %11.3f %14.3f %8.2f\n", d, plain, ours, plain / ours);
  }
  return 0;
}
