"""One rank of test_failures: trains (allreduces in a loop); rank KILL_RANK
kills itself with SIGKILL mid-way. Survivors print how long after the kill
they raised and what."""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import chorus_torch  # noqa: F401

rank, size, port, kill_rank = (int(a) for a in sys.argv[1:5])
dist.init_process_group("chorus", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size,
                        timeout=datetime.timedelta(seconds=60))
grads = torch.ones(100_000)
marker = sys.argv[5]
try:
    for step in range(100_000):
        if step == 20:
            if rank == kill_rank:
                open(marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(grads, async_op=(step % 2 == 0)).wait() if step % 2 == 0 else dist.all_reduce(grads)
        grads.fill_(1)
except RuntimeError as error:
    killed_at = os.path.getmtime(marker)
    print(f"rank {rank} raised {time.time() - killed_at:.2f} s after the kill: {error}", flush=True)
    time.sleep(2)  # as a trainer that logs before it exits: the other survivor looks at a live process
    os._exit(3)
print(f"rank {rank} finished without noticing", flush=True)
