// A stackful fiber: a function that can give the thread back in the middle
// (suspend) and be resumed later, from the same or another thread. A
// non-blocking collective runs its (blocking-style) algorithm on one, so every
// algorithm of the selection table runs non-blocking unchanged
// (docs/nonblocking.md, "Why fibers").
//
// On x86-64 a switch is a few instructions of our own (callee-saved
// registers, the stack pointer, the SSE and x87 control words); elsewhere
// ucontext, whose swapcontext also makes a system call for the signal mask on
// every switch. Stacks come from a pool, so a small operation touches no new
// page. The sanitizers are told about every switch (ASan's fake stacks, TSan's
// fibers), so sanitized builds test this code as it runs. Not thread-safe:
// one thread at a time resumes a given fiber (the session lock guarantees it).
#pragma once

#include <ucontext.h>

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>

namespace chorus::p2p {

// A fiber stack: `bytes` plus a guard page below it, mapped lazily. Kept in a
// per-thread pool when its fiber ends.
class FiberStack {
 public:
  static std::unique_ptr<FiberStack> take(size_t bytes);
  static void give_back(std::unique_ptr<FiberStack> stack);
  explicit FiberStack(size_t bytes);
  ~FiberStack();
  FiberStack(const FiberStack&) = delete;
  FiberStack& operator=(const FiberStack&) = delete;
  char* bottom() const { return base_ + guard_; }
  size_t size() const { return bytes_; }

 private:
  char* base_ = nullptr;
  size_t guard_ = 0;
  size_t bytes_ = 0;
};

class Fiber {
 public:
  Fiber(std::function<void()> body, size_t stack_bytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Runs the fiber until it suspends or its body returns. An exception that
  // leaves the body is kept and rethrown by rethrow_if_failed().
  void resume();
  // From inside the fiber: back to whoever called resume().
  static void suspend();
  // The fiber running on this thread, or nullptr.
  static Fiber* current();

  bool finished() const { return finished_; }
  void rethrow_if_failed() const {
    if (failure_) std::rethrow_exception(failure_);
  }

  // Internal: where a new fiber's stack starts (from the switch code).
  static void run(Fiber* self) noexcept;

 private:
  static void entry(unsigned int high, unsigned int low);
  void run_body() noexcept;
  // Always inlined: TSan keeps a shadow call stack per fiber, and
  // __tsan_switch_to_fiber must come right before the stack switch, with no
  // instrumented call between them; an out-of-line switch_in (at -O1) left
  // an entry on the fiber's shadow stack that the caller's then popped, and
  // TSan crashed on the corrupt stack (docs/testing.md, "Time").
  [[gnu::always_inline]] inline void switch_out();
  [[gnu::always_inline]] inline void switch_in();

  std::function<void()> body_;
  std::unique_ptr<FiberStack> stack_;
#if defined(__x86_64__)
  void* fiber_sp_ = nullptr;   // saved stack pointer of the suspended fiber
  void* caller_sp_ = nullptr;  // saved stack pointer of whoever resumed it
#else
  ucontext_t context_{};
  ucontext_t caller_{};
#endif
  Fiber* previous_ = nullptr;  // the fiber that resumed this one (nesting)
  bool started_ = false;
  bool finished_ = false;
  std::exception_ptr failure_;
  // Sanitizer bookkeeping (unused in plain builds).
  void* caller_fake_stack_ = nullptr;
  void* fiber_fake_stack_ = nullptr;
  const void* caller_stack_bottom_ = nullptr;
  size_t caller_stack_size_ = 0;
  void* tsan_fiber_ = nullptr;
  void* tsan_caller_ = nullptr;
};

}  // namespace chorus::p2p
