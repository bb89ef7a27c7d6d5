"""Every operation x dtype x size of the chorus backend, checked in each rank
against Gloo's result in the same run (a Gloo group beside the chorus one),
and against a reference computed locally from every rank's (deterministic)
input where Gloo lacks the op or dtype (reduce_scatter, alltoall, bfloat16,
int16, bool). Inputs are small integers, so float sums and products are exact
in any order: results must be equal, not close."""

import warnings

import torch
import torch.distributed as dist

# torch 1.13 warns that _all_gather_base, _reduce_scatter_base and all_reduce_coalesced will go: tested all the same.
warnings.filterwarnings("ignore", message=".*(deprecated|private function).*", category=UserWarning)

R = dist.ReduceOp
TORCH_MAJOR = int(torch.__version__.split(".")[0])
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int16, torch.int32,
          torch.int64, torch.uint8, torch.bool]
# 0, 1, odd (given non-contiguous), past the 16 KiB eager limit for every dtype, and 4 MiB of float32.
SIZES = [0, 1, 7, 20011]
LARGE = 1 << 20
REDUCTIONS = ["SUM", "PRODUCT", "MIN", "MAX"]  # by name: ReduceOp objects compare and hash oddly


def values(rank, n, dtype, op=None, salt=0):
    """Rank `rank`'s input: integers small enough that every reduction is exact in every dtype."""
    i = torch.arange(n, dtype=torch.int64)
    if op == "PRODUCT":
        base = (i + rank + salt) % 3 + 1  # at most 3^4 = 81: exact in bfloat16
    else:
        base = (i * 7 + rank * 5 + salt * 3) % 31  # 0..30
        if dtype == torch.bool:
            base = base % 2
        elif dtype not in (torch.uint8,):
            base = base - 15
    return base.to(dtype)


def strided(tensor, non_contiguous):
    """The same values as a non-contiguous view (every other element of a larger tensor)."""
    if not non_contiguous or tensor.numel() == 0:
        return tensor
    wide = torch.zeros(tensor.numel() * 2, dtype=tensor.dtype)
    wide[::2] = tensor
    return wide[::2]


def reduce_all(tensors, op, dtype):
    stacked = torch.stack([t.to(torch.int64) if dtype != torch.bool else t for t in tensors])
    if dtype == torch.bool:
        return {"SUM": stacked.any(0), "PRODUCT": stacked.all(0), "MIN": stacked.all(0), "MAX": stacked.any(0)}[op]
    if dtype.is_floating_point:
        stacked = torch.stack([t.to(torch.float64) for t in tensors])
    out = {"SUM": lambda: stacked.sum(0), "PRODUCT": lambda: stacked.prod(0), "MIN": lambda: stacked.min(0).values,
           "MAX": lambda: stacked.max(0).values}[op]()
    return out.to(dtype)  # integer results wrap, as both backends' do


class Case:
    def __init__(self, rank, size, n, dtype, non_contiguous, members=None):
        self.rank, self.size, self.n, self.dtype, self.nc = rank, size, n, dtype, non_contiguous
        self.members = members or list(range(size))

    def g(self, rank):
        """torch's src/dst/peer arguments are global ranks, also for a sub-group."""
        return self.members[rank]

    def input(self, rank=None, op=None, salt=0):
        return values(self.rank if rank is None else rank, self.n, self.dtype, op, salt)

    def tensor(self, op=None, salt=0):
        return strided(self.input(op=op, salt=salt), self.nc)


# Each op: run(group, case) -> list of tensors (the results this rank can
# check) and expected(case) -> the same list computed locally.
def allreduce_op(op):
    def run(group, c):
        t = c.tensor(op)
        dist.all_reduce(t, op=getattr(R, op), group=group)
        return [t]

    def expected(c):
        return [reduce_all([c.input(r, op) for r in range(c.size)], op, c.dtype)]
    return run, expected


def allreduce_avg():
    def run(group, c):
        t = c.tensor()
        if dist.get_backend(group) == "gloo":  # Gloo has no AVG: its sum, divided alike
            dist.all_reduce(t, op=R.SUM, group=group)
            t.div_(c.size)
        else:
            dist.all_reduce(t, op=R.AVG, group=group)
        return [t]

    def expected(c):
        return [reduce_all([c.input(r) for r in range(c.size)], "SUM", c.dtype).div_(c.size)]
    return run, expected


PREMUL_FACTOR = 2.0  # exact in every floating dtype


def allreduce_premul_sum():
    """ReduceOp.PREMUL_SUM (torch.distributed._make_nccl_premul_sum): each input scaled, then summed."""
    def run(group, c):
        t = c.tensor()
        if dist.get_backend(group) == "gloo":  # Gloo has no PREMUL_SUM: scaled, then its sum
            t.mul_(PREMUL_FACTOR)
            dist.all_reduce(t, op=R.SUM, group=group)
        else:
            dist.all_reduce(t, op=dist._make_nccl_premul_sum(PREMUL_FACTOR), group=group)
        return [t]

    def expected(c):
        return [reduce_all([c.input(r) for r in range(c.size)], "SUM", c.dtype).mul_(PREMUL_FACTOR)]
    return run, expected


def coalesced_tensor_ops(group, c):
    """torch 2.x: all_gather_into_tensor and reduce_scatter_tensor issued inside
    _coalescing_manager (as FSDP does), one work each for the lot."""
    gathered = [torch.empty(c.n * c.size, dtype=c.dtype) for _ in range(2)]
    with dist._coalescing_manager(group=group, async_ops=True) as manager:
        for salt, out in enumerate(gathered):
            dist.all_gather_into_tensor(out, c.input(salt=salt), group=group)
    manager.wait()
    scattered = [torch.empty(c.n, dtype=c.dtype) for _ in range(2)]
    with dist._coalescing_manager(group=group, async_ops=True) as manager:
        for salt, out in enumerate(scattered):
            blocks = torch.cat([values(c.rank, c.n, c.dtype, salt=10 * salt + r) for r in range(c.size)])
            dist.reduce_scatter_tensor(out, blocks, group=group)
    manager.wait()
    return gathered + scattered


def coalesced_tensor_ops_expected(c):
    n, dt, size = c.n, c.dtype, c.size
    return [torch.cat([values(r, n, dt, salt=salt) for r in range(size)]) for salt in range(2)] + \
        [reduce_all([values(r, n, dt, salt=10 * salt + c.rank) for r in range(size)], "SUM", dt) for salt in range(2)]


def allreduce_coalesced(group, c):
    tensors = [c.tensor("MAX", salt=s) for s in range(3)]
    dist.all_reduce_coalesced(tensors, op=R.MAX, group=group)
    return tensors


def allreduce_coalesced_expected(c):
    return [reduce_all([c.input(r, "MAX", salt=s) for r in range(c.size)], "MAX", c.dtype) for s in range(3)]


def broadcast(group, c):
    t = c.tensor() if c.rank == c.size - 1 else strided(torch.zeros(c.n, dtype=c.dtype), c.nc)
    dist.broadcast(t, src=c.g(c.size - 1), group=group)
    return [t]


def reduce_op(op):
    root = 1

    def run(group, c):
        t = c.tensor(op)
        dist.reduce(t, dst=c.g(root), op=getattr(R, op), group=group)
        return [t] if c.rank == root else []

    def expected(c):
        return [reduce_all([c.input(r, op) for r in range(c.size)], op, c.dtype)] if c.rank == root else []
    return run, expected


def allgather(group, c):
    out = [torch.empty(c.n, dtype=c.dtype) for _ in range(c.size)]
    dist.all_gather(out, c.tensor(), group=group)
    return out


def allgather_base(group, c):
    out = torch.empty(c.n * c.size, dtype=c.dtype)
    dist._all_gather_base(out, c.tensor(), group=group)
    return [out]


def gather(group, c):
    out = [torch.empty(c.n, dtype=c.dtype) for _ in range(c.size)] if c.rank == 0 else None
    dist.gather(c.tensor(), out, dst=c.g(0), group=group)
    return out or []


def scatter(group, c):
    src = c.size - 1
    out = strided(torch.zeros(c.n, dtype=c.dtype), c.nc)
    blocks = [values(src, c.n, c.dtype, salt=r) for r in range(c.size)] if c.rank == src else None
    dist.scatter(out, blocks, src=c.g(src), group=group)
    return [out]


def reduce_scatter(group, c):
    out = strided(torch.zeros(c.n, dtype=c.dtype), c.nc)
    dist.reduce_scatter(out, [values(c.rank, c.n, c.dtype, salt=r) for r in range(c.size)], op=R.SUM, group=group)
    return [out]


def reduce_scatter_base(group, c):
    out = torch.zeros(c.n, dtype=c.dtype)
    dist._reduce_scatter_base(out, torch.cat([values(c.rank, c.n, c.dtype, salt=r) for r in range(c.size)]),
                              op=R.MAX, group=group)
    return [out]


def block_rows(sender, receiver, n):
    """Rows rank `sender` sends rank `receiver` in the uneven all-to-all (0 for some pairs)."""
    return ((sender + 2 * receiver) % 3) * max(1, n // 4) if n else 0


def rows_of(sender, receiver, n, dtype):
    return values(sender, block_rows(sender, receiver, n) * 2, dtype, salt=receiver).view(-1, 2)


def alltoall_single(group, c):
    out = torch.empty(c.n * c.size, dtype=c.dtype)
    dist.all_to_all_single(out, torch.cat([values(c.rank, c.n, c.dtype, salt=j) for j in range(c.size)]), group=group)
    return [out]


def alltoall_single_uneven(group, c):
    send = [rows_of(c.rank, j, c.n, c.dtype) for j in range(c.size)]
    recv_rows = [block_rows(i, c.rank, c.n) for i in range(c.size)]
    out = torch.empty(sum(recv_rows), 2, dtype=c.dtype)
    dist.all_to_all_single(out, torch.cat(send), output_split_sizes=recv_rows,
                           input_split_sizes=[block_rows(c.rank, j, c.n) for j in range(c.size)], group=group)
    return [out]


def alltoall_lists(group, c):
    out = [torch.empty(block_rows(i, c.rank, c.n), 2, dtype=c.dtype) for i in range(c.size)]
    dist.all_to_all(out, [rows_of(c.rank, j, c.n, c.dtype) for j in range(c.size)], group=group)
    return out


def point_to_point(group, c):
    """A ring of isend/irecv, then every rank > 0 sends to rank 0, which receives from any source."""
    nxt, prev = (c.rank + 1) % c.size, (c.rank - 1) % c.size
    got = strided(torch.zeros(c.n, dtype=c.dtype), c.nc)
    requests = [dist.isend(c.tensor(), c.g(nxt), group=group, tag=5), dist.irecv(got, c.g(prev), group=group, tag=5)]
    for request in requests:
        request.wait()
    results = [got]
    if c.rank == 0:
        by_sender = {}
        for _ in range(c.size - 1):
            t = torch.zeros(c.n, dtype=c.dtype)
            sender = dist.recv(t, group=group, tag=6)  # any source: returns who sent it
            by_sender[c.members.index(sender)] = t
        assert sorted(by_sender) == list(range(1, c.size)), sorted(by_sender)
        results += [by_sender[r] for r in sorted(by_sender)]
    else:
        dist.send(c.tensor(), c.g(0), group=group, tag=6)
    return results


def expected_of(c, name):
    n, dt, size, rank = c.n, c.dtype, c.size, c.rank
    table = {
        "broadcast": lambda: [values(size - 1, n, dt)],
        "allgather": lambda: [values(r, n, dt) for r in range(size)],
        "_allgather_base": lambda: [torch.cat([values(r, n, dt) for r in range(size)])],
        "gather": lambda: [values(r, n, dt) for r in range(size)] if rank == 0 else [],
        "scatter": lambda: [values(size - 1, n, dt, salt=rank)],
        "reduce_scatter": lambda: [reduce_all([values(r, n, dt, salt=rank) for r in range(size)], "SUM", dt)],
        "_reduce_scatter_base": lambda: [reduce_all([values(r, n, dt, salt=rank) for r in range(size)], "MAX", dt)],
        "alltoall_base": lambda: [torch.cat([values(i, n, dt, salt=rank) for i in range(size)])],
        "alltoall_base_uneven": lambda: [torch.cat([rows_of(i, rank, n, dt) for i in range(size)])],
        "alltoall": lambda: [rows_of(i, rank, n, dt) for i in range(size)],
        "send_recv": lambda: [values((rank - 1) % size, n, dt)] + (
            [values(r, n, dt) for r in range(1, size)] if rank == 0 else []),
        "allreduce_coalesced": lambda: allreduce_coalesced_expected(c),
        "coalesced_tensor_ops": lambda: coalesced_tensor_ops_expected(c),
    }
    return table[name]()


def operations():
    ops = []
    for op in REDUCTIONS:
        run, expected = allreduce_op(op)
        ops.append((f"allreduce.{op}", run, expected))
        run, expected = reduce_op(op)
        ops.append((f"reduce.{op}", run, expected))
    run, expected = allreduce_avg()
    ops.append(("allreduce.AVG", run, expected))
    run, expected = allreduce_premul_sum()
    ops.append(("allreduce.PREMUL_SUM", run, expected))
    for name, run in [("allreduce_coalesced", allreduce_coalesced), ("broadcast", broadcast), ("allgather", allgather),
                      ("_allgather_base", allgather_base), ("gather", gather), ("scatter", scatter),
                      ("reduce_scatter", reduce_scatter), ("_reduce_scatter_base", reduce_scatter_base),
                      ("alltoall_base", alltoall_single), ("alltoall_base_uneven", alltoall_single_uneven),
                      ("alltoall", alltoall_lists), ("send_recv", point_to_point)]:
        ops.append((name, run, lambda c, name=name: expected_of(c, name)))
    if TORCH_MAJOR >= 2:  # torch 1.13 has no _coalescing_manager
        ops.append(("coalesced_tensor_ops", coalesced_tensor_ops, lambda c: expected_of(c, "coalesced_tensor_ops")))
    return ops


def same(a, b):
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, b))


def run_matrix(rank, size, chorus_group, gloo_group, sizes=SIZES, dtypes=DTYPES, large=True, members=None):
    """Returns (checks made, compared with Gloo); raises AssertionError naming the first mismatch."""
    checks = gloo_checks = 0
    plan = [(n, dt) for n in sizes for dt in dtypes]
    if large:
        plan += [(LARGE, torch.float32), (LARGE, torch.int8)]
    for n, dtype in plan:
        for name, run, expected in operations():
            if name.endswith(("AVG", "PREMUL_SUM")) and not dtype.is_floating_point:
                continue
            if dtype == torch.bool and name.startswith(("allreduce_coalesced", "_reduce_scatter_base",
                                                        "coalesced_tensor_ops")):
                continue  # MAX of bool is covered by allreduce.MAX
            c = Case(rank, size, n, dtype, non_contiguous=(n == 7), members=members)
            ours = run(chorus_group, c)
            what = f"{name} of {n} x {dtype} on {size} ranks (rank {rank})"
            want = expected(c)
            assert same(ours, want), f"{what}: chorus {ours[:2]} != expected {want[:2]}"
            checks += 1
            if n == 0:
                continue  # Gloo's allgather of 0 elements dies with SIGFPE (torch 1.13): the reference stands
            try:
                # Gloo gets contiguous tensors: given strided ones it reduces the wrong elements (torch 1.13).
                theirs = run(gloo_group, Case(rank, size, n, dtype, non_contiguous=False, members=members))
            except RuntimeError as e:  # Gloo lacks it: the local reference above stands
                assert any(why in str(e) for why in ("does not support", "no support", "not supported",
                                                     "Invalid scalar type")), f"{what}: gloo: {e}"
                continue
            assert same(ours, theirs), f"{what}: chorus {ours[:2]} != gloo {theirs[:2]}"
            gloo_checks += 1
    dist.barrier(group=chorus_group)
    return checks, gloo_checks
