// ProcessGroupChorus: torch.distributed's backend over a chorus communicator
// (docs/pytorch.md). On torch 2.x it is a c10d::Backend, which torch's own
// ProcessGroup holds for the CPU device; on torch 1.13 the creator returned
// the c10d::ProcessGroup itself. The ops' signatures are the same on both. Collectives chorus has as non-blocking
// calls start at once on the group's communicator; gather, scatter and
// uneven all-to-all, which chorus has only as blocking calls, run in order
// on a runner thread over a duplicate communicator. A completer thread
// completes the started calls whose future was asked for (so futures
// complete without a wait()) and those dropped unfinished (work.hpp).
#pragma once

#include "work.hpp"

#if CHORUS_TORCH_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <memory>

namespace chorus_torch {

#if CHORUS_TORCH_MAJOR >= 2
using TorchBackendBase = c10d::Backend;
#else
using TorchBackendBase = c10d::ProcessGroup;
#endif

class ProcessGroupChorus final : public TorchBackendBase {
 public:
  // Collective over the group's ranks: joins over `store` (no other store,
  // no listening port); `timeout` bounds every wait inside chorus.
  ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                     std::chrono::milliseconds timeout);
  ~ProcessGroupChorus() override;

  const std::string getBackendName() const override { return "chorus"; }
  std::string transport_name() const { return comm_->transport_name(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits, std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
#if CHORUS_TORCH_MAJOR >= 2
  // What torch 2.x's _coalescing_manager calls for all_gather_into_tensor and
  // reduce_scatter_tensor issued inside it (FSDP does).
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  // destroy_process_group calls it on every rank before dropping the group.
  void shutdown() override { shut_down(); }
#endif

 private:
  // A started request: completed by its wait(), or by the completer thread
  // once its future is asked for or it is dropped.
  c10::intrusive_ptr<c10d::Work> started(c10d::OpType type, chorus::Request request, std::vector<at::Tensor> outputs,
                                         std::function<void()> finish = {});
  // A blocking chorus call (on blocking_comm_) for the runner thread.
  c10::intrusive_ptr<c10d::Work> queued(c10d::OpType type, std::function<void()> body, std::vector<at::Tensor> outputs,
                                        std::function<void()> finish = {});
  c10::intrusive_ptr<c10d::Work> alltoallv(const at::Tensor& input, at::Tensor output, std::vector<size_t> send_counts,
                                           std::vector<size_t> recv_counts, std::vector<at::Tensor> outputs,
                                           std::function<void()> finish);

  // Completes what is queued and finalizes both communicators; once.
  void shut_down();
  bool shut_down_ = false;

  std::unique_ptr<chorus::Communicator> comm_;           // non-blocking calls, started by the caller's thread
  std::unique_ptr<chorus::Communicator> blocking_comm_;  // blocking calls, made by the runner thread
  std::shared_ptr<WorkQueue> completer_;  // works hold it weakly: they may outlive the group
  std::unique_ptr<WorkQueue> runner_;
};

}  // namespace chorus_torch
