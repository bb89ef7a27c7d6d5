// A stackful fiber: a function that can give the thread back in the middle
// (suspend) and be resumed later, from the same or another thread. A
// non-blocking collective runs its (blocking-style) algorithm on one, so every
// algorithm of the selection table runs non-blocking unchanged
// (docs/nonblocking.md, "Why fibers").
//
// Built on ucontext; the sanitizers are told about every switch (ASan's fake
// stacks, TSan's fibers), so sanitized builds test this code as it runs.
// Not thread-safe: one thread at a time resumes a given fiber (the session
// lock guarantees it).
#pragma once

#include <ucontext.h>

#include <cstddef>
#include <exception>
#include <functional>

namespace chorus::nb {

class Fiber {
 public:
  // The stack is `stack_bytes` plus a guard page, mapped lazily.
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

 private:
  static void entry(unsigned int high, unsigned int low);
  void run_body() noexcept;
  void switch_out();

  std::function<void()> body_;
  void* stack_ = nullptr;  // the mapping, guard page first
  size_t mapped_bytes_ = 0;
  size_t stack_bytes_ = 0;
  ucontext_t context_{};
  ucontext_t caller_{};
  Fiber* previous_ = nullptr;  // the fiber that resumed this one (nesting)
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

}  // namespace chorus::nb
