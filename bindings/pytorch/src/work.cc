#include "work.hpp"

#include <ATen/core/jit_type.h>

#include <algorithm>

namespace chorus_torch {

namespace {

// Waits for `request` by polling it, never blocking inside chorus: a thread
// blocked in Request::wait holds the session lock, so the caller's thread
// could not start the operation a peer is waiting for (an irecv after an
// isend) until it timed out. chorus' progress thread moves the operations;
// the polls only notice completion (yield first, then sleep up to 200 us).
void wait_polling(chorus::Request& request) {
  constexpr int kYields = 64;
  constexpr auto kLongestPause = std::chrono::microseconds(200);
  int polls = 0;
  auto pause = std::chrono::microseconds(1);
  while (!request.test()) {
    if (++polls < kYields) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kLongestPause);
  }
}

c10::intrusive_ptr<c10::ivalue::Future> tensor_list_future() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

}  // namespace

ChorusWork::ChorusWork(int rank, c10d::OpType type, chorus::Request request, std::vector<at::Tensor> outputs,
                       std::function<void()> finish)
    : c10d::Work(rank, type),
      request_(std::move(request)),
      finish_(std::move(finish)),
      outputs_(std::move(outputs)),
      future_(tensor_list_future()) {}

ChorusWork::ChorusWork(int rank, c10d::OpType type, std::function<void()> body, std::vector<at::Tensor> outputs,
                       std::function<void()> finish)
    : c10d::Work(rank, type),
      body_(std::move(body)),
      finish_(std::move(finish)),
      outputs_(std::move(outputs)),
      future_(tensor_list_future()) {}

void ChorusWork::complete(bool may_block) {
  std::lock_guard lock(completing_);
  if (done_) return;
  std::exception_ptr error;
  try {
    if (body_) {
      body_();
    } else {
      if (may_block) {
        request_.wait();
      } else {
        wait_polling(request_);
      }
      source_rank_ = request_.received().source;
    }
    if (finish_) finish_();
  } catch (...) {
    error = std::current_exception();
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

bool ChorusWork::wait(std::chrono::milliseconds /*timeout: chorus' own, set from the group's*/) {
  if (runs_body()) {
    // Bodies run only on the runner thread, in order: running one here could
    // reorder it against the other ranks'.
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return completed_; });
  } else {
    complete(/*may_block=*/true);
  }
  std::unique_lock lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

bool ChorusWork::isCompleted() {
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

WorkQueue::WorkQueue() : thread_([this] { run(); }) {}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

void WorkQueue::push(c10::intrusive_ptr<ChorusWork> work) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(work));
  }
  ready_.notify_one();
}

void WorkQueue::run() {
  for (;;) {
    c10::intrusive_ptr<ChorusWork> work;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is complete
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work->complete();
  }
}

}  // namespace chorus_torch
