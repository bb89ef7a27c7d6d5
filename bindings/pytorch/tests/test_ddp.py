"""DDP over chorus against DDP over Gloo: the same MLP, seed and data, 50
SGD steps on 2 and 3 processes, plain and with the allreduce and fp16
compression comm hooks (which chain on the Work's future). Both models live
in the same processes, one per backend, so nothing but the backend differs.

With 2 ranks the parameters must be bitwise equal: a sum of two gradients
is the same in either order. With 3 ranks the two backends may add the
three gradients in different orders (chorus' algorithm for the bucket size
vs Gloo's ring), so the last bit can differ, and 50 steps of SGD with
momentum amplify a last-bit difference of float32 to ~1e-4. So the 3-rank
runs train in float64, where the amplified rounding stays far below the
tolerance (1e-9 relative), while a wrong sum would not. The fp16 hook sums
float16 gradients: chorus accumulates them in float32 and rounds once, Gloo
rounds to float16 after each addition, so with 3 ranks the two differ by
float16 rounding (~1e-3 of a gradient) each step: checked to 5e-3."""

import datetime
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import chorus_torch  # noqa: F401

STEPS = 50


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_model(dtype=torch.float32):
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
                               torch.nn.Linear(256, 10)).to(dtype)


def train(group, hook, rank, dtype):
    # Small buckets: several allreduces per step, in flight together.
    model = DDP(make_model(dtype), process_group=group, bucket_cap_mb=0.1)
    if hook is not None:
        model.register_comm_hook(group, hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    data = torch.Generator().manual_seed(100 + rank)
    for _ in range(STEPS):
        x = torch.randn(16, 32, generator=data, dtype=dtype)
        y = torch.randint(0, 10, (16,), generator=data)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.module.parameters()]


def worker(rank, size, port, out_dir):
    torch.set_num_threads(1)
    dist.init_process_group("chorus", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=60))
    gloo = dist.new_group(backend="gloo")
    chorus = dist.distributed_c10d._get_default_group()
    lines = []
    dtype = torch.float32 if size == 2 else torch.float64
    for name, hook in [("no hook", None), ("allreduce_hook", default_hooks.allreduce_hook),
                       ("fp16_compress_hook", default_hooks.fp16_compress_hook)]:
        ours, theirs = train(chorus, hook, rank, dtype), train(gloo, hook, rank, dtype)
        bitwise = all(torch.equal(a, b) for a, b in zip(ours, theirs))
        largest = max((a - b).abs().max().item() for a, b in zip(ours, theirs))
        if size == 2:
            assert bitwise, f"{name}: chorus and gloo parameters differ by up to {largest} on 2 ranks"
        else:
            tolerance = dict(rtol=0, atol=5e-3) if hook is default_hooks.fp16_compress_hook else dict(rtol=1e-9, atol=1e-12)
            for a, b in zip(ours, theirs):
                torch.testing.assert_close(a, b, **tolerance, msg=lambda m: f"{name}: {m}")
        # Training moved the parameters (the comparison is not between two untouched models).
        assert any(not torch.equal(a, b) for a, b in zip(ours, make_model(dtype).parameters()))
        lines.append(f"{name} ({dtype}): {'bitwise equal' if bitwise else f'largest difference {largest:.3g}'}")
    with open(os.path.join(out_dir, f"rank{rank}"), "w") as out:
        out.write("; ".join(lines))
    dist.destroy_process_group()


def run(tmp_path, size):
    mp.start_processes(worker, args=(size, free_port(), str(tmp_path)), nprocs=size, start_method="spawn")
    print(f"DDP on {size} ranks, chorus vs gloo after {STEPS} steps: {(tmp_path / 'rank0').read_text()}")


def test_ddp_2_ranks_bitwise(tmp_path):
    run(tmp_path, 2)


def test_ddp_3_ranks(tmp_path):
    run(tmp_path, 3)
