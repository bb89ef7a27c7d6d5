#!/usr/bin/env bash
# The Slurm cluster of cluster.sh does what the PMIx tests rely on
# (docs/slurm.md): `srun -N 4 -n 8 --mpi=pmix` gives 8 tasks, 2 per node
# h0..h3, each with PMIx's rank equal to Slurm's; an arbitrary distribution
# gives 3,1,4,2 tasks per node; and a task killed mid-step makes `srun -K`
# exit non-zero within 5 s. Exit 77 (SKIP) where the cluster cannot start.
#   harness_check.sh [--help]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then sed -n '2,7s/^# \{0,1\}//p' "$0"; exit 0; fi
if [ "${1:-}" = --_inside ]; then
  failures=0
  fail() { echo "FAIL: $*"; failures=1; }
  # 8 tasks, 2 per node, PMIx rank = Slurm rank.
  out=$(srun -N 4 -n 8 --ntasks-per-node=2 --mpi=pmix bash -c 'echo "task $SLURM_PROCID $(hostname) ${PMIX_RANK:-none} ${PMIX_NAMESPACE:-none}"' 2>&1)
  status=$?
  echo "$out"
  [ $status -eq 0 ] || fail "srun -N 4 -n 8 exited with $status"
  for r in 0 1 2 3 4 5 6 7; do
    echo "$out" | grep -qE "^task $r h[0-3] $r [^ ]+$" || fail "task $r: no line 'task $r hN $r NAMESPACE' (PMIx rank missing or different)"
  done
  for h in h0 h1 h2 h3; do
    [ "$(echo "$out" | grep -c "^task [0-7] $h ")" -eq 2 ] || fail "node $h did not run 2 tasks"
  done
  # 3,1,4,2 tasks per node.
  hostfile=$(mktemp)
  printf '%s\n' h0 h0 h0 h1 h2 h2 h2 h2 h3 h3 >"$hostfile"
  out=$(SLURM_HOSTFILE=$hostfile srun -n 10 --distribution=arbitrary --mpi=pmix bash -c 'echo "task $SLURM_PROCID $(hostname)"' 2>&1)
  status=$?
  rm -f "$hostfile"
  [ $status -eq 0 ] || fail "the arbitrary distribution exited with $status: $out"
  counts=$(for h in h0 h1 h2 h3; do echo "$out" | grep -c "^task [0-9]* $h$"; done | tr '\n' ' ')
  echo "tasks per node (h0..h3): $counts"
  [ "$counts" = "3 1 4 2 " ] || fail "the arbitrary distribution gave $counts tasks per node, not 3 1 4 2"
  # A task killed mid-step: srun -K ends the step and exits non-zero quickly.
  start=$(date +%s.%N)
  srun -N 4 -n 8 -K bash -c 'if [ "$SLURM_PROCID" = 3 ]; then kill -9 $$; fi; sleep 30' >/dev/null 2>&1
  status=$?
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  echo "killed task: srun exited with $status after $took s"
  [ $status -ne 0 ] || fail "srun exited 0 although task 3 was killed"
  awk -v t="$took" 'BEGIN { exit !(t <= 5) }' || fail "srun took $took s (at most 5 s) to end a step with a killed task"
  [ $failures -eq 0 ] || exit 1
  echo "slurm harness: OK"
  exit 0
fi
exec "$here/cluster.sh" -- "$here/harness_check.sh" --_inside
