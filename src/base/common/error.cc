#include "common/error.hpp"

#include <cstring>

namespace chorus {

namespace {
// Picks the right strerror_r flavour at compile time.
[[maybe_unused]] const char* pick(int result, const char* buffer) { return result == 0 ? buffer : "unknown error"; }
[[maybe_unused]] const char* pick(const char* result, const char*) { return result; }
}  // namespace

std::string errno_string(int err) {
  char buffer[256] = {0};
  return pick(strerror_r(err, buffer, sizeof buffer), buffer);
}

size_t datatype_size(DataType dtype) {
  if (const size_t bytes = element_size(dtype); bytes != 0) return bytes;
  throw Error(Status::invalid_argument, concat("invalid datatype value ", static_cast<int>(dtype)));
}

std::string_view to_string(DataType dtype) {
  static constexpr std::string_view names[] = {"int8",   "uint8",  "int16",   "uint16",   "int32",   "uint32",
                                               "int64",  "uint64", "float16", "bfloat16", "float32", "float64"};
  auto index = static_cast<unsigned>(dtype);
  return index < std::size(names) ? names[index] : std::string_view("invalid-datatype");
}

std::string_view to_string(ReduceOp op) {
  static constexpr std::string_view names[] = {"sum", "prod", "min", "max"};
  auto index = static_cast<unsigned>(op);
  return index < std::size(names) ? names[index] : std::string_view("invalid-op");
}

std::string_view to_string(Collective op) { return collective_name(op); }

std::string_view to_string(Status status) {
  static constexpr std::string_view names[] = {
      "CHORUS_SUCCESS",        "CHORUS_ERR_INVALID_ARGUMENT", "CHORUS_ERR_CONFIG",    "CHORUS_ERR_TRANSPORT",
      "CHORUS_ERR_TIMEOUT",    "CHORUS_ERR_PEER_FAILED",      "CHORUS_ERR_BOOTSTRAP", "CHORUS_ERR_UNSUPPORTED",
      "CHORUS_ERR_FINALIZED",  "CHORUS_ERR_TRUNCATED",        "CHORUS_ERR_INTERNAL"};
  auto index = static_cast<unsigned>(status);
  return index < std::size(names) ? names[index] : std::string_view("CHORUS_ERR_UNKNOWN");
}

}  // namespace chorus
