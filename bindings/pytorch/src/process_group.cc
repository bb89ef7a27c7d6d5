#include "process_group.hpp"

#include "torch_store.hpp"
#include "trace.hpp"

#include <ATen/ATen.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <numeric>
#include <optional>

namespace chorus_torch {

namespace {

chorus::DataType data_type(const char* op, at::ScalarType type) {
  switch (type) {
    case at::kFloat: return chorus::DataType::float32;
    case at::kDouble: return chorus::DataType::float64;
    case at::kHalf: return chorus::DataType::float16;
    case at::kBFloat16: return chorus::DataType::bfloat16;
    case at::kChar: return chorus::DataType::int8;
    case at::kByte: return chorus::DataType::uint8;
    case at::kBool: return chorus::DataType::uint8;  // one byte, 0 or 1 (reductions: see reduction())
    case at::kShort: return chorus::DataType::int16;
    case at::kInt: return chorus::DataType::int32;
    case at::kLong: return chorus::DataType::int64;
    default: TORCH_CHECK(false, "chorus backend: ", op, " does not support dtype ", type);
  }
}

struct Reduction {
  chorus::ReduceOp op;
  bool average = false;  // AVG: a sum divided by the group's size afterwards
  std::optional<double> premultiply;  // PREMUL_SUM: each rank's input scaled before the sum
};

// PREMUL_SUM's factor (torch.distributed._make_nccl_premul_sum): a number,
// or a one-element tensor (torch 2.x keeps one, 1.13 one per device).
double premul_factor(const char* op, const c10d::ReduceOp& reduce) {
  const auto* supplement = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(reduce.supplement_.get());
  TORCH_CHECK(supplement != nullptr, "chorus backend: ", op, " with ReduceOp.PREMUL_SUM but no factor");
#if CHORUS_TORCH_MAJOR >= 2
  const at::Tensor factor = supplement->tensor_factor;
#else
  const at::Tensor factor = supplement->tensor_factors.empty() ? at::Tensor() : supplement->tensor_factors[0];
#endif
  if (!factor.defined()) return supplement->double_factor;
  TORCH_CHECK(factor.numel() == 1, "chorus backend: ", op, ": the PREMUL_SUM factor has ", factor.numel(),
              " elements, not one");
  return factor.to(at::kCPU).item<double>();
}

Reduction reduction(const char* op, const c10d::ReduceOp& reduce, at::ScalarType type) {
  // bool as uint8 0/1: "sum" is logical or (max), "product" logical and (min), as Gloo's bool reductions.
  const bool logical = type == at::kBool;
  switch (reduce.op_) {
    case c10d::ReduceOp::SUM: return {logical ? chorus::ReduceOp::max : chorus::ReduceOp::sum, false, std::nullopt};
    case c10d::ReduceOp::PRODUCT: return {logical ? chorus::ReduceOp::min : chorus::ReduceOp::prod, false, std::nullopt};
    case c10d::ReduceOp::MIN: return {chorus::ReduceOp::min, false, std::nullopt};
    case c10d::ReduceOp::MAX: return {chorus::ReduceOp::max, false, std::nullopt};
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(at::isFloatingType(type), "chorus backend: ", op, " with ReduceOp.AVG needs a floating-point dtype, not ",
                  type);
      return {chorus::ReduceOp::sum, true, std::nullopt};
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(at::isFloatingType(type), "chorus backend: ", op,
                  " with ReduceOp.PREMUL_SUM needs a floating-point dtype, not ", type);
      return {chorus::ReduceOp::sum, false, premul_factor(op, reduce)};
    default: {
      static const char* const names[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
      const auto index = static_cast<size_t>(reduce.op_);
      TORCH_CHECK(false, "chorus backend: ", op, " does not support ReduceOp.",
                  index < std::size(names) ? names[index] : "?",
                  ": it has SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM");
    }
  }
}

void check_cpu(const char* op, const at::Tensor& tensor) {
  TORCH_CHECK(tensor.device().is_cpu(), "chorus backend: ", op, " needs CPU tensors, got one on ", tensor.device(),
              ": chorus moves host memory only; use backend \"nccl\" for GPU tensors, or both at once with "
              "init_process_group(\"cpu:chorus,cuda:nccl\")");
  TORCH_CHECK(tensor.layout() == at::kStrided, "chorus backend: ", op, " needs dense tensors, got ", tensor.layout());
}

const at::Tensor& single_tensor(const char* op, const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(tensors.size() == 1, "chorus backend: ", op, " takes one tensor per process, got ", tensors.size());
  check_cpu(op, tensors[0]);
  return tensors[0];
}

// Every tensor of `list` has `reference`'s dtype and, with `same_numel`, its element count.
void check_list(const char* op, const std::vector<at::Tensor>& list, size_t expected_size, const at::Tensor& reference,
                bool same_numel = true) {
  TORCH_CHECK(list.size() == expected_size, "chorus backend: ", op, " needs a list of ", expected_size,
              " tensors (one per rank), got ", list.size());
  for (const at::Tensor& tensor : list) {
    check_cpu(op, tensor);
    TORCH_CHECK(tensor.scalar_type() == reference.scalar_type(), "chorus backend: ", op, ": tensors of dtype ",
                tensor.scalar_type(), " and ", reference.scalar_type(), " in one call");
    TORCH_CHECK(!same_numel || tensor.numel() == reference.numel(), "chorus backend: ", op, ": a tensor of ",
                tensor.numel(), " elements where ", reference.numel(), " are expected");
  }
}

// chorus needs one contiguous buffer; a non-contiguous tensor gets a copy
// (and copy_back writes the result into it).
at::Tensor dense(const at::Tensor& tensor) { return tensor.is_contiguous() ? tensor : tensor.contiguous(); }

// The buffer a reduction starts from: the tensor itself where it can be, a
// scaled copy for PREMUL_SUM (the caller's input stays as it was until the
// result is copied back, and a reduce's non-root keeps its input).
at::Tensor reduction_input(const at::Tensor& tensor, const Reduction& how) {
  return how.premultiply ? tensor.mul(*how.premultiply).contiguous() : dense(tensor);
}

void copy_back(at::Tensor& user, const at::Tensor& buffer) {
  if (!user.is_same(buffer)) user.copy_(buffer);
}

at::Tensor flat_of(const std::vector<at::Tensor>& list) {
  std::vector<at::Tensor> flattened;
  for (const at::Tensor& tensor : list) flattened.push_back(tensor.reshape({-1}));
  return at::cat(flattened);
}

// Copies consecutive blocks of `flat` into the tensors of `list`.
void unpack(const at::Tensor& flat, std::vector<at::Tensor>& list) {
  int64_t offset = 0;
  for (at::Tensor& tensor : list) {
    tensor.copy_(flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
    offset += tensor.numel();
  }
}

size_t count_of(const at::Tensor& tensor) { return static_cast<size_t>(tensor.numel()); }

// Elements in one index of dimension 0 (what alltoall_base's splits count).
int64_t row_elements(const at::Tensor& tensor) {
  int64_t row = 1;
  for (int64_t d = 1; d < tensor.dim(); ++d) row *= tensor.size(d);
  return row;
}

// alltoall_base's split sizes as element counts (empty splits: equal shares of dimension 0).
std::vector<size_t> split_counts(const char* side, const at::Tensor& tensor, const std::vector<int64_t>& splits,
                                 int size) {
  TORCH_CHECK(tensor.dim() >= 1, "chorus backend: alltoall_base needs tensors of at least one dimension");
  const int64_t rows = tensor.size(0);
  std::vector<size_t> counts(static_cast<size_t>(size));
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "chorus backend: alltoall_base: the ", side, " tensor's ", rows,
                " rows do not split evenly over ", size, " ranks");
    for (auto& count : counts) count = static_cast<size_t>(rows / size * row_elements(tensor));
    return counts;
  }
  TORCH_CHECK(splits.size() == static_cast<size_t>(size), "chorus backend: alltoall_base: ", splits.size(), " ", side,
              " splits for ", size, " ranks");
  TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t{0}) == rows, "chorus backend: alltoall_base: the ",
              side, " splits do not add up to the tensor's ", rows, " rows");
  for (size_t i = 0; i < counts.size(); ++i) {
    TORCH_CHECK(splits[i] >= 0, "chorus backend: alltoall_base: negative ", side, " split");
    counts[i] = static_cast<size_t>(splits[i] * row_elements(tensor));
  }
  return counts;
}

}  // namespace

ProcessGroupChorus::ProcessGroupChorus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                       std::chrono::milliseconds timeout)
    : TorchBackendBase(rank, size) {
  trace("constructor: torch's base class constructed");
  chorus::StoreInitOptions options;
  if (timeout.count() > 0) options.timeout = timeout;
  auto torch_store = std::make_shared<TorchStore>(store);
  if (tracing()) {
    torch_store->set("chorus-trace/" + std::to_string(rank), {1});
    trace(torch_store->check("chorus-trace/" + std::to_string(rank)) ? "constructor: torch's store answers"
                                                                     : "constructor: torch's store lost a key");
  }
  comm_ = std::make_unique<chorus::Communicator>(chorus::Communicator::init(rank, size, torch_store, options));
  trace("constructor: chorus communicator joined");
  blocking_comm_ = std::make_unique<chorus::Communicator>(comm_->dup());
  trace("constructor: its duplicate for blocking calls joined");
  completer_ = std::make_shared<WorkQueue>();
  runner_ = std::make_unique<WorkQueue>();
}

ProcessGroupChorus::~ProcessGroupChorus() { shut_down(); }

void ProcessGroupChorus::shut_down() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    // The worker threads may drop the last reference to a tensor Python
    // made, which takes the GIL: the caller (destroy_process_group) may hold it.
    std::optional<pybind11::gil_scoped_release> without_gil;
    if (Py_IsInitialized() && PyGILState_Check()) without_gil.emplace();
    runner_.reset();  // runs what is queued
    completer_.reset();  // completes the works it looks after and the dropped ones
  }
  try {
    blocking_comm_->finalize();
    comm_->finalize();
  } catch (const std::exception& e) {
    TORCH_WARN("chorus backend: finalize on rank ", rank_, " failed: ", e.what());
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::started(c10d::OpType type, chorus::Request request,
                                                           std::vector<at::Tensor> outputs, std::function<void()> finish) {
  return c10::make_intrusive<ChorusWork>(rank_, type, std::move(request), std::move(outputs), std::move(finish),
                                        completer_);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::queued(c10d::OpType type, std::function<void()> body,
                                                          std::vector<at::Tensor> outputs, std::function<void()> finish) {
  auto work = c10::make_intrusive<ChorusWork>(rank_, type, std::move(body), std::move(outputs), std::move(finish));
  runner_->push([work] { work->complete_in_background(); });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  at::Tensor tensor = single_tensor("broadcast", tensors);
  const auto dtype = data_type("broadcast", tensor.scalar_type());
  at::Tensor buffer = dense(tensor);
  auto request = comm_->ibroadcast(buffer.data_ptr(), count_of(buffer), dtype, static_cast<int>(opts.rootRank));
  return started(c10d::OpType::BROADCAST, std::move(request), tensors,
                 [tensor, buffer]() mutable { copy_back(tensor, buffer); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  at::Tensor tensor = single_tensor("allreduce", tensors);
  const auto dtype = data_type("allreduce", tensor.scalar_type());
  const Reduction how = reduction("allreduce", opts.reduceOp, tensor.scalar_type());
  at::Tensor buffer = reduction_input(tensor, how);
  auto request = comm_->iallreduce(buffer.data_ptr(), buffer.data_ptr(), count_of(buffer), dtype, how.op);
  return started(c10d::OpType::ALLREDUCE, std::move(request), tensors,
                 [tensor, buffer, average = how.average, size = size_]() mutable {
                   if (average) buffer.div_(size);
                   copy_back(tensor, buffer);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                       const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "chorus backend: allreduce_coalesced needs at least one tensor");
  check_list("allreduce_coalesced", tensors, tensors.size(), tensors[0], false);
  const auto dtype = data_type("allreduce_coalesced", tensors[0].scalar_type());
  const Reduction how = reduction("allreduce_coalesced", opts.reduceOp, tensors[0].scalar_type());
  at::Tensor flat = flat_of(tensors);
  if (how.premultiply) flat.mul_(*how.premultiply);
  auto request = comm_->iallreduce(flat.data_ptr(), flat.data_ptr(), count_of(flat), dtype, how.op);
  return started(c10d::OpType::ALLREDUCE_COALESCED, std::move(request), tensors,
                 [tensors, flat, average = how.average, size = size_]() mutable {
                   if (average) flat.div_(size);
                   unpack(flat, tensors);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  at::Tensor tensor = single_tensor("reduce", tensors);
  const auto dtype = data_type("reduce", tensor.scalar_type());
  const Reduction how = reduction("reduce", opts.reduceOp, tensor.scalar_type());
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor buffer = reduction_input(tensor, how);
  // Only the root's tensor receives; the others' stay as they were.
  void* result = rank_ == root ? buffer.data_ptr() : nullptr;
  auto request = comm_->ireduce(buffer.data_ptr(), result, count_of(buffer), dtype, how.op, root);
  return started(c10d::OpType::REDUCE, std::move(request), tensors,
                 [tensor, buffer, average = how.average, at_root = rank_ == root, size = size_]() mutable {
                   if (!at_root) return;
                   if (average) buffer.div_(size);
                   copy_back(tensor, buffer);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllgatherOptions& /*opts*/) {
  const at::Tensor& input = single_tensor("allgather", inputs);
  TORCH_CHECK(outputs.size() == 1, "chorus backend: allgather takes one output list per process");
  check_list("allgather", outputs[0], static_cast<size_t>(size_), input);
  const auto dtype = data_type("allgather", input.scalar_type());
  at::Tensor buffer = dense(input);
  at::Tensor flat = at::empty({size_ * input.numel()}, input.options());
  auto request = comm_->iallgather(buffer.data_ptr(), flat.data_ptr(), count_of(buffer), dtype);
  std::vector<at::Tensor> list = outputs[0];
  return started(c10d::OpType::ALLGATHER, std::move(request), list,
                 [list, flat, buffer]() mutable { unpack(flat, list); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                   const c10d::AllgatherOptions& /*opts*/) {
  check_cpu("_allgather_base", input);
  check_list("_allgather_base", {output}, 1, input, false);
  TORCH_CHECK(output.numel() == size_ * input.numel(), "chorus backend: _allgather_base: the output has ",
              output.numel(), " elements, not ", size_, " x ", input.numel());
  const auto dtype = data_type("_allgather_base", input.scalar_type());
  at::Tensor in = dense(input);
  at::Tensor out = dense(output);
  auto request = comm_->iallgather(in.data_ptr(), out.data_ptr(), count_of(in), dtype);
  return started(c10d::OpType::_ALLGATHER_BASE, std::move(request), {output},
                 [output, out, in]() mutable { copy_back(output, out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::GatherOptions& opts) {
  const at::Tensor& input = single_tensor("gather", inputs);
  const auto dtype = data_type("gather", input.scalar_type());
  const int root = static_cast<int>(opts.rootRank);
  const bool at_root = rank_ == root;
  std::vector<at::Tensor> list;
  if (at_root) {
    TORCH_CHECK(outputs.size() == 1, "chorus backend: gather takes one output list at the root");
    check_list("gather", outputs[0], static_cast<size_t>(size_), input);
    list = outputs[0];
  }
  at::Tensor in = dense(input);
  at::Tensor flat = at_root ? at::empty({size_ * input.numel()}, input.options()) : at::Tensor();
  chorus::Communicator* comm = blocking_comm_.get();
  return queued(
      c10d::OpType::GATHER,
      [comm, in, flat, dtype, root] {
        comm->gather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, count_of(in), dtype, root);
      },
      list, [list, flat]() mutable {
        if (flat.defined()) unpack(flat, list);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ScatterOptions& opts) {
  at::Tensor output = single_tensor("scatter", outputs);
  const auto dtype = data_type("scatter", output.scalar_type());
  const int root = static_cast<int>(opts.rootRank);
  at::Tensor flat;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1, "chorus backend: scatter takes one input list at the root");
    check_list("scatter", inputs[0], static_cast<size_t>(size_), output);
    flat = flat_of(inputs[0]);
  }
  at::Tensor out = dense(output);
  chorus::Communicator* comm = blocking_comm_.get();
  return queued(
      c10d::OpType::SCATTER,
      [comm, out, flat, dtype, root] {
        comm->scatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), count_of(out), dtype, root);
      },
      outputs, [output, out]() mutable { copy_back(output, out); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                                  const c10d::ReduceScatterOptions& opts) {
  at::Tensor output = single_tensor("reduce_scatter", outputs);
  TORCH_CHECK(inputs.size() == 1, "chorus backend: reduce_scatter takes one input list per process");
  check_list("reduce_scatter", inputs[0], static_cast<size_t>(size_), output);
  const auto dtype = data_type("reduce_scatter", output.scalar_type());
  const Reduction how = reduction("reduce_scatter", opts.reduceOp, output.scalar_type());
  at::Tensor flat = flat_of(inputs[0]);
  if (how.premultiply) flat.mul_(*how.premultiply);
  at::Tensor out = dense(output);
  auto request = comm_->ireduce_scatter(flat.data_ptr(), out.data_ptr(), count_of(out), dtype, how.op);
  return started(c10d::OpType::REDUCE_SCATTER, std::move(request), outputs,
                 [output, out, flat, average = how.average, size = size_]() mutable {
                   if (average) out.div_(size);
                   copy_back(output, out);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                        const c10d::ReduceScatterOptions& opts) {
  check_cpu("_reduce_scatter_base", output);
  check_list("_reduce_scatter_base", {input}, 1, output, false);
  TORCH_CHECK(input.numel() == size_ * output.numel(), "chorus backend: _reduce_scatter_base: the input has ",
              input.numel(), " elements, not ", size_, " x ", output.numel());
  const auto dtype = data_type("_reduce_scatter_base", output.scalar_type());
  const Reduction how = reduction("_reduce_scatter_base", opts.reduceOp, output.scalar_type());
  at::Tensor in = reduction_input(input, how);
  at::Tensor out = dense(output);
  auto request = comm_->ireduce_scatter(in.data_ptr(), out.data_ptr(), count_of(out), dtype, how.op);
  return started(c10d::OpType::_REDUCE_SCATTER_BASE, std::move(request), {output},
                 [output, out, in, average = how.average, size = size_]() mutable {
                   if (average) out.div_(size);
                   copy_back(output, out);
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoallv(const at::Tensor& input, at::Tensor output,
                                                             std::vector<size_t> send_counts,
                                                             std::vector<size_t> recv_counts,
                                                             std::vector<at::Tensor> outputs,
                                                             std::function<void()> finish) {
  const auto dtype = data_type("alltoall", input.scalar_type());
  chorus::Communicator* comm = blocking_comm_.get();
  return queued(
      c10d::OpType::ALLTOALL,
      [comm, input, output, send_counts = std::move(send_counts), recv_counts = std::move(recv_counts), dtype] {
        comm->alltoallv(input.data_ptr(), send_counts, {}, output.data_ptr(), recv_counts, {}, dtype);
      },
      std::move(outputs), std::move(finish));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                 std::vector<int64_t>& output_splits,
                                                                 std::vector<int64_t>& input_splits,
                                                                 const c10d::AllToAllOptions& /*opts*/) {
  check_cpu("alltoall_base", input);
  check_list("alltoall_base", {output}, 1, input, false);
  const auto dtype = data_type("alltoall_base", input.scalar_type());
  at::Tensor in = dense(input);
  at::Tensor out = dense(output);
  auto finish = [output, out, in]() mutable { copy_back(output, out); };
  if (output_splits.empty() && input_splits.empty()) {
    TORCH_CHECK(input.numel() == output.numel() && input.numel() % size_ == 0, "chorus backend: alltoall_base: ",
                input.numel(), " input and ", output.numel(), " output elements do not split evenly over ", size_,
                " ranks");
    auto request = comm_->ialltoall(in.data_ptr(), out.data_ptr(), count_of(in) / static_cast<size_t>(size_), dtype);
    return started(c10d::OpType::ALLTOALL_BASE, std::move(request), {output}, finish);
  }
  return alltoallv(in, out, split_counts("input", input, input_splits, size_),
                   split_counts("output", output, output_splits, size_), {output}, finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& /*opts*/) {
  TORCH_CHECK(!inputs.empty(), "chorus backend: alltoall needs one input tensor per rank");
  check_list("alltoall", inputs, static_cast<size_t>(size_), inputs[0], false);
  check_list("alltoall", outputs, static_cast<size_t>(size_), inputs[0], false);
  at::Tensor flat_in = flat_of(inputs);
  std::vector<size_t> send_counts, recv_counts;
  for (const at::Tensor& tensor : inputs) send_counts.push_back(count_of(tensor));
  for (const at::Tensor& tensor : outputs) recv_counts.push_back(count_of(tensor));
  const size_t received = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0});
  at::Tensor flat_out = at::empty({static_cast<int64_t>(received)}, inputs[0].options());
  auto finish = [outputs, flat_out, flat_in]() mutable { unpack(flat_out, outputs); };
  const bool equal = std::all_of(send_counts.begin(), send_counts.end(), [&](size_t n) { return n == send_counts[0]; }) &&
                     std::all_of(recv_counts.begin(), recv_counts.end(), [&](size_t n) { return n == send_counts[0]; });
  if (equal) {
    const auto dtype = data_type("alltoall", flat_in.scalar_type());
    auto request = comm_->ialltoall(flat_in.data_ptr(), flat_out.data_ptr(), send_counts[0], dtype);
    return started(c10d::OpType::ALLTOALL, std::move(request), outputs, finish);
  }
  return alltoallv(flat_in, flat_out, std::move(send_counts), std::move(recv_counts), outputs, finish);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::barrier(const c10d::BarrierOptions& /*opts*/) {
  return started(c10d::OpType::BARRIER, comm_->ibarrier(), {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const at::Tensor& tensor = single_tensor("send", tensors);
  at::Tensor buffer = dense(tensor);
  auto request = comm_->isend(buffer.data_ptr(), buffer.nbytes(), dst, tag);
  return started(c10d::OpType::SEND, std::move(request), tensors, [buffer] {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  at::Tensor tensor = single_tensor("recv", tensors);
  at::Tensor buffer = dense(tensor);
  auto request = comm_->irecv(buffer.data_ptr(), buffer.nbytes(), src, tag);
  return started(src == chorus::kAnySource ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV, std::move(request),
                 tensors, [tensor, buffer]() mutable { copy_back(tensor, buffer); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return recv(tensors, chorus::kAnySource, tag);
}

#if CHORUS_TORCH_MAJOR >= 2
namespace {

// The pairs of a coalesced call, checked: output i is `factor` times input i.
void check_pairs(const char* op, const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                 int64_t output_factor, int64_t input_factor) {
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "chorus backend: ", op, " needs as many outputs as ",
              "inputs (and at least one), got ", outputs.size(), " and ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_cpu(op, inputs[i]);
    check_cpu(op, outputs[i]);
    TORCH_CHECK(inputs[i].scalar_type() == outputs[i].scalar_type(), "chorus backend: ", op, ": pair ", i, " mixes ",
                inputs[i].scalar_type(), " and ", outputs[i].scalar_type());
    TORCH_CHECK(outputs[i].numel() * input_factor == inputs[i].numel() * output_factor, "chorus backend: ", op,
                ": pair ", i, " has ", inputs[i].numel(), " input and ", outputs[i].numel(), " output elements");
  }
}

}  // namespace

// Both run the pairs in order as blocking calls on the runner thread: one
// work for the lot, as torch's _coalescing_manager expects.
c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& /*opts*/) {
  const char* op = "allgather_into_tensor_coalesced";
  check_pairs(op, outputs, inputs, size_, 1);
  std::vector<at::Tensor> in, out;
  std::vector<chorus::DataType> dtypes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    in.push_back(dense(inputs[i]));
    out.push_back(dense(outputs[i]));
    dtypes.push_back(data_type(op, inputs[i].scalar_type()));
  }
  chorus::Communicator* comm = blocking_comm_.get();
  return queued(
      c10d::OpType::COALESCED,
      [comm, in, out, dtypes] {
        for (size_t i = 0; i < in.size(); ++i) comm->allgather(in[i].data_ptr(), out[i].data_ptr(), count_of(in[i]), dtypes[i]);
      },
      outputs, [outputs, out]() mutable {
        for (size_t i = 0; i < out.size(); ++i) copy_back(outputs[i], out[i]);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  const char* op = "reduce_scatter_tensor_coalesced";
  check_pairs(op, outputs, inputs, 1, size_);
  std::vector<at::Tensor> in, out;
  std::vector<chorus::DataType> dtypes;
  std::vector<Reduction> hows;
  for (size_t i = 0; i < inputs.size(); ++i) {
    hows.push_back(reduction(op, opts.reduceOp, inputs[i].scalar_type()));
    in.push_back(reduction_input(inputs[i], hows.back()));
    out.push_back(dense(outputs[i]));
    dtypes.push_back(data_type(op, inputs[i].scalar_type()));
  }
  chorus::Communicator* comm = blocking_comm_.get();
  return queued(
      c10d::OpType::COALESCED,
      [comm, in, out, dtypes, hows] {
        for (size_t i = 0; i < in.size(); ++i) {
          comm->reduce_scatter(in[i].data_ptr(), out[i].data_ptr(), count_of(out[i]), dtypes[i], hows[i].op);
        }
      },
      outputs, [outputs, out, hows, size = size_]() mutable {
        for (size_t i = 0; i < out.size(); ++i) {
          if (hows[i].average) out[i].div_(size);
          copy_back(outputs[i], out[i]);
        }
      });
}
#endif

}  // namespace chorus_torch
