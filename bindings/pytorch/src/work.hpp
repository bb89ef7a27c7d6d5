// The Work objects of the chorus process group and the threads that complete
// them. A Work either holds a chorus::Request (a non-blocking chorus call
// already started) or a body to run (an operation chorus has only as a
// blocking call), plus a `finish` step run after it (copy results back into
// non-contiguous tensors, unpack lists, divide for AVG). Its future
// (get_future(), what DDP's comm hooks chain on) completes when it does.
#pragma once

#include <chorus/chorus.hpp>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace chorus_torch {

class ChorusWork final : public c10d::Work {
 public:
  // A started non-blocking call; `finish` runs once it completed.
  ChorusWork(int rank, c10d::OpType type, chorus::Request request, std::vector<at::Tensor> outputs,
             std::function<void()> finish = {});
  // A blocking call to make, in order, on the runner thread.
  ChorusWork(int rank, c10d::OpType type, std::function<void()> body, std::vector<at::Tensor> outputs,
             std::function<void()> finish = {});

  // Completes the work in this thread if it is not complete yet: waits for
  // its request (or runs its body), then finishes. Never throws: an error
  // is kept for wait() and set on the future. `may_block`: wait inside
  // chorus (the caller's thread, which starts no operation meanwhile)
  // instead of polling (the completer).
  void complete(bool may_block = false);

  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  bool isCompleted() override;
  bool isSuccess() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  bool runs_body() const { return static_cast<bool>(body_); }

 private:
  std::mutex completing_;  // held by the thread completing it (the waiter's or the completer's)
  bool done_ = false;
  chorus::Request request_;
  std::function<void()> body_;
  std::function<void()> finish_;
  std::vector<at::Tensor> outputs_;
  int source_rank_ = -1;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// One thread that completes works in the order they were queued: it waits
// for requests (so futures complete without anybody calling wait()) or runs
// blocking bodies (so they run in the same order on every rank).
class WorkQueue {
 public:
  WorkQueue();
  // Completes what is still queued, then stops.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;
  void push(c10::intrusive_ptr<ChorusWork> work);

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<c10::intrusive_ptr<ChorusWork>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace chorus_torch
