#!/usr/bin/env bash
# Runs one fault trial and checks what docs/architecture.md §9 promises: every surviving
# rank gets an error naming the failed peer within CHORUS_TIMEOUT, chorusrun
# exits non-zero, no process is left, and no rank's file is left in
# /dev/shm (tests/shm_leftovers.sh).
#   survivors_report.sh CHORUSRUN FAULT_PROGRAM RANKS TIMEOUT EXPECTED_NAMING [chorusrun args] -- [chorus-fault args]
# EXPECTED_NAMING: how many ranks must print "names the failed peer".
set -uo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
chorusrun=$1 program=$2 ranks=$3 timeout_seconds=$4 expected=$5
shift 5
source "$(dirname "$0")/../launch_args.sh"
source "$(dirname "$0")/../shm_leftovers.sh"
shm_pids_file=$(mktemp)
record_pids=(sh -c 'echo $$ >>"$0"; exec "$@"' "$shm_pids_file")
trap 'rm -f "$log" "$shm_pids_file"' EXIT
# Marks this trial's ranks: others may run the same program on the machine
# at the same time, and their processes are neither ours to count nor to kill.
trial="survivors-$$-$(date +%s%N)"
trial_pids() { grep -lsz "^CHORUS_TEST_FAULT_TRIAL=$trial\$" /proc/[0-9]*/environ | cut -d/ -f3 | tr '\n' ' '; }

start=$(date +%s.%N)
# The grace lets survivors report instead of being stopped at the first death.
timeout $((timeout_seconds * 3 + 30)) "$chorusrun" -n "$ranks" --timeout "$timeout_seconds" \
  --failure-grace $((timeout_seconds + 10)) -x "CHORUS_TEST_FAULT_TRIAL=$trial" "${launcher_args[@]}" "${record_pids[@]}" "$program" "${program_args[@]}" \
  >"$log" 2>&1
status=$?
elapsed=$(echo "$(date +%s.%N) - $start" | bc)

grep -E 'error after|failing now|chorusrun:' "$log" | cut -c1-400
named=$(grep -c 'names the failed peer' "$log")
failures=0
[ "$status" -ne 0 ] || { echo "FAIL: chorusrun exited 0"; failures=1; }
[ "$status" -ne 124 ] || { echo "FAIL: the job hung"; failures=1; }
[ "$named" -eq "$expected" ] || { echo "FAIL: $named ranks named the failed peer, expected $expected"; failures=1; }
if grep -q 'DOES NOT NAME\|no error after\|WRONG RESULT' "$log"; then echo "FAIL: a rank missed the fault"; failures=1; fi
# SURVIVORS_EXPECT: an extended regex some rank's output must match as well.
if [ -n "${SURVIVORS_EXPECT:-}" ] && ! grep -Eq "$SURVIVORS_EXPECT" "$log"; then
  echo "FAIL: no output matches \"$SURVIVORS_EXPECT\""; failures=1
fi
# SURVIVORS_WITHIN: seconds from the victim's "failing now" to each survivor's
# error line (both print the wall-clock time first).
if [ -n "${SURVIVORS_WITHIN:-}" ]; then
  # A pipe, not <(...): the lab guest has no /dev/fd.
  slowest=$(sed 's/^\[[0-9]*\] //' "$log" |
            awk '/failing now/ { t = $1 + 0 } /error after/ { d = $1 - t; if (d > m) m = d } END { printf "%.3f", m }')
  echo "survivors_report: slowest survivor reported ${slowest}s after the fault (limit ${SURVIVORS_WITHIN}s)"
  [ "$(echo "$slowest <= $SURVIVORS_WITHIN" | bc)" = 1 ] || { echo "FAIL: a survivor took ${slowest}s"; failures=1; }
fi
# Each survivor's error must come within CHORUS_TIMEOUT of the fault (plus start-up).
limit=$((timeout_seconds + 15))
[ "$(echo "$elapsed < $limit" | bc)" = 1 ] || { echo "FAIL: took ${elapsed}s (limit ${limit}s)"; failures=1; }
sleep 0.3
left=$(trial_pids)
[ -z "$left" ] || { echo "FAIL: processes left: $left"; kill -9 $left 2>/dev/null; failures=1; }
# Every rank started (recorded its pid), and none left a file in /dev/shm.
recorded=$(wc -l <"$shm_pids_file")
[ "$recorded" -eq "$ranks" ] || { echo "FAIL: $recorded of $ranks ranks recorded their pid"; failures=1; }
fail_on_shm_leftovers "$shm_pids_file" || failures=1
if [ $failures -ne 0 ]; then echo "--- output"; tail -n 40 "$log"; exit 1; fi
echo "survivors_report: OK: $named of $ranks ranks named the failed peer; chorusrun exit $status after ${elapsed}s (timeout ${timeout_seconds}s); nothing left in /dev/shm"
