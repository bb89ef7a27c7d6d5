#!/usr/bin/env bash
# stop_phases.sh: a peer stopped (SIGSTOP) at many moments of a collective is
# named by the survivors within a bound, not at CHORUS_TIMEOUT (issue 42's
# lab trial 15: 2 ranks, reduce_scatter 4 KiB over verbs RC, rank 1 stopped
# 1288 ms in, named only by the survivor's 20 s timeout).
#
# Usage: stop_phases.sh --chorusrun PATH --program PATH [options] [-- chorusrun args]
#   --chorusrun PATH  the chorusrun to launch with
#   --program PATH    chorus-fault (tests/faults/fault_rank.cc)
#   --op OP           the collective (default reduce_scatter)
#   --bytes B         its size (default 4096)
#   --from MS --to MS --step MS
#                     stop rank 1 at MS milliseconds into the loop, from..to
#                     by step (default 100..1500 by 97: 15 moments that fall
#                     at different phases of the calls)
#   --bound SEC       a survivor must name rank 1 within SEC seconds of its
#                     stop (default 2.5)
#   --timeout SEC     CHORUS_TIMEOUT of each job (default 20; the bound is far
#                     below it, so a survivor named by its timeout fails)
#   --help            this text
# Arguments after -- go to chorusrun (e.g. --transport verbs).
# Each job: chorusrun -n 2 --failure-grace 5; rank 1 stops itself from a timer
# thread. Passes when rank 0 exits 42 (its error names rank 1) within the
# bound of rank 1's "failing now" line, and chorusrun names rank 1 and exits
# non-zero. Prints a line per moment and "stop_phases: OK" or the failures.
set -uo pipefail

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

chorusrun='' program='' op=reduce_scatter bytes=4096 from=100 to=1500 step=97 bound=2.5 timeout=20
while [ $# -gt 0 ]; do
  case "$1" in
    --chorusrun) chorusrun=$2; shift 2 ;;
    --program) program=$2; shift 2 ;;
    --op) op=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --from) from=$2; shift 2 ;;
    --to) to=$2; shift 2 ;;
    --step) step=$2; shift 2 ;;
    --bound) bound=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "stop_phases: unknown argument \"$1\"; see --help" >&2; exit 2 ;;
  esac
done
[ -x "$chorusrun" ] && [ -x "$program" ] || { echo "stop_phases: --chorusrun and --program must be executables; see --help" >&2; exit 2; }

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failures=0 worst=0 moments=0
for at in $(seq "$from" "$step" "$to"); do
  moments=$((moments + 1))
  timeout $((timeout + 30)) "$chorusrun" -n 2 --timeout "$timeout" --failure-grace 5 "$@" \
    "$program" --victim 1 --how stop --at-ms "$at" --op "$op" --bytes "$bytes" >"$log" 2>&1
  status=$?
  stopped=$(sed -n 's/^\[1\] \([0-9.]*\) rank 1: failing now.*/\1/p' "$log" | head -1)
  named=$(sed -n 's/^\[0\] \([0-9.]*\) rank 0: error after .*names the failed peer.*/\1/p' "$log" | head -1)
  problem=''
  if [ -z "$stopped" ]; then
    problem="rank 1 never stopped (the loop ended first?)"
  elif [ -z "$named" ]; then
    problem="rank 0 did not name rank 1"
  else
    took=$(awk -v a="$stopped" -v b="$named" 'BEGIN { printf "%.2f", b - a }')
    worst=$(awk -v a="$worst" -v b="$took" 'BEGIN { print (b > a) ? b : a }')
    awk -v t="$took" -v b="$bound" 'BEGIN { exit !(t > b) }' && problem="rank 0 named rank 1 after $took s (bound $bound s)"
  fi
  [ "$status" -ne 0 ] || problem="${problem:+$problem; }chorusrun exited 0"
  grep -q "^chorusrun: rank 1 .*stopped by signal" "$log" || problem="${problem:+$problem; }chorusrun did not name rank 1"
  if [ -n "$problem" ]; then
    failures=$((failures + 1))
    echo "stop at $at ms: FAILED: $problem"
    cut -c1-300 "$log" | tail -n 8 | sed 's/^/    /'
  else
    echo "stop at $at ms: rank 0 named rank 1 after $took s"
  fi
done
echo "stop_phases: $op $bytes B, $moments moments, $failures failed, worst $worst s (bound $bound s, load $(cut -d' ' -f1 /proc/loadavg))"
[ "$failures" -eq 0 ] && echo "stop_phases: OK"
[ "$failures" -eq 0 ]
