"""chorus as a torch.distributed backend.

    import chorus_torch                      # registers backend "chorus"
    torch.distributed.init_process_group("chorus", ...)

The backend bootstraps over the store torch hands it (no second store, no
extra port). CHORUS_* settings apply as for any chorus program; the
process group's timeout becomes chorus' timeout.
"""

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from . import _C

__all__ = ["transport_name"]


def _create_process_group(store, rank, size, timeout):
    return _C.create_process_group(store, rank, size, timeout)


def transport_name(group=None):
    """The chorus transport a chorus process group runs over ("shm", "ofi:tcp;ofi_rxm", ...)."""
    return _C.transport_name(group if group is not None else dist.distributed_c10d._get_default_group())


if "CHORUS" not in dist.Backend._plugins:
    dist.Backend.register_backend("chorus", _create_process_group)
