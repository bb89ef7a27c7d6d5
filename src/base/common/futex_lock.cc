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

// The results are not checked, on purpose: EAGAIN (the word changed first)
// and EINTR are a wait's normal returns, and EFAULT/EINVAL cannot happen
// for this aligned word. If futexes are refused altogether (ENOSYS under a
// seccomp filter), every wait returns at once and lock() spins on the
// word: slower, never wrong, and a wake then has nobody asleep to miss. A
// lock has no caller to report an error to.
void FutexLock::sleep_while_taken() { (void)futex(state_, FUTEX_WAIT_PRIVATE, kTakenWithSleepers); }

void FutexLock::wake_one() { (void)futex(state_, FUTEX_WAKE_PRIVATE, 1); }

}  // namespace chorus
