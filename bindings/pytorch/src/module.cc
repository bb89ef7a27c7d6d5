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

namespace {

// torch's store as the C++ object. Where this module shares pybind11's type
// registry with torch (the same PYBIND11_INTERNALS_ID) the holder cast
// works. Where it does not, pybind11 may still find the object through its
// "conduit" (a raw pointer) and hand a holder caster an empty holder: a
// null store, which would crash at its first use. So: the holder if it is
// there, else the raw pointer taken into a new reference, else a clear error.
c10::intrusive_ptr<c10d::Store> store_of(const py::object& store) {
  try {
    auto held = store.cast<c10::intrusive_ptr<c10d::Store>>();
    if (held) return held;
  } catch (const py::cast_error&) {
  }
  chorus_torch::trace("create: torch's store came without its holder; taking its raw pointer");
  c10d::Store* raw = nullptr;
  try {
    raw = store.cast<c10d::Store*>();
  } catch (const py::cast_error&) {
  }
  TORCH_CHECK(raw != nullptr, "chorus backend: torch's store (", py::str(py::type::of(store)).cast<std::string>(),
              ") did not reach the extension as a c10d::Store: the extension and torch do not share pybind11's "
              "type registry (the extension's is ", PYBIND11_INTERNALS_ID, "); rebuild chorus_torch against this torch");
  return c10::intrusive_ptr<c10d::Store>::reclaim_copy(raw);
}

}  // namespace

PYBIND11_MODULE(_C, module) {
  module.doc() = "chorus as a torch.distributed backend (see chorus_torch)";
  module.attr("torch_major") = CHORUS_TORCH_MAJOR;
  // Compared with torch's own by check-torch2 (bindings/pytorch/device).
  module.attr("pybind11_internals_id") = PYBIND11_INTERNALS_ID;
  chorus_torch::install_crash_backtrace();
  module.def(
      "create_process_group",
      [](const py::object& store, int rank, int size, std::chrono::milliseconds timeout) -> TorchBackendPtr {
        chorus_torch::trace("create: arguments converted");
        c10::intrusive_ptr<c10d::Store> torch_store = store_of(store);
        py::gil_scoped_release without_gil;  // the join waits for the other ranks
        TorchBackendPtr made = c10::make_intrusive<chorus_torch::ProcessGroupChorus>(torch_store, rank, size, timeout);
        chorus_torch::trace("create: constructed; returning it to Python");
        return made;
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
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
