// RAII owners for verbs objects and the error helpers every call site uses,
// so each ibv_* call is checked and reported the same way (rc_pingpong style:
// one call, one check, one message naming what failed and for which peer).
#pragma once

#include "common/error.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <concepts>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

namespace chorus::transport::verbs {

// Throws Error(Status::transport) "verbs: <what> failed: <strerror> (errno N)".
// Verbs calls report failure either by returning an errno value or by
// returning NULL/-1 with errno set; callers pass whichever applies.
[[noreturn]] inline void fail_errno(std::string_view what, int error_number, int peer = -1) {
  throw Error(Status::transport,
              concat("verbs: ", what, " failed: ", std::strerror(error_number), " (errno ", error_number, ")"), peer);
}

// For calls that return 0 or an errno value (ibv_modify_qp, ibv_post_*, ...).
inline void check_rc(int rc, std::string_view what, int peer = -1) {
  if (rc != 0) fail_errno(what, rc > 0 ? rc : errno, peer);
}

// The same with the text built only on failure, for the data path: building
// "ibv_post_send (eager, 12 bytes, to rank 1)" through a stream on every post
// cost more than the post itself (perf in the lab, 2026-11-26).
template <std::invocable Describe>
inline void check_rc(int rc, Describe&& describe, int peer = -1) {
  if (rc == 0) [[likely]] return;
  const int error_number = rc > 0 ? rc : errno;  // before describe() may touch errno
  fail_errno(describe(), error_number, peer);
}

// For calls that return a pointer, NULL with errno on failure.
template <class T>
T* check_ptr(T* object, std::string_view what, int peer = -1) {
  if (object == nullptr) fail_errno(what, errno != 0 ? errno : EINVAL, peer);
  return object;
}

// Teardown cannot report to anyone: destroy calls are not checked here, and a
// failure (EBUSY from a resource still in use) would be a chorus bug caught by
// the leak checks in the lab.
template <auto Destroy>
struct Destroyer {
  template <class T>
  void operator()(T* object) const {
    if (object != nullptr) Destroy(object);
  }
};
using ContextPtr = std::unique_ptr<ibv_context, Destroyer<ibv_close_device>>;
using PdPtr = std::unique_ptr<ibv_pd, Destroyer<ibv_dealloc_pd>>;
using MrPtr = std::unique_ptr<ibv_mr, Destroyer<ibv_dereg_mr>>;
using ChannelPtr = std::unique_ptr<ibv_comp_channel, Destroyer<ibv_destroy_comp_channel>>;
using CqPtr = std::unique_ptr<ibv_cq, Destroyer<ibv_destroy_cq>>;
using QpPtr = std::unique_ptr<ibv_qp, Destroyer<ibv_destroy_qp>>;
using SrqPtr = std::unique_ptr<ibv_srq, Destroyer<ibv_destroy_srq>>;
using DeviceListPtr = std::unique_ptr<ibv_device*, Destroyer<ibv_free_device_list>>;

}  // namespace chorus::transport::verbs
