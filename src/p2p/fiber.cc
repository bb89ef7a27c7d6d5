#include "p2p/fiber.hpp"

#include "common/error.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

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

#if defined(__x86_64__)
// chorus_fiber_switch(save, next): pushes the callee-saved registers and the
// SSE/x87 control words, stores the stack pointer in *save, switches to
// `next` and pops the same from there. A new stack is laid out as if it had
// been switched away from just before chorus_fiber_start, with the Fiber in
// r12 (see Fiber::Fiber).
extern "C" void chorus_fiber_switch(void** save, void* next);
extern "C" void chorus_fiber_start();
extern "C" void chorus_fiber_main(void* self) { chorus::p2p::Fiber::run(static_cast<chorus::p2p::Fiber*>(self)); }
asm(R"(
  .text
  .globl chorus_fiber_switch
  .type chorus_fiber_switch,@function
chorus_fiber_switch:
  .cfi_startproc
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size chorus_fiber_switch,.-chorus_fiber_switch

  .globl chorus_fiber_start
  .type chorus_fiber_start,@function
chorus_fiber_start:
  .cfi_startproc
  .cfi_undefined rip
  movq %r12, %rdi
  call chorus_fiber_main
  ud2
  .cfi_endproc
  .size chorus_fiber_start,.-chorus_fiber_start
)");
#endif

namespace chorus::p2p {

namespace {
thread_local Fiber* current_fiber = nullptr;
// Stacks of ended fibers, per thread (a stack is given back by whoever
// resumed its fiber last). A few are enough: 64 outstanding operations keep
// at most 64 in use, and the pool only saves the map and the page faults.
constexpr size_t kPooledStacks = 16;
thread_local std::vector<std::unique_ptr<FiberStack>> stack_pool;

size_t page_size() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}
}  // namespace

FiberStack::FiberStack(size_t bytes) {
  guard_ = page_size();
  bytes_ = (bytes + guard_ - 1) / guard_ * guard_;
  void* mapping =
      mmap(nullptr, bytes_ + guard_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) {
    fail(Status::internal, "mmap of a ", bytes_ + guard_, "-byte stack for a non-blocking operation failed: ",
         errno_string(errno));
  }
  base_ = static_cast<char*>(mapping);
  // The lowest page traps a stack overflow instead of corrupting memory.
  if (mprotect(base_, guard_, PROT_NONE) != 0) {
    const int err = errno;
    munmap(base_, bytes_ + guard_);
    fail(Status::internal, "mprotect of a fiber stack's guard page failed: ", errno_string(err));
  }
}

FiberStack::~FiberStack() { munmap(base_, bytes_ + guard_); }

std::unique_ptr<FiberStack> FiberStack::take(size_t bytes) {
  for (auto it = stack_pool.begin(); it != stack_pool.end(); ++it) {
    if ((*it)->size() >= bytes) {
      std::unique_ptr<FiberStack> stack = std::move(*it);
      stack_pool.erase(it);
      return stack;
    }
  }
  return std::make_unique<FiberStack>(bytes);
}

void FiberStack::give_back(std::unique_ptr<FiberStack> stack) {
  if (stack && stack_pool.size() < kPooledStacks) stack_pool.push_back(std::move(stack));
}

Fiber::Fiber(std::function<void()> body, size_t stack_bytes)
    : body_(std::move(body)), stack_(FiberStack::take(stack_bytes)) {
#if defined(__x86_64__)
  // The new stack as chorus_fiber_switch leaves one: control words, r15..r12
  // (r12 = this), rbx, rbp, and the return address chorus_fiber_start, at
  // an address where the ret leaves the stack 16-byte aligned for its call.
  auto top = reinterpret_cast<uintptr_t>(stack_->bottom() + stack_->size()) & ~uintptr_t{15};
  auto* slot = reinterpret_cast<uint64_t*>(top - 24);  // return address
  slot[0] = reinterpret_cast<uint64_t>(&chorus_fiber_start);
  slot[-1] = 0;                                    // rbp
  slot[-2] = 0;                                    // rbx
  slot[-3] = reinterpret_cast<uint64_t>(this);    // r12
  slot[-4] = 0;                                    // r13
  slot[-5] = 0;                                    // r14
  slot[-6] = 0;                                    // r15
  const uint32_t mxcsr = 0x1f80;                   // the defaults: all exceptions masked, round to nearest
  const uint16_t fpu_control = 0x037f;
  std::memcpy(&slot[-7], &mxcsr, sizeof mxcsr);
  std::memcpy(reinterpret_cast<char*>(&slot[-7]) + 4, &fpu_control, sizeof fpu_control);
  fiber_sp_ = &slot[-7];
#else
  if (getcontext(&context_) != 0) {
    fail(Status::internal, "getcontext for a non-blocking operation failed: ", errno_string(errno));
  }
  context_.uc_stack.ss_sp = stack_->bottom();
  context_.uc_stack.ss_size = stack_->size();
  context_.uc_link = nullptr;  // entry() never returns: it switches back itself
  const auto self = reinterpret_cast<uintptr_t>(this);
  makecontext(&context_, reinterpret_cast<void (*)()>(&Fiber::entry), 2, static_cast<unsigned int>(self >> 32),
              static_cast<unsigned int>(self & 0xffffffffu));
#endif
#if defined(CHORUS_TSAN_FIBERS)
  tsan_fiber_ = __tsan_create_fiber(0);
#endif
}

Fiber::~Fiber() {
#if defined(CHORUS_TSAN_FIBERS)
  if (tsan_fiber_ != nullptr) __tsan_destroy_fiber(tsan_fiber_);
#endif
  // A fiber destroyed before it ended leaves frames on its stack: that
  // stack is not reused.
  if (finished_ || !started_) FiberStack::give_back(std::move(stack_));
}

Fiber* Fiber::current() { return current_fiber; }

void Fiber::resume() {
  if (finished_) return;
  started_ = true;
  previous_ = current_fiber;
  current_fiber = this;
#if defined(CHORUS_ASAN_FIBERS)
  __sanitizer_start_switch_fiber(&caller_fake_stack_, stack_->bottom(), stack_->size());
#endif
#if defined(CHORUS_TSAN_FIBERS)
  tsan_caller_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsan_fiber_, 0);
#endif
  switch_in();
#if defined(CHORUS_ASAN_FIBERS)
  __sanitizer_finish_switch_fiber(caller_fake_stack_, nullptr, nullptr);
#endif
  current_fiber = previous_;
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

inline void Fiber::switch_in() {
#if defined(__x86_64__)
  chorus_fiber_switch(&caller_sp_, fiber_sp_);
#else
  // swapcontext fails only for a bad context, which ours is not.
  if (swapcontext(&caller_, &context_) != 0) {
    finished_ = true;
    failure_ = std::make_exception_ptr(
        Error(Status::internal, concat("swapcontext into a non-blocking operation failed: ", errno_string(errno))));
  }
#endif
}

inline void Fiber::switch_out() {
#if defined(CHORUS_ASAN_FIBERS)
  // A finished fiber never comes back: its fake stack may go.
  __sanitizer_start_switch_fiber(finished_ ? nullptr : &fiber_fake_stack_, caller_stack_bottom_, caller_stack_size_);
#endif
#if defined(CHORUS_TSAN_FIBERS)
  __tsan_switch_to_fiber(tsan_caller_, 0);
#endif
#if defined(__x86_64__)
  chorus_fiber_switch(&fiber_sp_, caller_sp_);
#else
  swapcontext(&context_, &caller_);
#endif
}

void Fiber::run(Fiber* self) noexcept {
#if defined(CHORUS_ASAN_FIBERS)
  __sanitizer_finish_switch_fiber(nullptr, &self->caller_stack_bottom_, &self->caller_stack_size_);
#endif
  self->run_body();
  self->finished_ = true;
  self->switch_out();
}

void Fiber::entry(unsigned int high, unsigned int low) {
  run(reinterpret_cast<Fiber*>((static_cast<uintptr_t>(high) << 32) | static_cast<uintptr_t>(low)));
}

void Fiber::run_body() noexcept {
  try {
    body_();
  } catch (...) {
    failure_ = std::current_exception();
  }
}

}  // namespace chorus::p2p
