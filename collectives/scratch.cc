#include "collectives/collectives.hpp"

#include "common/error.hpp"

#include <cstdint>
#include <cstdlib>

namespace chorus::coll {

void* Scratch::get(int slot, size_t bytes) {
  if (slot < 0 || slot >= 4) fail(Status::internal, "scratch slot ", slot, " outside 0..3");
  Buffer& buffer = buffers_[slot];
  if (buffer.bytes >= bytes && buffer.data != nullptr) return buffer.data;
  if (bytes > (SIZE_MAX >> 1)) fail(Status::internal, "collective scratch of ", bytes, " bytes asked for (size overflow)");
  // Grow to the next power of two so a sweep of sizes reallocates rarely.
  size_t capacity = 4096;
  while (capacity < bytes) capacity *= 2;
  void* data = nullptr;
  int error = posix_memalign(&data, 64, capacity);
  if (error != 0) fail(Status::internal, "cannot allocate ", capacity, " bytes of collective scratch: ", errno_string(error));
  if (buffer.data != nullptr && engine() != nullptr) engine()->forget_memory(buffer.data, buffer.bytes);
  std::free(buffer.data);
  buffer = Buffer{data, capacity};
  if (engine() != nullptr) engine()->persist_memory(data, capacity);
  return data;
}

void Scratch::release_all() {
  for (Buffer& buffer : buffers_) {
    if (buffer.data != nullptr && engine() != nullptr) engine()->forget_memory(buffer.data, buffer.bytes);
    std::free(buffer.data);
    buffer = Buffer{};
  }
}

Scratch::~Scratch() { release_all(); }

}  // namespace chorus::coll
