// The one check of a user's point-to-point tag, for every front end: the C++
// API (CommunicatorImpl's send/recv/isend/irecv/probe), the C API and the MPI
// subset. A tag is 0..kMaxUserTag (the bits p2p::CallTag gives it: 2^31-1),
// or, where a receive or probe allows it, the wildcard kAnyTag (-1, which is
// also CHORUS_ANY_TAG and MPI_ANY_TAG).
//
// Header-only: libchorus_mpi, a client of libchorus' public API, uses it
// without linking anything of the library's internals.
#pragma once

#include "common/error.hpp"
#include "p2p/call_tag.hpp"

#include <chorus/chorus.hpp>

#include <string>

namespace chorus {

inline constexpr int kMaxUserTag = p2p::CallTag::kMaxUserTag;

constexpr bool is_user_tag(int tag, bool wildcard_allowed) {
  return (tag >= 0 && tag <= kMaxUserTag) || (wildcard_allowed && tag == kAnyTag);
}

// What an error says of a tag is_user_tag refuses, naming the wildcard as
// the caller's API spells it: "tag -3 outside 0..2147483647 (or kAnyTag)".
inline std::string user_tag_problem(int tag, bool wildcard_allowed, const char* wildcard = "kAnyTag") {
  return concat("tag ", tag, " outside 0..", kMaxUserTag, wildcard_allowed ? concat(" (or ", wildcard, ")") : "");
}

// The C++ and C APIs' check: throws Error(Status::invalid_argument)
// "<what>: tag -3 outside 0..2147483647 (or kAnyTag)".
inline void check_user_tag(const char* what, int tag, bool wildcard_allowed) {
  if (!is_user_tag(tag, wildcard_allowed)) [[unlikely]] {
    fail(Status::invalid_argument, what, ": ", user_tag_problem(tag, wildcard_allowed));
  }
}

}  // namespace chorus
