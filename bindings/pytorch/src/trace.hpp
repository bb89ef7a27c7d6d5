// CHORUS_TORCH_TRACE=1: the backend's creation step by step on stderr, and a
// native backtrace if the process dies of SIGSEGV (Python's faulthandler
// shows only the Python frames). A diagnostic for a crash inside
// init_process_group, as torch 2.11 shows (docs/pytorch.md); off by default.
#pragma once

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace chorus_torch {

inline bool tracing() {
  static const bool on = [] {
    const char* value = std::getenv("CHORUS_TORCH_TRACE");
    return value != nullptr && value[0] != '\0' && value[0] != '0';
  }();
  return on;
}

inline void trace(const char* step) {
  if (!tracing()) return;
  std::fprintf(stderr, "chorus_torch trace (pid %d): %s\n", static_cast<int>(getpid()), step);
  std::fflush(stderr);
}

// Installed at import when tracing: prints the native frames, then dies of
// the same signal (the default action), so the exit status stays SIGSEGV.
inline void install_crash_backtrace() {
  if (!tracing()) return;
  std::signal(SIGSEGV, [](int signal_number) {
    static const char header[] = "chorus_torch trace: SIGSEGV, native backtrace:\n";
    void* frames[64];
    const int count = backtrace(frames, 64);
    (void)!write(STDERR_FILENO, header, sizeof header - 1);
    backtrace_symbols_fd(frames, count, STDERR_FILENO);
    std::signal(signal_number, SIG_DFL);
    std::raise(signal_number);
  });
}

}  // namespace chorus_torch
