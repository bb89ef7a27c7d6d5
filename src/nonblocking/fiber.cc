#include "nonblocking/fiber.hpp"

#include "common/error.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#if defined(__SANITIZE_ADDRESS__)
#define CHORUS_ASAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CHORUS_ASAN_FIBERS 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define CHORUS_TSAN_FIBERS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHORUS_TSAN_FIBERS 1
#endif
#endif

#if defined(CHORUS_ASAN_FIBERS)
extern "C" void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old);
#endif
#if defined(CHORUS_TSAN_FIBERS)
extern "C" void* __tsan_get_current_fiber();
extern "C" void* __tsan_create_fiber(unsigned flags);
extern "C" void __tsan_destroy_fiber(void* fiber);
extern "C" void __tsan_switch_to_fiber(void* fiber, unsigned flags);
#endif

namespace chorus::nb {

namespace {
thread_local Fiber* current_fiber = nullptr;

size_t page_size() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}
}  // namespace

Fiber::Fiber(std::function<void()> body, size_t stack_bytes) : body_(std::move(body)) {
  const size_t page = page_size();
  stack_bytes_ = (stack_bytes + page - 1) / page * page;
  mapped_bytes_ = stack_bytes_ + page;
  stack_ = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stack_ == MAP_FAILED) {
    stack_ = nullptr;
    fail(Status::internal, "mmap of a ", mapped_bytes_, "-byte stack for a non-blocking operation failed: ",
         errno_string(errno));
  }
  // The lowest page traps a stack overflow instead of corrupting the heap.
  if (mprotect(stack_, page, PROT_NONE) != 0) {
    const int err = errno;
    munmap(stack_, mapped_bytes_);
    stack_ = nullptr;
    fail(Status::internal, "mprotect of a fiber stack's guard page failed: ", errno_string(err));
  }
  if (getcontext(&context_) != 0) {
    const int err = errno;
    munmap(stack_, mapped_bytes_);
    stack_ = nullptr;
    fail(Status::internal, "getcontext for a non-blocking operation failed: ", errno_string(err));
  }
  context_.uc_stack.ss_sp = static_cast<char*>(stack_) + page;
  context_.uc_stack.ss_size = stack_bytes_;
  context_.uc_link = nullptr;  // entry() never returns: it switches back itself
  const auto self = reinterpret_cast<uintptr_t>(this);
  makecontext(&context_, reinterpret_cast<void (*)()>(&Fiber::entry), 2, static_cast<unsigned int>(self >> 32),
              static_cast<unsigned int>(self & 0xffffffffu));
#if defined(CHORUS_TSAN_FIBERS)
  tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

Fiber::~Fiber() {
#if defined(CHORUS_TSAN_FIBERS)
  if (tsan_fiber_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
#endif
  if (stack_ != nullptr) munmap(stack_, mapped_bytes_);
}

Fiber* Fiber::current() { return current_fiber; }

void Fiber::resume() {
  if (finished_) return;
  previous_ = current_fiber;
  current_fiber = this;
#if defined(CHORUS_ASAN_FIBERS)
  __sanitizer_start_switch_fiber(&caller_fake_stack_, static_cast<char*>(stack_) + (mapped_bytes_ - stack_bytes_),
                                 stack_bytes_);
#endif
#if defined(CHORUS_TSAN_FIBERS)
  tsan_caller_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
  // swapcontext only fails for a bad context, which ours is not; a failure
  // would leave the fiber unrun, reported as such below.
  const int switched = swapcontext(&caller_, &context_);
#if defined(CHORUS_ASAN_FIBERS)
  __sanitizer_finish_switch_fiber(caller_fake_stack_, nullptr, nullptr);
#endif
  current_fiber = previous_;
  if (switched != 0) {
    finished_ = true;
    failure_ = std::make_exception_ptr(
        Error(Status::internal, concat("swapcontext into a non-blocking operation failed: ", errno_string(errno))));
  }
}

void Fiber::suspend() {
  Fiber* self = current_fiber;
  if (self == nullptr) fail(Status::internal, "Fiber::suspend outside a fiber");
  self->switch_out();
#if defined(CHORUS_ASAN_FIBERS)
  // Resumed, maybe by another thread: learn that thread's stack.
  __sanitizer_finish_switch_fiber(self->fiber_fake_stack_, &self->caller_stack_bottom_, &self->caller_stack_size_);
#endif
}

void Fiber::switch_out() {
#if defined(CHORUS_ASAN_FIBERS)
  // A finished fiber never comes back: its fake stack may go.
  __sanitizer_start_switch_fiber(finished_ ? nullptr : &fiber_fake_stack_, caller_stack_bottom_, caller_stack_size_);
#endif
#if defined(CHORUS_TSAN_FIBERS)
  __tsan_switch_to_fiber(tsan_caller_, 0);
#endif
  swapcontext(&context_, &caller_);
}

void Fiber::entry(unsigned int high, unsigned int low) {
  auto* self = reinterpret_cast<Fiber*>((static_cast<uintptr_t>(high) << 32) | static_cast<uintptr_t>(low));
#if defined(CHORUS_ASAN_FIBERS)
  __sanitizer_finish_switch_fiber(nullptr, &self->caller_stack_bottom_, &self->caller_stack_size_);
#endif
  self->run_body();
  self->finished_ = true;
  self->switch_out();
}

void Fiber::run_body() noexcept {
  try {
    body_();
  } catch (...) {
    failure_ = std::current_exception();
  }
}

}  // namespace chorus::nb
