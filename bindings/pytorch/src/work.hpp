// The Work objects of the chorus process group and the threads that complete
// them. A Work either holds a chorus::Request (a non-blocking chorus call
// already started) or a body to run (an operation chorus has only as a
// blocking call), plus a `finish` step run after it (copy results back into
// non-contiguous tensors, unpack lists, divide for AVG; it also keeps the
// tensors chorus works on alive). Its future (get_future(), what DDP's comm
// hooks chain on) completes when it does.
//
// A started call is completed by whoever needs it first: the caller's
// wait(), an isCompleted() that finds it done, or, once get_future() was
// asked for, the completer thread. A work nobody waits for and whose future
// nobody asked for is handed to the completer when it is destroyed, so its
// results still land and its tensors live until chorus is done with them.
// (A small blocking all_reduce thus never wakes another thread: the
// completer used to take every work and make the caller's wait() queue
// behind its polling.)
#pragma once

#include <chorus/chorus.hpp>

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace chorus_torch {

// One thread that runs jobs in the order they were queued.
class WorkQueue {
 public:
  WorkQueue();
  // Runs what is still queued, then stops.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;
  void push(std::function<void()> job);

 private:
  void run();
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

class ChorusWork final : public c10d::Work {
 public:
  // A started non-blocking call; `finish` runs once it completed. The
  // completer (held weakly: a work may outlive its group) takes it when its
  // future is asked for or when it is dropped unfinished.
  ChorusWork(int rank, c10d::OpType type, chorus::Request request, std::vector<at::Tensor> outputs,
             std::function<void()> finish, std::weak_ptr<WorkQueue> completer);
  // A blocking call to make, in order, on the runner thread.
  ChorusWork(int rank, c10d::OpType type, std::function<void()> body, std::vector<at::Tensor> outputs,
             std::function<void()> finish = {});
  ~ChorusWork() override;

  // Runner: runs the body. Completer: polls the request (never blocking
  // inside chorus, see work.cc) until this work is complete. Never throws:
  // an error is kept for wait() and set on the future.
  void complete_in_background();

  // Without a timeout it waits as long as the operation takes (bounded by
  // the group's timeout inside chorus); with one it throws once it runs out.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  bool isCompleted() override;
  bool isSuccess() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  bool runs_body() const { return static_cast<bool>(body_); }

 private:
  // With completing_ held: one non-blocking look at the request; completes
  // the work if it is done. True when the work is complete.
  bool try_complete_locked();
  // Work.wait(timeout): polls until complete or the timeout runs out (throws).
  void wait_at_most(std::chrono::milliseconds timeout);
  // With completing_ held: runs `finish`, completes the work and its future.
  void complete_locked(std::exception_ptr error);

  std::mutex completing_;  // held by the thread completing it, only while it looks or waits
  bool done_ = false;
  chorus::Request request_;
  std::function<void()> body_;
  std::function<void()> finish_;
  std::vector<at::Tensor> outputs_;
  int source_rank_ = -1;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::weak_ptr<WorkQueue> completer_;
  std::atomic<bool> with_completer_{false};
};

}  // namespace chorus_torch
