#include "work.hpp"

#include <ATen/core/jit_type.h>

#include <algorithm>

namespace chorus_torch {

namespace {

// The completer's pause between looks at a request: yield first, then sleep
// up to 200 us. It never waits inside chorus: a thread blocked in
// Request::wait holds the session lock, so the caller's thread could not
// start the operation a peer is waiting for (an irecv after an isend) until
// it timed out. chorus' progress thread moves the operations; the looks
// only notice completion.
class Backoff {
 public:
  void pause() {
    constexpr int kYields = 64;
    constexpr auto kLongestPause = std::chrono::microseconds(200);
    if (++polls_ < kYields) {
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(pause_);
    pause_ = std::min(pause_ * 2, kLongestPause);
  }

 private:
  int polls_ = 0;
  std::chrono::microseconds pause_{1};
};

// Waits for a request that nobody holds a work for any more, then finishes it.
void complete_detached(chorus::Request& request, std::function<void()>& finish) {
  try {
    for (Backoff backoff; !request.test();) backoff.pause();
    if (finish) finish();
  } catch (const std::exception&) {
    // Nobody is left to tell: the communicator's next call reports the
    // failure (chorus makes it unusable).
  }
}

c10::intrusive_ptr<c10::ivalue::Future> tensor_list_future() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

}  // namespace

ChorusWork::ChorusWork(int rank, c10d::OpType type, chorus::Request request, std::vector<at::Tensor> outputs,
                       std::function<void()> finish, std::weak_ptr<WorkQueue> completer)
    : c10d::Work(rank, type),
      request_(std::move(request)),
      finish_(std::move(finish)),
      outputs_(std::move(outputs)),
      future_(tensor_list_future()),
      completer_(std::move(completer)) {}

ChorusWork::ChorusWork(int rank, c10d::OpType type, std::function<void()> body, std::vector<at::Tensor> outputs,
                       std::function<void()> finish)
    : c10d::Work(rank, type),
      body_(std::move(body)),
      finish_(std::move(finish)),
      outputs_(std::move(outputs)),
      future_(tensor_list_future()) {}

ChorusWork::~ChorusWork() {
  // Only the last reference remains: nobody else completes this work now.
  if (done_ || body_) return;  // a body work is held by the runner until it ran
  auto request = std::make_shared<chorus::Request>(std::move(request_));
  auto finish = std::make_shared<std::function<void()>>(std::move(finish_));
  if (auto completer = completer_.lock()) {
    completer->push([request, finish] { complete_detached(*request, *finish); });
  } else {
    // The group is gone or going (its finalize completes every operation):
    // wait here, so the tensors `finish` holds outlive chorus' use of them.
    complete_detached(*request, *finish);
  }
}

void ChorusWork::complete_locked(std::exception_ptr error) {
  if (!error) {
    try {
      if (finish_) finish_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  // Drop the tensors the steps captured: the work may outlive its use.
  body_ = nullptr;
  finish_ = nullptr;
  done_ = true;
  finish(error);
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

bool ChorusWork::try_complete_locked() {
  if (done_) return true;
  try {
    if (!request_.test()) return false;
    source_rank_ = request_.received().source;
  } catch (...) {
    complete_locked(std::current_exception());
    return true;
  }
  complete_locked(nullptr);
  return true;
}

void ChorusWork::complete_in_background() {
  if (body_) {
    std::lock_guard lock(completing_);
    std::exception_ptr error;
    try {
      body_();
    } catch (...) {
      error = std::current_exception();
    }
    complete_locked(error);
    return;
  }
  // Holds completing_ only while it looks, so a wait() in the caller's
  // thread never queues behind this thread's pause.
  for (Backoff backoff;; backoff.pause()) {
    std::unique_lock lock(completing_, std::try_to_lock);
    if (lock.owns_lock() && try_complete_locked()) return;
  }
}

bool ChorusWork::wait(std::chrono::milliseconds timeout) {
  if (timeout != kNoTimeout) {
    wait_at_most(timeout);
  } else if (runs_body()) {
    // Bodies run only on the runner thread, in order: running one here could
    // reorder it against the other ranks'.
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return completed_; });
  } else {
    // In the caller's thread, waiting inside chorus: it starts no operation
    // meanwhile, and a small operation takes microseconds, not a pause.
    std::lock_guard lock(completing_);
    if (!done_) {
      std::exception_ptr error;
      try {
        request_.wait();
        source_rank_ = request_.received().source;
      } catch (...) {
        error = std::current_exception();
      }
      complete_locked(error);
    }
  }
  std::unique_lock lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void ChorusWork::wait_at_most(std::chrono::milliseconds timeout) {
  // Work.wait(timeout): a bound for this wait alone, below the group's. The
  // operation stays in flight when it runs out (as Gloo's): the work still
  // completes later, and chorus' own timeout still bounds the operation.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto ran_out = [&] {
    TORCH_CHECK(false, "chorus backend: rank ", rank_, ": ", c10d::opTypeToString(opType_), " did not complete within ",
                timeout.count(), " ms (Work.wait timeout); the operation is still in flight");
  };
  if (runs_body()) {
    std::unique_lock lock(mutex_);
    if (!cv_.wait_until(lock, deadline, [this] { return completed_; })) ran_out();
    return;
  }
  for (Backoff backoff;; backoff.pause()) {
    {
      std::unique_lock lock(completing_, std::try_to_lock);
      if (lock.owns_lock() && try_complete_locked()) return;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::unique_lock lock(mutex_);
      if (!completed_) ran_out();
      return;
    }
  }
}

bool ChorusWork::isCompleted() {
  if (!runs_body()) {
    std::unique_lock lock(completing_, std::try_to_lock);
    if (lock.owns_lock()) try_complete_locked();
  }
  std::unique_lock lock(mutex_);
  return completed_;
}

bool ChorusWork::isSuccess() const {
  std::unique_lock lock(mutex_);
  return completed_ && !exception_;
}

int ChorusWork::sourceRank() const {
  std::unique_lock lock(mutex_);
  return source_rank_;
}

c10::intrusive_ptr<c10::ivalue::Future> ChorusWork::getFuture() {
  // A future completes without a wait(): from now on the completer looks
  // after this work (once).
  if (!runs_body() && !with_completer_.exchange(true)) {
    if (auto completer = completer_.lock()) {
      auto self = c10::intrusive_ptr<ChorusWork>::reclaim_copy(this);
      completer->push([self] { self->complete_in_background(); });
    }
  }
  return future_;
}

WorkQueue::WorkQueue() : thread_([this] { run(); }) {}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void WorkQueue::push(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(job));
  }
  ready_.notify_one();
}

void WorkQueue::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and every queued job ran
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

}  // namespace chorus_torch
