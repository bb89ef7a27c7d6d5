/*
 * uverbs_write_time: an LD_PRELOAD library that times every write() to a
 * /dev/infiniband/uverbs* file descriptor and reports at exit.
 *
 * Why: a software RDMA provider (rxe, soft-RoCE) rings its send doorbell
 * with a write() of an empty post_send command to that descriptor, and the
 * kernel then runs the message's whole protocol work inside that system call
 * (the requester, the loopback, the peer's responder, the completions). So
 * the time a write() takes is what one posted message costs in the kernel,
 * separate from the library's own user-space path. bench/verbs-vs-ucx
 * --steps preloads it into both libraries' programs (docs/performance.md).
 *
 * Only writes to uverbs descriptors are timed; every other write() passes
 * straight through. At exit each process prints one line to stderr:
 *   uverbs_write_time: pid P: N writes, total T us, mean M us, median D us
 * (nothing when it made no such write). Thread-safe: counters are atomic.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kMaxFd = 4096, kBuckets = 1024 };  /* 0.25 us buckets up to 256 us; the last collects the rest */
enum { kUnknown = 0, kUverbs = 1, kOther = 2 };

static _Atomic unsigned char fd_kind[kMaxFd];
static _Atomic uint64_t writes, total_ns, buckets[kBuckets];

static ssize_t (*real_write)(int, const void*, size_t);
static int (*real_close)(int);

/* Resolved before main(); a write() from an earlier constructor resolves
 * them itself (then still on the one thread a process has that early). */
__attribute__((constructor)) static void resolve(void) {
  real_write = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Looked up once per descriptor; close() forgets it (the number is reused). */
static int is_uverbs(int fd) {
  unsigned char kind = atomic_load_explicit(&fd_kind[fd], memory_order_relaxed);
  if (kind == kUnknown) {
    char path[64], target[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t length = readlink(path, target, sizeof target - 1);
    target[length > 0 ? length : 0] = '\0';
    kind = strncmp(target, "/dev/infiniband/uverbs", 22) == 0 ? kUverbs : kOther;
    atomic_store_explicit(&fd_kind[fd], kind, memory_order_relaxed);
  }
  return kind == kUverbs;
}

ssize_t write(int fd, const void* buffer, size_t bytes) {
  if (real_write == NULL) resolve();
  if (fd < 0 || fd >= kMaxFd || !is_uverbs(fd)) return real_write(fd, buffer, bytes);
  uint64_t start = now_ns();
  ssize_t result = real_write(fd, buffer, bytes);
  uint64_t took = now_ns() - start;
  atomic_fetch_add_explicit(&writes, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&total_ns, took, memory_order_relaxed);
  uint64_t bucket = took / 250;
  atomic_fetch_add_explicit(&buckets[bucket < kBuckets ? bucket : kBuckets - 1], 1, memory_order_relaxed);
  return result;
}

int close(int fd) {
  if (real_close == NULL) resolve();
  if (fd >= 0 && fd < kMaxFd) atomic_store_explicit(&fd_kind[fd], kUnknown, memory_order_relaxed);
  return real_close(fd);
}

__attribute__((destructor)) static void report(void) {
  uint64_t count = atomic_load(&writes);
  if (count == 0) return;
  uint64_t seen = 0, median_bucket = 0;
  for (uint64_t b = 0; b < kBuckets; ++b) {
    seen += atomic_load(&buckets[b]);
    if (seen * 2 >= count) {
      median_bucket = b;
      break;
    }
  }
  double total_us = (double)atomic_load(&total_ns) / 1e3;
  fprintf(stderr, "uverbs_write_time: pid %d: %llu writes, total %.0f us, mean %.2f us, median %.2f us\n", (int)getpid(),
          (unsigned long long)count, total_us, total_us / (double)count, (double)median_bucket * 0.25 + 0.125);
}
