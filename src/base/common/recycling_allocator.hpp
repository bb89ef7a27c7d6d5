// An allocator that keeps freed single objects for the next allocation of
// the same type, for the objects every non-blocking call makes (a request's
// state, which counts its own references; the MPI request).
//
// Why: an application posts a window of requests (osu_bw: 64 isends) and
// then frees them together; glibc's per-thread cache keeps 7 blocks of a
// size, so most of a window took malloc's slow path, about 250
// instructions each (callgrind, docs/performance.md "Message rate").
//
// Each thread keeps up to kLocalKept freed objects of a type in a list of
// its own, taken and given back with no atomic instruction: a locked one
// costs about 5 ns on this project's hosts, and a pool behind a lock took
// four per object (take, give back, each a lock and an unlock), a tenth of
// a small receive's time (perf, docs/performance.md). Past that, and for a
// thread whose list is empty, a shared pool behind a FutexLock moves
// objects a batch at a time: objects may be freed on another thread (the
// progress thread) than the one that made them. A thread that exits gives
// its list to the shared pool (a pthread key's destructor); the main
// thread's stays reachable from its thread-local storage until exit.
//
// An object of more than 32 bytes starts on a cache line: a window of 64
// requests touches each object in several passes (post, deliver, wait),
// each after the window's others, so every line an object straddles is
// one more miss a pass (callgrind's cache simulation, docs/performance.md).
#pragma once

#include "common/futex_lock.hpp"

#include <pthread.h>

#include <cstddef>
#include <cstdint>
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
      Local& local = local_list();
      if (local.head != nullptr || refill(local)) {
        Node* node = local.head;
        local.head = node->next;
        --local.count;
        return reinterpret_cast<T*>(node);
      }
    }
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kAlignment}));
  }

  void deallocate(T* memory, std::size_t n) noexcept {
    if (kRecycleObjects && n == 1) {
      Local& local = local_list();
      if (local.count >= kLocalKept) spill(local);
      if (!local.registered) register_thread(local);
      local.head = ::new (static_cast<void*>(memory)) Node{local.head};
      ++local.count;
      return;
    }
    ::operator delete(memory, n * sizeof(T), std::align_val_t{kAlignment});
  }

  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const noexcept {
    return true;
  }

  // For tests: objects kept by this thread's list and by the shared pool.
  static std::size_t kept_by_this_thread() { return local_list().count; }
  static std::size_t kept_in_shared_pool() {
    Shared& shared = shared_pool();
    std::lock_guard lock(shared.mutex);
    return shared.free.size();
  }
  static constexpr std::size_t kLocalKept = 256;  // per thread and type
  static constexpr std::size_t kBatch = 64;       // moved to or from the shared pool at once
  static constexpr std::size_t kSharedKept = 4096;  // more than this go back to the heap
  static constexpr std::size_t kCacheLine = 64;
  static constexpr std::size_t kAlignment = sizeof(T) > 32 && alignof(T) < kCacheLine ? kCacheLine : alignof(T);

 private:
  struct Node {
    Node* next;
  };
  static_assert(sizeof(T) >= sizeof(Node) && alignof(T) >= alignof(Node));

  // Trivially destructible, so usable during static destruction (an object
  // may be freed then) and with no guard on each access.
  struct Local {
    Node* head;
    std::uint32_t count;
    bool registered;  // the pthread key holds it: given back at thread exit
  };
  // initial-exec: one load through %fs. The default model for a shared
  // library calls __tls_get_addr, which cost about 27 instructions a call
  // here (callgrind), more than the list itself. The few bytes this takes
  // fit the static TLS that glibc keeps for libraries loaded by dlopen (the
  // torch extension), as transports/ofi/stall_escape.hpp's already do.
  static Local& local_list() {
    static thread_local Local local __attribute__((tls_model("initial-exec"))) = {nullptr, 0, false};
    return local;
  }

  struct Shared {
    FutexLock mutex;
    std::vector<void*> free;
    pthread_key_t key{};
    bool have_key = false;
  };
  // Never destroyed: an object may be freed during static destruction; what
  // the pool holds stays reachable.
  static Shared& shared_pool() {
    static auto* shared = [] {
      auto* made = new Shared;
      made->have_key = pthread_key_create(&made->key, &give_back_at_exit) == 0;
      return made;
    }();
    return *shared;
  }

  // Takes up to a batch from the shared pool; false if it had none.
  static bool refill(Local& local) {
    Shared& shared = shared_pool();
    std::lock_guard lock(shared.mutex);
    if (shared.free.empty()) return false;
    for (std::size_t moved = 0; moved < kBatch && !shared.free.empty(); ++moved) {
      local.head = ::new (shared.free.back()) Node{local.head};
      shared.free.pop_back();
      ++local.count;
    }
    return true;
  }

  // Gives a batch to the shared pool (the heap, past its limit).
  static void spill(Local& local) noexcept {
    Shared& shared = shared_pool();
    std::lock_guard lock(shared.mutex);
    for (std::size_t moved = 0; moved < kBatch && local.head != nullptr; ++moved) {
      Node* node = local.head;
      local.head = node->next;
      --local.count;
      if (!keep_shared(shared, node)) ::operator delete(static_cast<void*>(node), sizeof(T), std::align_val_t{kAlignment});
    }
  }

  static bool keep_shared(Shared& shared, void* memory) noexcept {
    if (shared.free.size() >= kSharedKept) return false;
    try {
      shared.free.push_back(memory);
      return true;
    } catch (...) {
      return false;  // no room to remember it
    }
  }

  // Asked once a thread: if the key cannot be had or set, that thread's
  // list is lost when it exits (at most kLocalKept objects).
  static void register_thread(Local& local) noexcept {
    Shared& shared = shared_pool();
    if (shared.have_key) (void)pthread_setspecific(shared.key, &local);
    local.registered = true;
  }

  // The key's destructor is this library's code: a library unloaded with
  // dlclose while threads that used it still run would leave the key
  // pointing at nothing (Python, torch's host, never unloads extensions).
  static void give_back_at_exit(void* value) {
    auto& local = *static_cast<Local*>(value);
    while (local.head != nullptr) spill(local);
    local.registered = false;  // a later free on this thread registers again
  }
};

}  // namespace chorus
