// Building chorus::Error with a formatted message. Library code never aborts:
// every failure becomes one of these and travels up to the caller.
#pragma once

#include <chorus/chorus.hpp>

#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
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

// Inline forms of datatype_size() and to_string(Collective) for the call
// path, where a call through the library's symbol table costs as much as
// the lookup itself. An invalid value gives 0 / "invalid-collective" (the
// public functions throw for it, after validation nothing reaches them).
constexpr size_t element_size(DataType dtype) {
  switch (dtype) {
    case DataType::int8:
    case DataType::uint8:
      return 1;
    case DataType::int16:
    case DataType::uint16:
    case DataType::float16:
    case DataType::bfloat16:
      return 2;
    case DataType::int32:
    case DataType::uint32:
    case DataType::float32:
      return 4;
    case DataType::int64:
    case DataType::uint64:
    case DataType::float64:
      return 8;
  }
  return 0;
}

// At namespace scope: a table inside a constexpr function is built on the
// stack at every call.
inline constexpr std::string_view kCollectiveNames[] = {
    "allreduce", "broadcast", "barrier",  "reduce",     "allgather", "reduce_scatter", "alltoall", "gather",
    "gatherv",   "scatter",   "scatterv", "allgatherv", "alltoallv", "scan",           "exscan"};
static_assert(std::size(kCollectiveNames) == kNumCollectives);

constexpr std::string_view collective_name(Collective op) {
  const auto index = static_cast<unsigned>(op);
  return index < std::size(kCollectiveNames) ? kCollectiveNames[index] : std::string_view("invalid-collective");
}

// strerror_r wrapper that is thread-safe and works with both GNU and XSI variants.
std::string errno_string(int err);

}  // namespace chorus
