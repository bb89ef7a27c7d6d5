// Building chorus::Error with a formatted message. Library code never aborts:
// every failure becomes one of these and travels up to the caller.
#pragma once

#include <chorus/chorus.hpp>

#include <sstream>
#include <string>
#include <utility>

namespace chorus {

template <class... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <class... Args>
[[noreturn]] void fail(Status status, Args&&... args) {
  throw Error(status, concat(std::forward<Args>(args)...));
}

template <class... Args>
[[noreturn]] void fail_peer(Status status, int peer, Args&&... args) {
  throw Error(status, concat(std::forward<Args>(args)...), peer);
}

// strerror_r wrapper that is thread-safe and works with both GNU and XSI variants.
std::string errno_string(int err);

}  // namespace chorus
