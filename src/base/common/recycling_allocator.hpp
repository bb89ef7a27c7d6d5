// An allocator that keeps freed single objects for the next allocation of
// the same type, for the objects every non-blocking call makes (with
// std::allocate_shared: control block and object in one block).
//
// Why: an application posts a window of requests (osu_bw: 64 isends) and
// then frees them together; glibc's per-thread cache keeps 7 blocks of a
// size, so most of a window took malloc's slow path, about 250
// instructions each (callgrind, docs/performance.md "Message rate"). A
// free list under a lock costs a fraction of that; objects may be freed
// on another thread (the progress thread) than the one that made them.
// The lock is a FutexLock: std::mutex's two calls into libc cost about 55
// instructions per allocation or free, more than the rest of it.
#pragma once

#include "common/futex_lock.hpp"

#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

namespace chorus {

// Under AddressSanitizer every object goes back to the heap, so a use after
// free stays visible to it.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kRecycleObjects = false;
#else
inline constexpr bool kRecycleObjects = true;
#endif

template <class T>
class RecyclingAllocator {
 public:
  using value_type = T;

  RecyclingAllocator() noexcept = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>&) noexcept {}  // NOLINT: rebinding converts implicitly

  T* allocate(std::size_t n) {
    if (kRecycleObjects && n == 1) {
      Pool& pool = pool_of();
      std::lock_guard lock(pool.mutex);
      if (!pool.free.empty()) {
        void* memory = pool.free.back();
        pool.free.pop_back();
        return static_cast<T*>(memory);
      }
    }
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignof(T)}));
  }

  void deallocate(T* memory, std::size_t n) noexcept {
    if (kRecycleObjects && n == 1) {
      Pool& pool = pool_of();
      std::lock_guard lock(pool.mutex);
      if (pool.free.size() < kKept) {
        try {
          pool.free.push_back(memory);
          return;
        } catch (...) {
          // no room to remember it: give it back below
        }
      }
    }
    ::operator delete(memory, n * sizeof(T), std::align_val_t{alignof(T)});
  }

  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }

 private:
  static constexpr std::size_t kKept = 4096;  // free objects kept per type; more go back to the heap

  struct Pool {
    FutexLock mutex;
    std::vector<void*> free;
  };
  // Never destroyed: an object may be freed during static destruction; what
  // the pool holds stays reachable.
  static Pool& pool_of() {
    static auto* pool = new Pool;
    return *pool;
  }
};

}  // namespace chorus
