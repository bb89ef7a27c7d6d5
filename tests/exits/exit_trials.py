#!/usr/bin/python3
"""Exit trials: a rank leaves the job by some path before the others are done;
every survivor, and chorusrun where it runs the job, must name that rank
within a bound (docs/errors.md, "A rank leaves early").

Each trial launches chorus-fault (tests/faults/fault_rank.cc) on 2-4 ranks
with a random victim, collective, size, transport and moment, and one way of
leaving:
  exit0      std::exit(0) mid-job: no finalize, the Communicator never destroyed
  _exit0     _exit(0) mid-job
  return     return from main: the Communicator destroyed without finalize()
  skip_init  return 0 before Communicator::init (the others wait in init)
  exit3      std::exit(3) mid-job
  kill       SIGKILL mid-job
under one of two launchers:
  chorusrun  build/launcher/chorusrun --failure-grace 5 (the survivors report
             before chorusrun stops them)
  torchrun   a torchrun-style environment made here (RANK, WORLD_SIZE,
             LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
             TORCHELASTIC_RUN_ID): rank 0 serves chorus' store, no launcher
             watches the ranks
A trial passes when every survivor exits 42 (chorus-fault: "the error names
the failed peer") within --bound seconds of the victim's last line, and, under
chorusrun, chorusrun's first failure line names the victim within the bound
and its exit status is not 0. Prints one line per trial and a summary with
the worst times; exits 1 if any trial failed.
"""
import argparse
import os
import random
import re
import select
import socket
import subprocess
import sys
import time

HOWS = ["exit0", "_exit0", "return", "skip_init", "exit3", "kill"]
LAUNCHERS = ["chorusrun", "torchrun"]
OPS = ["allreduce", "broadcast", "barrier", "allgather", "reduce_scatter"]


def free_port_pair():
    """A port P with P+1 free too (chorus serves its store at MASTER_PORT+1 under torchrun)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port >= 65535:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port + 1))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair on 127.0.0.1")


def read_lines(procs, deadline):
    """Reads every process's merged output until all exit or the deadline;
    returns {index: [(arrival time, line)]}."""
    lines = {i: [] for i in range(len(procs))}
    partial = {i: b"" for i in range(len(procs))}
    fds = {p.stdout.fileno(): i for i, p in enumerate(procs)}
    while fds and time.time() < deadline:
        ready, _, _ = select.select(list(fds), [], [], 0.1)
        now = time.time()
        for fd in ready:
            i = fds[fd]
            chunk = os.read(fd, 65536)
            if not chunk:
                del fds[fd]
                continue
            partial[i] += chunk
            *done, partial[i] = partial[i].split(b"\n")
            lines[i].extend((now, line.decode(errors="replace")) for line in done)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    for i, rest in partial.items():
        if rest:
            lines[i].append((time.time(), rest.decode(errors="replace")))
    return lines


def fault_args(how, victim, op, size_bytes, after):
    args = ["--victim", str(victim), "--op", op, "--bytes", str(size_bytes), "--iterations", "100000"]
    if how == "skip_init":
        return args + ["--how", "return", "--before-init"]
    return args + ["--how", how, "--after", str(after)]


VICTIM_LINE = re.compile(r"^(?:\[\d+\] )?(\d+\.\d+) rank (\d+): failing now")
SURVIVOR_LINE = re.compile(r"^(?:\[\d+\] )?(\d+\.\d+) rank (\d+): error after")


def judge(trial, ranks, victim, outputs, statuses, launcher_line, bound):
    """Returns (ok, text, worst survivor delay, chorusrun delay)."""
    start = None
    survivors = {}
    for _, line in outputs:
        m = VICTIM_LINE.match(line)
        if m and int(m.group(2)) == victim:
            start = float(m.group(1))
        m = SURVIVOR_LINE.match(line)
        if m:
            survivors[int(m.group(2))] = (float(m.group(1)), line)
    problems = []
    if start is None:
        problems.append("the victim never printed its 'failing now' line")
        start = 0.0
    worst = 0.0
    for rank in range(ranks):
        if rank == victim:
            continue
        status = statuses.get(rank)
        if rank not in survivors:
            problems.append(f"rank {rank} printed no error (exit status {status})")
            continue
        delay = survivors[rank][0] - start
        worst = max(worst, delay)
        if status is not None and status != 42:
            problems.append(f"rank {rank} exited {status}, not 42: its error does not name rank {victim}: "
                            f"{survivors[rank][1][:300]}")
        if delay > bound:
            problems.append(f"rank {rank} named it after {delay:.2f} s (bound {bound} s)")
    launcher_delay = None
    if launcher_line is not None:
        arrival, line, exit_status = launcher_line
        if line is None:
            problems.append("chorusrun printed no failure line")
        else:
            launcher_delay = arrival - start
            if not re.match(rf"chorusrun: rank {victim}\b", line):
                problems.append(f"chorusrun named another rank first: {line[:300]}")
            if launcher_delay > bound:
                problems.append(f"chorusrun named it after {launcher_delay:.2f} s (bound {bound} s)")
        if exit_status == 0:
            problems.append("chorusrun exited 0")
    return (not problems, "; ".join(problems), worst, launcher_delay)


def run_chorusrun(build, ranks, transport, args, timeout):
    command = [f"{build}/launcher/chorusrun", "-n", str(ranks), "--timeout", str(timeout), "--failure-grace", "5",
               "--transport", transport, f"{build}/tests/faults/chorus-fault"] + args
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = read_lines([proc], time.time() + timeout + 15)[0]
    statuses = {}
    for _, line in lines:
        m = re.match(r"^\[(\d+)\] .* rank \d+: error after", line)
        if m:
            statuses[int(m.group(1))] = 42 if "names the failed peer" in line else 43
    first = next(((t, line) for t, line in lines if line.startswith("chorusrun: rank")), (None, None))
    return lines, statuses, (first[0], first[1], proc.returncode)


def run_torchrun(build, ranks, transport, args, timeout, trial):
    port = free_port_pair()
    procs = []
    for rank in range(ranks):
        env = dict(os.environ)
        for name in list(env):
            if name.startswith("CHORUS_") or name.startswith("OMPI_") or name.startswith("PMIX_") or name.startswith("SLURM_"):
                del env[name]
        env.update(RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(ranks),
                   GROUP_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCHELASTIC_RUN_ID=f"exit-trial-{os.getpid()}-{trial}", CHORUS_TIMEOUT=str(timeout),
                   CHORUS_TRANSPORT=transport)
        procs.append(subprocess.Popen([f"{build}/tests/faults/chorus-fault"] + args, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    per_rank = read_lines(procs, time.time() + timeout + 15)
    lines = sorted(item for rank in per_rank for item in per_rank[rank])
    statuses = {rank: p.returncode for rank, p in enumerate(procs)}
    return lines, statuses, None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build", help="build directory (default: build)")
    parser.add_argument("--trials", type=int, default=24, help="number of trials (default 24)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: time)")
    parser.add_argument("--hows", default=",".join(HOWS), help="ways of leaving, comma separated (default: all)")
    parser.add_argument("--launchers", default=",".join(LAUNCHERS), help="chorusrun,torchrun (default: both)")
    parser.add_argument("--transports", default="shm,tcp", help="CHORUS_TRANSPORT values (default: shm,tcp)")
    parser.add_argument("--bound", type=float, default=2.0, help="seconds a survivor may take (default 2)")
    parser.add_argument("--timeout", type=int, default=20, help="CHORUS_TIMEOUT of the ranks (default 20)")
    opts = parser.parse_args()
    seed = opts.seed if opts.seed is not None else int(time.time())
    rng = random.Random(seed)
    hows = opts.hows.split(",")
    launchers = opts.launchers.split(",")
    transports = opts.transports.split(",")
    for how in hows:
        if how not in HOWS:
            parser.error(f"unknown way of leaving '{how}' ({', '.join(HOWS)})")
    for launcher in launchers:
        if launcher not in LAUNCHERS:
            parser.error(f"unknown launcher '{launcher}' ({', '.join(LAUNCHERS)})")
    if not os.access(f"{opts.build}/tests/faults/chorus-fault", os.X_OK):
        print(f"exit_trials: {opts.build}/tests/faults/chorus-fault is not built", file=sys.stderr)
        return 2
    print(f"exit_trials: {opts.trials} trials, seed {seed}, load {os.getloadavg()[0]:.1f}", flush=True)
    failed = 0
    skipped = 0
    worst = {}
    for trial in range(opts.trials):
        how = hows[trial % len(hows)]
        launcher = launchers[(trial // len(hows)) % len(launchers)]
        transport = rng.choice(transports)
        ranks = rng.randint(2, 4)
        victim = rng.randrange(ranks)
        op = rng.choice(OPS)
        size_bytes = rng.choice([64, 4096, 1 << 20])
        after = rng.randint(0, 30)
        args = fault_args(how, victim, op, size_bytes, after)
        if launcher == "torchrun" and how == "skip_init":
            # Nobody can tell the others: the rank never reached the store,
            # and no launcher reports into it (docs/errors.md).
            print(f"trial {trial + 1}/{opts.trials}: torchrun skip_init: SKIP (a rank that never joins is named "
                  f"only by chorusrun; elsewhere the others report it missing every 2 s until CHORUS_TIMEOUT)",
                  flush=True)
            skipped += 1
            continue
        began = time.time()
        if launcher == "chorusrun":
            lines, statuses, launcher_line = run_chorusrun(opts.build, ranks, transport, args, opts.timeout)
        else:
            lines, statuses, launcher_line = run_torchrun(opts.build, ranks, transport, args, opts.timeout, trial)
        ok, problems, delay, launcher_delay = judge(trial, ranks, victim, lines, statuses, launcher_line, opts.bound)
        key = (launcher, how)
        worst[key] = max(worst.get(key, 0.0), delay, launcher_delay or 0.0)
        what = (f"trial {trial + 1}/{opts.trials}: {launcher} {transport} {ranks} ranks, rank {victim} {how} "
                f"({op} {size_bytes} B, after {after}): ")
        if ok:
            chorusrun_part = f", chorusrun {launcher_delay:.2f} s" if launcher_delay is not None else ""
            print(what + f"ok, survivors named it within {delay:.2f} s{chorusrun_part} "
                  f"({time.time() - began:.1f} s)", flush=True)
        else:
            failed += 1
            print(what + "FAILED: " + problems, flush=True)
            for _, line in lines[-12:]:
                print("    " + line[:400])
    print(f"exit_trials: {opts.trials - failed - skipped} of {opts.trials} trials passed, {failed} failed, "
          f"{skipped} skipped (seed {seed}, load "
          f"{os.getloadavg()[0]:.1f}); worst time to name the rank that left, per launcher and way:")
    for (launcher, how), seconds in sorted(worst.items()):
        print(f"  {launcher:9} {how:9} {seconds:.2f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
