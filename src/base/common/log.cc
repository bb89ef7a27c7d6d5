#include "common/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace chorus::log {

namespace {
std::atomic<int> g_rank{-1};

Level parse_level() {
  const char* text = std::getenv("CHORUS_LOG_LEVEL");
  if (text == nullptr || *text == '\0') return Level::warn;
  if (std::strcmp(text, "error") == 0) return Level::error;
  if (std::strcmp(text, "warn") == 0) return Level::warn;
  if (std::strcmp(text, "info") == 0) return Level::info;
  if (std::strcmp(text, "debug") == 0) return Level::debug;
  // Logging must work before config validation runs, so say it here once.
  std::fprintf(stderr, "chorus: CHORUS_LOG_LEVEL=\"%s\" is not one of error, warn, info, debug; using warn\n", text);
  return Level::warn;
}
}  // namespace

Level level() {
  static const Level current = parse_level();
  return current;
}

void set_rank(int rank) { g_rank.store(rank); }

void write(Level level, const std::string& message) {
  static constexpr const char* names[] = {"error", "warn", "info", "debug"};
  char prefix[64];
  int rank = g_rank.load();
  if (rank >= 0) {
    std::snprintf(prefix, sizeof prefix, "chorus[%d] %s: ", rank, names[static_cast<int>(level)]);
  } else {
    std::snprintf(prefix, sizeof prefix, "chorus %s: ", names[static_cast<int>(level)]);
  }
  // One write() per line so ranks' lines do not interleave mid-line.
  std::string line = std::string(prefix) + message + "\n";
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace chorus::log
