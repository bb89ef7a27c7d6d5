#!/usr/bin/env python3
"""Mismatch trials (issue 42, item 3; docs/errors.md, "Misuse by the application").

Runs JOBS jobs of chorus-mismatch under chorusrun. Each job has 2 to 4 ranks
and one disagreement, chosen at random: the kind (root, collective, count,
dtype, op, blocking against non-blocking), the collective, the rank that
disagrees, the transport (shm or tcp) and the size (small: on the shm board;
large: over 64 KiB, by rendezvous). Every rank then calls barrier twice.

A job passes when every rank fails with CHORUS_ERR_INVALID_ARGUMENT within
--limit seconds of its call, and its error names both calls: the odd rank's
and the others' (as "broadcast(count 8 of int32, root 1)"). CHORUS_TIMEOUT
is --timeout (20 s), far above the limit, so a mismatch found only by the
timeout fails the job.

The script prints one line per job, then a summary with the failures and the
worst time. --seed S replays a run (the seed is printed first).

  tests/misuse/mismatch_trials.py --chorusrun build/launcher/chorusrun \\
      --program build/tests/misuse/chorus-mismatch --jobs 300
"""
import argparse
import random
import re
import subprocess
import sys
import time

SMALL, LARGE = 2, 20000  # int32 elements: 8 bytes (the shm board), 80 KB (rendezvous)

ROOTED = ["broadcast", "reduce", "gather", "scatter", "gatherv", "scatterv", "ibroadcast", "ireduce"]
REDUCTIONS = ["allreduce", "reduce", "reduce_scatter", "iallreduce", "ireduce"]
HAS_NONBLOCKING = ["allreduce", "broadcast", "reduce", "allgather", "alltoall", "reduce_scatter", "barrier"]
KINDS = ["root", "collective", "count", "dtype", "op", "blocking"]



class Call:
    def __init__(self, name, count, dtype="int32", op="sum", root=0):
        self.name, self.count, self.dtype, self.op, self.root = name, count, dtype, op, root

    def spec(self):
        return f"{self.name}:{self.count}:{self.dtype}:{self.op}:{self.root}"

    def copy(self, **changes):
        call = Call(self.name, self.count, self.dtype, self.op, self.root)
        for key, value in changes.items():
            setattr(call, key, value)
        return call


def make_job(rng, kinds, transports):
    ranks = rng.randint(2, 4)
    kind = rng.choice(kinds)
    transport = rng.choice(transports)
    large = rng.random() < 0.5
    count = LARGE if large else SMALL
    odd = rng.randrange(ranks)
    root = rng.randrange(ranks)
    if kind == "root":
        name = rng.choice(ROOTED)
        normal = Call(name, count, root=root)
        odd_call = normal.copy(root=rng.choice([r for r in range(ranks) if r != root]))
    elif kind == "collective":
        names = ["allreduce", "broadcast", "reduce", "allgather", "alltoall", "reduce_scatter", "gather", "scatter",
                 "barrier"]
        first, second = rng.sample(names, 2)
        normal, odd_call = Call(first, count, root=root), Call(second, count, root=root)
    elif kind == "count":
        name = rng.choice(["allreduce", "broadcast", "reduce", "allgather", "alltoall", "reduce_scatter", "gather",
                           "scatter", "iallreduce", "ibroadcast"])
        normal = Call(name, count, root=root)
        odd_call = normal.copy(count=count + rng.choice([1, count]))
    elif kind == "dtype":
        name = rng.choice(["allreduce", "reduce", "broadcast", "allgather", "iallreduce"])
        normal = Call(name, count, root=root)
        odd_call = normal.copy(dtype=rng.choice(["float32", "int64", "uint32"]))
    elif kind == "op":
        name = rng.choice(REDUCTIONS)
        normal = Call(name, count, root=root)
        odd_call = normal.copy(op=rng.choice(["max", "min", "prod"]))
    else:  # blocking against non-blocking
        name = rng.choice(HAS_NONBLOCKING)
        normal, odd_call = Call(name, count, root=root), Call("i" + name, count, root=root)
        if rng.random() < 0.5:
            normal, odd_call = odd_call, normal
    return dict(ranks=ranks, kind=kind, transport=transport, large=large, odd=odd, normal=normal, odd_call=odd_call)


LINE = re.compile(r"rank (\d+): (called (.*)|error (\S+) ([0-9.]+) s: (.*)|completed ([0-9.]+) s)$")


def names_call(text, description):
    # "allreduce(...)" must not be found inside "iallreduce(...)".
    return re.search(r"(?<![a-z_])" + re.escape(description), text) is not None


def run_job(args, number, job):
    command = [args.chorusrun, "-n", str(job["ranks"]), "--timeout", str(args.timeout), "--failure-grace",
               str(args.timeout), "--transport", job["transport"], *args.launcher_args, args.program,
               "--call", job["normal"].spec(),
               "--odd-call", job["odd_call"].spec(), "--odd", str(job["odd"])]
    started = time.monotonic()
    try:
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                timeout=args.timeout * 3 + 30)
        output, status = result.stdout, result.returncode
    except subprocess.TimeoutExpired as e:
        output, status = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""), None
    wall = time.monotonic() - started
    called, outcomes = {}, {}
    for raw in output.splitlines():
        line = re.sub(r"^\[\d+\]\s*", "", raw.strip())
        m = LINE.search(line)
        if not m:
            continue
        rank = int(m.group(1))
        if m.group(3) is not None:
            called[rank] = m.group(3)
        elif m.group(4) is not None:
            outcomes[rank] = ("error", m.group(4), float(m.group(5)), m.group(6))
        else:
            outcomes[rank] = ("completed", None, float(m.group(7)), "")
    problems = []
    if status is None:
        problems.append("the job hung")
    odd_text = called.get(job["odd"])
    normal_rank = next((r for r in range(job["ranks"]) if r != job["odd"]), None)
    normal_text = called.get(normal_rank)
    worst = 0.0
    for rank in range(job["ranks"]):
        outcome = outcomes.get(rank)
        if outcome is None:
            problems.append(f"rank {rank} reported nothing")
            continue
        kind, code, seconds, text = outcome
        worst = max(worst, seconds)
        if kind != "error":
            problems.append(f"rank {rank} completed")
            continue
        if code != "CHORUS_ERR_INVALID_ARGUMENT":
            problems.append(f"rank {rank} failed with {code} after {seconds:.2f} s: {text[:300]}")
            continue
        if seconds > args.limit:
            problems.append(f"rank {rank} took {seconds:.2f} s (over {args.limit} s)")
        missing = [d for d in (odd_text, normal_text) if d is None or not names_call(text, d)]
        if missing:
            problems.append(f"rank {rank}'s error does not name {' and '.join(str(d) for d in missing)}: {text[:400]}")
    summary = (f"job {number}: {job['kind']:<10} {job['transport']} np{job['ranks']} "
               f"{'large' if job['large'] else 'small'} rank {job['odd']} {job['odd_call'].spec()} "
               f"vs {job['normal'].spec()}: ")
    return problems, worst, wall, summary, command, output


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chorusrun", default="build/launcher/chorusrun")
    parser.add_argument("--program", default="build/tests/misuse/chorus-mismatch")
    parser.add_argument("--jobs", type=int, default=30, help="jobs to run (default 30)")
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: random, printed)")
    parser.add_argument("--timeout", type=int, default=20, help="CHORUS_TIMEOUT of the ranks (default 20)")
    parser.add_argument("--limit", type=float, default=2.0, help="seconds each rank has to report (default 2)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated subset of " + ",".join(KINDS))
    parser.add_argument("--transports", default="shm,tcp", help="comma-separated subset of shm,tcp")
    parser.add_argument("--verbose", action="store_true", help="print every job's output")
    parser.add_argument("launcher_args", nargs="*", metavar="-- CHORUSRUN_ARGS",
                        help="more chorusrun options for every job, e.g. -- -x CHORUS_PROGRESS=caller")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 31)
    print(f"mismatch_trials: seed {seed}, {args.jobs} jobs", flush=True)
    rng = random.Random(seed)
    kinds = args.kinds.split(",")
    transports = args.transports.split(",")
    failures, worst, by_kind = 0, 0.0, {}
    for number in range(1, args.jobs + 1):
        job = make_job(rng, kinds, transports)
        problems, job_worst, wall, summary, command, output = run_job(args, number, job)
        worst = max(worst, job_worst)
        stats = by_kind.setdefault(job["kind"], [0, 0, 0.0])
        stats[0] += 1
        stats[2] = max(stats[2], job_worst)
        if problems:
            failures += 1
            stats[1] += 1
            print(summary + "FAIL", flush=True)
            for problem in problems:
                print("    " + problem)
            print("    replay: " + " ".join(f"'{c}'" if ";" in c else c for c in command))
            if args.verbose:
                print(output)
        else:
            print(summary + f"ok (slowest rank {job_worst:.2f} s, job {wall:.1f} s)", flush=True)
            if args.verbose:
                print(output)
    for kind, (jobs, failed, slowest) in sorted(by_kind.items()):
        print(f"  {kind:<10} {jobs:4d} jobs, {failed} failed, slowest rank {slowest:.2f} s")
    print(f"mismatch_trials: {args.jobs} jobs, {failures} failed, worst time {worst:.2f} s (limit {args.limit} s), "
          f"seed {seed}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
