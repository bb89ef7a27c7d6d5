// wait_any over an array of request handles with holes, the one version for
// the C API (chorus_waitany: NULL entries) and the MPI subset (MPI_Waitany,
// MPI_Waitsome: MPI_REQUEST_NULL entries, and requests whose operation has
// already finished or never had one). The waiting itself is chorus::wait_any
// (communicator_nonblocking.cc), over the handles' chorus::Requests moved
// into one dense array and back.
//
// Header-only: libchorus_mpi, a client of libchorus' public API, uses it
// without linking anything of the library's internals.
#pragma once

#include <chorus/chorus.hpp>

#include <cstddef>
#include <optional>
#include <vector>

namespace chorus {

// `request_of(i)` is entry i's chorus::Request*, or nullptr for a hole.
// Returns the first entry whose request is not active (finished, or never
// started), else the entry whose request chorus::wait_any completed; nullopt
// when every entry is a hole. If the wait fails, `failed(i)` is called for
// the entry whose request failed (chorus::wait_any emptied it) with every
// request back in its handle, and the error is rethrown.
template <class RequestOf, class Failed>
std::optional<size_t> wait_any_of(size_t count, RequestOf&& request_of, Failed&& failed) {
  std::vector<size_t> positions;
  for (size_t i = 0; i < count; ++i) {
    Request* request = request_of(i);
    if (request == nullptr) continue;
    if (!request->active()) return i;
    positions.push_back(i);
  }
  if (positions.empty()) return std::nullopt;
  std::vector<Request> active;
  active.reserve(positions.size());
  for (size_t i : positions) active.push_back(std::move(*request_of(i)));
  auto put_back = [&] {
    for (size_t k = 0; k < positions.size(); ++k) *request_of(positions[k]) = std::move(active[k]);
  };
  size_t done = 0;
  try {
    done = wait_any(active);
  } catch (...) {
    put_back();
    for (size_t i : positions) {
      if (!request_of(i)->active()) failed(i);
    }
    throw;
  }
  put_back();
  return positions[done];
}

}  // namespace chorus
