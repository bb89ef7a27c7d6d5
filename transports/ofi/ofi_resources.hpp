// RAII owners for libfabric objects and the error helper every call site
// uses, so each fi_* call is checked and reported the same way.
#pragma once

#include "common/error.hpp"
#include "transports/ofi/ofi_library.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include <memory>

namespace chorus::transport::ofi {

// Throws Error(Status::transport) "<what> failed: <fi_strerror> (-<code>)".
[[noreturn]] inline void fail_call(const std::string& what, ssize_t ret, int peer = -1) {
  throw Error(Status::transport, concat("libfabric: ", what, " failed: ", library::strerror(static_cast<int>(-ret)), " (",
                                        ret, ")"),
              peer);
}

inline void check(ssize_t ret, const std::string& what, int peer = -1) {
  if (ret != 0) fail_call(what, ret, peer);
}

// Closes any fid on destruction (fi_close), logging nothing: teardown errors
// have no caller to report to.
struct FidCloser {
  void operator()(fid* f) const {
    if (f != nullptr) fi_close(f);
  }
};
template <class T>
struct Closer {
  void operator()(T* object) const {
    if (object != nullptr) fi_close(&object->fid);
  }
};
template <class T>
using Owned = std::unique_ptr<T, Closer<T>>;

struct InfoDeleter {
  void operator()(fi_info* info) const { library::freeinfo(info); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoDeleter>;

}  // namespace chorus::transport::ofi
