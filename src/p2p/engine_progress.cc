// The engine's waiting: the progress loop of wait() (spin, then block on the
// transport's fd), the timeout and its message, the failure probe, and
// flushing sends before finalize.
#include "p2p/engine_impl.hpp"

#include <poll.h>
#include <sched.h>

#include <algorithm>

namespace chorus::p2p {

namespace {

constexpr auto kFailureProbeInterval = std::chrono::seconds(1);
constexpr int kEmptyPollsPerClockRead = 32;

}  // namespace

Completion Engine::Impl::wait(Request& request) {
  if (!request.finished_send()) {
    Slot& slot = lookup(request);
    if (!finished(slot)) progress_until(slot, [&] { return finished(slot); });
  }
  Completion done;
  reap(request, &done);
  return done;
}

void Engine::Impl::wait_all(std::span<Request> requests) {
  for (Request& request : requests) {
    if (request.valid()) wait(request);
  }
}

void Engine::Impl::progress_until(const Request& request, const std::function<bool()>& stop) {
  if (request.finished_send()) return;
  const Slot& slot = lookup(request);
  const uint32_t generation = request.generation;
  progress_until(slot, [&] { return slot.generation != generation || finished(slot) || stop(); });
}

void Engine::Impl::flush_sends(std::chrono::milliseconds linger, std::chrono::milliseconds limit) noexcept {
  const auto start = Clock::now();
  try {
    for (;;) {
      const auto elapsed = Clock::now() - start;
      if (elapsed >= limit || (elapsed >= linger && !transport_.sends_pending())) return;
      if (poll_transport() == 0) sched_yield();
    }
  } catch (const std::exception&) {
    // A broken peer or endpoint: nothing more can be delivered.
  }
}

std::string Engine::Impl::describe_wait(const Slot& slot) const {
  if (slot.kind == Slot::Kind::send) {
    return slot.state == Slot::State::awaiting_fin
               ? concat("rank ", slot.peer, " to read a ", slot.capacity, "-byte rendezvous send")
               : concat("a send to rank ", slot.peer);
  }
  if (slot.state == Slot::State::reading) {
    return concat("RDMA reads of a ", slot.read_total, "-byte message from rank ", slot.result.source);
  }
  if (slot.peer == kAnySource) return "a message from any rank";
  return concat("a message from rank ", slot.peer);
}

Error Engine::Impl::timeout_error(const Slot& slot) {
  std::string seconds = concat(std::chrono::duration<double>(settings_.timeout).count());
  const int peer = slot.state == Slot::State::reading ? slot.result.source : slot.peer;
  const std::string transport_state = peer >= 0 && peer < size_ ? transport_.describe_peer(peer) : std::string();
  return Error(Status::timeout,
               concat("rank ", rank_, " timed out after ", seconds, " s (CHORUS_TIMEOUT) waiting for ",
                      describe_wait(slot), " (", CallTag::describe(slot.tag),
                      "); the peer may have died, stalled, or called a different collective",
                      transport_state.empty() ? "" : "; transport: ", transport_state),
               slot.peer);
}

// A long wait asks the launcher whether a rank has failed (at most once per
// interval), so survivors learn of a death in about a second, not after
// CHORUS_TIMEOUT.
template <class Describe>
void Engine::Impl::probe_for_failures(const Describe& describe, Clock::time_point now, Clock::time_point& next_probe) {
  if (!failure_probe_ || now < next_probe) return;
  next_probe = now + kFailureProbeInterval;
  if (std::optional<Error> failure = failure_probe_()) {
    throw Error(failure->status(), concat("rank ", rank_, " stopped waiting for ", describe().what, ": ", failure->what()),
                failure->peer());
  }
}

// The progress loop of every wait. Reading the clock costs as much as an
// empty poll of shared memory (more in a VM), so it is read only every few
// dozen empty polls: the first read starts the timeout and the spin window,
// and a later one restarts the spin window if anything happened in between.
template <class Done, class Timeout, class Describe>
void Engine::Impl::progress_loop(Done done, const Timeout& timeout, const Describe& describe, bool blocking) {
  Clock::time_point deadline, spin_until, next_probe;
  bool clock_started = false;
  int empty_polls = 0;
  bool progressed = false;
  while (!done()) {
    if (poll_transport() + (progress_hook_ ? progress_hook_() : 0) > 0) {
      progressed = true;
      empty_polls = 0;
      continue;
    }
    if (!oversubscribed_ && ++empty_polls < kEmptyPollsPerClockRead) continue;
    empty_polls = 0;
    const auto now = Clock::now();
    if (!clock_started) {
      clock_started = true;
      deadline = now + settings_.timeout;
      next_probe = now + kFailureProbeInterval;
      progressed = true;
    }
    if (progressed) {
      spin_until = now + settings_.spin;
      progressed = false;
    }
    if (now >= deadline) throw timeout();
    probe_for_failures(describe, now, next_probe);
    if (oversubscribed_ || now >= spin_until) idle(deadline - now, blocking);
  }
}

template <class Done>
void Engine::Impl::progress_until(const Slot& slot, Done done) {
  progress_loop(
      done, [&] { return timeout_error(slot); },
      [&] { return Waiting{slot.peer, concat(describe_wait(slot), " (", CallTag::describe(slot.tag), ")")}; }, true);
}

void Engine::Impl::wait_until(const std::function<bool()>& done, const std::function<Waiting()>& waiting_for) {
  auto timeout = [&] {
    const Waiting waiting = waiting_for();
    return Error(Status::timeout,
                 concat("rank ", rank_, " timed out after ", std::chrono::duration<double>(settings_.timeout).count(),
                        " s (CHORUS_TIMEOUT) waiting for ", waiting.what,
                        "; the peer may have died, stalled, or called a different collective"),
                 waiting.peer);
  };
  // What is awaited is written to memory, not sent: no transport event wakes
  // a sleeper, so idle only yields.
  progress_loop(done, timeout, waiting_for, false);
}

// Nothing to do: block on the transport's fd if it has one, else yield.
void Engine::Impl::idle(Clock::duration remaining, bool blocking) {
  int fd = blocking ? transport_.wait_fd() : -1;
  if (fd >= 0 && transport_.arm()) {
    // Short slices keep the timeout check and stray wakeups cheap.
    auto slice = std::min<Clock::duration>(remaining, std::chrono::milliseconds(100));
    int ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(slice).count());
    pollfd descriptor{fd, POLLIN, 0};
    ++counters_.blocked_waits;
    if (::poll(&descriptor, 1, ms) < 0 && errno != EINTR) {
      fail(Status::internal, "poll() on the transport's wait fd failed: ", errno_string(errno));
    }
    return;
  }
  sched_yield();
}

}  // namespace chorus::p2p
