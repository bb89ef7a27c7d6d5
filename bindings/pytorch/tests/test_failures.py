"""A rank killed mid-training: every survivor raises a RuntimeError naming
it within a few seconds (far below the group's 60 s timeout); nothing hangs."""
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_killed_rank_is_named_by_every_survivor(tmp_path):
    size, kill_rank = 3, 1
    port, marker = free_port(), str(tmp_path / "killed")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    start = time.time()
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "failure_worker.py"), str(rank), str(size), str(port),
                               str(kill_rank), marker], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for rank in range(size)]
    outputs = []
    for proc in procs:
        try:
            outputs.append(proc.communicate(timeout=45)[0])
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            raise AssertionError(f"a survivor hung: {[p.communicate()[0] for p in procs]}")
    print(f"done in {time.time() - start:.1f} s")
    for rank, (proc, out) in enumerate(zip(procs, outputs)):
        if rank == kill_rank:
            assert proc.returncode == -9, out
            continue
        assert proc.returncode == 3, out
        line = next(l for l in out.splitlines() if l.startswith(f"rank {rank} raised"))
        print(line[:300])
        assert f"rank {kill_rank}" in line.split(": ", 1)[1], line
        assert float(line.split()[3]) < 5.0, line
