// The Python module chorus_torch._C: makes the chorus process group for
// torch.distributed (chorus_torch/__init__.py registers it as backend "chorus").
#include "process_group.hpp"

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

namespace py = pybind11;

PYBIND11_MODULE(_C, module) {
  module.doc() = "chorus as a torch.distributed backend (see chorus_torch)";
  module.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
         std::chrono::milliseconds timeout) -> c10::intrusive_ptr<c10d::ProcessGroup> {
        return c10::make_intrusive<chorus_torch::ProcessGroupChorus>(store, rank, size, timeout);
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
      py::call_guard<py::gil_scoped_release>(),
      "Joins the group's ranks over torch's store (collective); what Backend.register_backend calls.");
  module.def(
      "transport_name",
      [](const c10::intrusive_ptr<c10d::ProcessGroup>& group) {
        auto* chorus_group = dynamic_cast<chorus_torch::ProcessGroupChorus*>(group.get());
        TORCH_CHECK(chorus_group != nullptr, "not a chorus process group (backend ", group->getBackendName(), ")");
        return chorus_group->transport_name();
      },
      "The chorus transport under a chorus process group, e.g. \"shm\" or \"ofi:tcp;ofi_rxm\".");
}
