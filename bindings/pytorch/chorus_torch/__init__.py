"""chorus as a torch.distributed backend.

    import chorus_torch                      # registers backend "chorus"
    torch.distributed.init_process_group("chorus", ...)

The backend bootstraps over the store torch hands it (no second store, no
extra port). CHORUS_* settings apply as for any chorus program; the
process group's timeout becomes chorus' timeout.

On torch 2.x chorus is a c10d Backend registered for "cpu" and "cuda": CPU
tensors are reduced, and a CUDA tensor gets an error at once that names its
device and points to "nccl" (or "cpu:chorus,cuda:nccl" for both in one
group). On torch 1.13 the creator returns the process group itself.
"""

import torch
import torch.distributed as dist

from . import _C

__all__ = ["transport_name", "torch_major"]

torch_major = _C.torch_major
_running_major = int(torch.__version__.split(".")[0])
if _running_major != torch_major:
    raise ImportError(f"chorus_torch was built for torch {torch_major}.x but torch {torch.__version__} is imported: "
                      "rebuild it in this environment (pip install . from the chorus repository)")


def _create_process_group(store, rank, size, timeout):
    """torch 1.13: Backend.register_backend's creator returns the process group."""
    return _C.create_process_group(store, rank, size, timeout)


def _create_backend(dist_options, backend_options):
    """torch 2.x (extended_api=True): the c10d Backend torch's ProcessGroup holds for the CPU device."""
    del backend_options  # chorus takes its settings from CHORUS_* variables
    return _C.create_process_group(dist_options.store, dist_options.group_rank, dist_options.group_size,
                                   dist_options.timeout)


def transport_name(group=None):
    """The chorus transport a chorus process group runs over ("shm", "ofi:tcp;ofi_rxm", ...)."""
    group = group if group is not None else dist.distributed_c10d._get_default_group()
    if torch_major >= 2:
        group = group._get_backend(torch.device("cpu"))
    return _C.transport_name(group)


if "CHORUS" not in dist.Backend._plugins:
    if torch_major >= 2:
        dist.Backend.register_backend("chorus", _create_backend, extended_api=True, devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend("chorus", _create_process_group)
