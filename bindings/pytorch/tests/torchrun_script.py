"""Run by test_ops.test_torchrun under torchrun: joins from its environment."""
import torch
import torch.distributed as dist

import chorus_torch  # noqa: F401  registers "chorus"

dist.init_process_group("chorus")
rank, size = dist.get_rank(), dist.get_world_size()
t = torch.arange(1000, dtype=torch.float32) * (rank + 1)
dist.all_reduce(t)
assert torch.equal(t, torch.arange(1000, dtype=torch.float32) * (size * (size + 1) // 2)), t[:4]
dist.destroy_process_group()
print("torchrun rank ok", flush=True)
