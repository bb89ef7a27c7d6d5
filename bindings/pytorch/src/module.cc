// The Python module chorus_torch._C: makes the chorus process group for
// torch.distributed (chorus_torch/__init__.py registers it as backend "chorus").
#include "process_group.hpp"
#include "trace.hpp"

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

// What Python sees of the group: torch 2.x's Backend (its ProcessGroup holds
// it for the CPU device), torch 1.13's ProcessGroup.
using TorchBackendPtr = c10::intrusive_ptr<chorus_torch::TorchBackendBase>;

PYBIND11_MODULE(_C, module) {
  module.doc() = "chorus as a torch.distributed backend (see chorus_torch)";
  module.attr("torch_major") = CHORUS_TORCH_MAJOR;
  chorus_torch::install_crash_backtrace();
  module.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout) -> TorchBackendPtr {
        chorus_torch::trace("create: arguments converted");
        TorchBackendPtr made = c10::make_intrusive<chorus_torch::ProcessGroupChorus>(store, rank, size, timeout);
        chorus_torch::trace("create: constructed; returning it to Python");
        return made;
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::call_guard<py::gil_scoped_release>(),
      "Joins the group's ranks over torch's store (collective); what Backend.register_backend calls.");
  module.def(
      "transport_name",
      [](const TorchBackendPtr& group) {
        auto* chorus_group = dynamic_cast<chorus_torch::ProcessGroupChorus*>(group.get());
        TORCH_CHECK(chorus_group != nullptr, "not a chorus process group (backend ", group->getBackendName(), ")");
        return chorus_group->transport_name();
      },
      "The chorus transport under a chorus backend (torch 2.x) or process group (1.13), e.g. \"shm\".");
}
