#!/usr/bin/python3
"""chorus vs Gloo as torch.distributed backends, in one run: per-op time and
bus bandwidth from 4 B to 64 MiB, and the step time of DDP training a model
of ~20 M parameters. Both backends live in the same processes (a chorus
default group and a Gloo group beside it) and are measured alternately, so
load on the machine hits both alike; the ratio column is what to read.

    PYTHONPATH=<build>/bindings/pytorch /usr/bin/python3 bench/torch_compare.py --ranks 2 4
"""
import argparse
import datetime
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

OPS = ["allreduce", "broadcast", "allgather", "alltoall"]


def bus_factor(op, size):
    """busbw = algbw x this (the nccl-tests convention)."""
    return {"allreduce": 2 * (size - 1) / size, "broadcast": 1.0, "allgather": (size - 1) / size,
            "alltoall": (size - 1) / size}[op]


def run_op(op, group, tensor, out, size):
    if op == "allreduce":
        dist.all_reduce(tensor, group=group)
    elif op == "broadcast":
        dist.broadcast(tensor, 0, group=group)
    elif op == "allgather":
        dist._all_gather_base(out, tensor, group=group) if dist.get_backend(group) != "gloo" else \
            dist.all_gather(list(out.chunk(size)), tensor, group=group)
    elif op == "alltoall":
        dist.all_to_all_single(out[:tensor.numel()], tensor, group=group)


def time_op(op, group, nbytes, size, iters, warmup):
    elements = max(1, nbytes // 4)
    if op == "alltoall":
        elements = max(size, elements // size * size)
    tensor = torch.ones(elements)
    out = torch.empty(elements * size)
    for _ in range(warmup):
        run_op(op, group, tensor, out, size)
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        run_op(op, group, tensor, out, size)
    elapsed = (time.perf_counter() - start) / iters
    slowest = torch.tensor([elapsed], dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
    # Bytes of the whole result, as nccl-tests count them: allgather's is every rank's block.
    return slowest.item(), elements * 4 * (size if op == "allgather" else 1)


def ddp_step_time(group, params_millions, steps):
    from torch.nn.parallel import DistributedDataParallel as DDP
    width = 2048
    layers = max(1, round(params_millions * 1e6 / (width * width + width)))
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)]), process_group=group)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(8, width)
    times = []
    for step in range(steps + 2):
        start = time.perf_counter()
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
        if step >= 2:  # the first steps build buckets
            times.append(time.perf_counter() - start)
    parameters = sum(p.numel() for p in model.parameters())
    return sorted(times)[len(times) // 2], parameters


def worker(rank, size, port, args, results):
    import chorus_torch  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group("chorus", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=300))
    groups = {"chorus": dist.distributed_c10d._get_default_group(), "gloo": dist.new_group(backend="gloo")}
    rows = []
    nbytes = 4
    while nbytes <= args.max_bytes:
        iters = args.iters if nbytes <= (1 << 20) else max(3, args.iters // 10)
        for op in args.ops:
            measured = {}
            for name in ("chorus", "gloo"):
                seconds, moved = time_op(op, groups[name], nbytes, size, iters, warmup=max(2, iters // 10))
                measured[name] = (seconds, moved / seconds / 1e9 * bus_factor(op, size))
            rows.append((op, nbytes, measured))
        nbytes *= args.step
    ddp = {}
    if args.ddp_params > 0:
        for name in ("chorus", "gloo"):
            ddp[name] = ddp_step_time(groups[name], args.ddp_params, args.ddp_steps)
    if rank == 0:
        results.put((size, rows, ddp))
    dist.destroy_process_group()


def human(nbytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4], help="process counts to run (default 2 4)")
    parser.add_argument("--max-bytes", type=int, default=64 << 20, help="largest message (default 64 MiB)")
    parser.add_argument("--step", type=int, default=16, help="size multiplier between rows (default 16)")
    parser.add_argument("--iters", type=int, default=200,
                        help="iterations per size up to 1 MiB, a tenth beyond (default 200: one scheduler "
                             "stall of a few ms in 50 calls would double a small row's mean)")
    parser.add_argument("--ops", nargs="+", default=OPS, choices=OPS, help="operations (default: all)")
    parser.add_argument("--ddp-params", type=float, default=20, help="DDP model size in millions (0: skip)")
    parser.add_argument("--ddp-steps", type=int, default=10, help="DDP steps timed (median reported)")
    args = parser.parse_args()
    print(f"load average: {open('/proc/loadavg').read().strip()}")
    context = mp.get_context("spawn")
    for size in args.ranks:
        results = context.SimpleQueue()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.start_processes(worker, args=(size, port, args, results), nprocs=size, start_method="spawn")
        size, rows, ddp = results.get()
        print(f"\n{size} processes (one host; chorus over {'shm'})")
        print(f"{'op':<10} {'bytes':>8} {'chorus us':>11} {'gloo us':>11} {'speedup':>8} {'chorus GB/s':>12} {'gloo GB/s':>10}")
        for op, nbytes, m in rows:
            (ct, cb), (gt, gb) = m["chorus"], m["gloo"]
            print(f"{op:<10} {human(nbytes):>8} {ct * 1e6:>11.1f} {gt * 1e6:>11.1f} {gt / ct:>7.2f}x {cb:>12.3f} {gb:>10.3f}")
        if ddp:
            (cs, params), (gs, _) = ddp["chorus"], ddp["gloo"]
            print(f"DDP step, {params / 1e6:.1f} M parameters: chorus {cs * 1e3:.1f} ms, gloo {gs * 1e3:.1f} ms, "
                  f"speedup {gs / cs:.2f}x")
    print(f"load average: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
