// Minimal leveled logging to stderr. CHORUS_LOG_LEVEL=error|warn|info|debug
// (default warn). Lines are prefixed with "chorus[rank]" once the rank is known.
#pragma once

#include "common/error.hpp"

namespace chorus::log {

enum class Level : int { error = 0, warn = 1, info = 2, debug = 3 };

Level level();
void set_rank(int rank);
void write(Level level, const std::string& message);

template <class... Args>
void error(Args&&... args) {
  write(Level::error, concat(std::forward<Args>(args)...));
}
template <class... Args>
void warn(Args&&... args) {
  if (level() >= Level::warn) write(Level::warn, concat(std::forward<Args>(args)...));
}
template <class... Args>
void info(Args&&... args) {
  if (level() >= Level::info) write(Level::info, concat(std::forward<Args>(args)...));
}
template <class... Args>
void debug(Args&&... args) {
  if (level() >= Level::debug) write(Level::debug, concat(std::forward<Args>(args)...));
}

}  // namespace chorus::log
