#include "common/log.hpp"

#include "common/config.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <unistd.h>

namespace chorus::log {

namespace {
std::atomic<int> g_rank{-1};

std::optional<Level> level_named(std::string_view name) {
  if (name == "error") return Level::error;
  if (name == "warn") return Level::warn;
  if (name == "info") return Level::info;
  if (name == "debug") return Level::debug;
  return std::nullopt;
}

Level parse_level() {
  constexpr std::string_view kDefault = config::default_text(config::kVariables, "CHORUS_LOG_LEVEL");
  const char* text = std::getenv("CHORUS_LOG_LEVEL");
  if (text == nullptr || *text == '\0') return *level_named(kDefault);
  if (auto level = level_named(text)) return *level;
  // Logging must work before config validation runs, so say it here once.
  std::fprintf(stderr, "chorus: CHORUS_LOG_LEVEL=\"%s\" is not one of error, warn, info, debug; using %.*s\n", text,
               static_cast<int>(kDefault.size()), kDefault.data());
  return *level_named(kDefault);
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
