// Small helpers of the transports that move bytes themselves (shm, tcp):
// where a read lands, and an eager message copied into one buffer.
#pragma once

#include "common/error.hpp"
#include "transports/transport.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace chorus::transport {

// The address of byte `offset` of `local`, after checking that `bytes` from
// there stay inside it; `transport` names the caller in the error.
inline uint8_t* local_read_target(const char* transport, MemoryRegion& local, size_t offset, size_t bytes) {
  if (offset > local.length() || bytes > local.length() - offset) {
    fail(Status::internal, transport, ": read of ", bytes, " bytes at offset ", offset, " overruns a region of ",
         local.length(), " bytes");
  }
  return static_cast<uint8_t*>(local.base()) + offset;
}

// Header and payload of an eager message copied into one buffer, for a
// message that has to wait.
inline std::vector<uint8_t> joined_copy(const void* header, size_t header_bytes, const void* payload,
                                        size_t payload_bytes) {
  std::vector<uint8_t> copy(header_bytes + payload_bytes);
  if (header_bytes != 0) std::memcpy(copy.data(), header, header_bytes);
  if (payload_bytes != 0) std::memcpy(copy.data() + header_bytes, payload, payload_bytes);
  return copy;
}

}  // namespace chorus::transport
