// The non-blocking operations of p2p::Progress: starting, stepping and
// failing them, waits and tests on them, and what finalize does with those
// still outstanding (complete, settle, cancel). The loop of every wait, the
// engine's waits and the progress thread: progress.cc.
#include "p2p/progress.hpp"

#include "common/error.hpp"
#include "common/log.hpp"
#include "p2p/engine_impl.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace chorus::p2p {

namespace {
// Room for an algorithm, the reduction kernels, an exception's unwinding and
// a sanitizer's red zones; mapped lazily, so unused pages cost nothing.
constexpr size_t kFiberStackBytes = 256 * 1024;
}  // namespace

// --- non-blocking operations ----------------------------------------------------

void DriverMutex::signal(int eventfd) {
  const uint64_t one = 1;
  if (write(eventfd, &one, sizeof one) < 0 && errno != EAGAIN) {
    log::warn("waking the progress thread after a call failed: ", errno_string(errno));
  }
}

void Progress::serve_between_calls() {
  if (between_calls_) ensure_thread();
}

void Progress::add(Operation& operation, bool large) {
  operation.sequence = next_sequence_++;
  operations_.push_back(OperationRef::share(&operation));
  walk_again_ = true;  // advance() steps a new operation even if no request finishes
  outstanding_.fetch_add(1);
  ensure_thread();
  wake_thread(large, /*collective=*/true);
}

void Progress::add_point_to_point(Operation& operation, Slot& pending, bool large) {
  operation.sequence = next_sequence_++;
  point_to_point_.push_back(&operation);
  // An index, 32 bits: more than 4 billion outstanding operations do not fit in memory.
  operation.listed_at = static_cast<uint32_t>(point_to_point_.size() - 1);
  pending.waiter = &operation;  // listed first: a failed push_back names no waiter
  outstanding_.fetch_add(1);
  ensure_thread();
  wake_thread(large);
}

// Inlined (it completes every receive): out of line it was a call frame of
// about 15 instructions on a path of a few hundred.
[[gnu::always_inline]] inline void Progress::unlist(Operation& operation) {
  const uint32_t at = operation.listed_at;
  Operation* const last = point_to_point_.back();
  point_to_point_[at] = last;
  last->listed_at = at;
  point_to_point_.pop_back();
  operation.listed_at = Operation::kNotListed;
  drop_outstanding();
}

void Progress::finish_point_to_point(Operation& operation) noexcept {
  // Read before finish(): once `complete` is set, an operation Progress does
  // not own may be freed by its Request's thread.
  const bool adopted = operation.adopted;
  finish(operation);
  if (adopted) drop(&operation);
}

void Progress::detach(Operation& operation) noexcept {
  std::lock_guard lock(*mutex_);
  if (!operation.complete.load(std::memory_order_relaxed) && operation.listed_at != Operation::kNotListed) {
    operation.adopted = true;  // its Request's reference is Progress' now
    return;
  }
  drop(&operation);  // complete, or a collective (its list holds a reference of its own)
}

bool Progress::withdraw_receive(Operation& operation) {
  if (operation.complete.load(std::memory_order_relaxed) || operation.listed_at == Operation::kNotListed) return false;
  if (!engine_.withdraw_receive(operation.request)) return false;
  operation.request = Request{};
  unlist(operation);
  operation.received = Received{};
  // Read before `complete` is set, as finish_point_to_point does.
  const bool adopted = operation.adopted;
  operation.complete.store(true, std::memory_order_release);
  if (adopted) drop(&operation);
  return true;
}

int Progress::complete_finished_point_to_point() {
  int moved = 0;
  advancing_ = true;
  try {
    // Completing one may finish others (an error abandons every request):
    // they are named in the engine's list again, and taken in the next round.
    while (!engine_.finished_waiters().empty()) {
      finished_batch_.swap(engine_.finished_waiters());
      for (size_t i = 0; i < finished_batch_.size(); ++i) {
        auto* operation = static_cast<Operation*>(finished_batch_[i]);
        if (operation == nullptr || operation->listed_at == Operation::kNotListed) continue;
        if (step(*operation) != Step::completed) continue;  // cannot happen: its request finished
        unlist(*operation);
        finish_point_to_point(*operation);
        ++moved;
      }
      finished_batch_.clear();
    }
  } catch (...) {
    finished_batch_.clear();  // step() does not throw; should it, those left stay listed, and wait() drives them
    advancing_ = false;
    throw;
  }
  advancing_ = false;
  return moved;
}

void Progress::complete_delivered(void* waiter, const Completion& done) noexcept {
  auto* operation = static_cast<Operation*>(waiter);
  if (operation->listed_at == Operation::kNotListed) return;  // cannot happen: only a listed one is a waiter
  operation->completion = done;
  operation->request = Request{};  // as take_finished leaves it
  unlist(*operation);
  finish_point_to_point(*operation);
}

std::vector<OperationRef> Progress::outstanding_operations() const {
  std::vector<OperationRef> all(operations_);
  // Under the lock: a listed one's owner drops it only under the lock
  // (detach), so the reference is taken while it is alive.
  for (Operation* operation : point_to_point_) all.push_back(OperationRef::share(operation));
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a->sequence < b->sequence; });
  return all;
}

void Progress::remove(Operation& operation) {
  if (operation.listed_at != Operation::kNotListed) {
    // Failed before its request finished: the engine must not name it any more.
    engine_.clear_waiter(operation.request, &operation);
    std::replace(finished_batch_.begin(), finished_batch_.end(), static_cast<void*>(&operation),
                 static_cast<void*>(nullptr));
    unlist(operation);
    finish_point_to_point(operation);
    return;
  }
  auto it = std::find_if(operations_.begin(), operations_.end(),
                         [&](const OperationRef& candidate) { return candidate.get() == &operation; });
  if (it == operations_.end()) return;
  const OperationRef keep = std::move(*it);  // alive through finish()
  operations_.erase(it);
  drop_outstanding();
  finish(*keep);
}

void Progress::start_collective(Operation& operation, std::function<void()> body, bool large) {
  if (!operation.collective) operation.collective = std::make_unique<CollectiveState>();
  operation.collective->fiber = std::make_unique<Fiber>(std::move(body), kFiberStackBytes);
  add(operation, large);
  // Run it to its first wait now: its first messages leave before the
  // caller goes back to computing.
  if (step(operation) == Step::completed) remove(operation);
}

void Progress::start_point_to_point(Operation& operation, bool large) {
  // One already complete (an eager send the transport copied, a receive
  // whose message had arrived) never joins the list, nor wakes the thread.
  // One look at its slot: pending, or finished (step() takes it).
  Slot* pending = engine_.pending_slot(operation.request);
  if (pending == nullptr) {
    step(operation);
    return finish(operation);
  }
  add_point_to_point(operation, *pending, large);
}

Progress::Step Progress::step(Operation& operation) {
  if (!operation.fiber()) {
    if (!engine_.finished(operation.request)) return Step::waiting;
    try {
      engine_.take_finished(operation.request, &operation.completion);
    } catch (const std::exception& e) {
      operation.error = as_error(e);
    }
    return Step::completed;
  }
  CollectiveState& collective = *operation.collective;
  if (collective.awaited.valid() && !collective.abort && !engine_.finished(collective.awaited)) return Step::waiting;
  Operation* const outer = running_;
  running_ = &operation;
  collective.fiber->resume();
  running_ = outer;
  // A fiber that waits on memory (the shm board), not on an engine request,
  // moves only when resumed: advance() must walk again, wherever it ran.
  if (!collective.fiber->finished()) {
    walk_again_ = true;
    return Step::advanced;
  }
  try {
    collective.fiber->rethrow_if_failed();
  } catch (const std::exception& e) {
    operation.error = as_error(e);
  }
  collective.fiber.reset();  // its stack goes now, not with the last Request
  return Step::completed;
}

void Progress::finish(Operation& operation) noexcept {
  if (operation.on_complete) {
    try {
      operation.on_complete(operation);
    } catch (const std::exception& e) {
      if (!operation.error) operation.error = as_error(e);
    }
  }
  if (operation.error && failure_note_) {
    try {
      failure_note_(OperationRef::share(&operation));
    } catch (const std::exception& e) {
      log::warn("keeping the failure of ", operation.name, " for finalize's report failed: ", e.what());
    }
  }
  operation.complete.store(true, std::memory_order_release);
}

int Progress::advance() {
  // Not re-entered, and never from inside an operation's own fiber. Every
  // poll of every wait comes here: the cheap tests first.
  const bool point_to_point_finished = !engine_.finished_waiters().empty();
  if ((operations_.empty() && !point_to_point_finished) || advancing_ || Fiber::current() != nullptr) return 0;
  int moved = point_to_point_finished ? complete_finished_point_to_point() : 0;
  if (operations_.empty()) return moved;
  const uint64_t finished = engine_.finished_requests();
  if (finished == finished_seen_ && !walk_again_) return moved;
  finished_seen_ = finished;  // what finishes during the walk makes another
  walk_again_ = false;
  advancing_ = true;
  size_t i = 0;
  try {
    while (i < operations_.size()) {
      const Operation& listed = *operations_[i];
      // A point-to-point operation whose request is pending (step() would
      // say so), without touching its reference count.
      if (!listed.fiber() && !engine_.finished(listed.request)) {
        ++i;
        continue;
      }
      const OperationRef operation = operations_[i];  // alive through its step and finish
      const Step result = step(*operation);
      if (result == Step::completed) {
        operations_.erase(operations_.begin() + static_cast<std::ptrdiff_t>(i));
        drop_outstanding();
        finish(*operation);
        ++moved;
        continue;
      }
      if (result == Step::advanced) ++moved;
      ++i;
    }
  } catch (...) {
    advancing_ = false;
    walk_again_ = true;  // the rest were not stepped
    throw;
  }
  advancing_ = false;
  return moved;
}

void Progress::fail(Operation& operation, const Error& error) {
  if (operation.complete.load(std::memory_order_relaxed)) return;
  if (operation.fiber()) {
    // The algorithm throws at its wait and unwinds on its own stack.
    operation.collective->abort = error;
    if (step(operation) != Step::completed) {
      walk_again_ = true;
      return;
    }
  } else if (!operation.error) {
    operation.error = error;
  }
  remove(operation);
}

void Progress::fail_all(const Error& error) {
  // A copy: failing an operation removes it from the list.
  for (auto& operation : outstanding_operations()) fail(*operation, error);
}

bool Progress::drive(Operation& operation) {
  if (operation.complete.load(std::memory_order_acquire)) return true;
  const p2p::Request pending = operation.fiber() ? operation.collective->awaited : operation.request;
  try {
    if (pending.valid()) {
      engine_.progress_until(pending, [&] { return operation.complete.load(std::memory_order_relaxed); });
    } else {
      engine_.progress();
    }
    advance();
  } catch (const std::exception& e) {
    // A timeout or a failure the probe reported while waiting for this
    // operation's request: it belongs to this operation.
    fail(operation, as_error(e));
  }
  return operation.complete.load(std::memory_order_acquire);
}

void Progress::wait(Operation& operation) {
  if (!operation.complete.load(std::memory_order_acquire)) {
    std::unique_lock lock(*mutex_);
    while (!drive(operation)) {
    }
  }
  if (operation.error) throw *operation.error;
}

bool Progress::test(Operation& operation) {
  if (!operation.complete.load(std::memory_order_acquire)) {
    std::unique_lock lock(*mutex_);
    try {
      engine_.progress();
      advance();
    } catch (const std::exception& e) {
      fail_all(as_error(e));
    }
    if (!operation.complete.load(std::memory_order_acquire)) {
      check_stalled(Clock::now());
      if (!operation.complete.load(std::memory_order_acquire)) return false;
    }
  }
  if (operation.error) throw *operation.error;
  return true;
}

size_t Progress::wait_any(const std::vector<Operation*>& operations) {
  auto first_complete = [&]() -> std::optional<size_t> {
    for (size_t i = 0; i < operations.size(); ++i) {
      if (operations[i]->complete.load(std::memory_order_acquire)) return i;
    }
    return std::nullopt;
  };
  if (auto done = first_complete()) return *done;
  std::unique_lock lock(*mutex_);
  for (;;) {
    // Look again under the lock: the progress thread completes operations
    // under it, so the last incomplete one may have finished while this
    // thread waited for the lock, leaving no target below.
    if (auto done = first_complete()) return *done;
    // Progress towards one incomplete operation, stopping as soon as any completes.
    Operation* target = nullptr;
    for (Operation* operation : operations) {
      if (!operation->complete.load(std::memory_order_relaxed)) {
        target = operation;
        break;
      }
    }
    if (target == nullptr) continue;  // all completed since the look above: it returns now
    const p2p::Request pending = target->fiber() ? target->collective->awaited : target->request;
    try {
      if (pending.valid()) {
        engine_.progress_until(pending, [&] { return first_complete().has_value(); });
      } else {
        engine_.progress();
      }
      advance();
    } catch (const std::exception& e) {
      fail(*target, as_error(e));
    }
  }
}

void Progress::complete_all(std::unique_lock<DriverMutex>& lock, const void* owner) {
  (void)lock;  // held by the caller
  for (;;) {
    OperationRef next;  // owned: it may complete, and its Request go, while it is driven
    for (const OperationRef& operation : operations_) {
      if (owner == nullptr || operation->owner == owner) {
        next = operation;
        break;
      }
    }
    if (!next) {
      for (Operation* operation : point_to_point_) {
        if (owner == nullptr || operation->owner == owner) {
          next = OperationRef::share(operation);
          break;
        }
      }
    }
    if (!next) return;
    while (!drive(*next)) {
    }
  }
}

void Progress::settle(std::chrono::milliseconds quiet) {
  auto last_event = Clock::now();
  while (outstanding() > 0) {
    int events = 0;
    try {
      events = poll();
    } catch (const std::exception& e) {
      fail_all(as_error(e));  // a broken transport: nothing more completes
      return;
    }
    const auto now = Clock::now();
    if (events > 0) {
      last_event = now;
      continue;
    }
    if (now - last_event >= quiet) return;
    idle(quiet - (now - last_event), true);
  }
}

void Progress::cancel_all(const std::function<Error(const Operation&)>& why) {
  const std::vector<OperationRef> doomed = outstanding_operations();
  // Every engine request and abort first, then one advance completes them
  // all, each with its own error (a completion may abandon the rest).
  for (const auto& operation : doomed) {
    Error error = why(*operation);
    if (operation->fiber()) {
      operation->collective->abort = std::move(error);
    } else if (operation->request.valid()) {
      engine_.cancel(operation->request, error);
    } else if (!operation->error) {
      operation->error = std::move(error);
    }
  }
  walk_again_ = true;  // aborts and errors set above, whether or not a request finished
  try {
    advance();
  } catch (const std::exception& e) {
    fail_all(as_error(e));
  }
  for (const auto& operation : outstanding_operations()) {
    const CollectiveState* collective = operation->collective.get();
    fail(*operation, collective != nullptr && collective->abort ? *collective->abort : why(*operation));
  }
}

void Progress::check_stalled(Clock::time_point now) {
  if (outstanding() == 0) return;
  if (now >= next_probe_) {
    // Stalled: an operation has waited for one message for a probe
    // interval; the most recent such stall sets the pace.
    bool stalled = false;
    Clock::time_point latest_stall{};
    for (const auto& operation : operations_) {
      if (operation->fiber() && operation->collective->awaited.valid() &&
          now - operation->collective->awaited_since >= ProgressRules::kFailureProbeInterval) {
        stalled = true;
        latest_stall = std::max(latest_stall, operation->collective->awaited_since);
      }
    }
    next_probe_ = stalled ? ProgressRules::next_stalled_probe(latest_stall, now)
                          : now + std::chrono::duration_cast<Clock::duration>(ProgressRules::kFailureProbeInterval);
    if (std::optional<Error> failure = probe_failure(stalled)) {
      fail_all(*failure);
      return;
    }
  }
  for (auto& operation : std::vector<OperationRef>(operations_)) {
    const CollectiveState* collective = operation->fiber() ? operation->collective.get() : nullptr;
    if (collective != nullptr && collective->awaited.valid() &&
        now - collective->awaited_since >= engine_.settings().timeout) {
      fail(*operation, engine_.timeout_error(collective->awaited));
    }
  }
}

}  // namespace chorus::p2p
