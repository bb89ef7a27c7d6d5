"""Two ranks (or one, port 0) of check-torch2: create a chorus group, all_reduce, barrier, destroy;
each step printed, so a crash shows where it happened."""
import datetime
import sys

import torch, torch.distributed as dist
import chorus_torch
rank, size, port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def say(*a): print(f"[rank {rank}]", *a, flush=True)
if port == 0:
    say("direct create over a HashStore (size 1)")
    b = chorus_torch._C.create_process_group(dist.HashStore(), 0, 1, datetime.timedelta(seconds=20))
    say("created", type(b), chorus_torch._C.transport_name(b))
    sys.exit(0)
dist.init_process_group("chorus", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size, timeout=datetime.timedelta(seconds=30))
say("init done; transport", chorus_torch.transport_name())
t = torch.arange(1000, dtype=torch.float32) * (rank + 1)
dist.all_reduce(t)
say("allreduce", t[:3].tolist())
dist.barrier()
dist.destroy_process_group()
say("destroyed OK")
