#include "common/futex_lock.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace chorus {

namespace {
long futex(std::atomic<uint32_t>& word, int operation, uint32_t value) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free);
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), operation, value, nullptr, nullptr, 0);
}
}  // namespace

// EAGAIN (the word changed first) and EINTR are the waits' normal returns;
// EFAULT/EINVAL/ENOSYS cannot happen for a private futex on this aligned
// word. Whatever it returns, lock() looks at the word again before it
// sleeps again, so no return is lost; a lock cannot report an error.
void FutexLock::sleep_while_taken() { (void)futex(state_, FUTEX_WAIT_PRIVATE, kTakenWithSleepers); }

// Wakes one sleeper, which takes the lock or sleeps again; a failed wake
// (impossible, as above) would leave it asleep until the next unlock.
void FutexLock::wake_one() { (void)futex(state_, FUTEX_WAKE_PRIVATE, 1); }

}  // namespace chorus
