#!/usr/bin/env bash
# Acceptance: kill -9 of one rank in the middle of a long benchmark makes
# chorusrun exit non-zero within --timeout, name the rank, and leave no
# chorus process and no rank's file in /dev/shm behind (tests/shm_leftovers.sh).
#   kill_rank_mid_benchmark.sh CHORUSRUN CHORUS_BENCH NAME [CHORUSRUN ARGS...]
# NAME labels the result; the arguments choose the transport (e.g.
# --transport shm, or --transport ofi --ofi-provider 'tcp;ofi_rxm').
set -uo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
source "$(dirname "$0")/../shm_leftovers.sh"
chorusrun=$1 bench=$2 name=$3
shift 3
timeout_seconds=20
ranks=4
victim=2
log=$(mktemp)
shm_pids_file=$(mktemp)
trap 'rm -f "$log" "$shm_pids_file"' EXIT

FI_TCP_IFACE=lo "$chorusrun" -n $ranks --timeout $timeout_seconds "$@" \
  "$bench" --op allreduce --min-bytes 1M --max-bytes 16M --iters 100000 --warmup 1 >"$log" 2>&1 &
launcher=$!

# Wait until every rank runs the benchmark (its pid is a child of chorusrun).
pids=""
for _ in $(seq 1 100); do
  pids=$(pgrep -P $launcher -d ' ' 2>/dev/null || true)
  [ "$(echo $pids | wc -w)" -ge $ranks ] && break
  sleep 0.1
done
[ "$(echo $pids | wc -w)" -ge $ranks ] || { echo "FAIL: ranks did not start"; cat "$log"; kill -9 $launcher; exit 1; }
sleep 2  # well inside the measurement loop

# Rank r's pid: chorusrun exports CHORUS_RANK to each child.
victim_pid=""
for pid in $pids; do
  if tr '\0' '\n' </proc/$pid/environ 2>/dev/null | grep -qx "CHORUS_RANK=$victim"; then victim_pid=$pid; fi
done
[ -n "$victim_pid" ] || { echo "FAIL: no process with CHORUS_RANK=$victim among $pids"; kill -9 $launcher; exit 1; }

start=$(date +%s.%N)
kill -9 "$victim_pid"
wait $launcher
status=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)

echo "chorusrun exit status $status after ${elapsed}s (timeout ${timeout_seconds}s)"
grep -i "rank $victim" "$log" | grep -iv '^\[' | head -n 3
failures=0
[ $status -ne 0 ] || { echo "FAIL: chorusrun exited 0"; failures=1; }
[ "$(echo "$elapsed < $timeout_seconds" | bc)" = 1 ] || { echo "FAIL: took ${elapsed}s"; failures=1; }
grep -qiE "rank $victim .*(signal 9|killed)" "$log" || { echo "FAIL: no message naming rank $victim and the signal"; failures=1; }
sleep 0.2
left=""
for pid in $pids; do [ -d /proc/$pid ] && [ "$(cat /proc/$pid/stat 2>/dev/null | awk '{print $3}')" != Z ] && left="$left $pid"; done
[ -z "$left" ] || { echo "FAIL: processes left:$left"; failures=1; }
# The ranks are chorusrun's children: their pids name their /dev/shm files.
printf '%s\n' $pids >"$shm_pids_file"
fail_on_shm_leftovers "$shm_pids_file" || failures=1
if [ $failures -ne 0 ]; then echo "--- output"; tail -n 30 "$log"; exit 1; fi
echo "kill_rank_mid_benchmark: OK ($name): nothing left in /dev/shm"
