#!/usr/bin/env bash
# Randomized fault injection (docs/errors.md, "Faults"): each trial starts a
# job of 2..MAX ranks running one random collective in a loop, and kills
# (SIGKILL) or stops (SIGSTOP) a random rank at a random moment. A trial
# passes when every survivor returns an error naming that rank within
# CHORUS_TIMEOUT, chorusrun exits non-zero naming it, nothing hangs or
# crashes, no process is left, and no rank's file is left in /dev/shm
# (tests/shm_leftovers.sh). Prints one line per trial and the counts.
set -uo pipefail

usage() {
  cat <<'TEXT'
Usage: fault_trials.sh --chorusrun PATH --program PATH [options] [-- chorusrun args]

  --chorusrun PATH   the chorusrun to launch jobs with
  --program PATH     chorus-fault (tests/faults/fault_rank.cc)
  --trials N         number of trials (default 20)
  --seed S           random seed (default: from the clock; printed, so a run can be replayed)
  --timeout SEC      CHORUS_TIMEOUT of each job; a survivor must report within it (default 10)
  --max-ranks R      jobs have 2..R ranks (default 4)
  --name TEXT        transport name for the summary (default: the chorusrun args)
Arguments after -- go to chorusrun, e.g. -- --ofi-provider 'tcp;ofi_rxm' -x FI_TCP_IFACE=lo
Exit status: 0 if every trial passed, 1 otherwise, 2 on a usage error.
TEXT
}

chorusrun="" program="" trials=20 seed=$(( $(date +%s%N) % 32768 )) timeout_s=10 max_ranks=4 name=""
while [ $# -gt 0 ]; do
  case "$1" in
    --chorusrun) chorusrun=${2:-}; shift 2 ;;
    --program) program=${2:-}; shift 2 ;;
    --trials) trials=${2:-}; shift 2 ;;
    --seed) seed=${2:-}; shift 2 ;;
    --timeout) timeout_s=${2:-}; shift 2 ;;
    --max-ranks) max_ranks=${2:-}; shift 2 ;;
    --name) name=${2:-}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "fault_trials.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
for number in "$trials" "$seed" "$timeout_s" "$max_ranks"; do
  [[ "$number" =~ ^[0-9]+$ ]] || { echo "fault_trials.sh: \"$number\" is not a whole number" >&2; exit 2; }
done
[ -x "$chorusrun" ] && [ -x "$program" ] || { echo "fault_trials.sh: --chorusrun and --program must be executables" >&2; exit 2; }
[ "$max_ranks" -ge 2 ] || { echo "fault_trials.sh: --max-ranks must be at least 2" >&2; exit 2; }
launcher_args=("$@")
[ -n "$name" ] || name=${launcher_args[*]:-default transport}
RANDOM=$seed
ops=(allreduce broadcast barrier reduce allgather reduce_scatter alltoall)
sizes=(8 4096 65536 1048576)
hows=(kill stop)
log=$(mktemp)
source "$(dirname "$0")/../shm_leftovers.sh"
shm_pids_file=$(mktemp)
record_pids=(sh -c 'echo $$ >>"$0"; exec "$@"' "$shm_pids_file")
trap 'rm -f "$log" "$shm_pids_file"' EXIT
passed=0 detected=0 misreported=0 hangs=0 crashes=0 leftovers=0 shm_left=0 slowest=0
echo "fault_trials: $trials trials over $name, seed $seed, CHORUS_TIMEOUT ${timeout_s}s"

for ((trial = 1; trial <= trials; ++trial)); do
  ranks=$((2 + RANDOM % (max_ranks - 1)))
  victim=$((RANDOM % ranks))
  op=${ops[RANDOM % ${#ops[@]}]}
  bytes=${sizes[RANDOM % ${#sizes[@]}]}
  how=${hows[RANDOM % ${#hows[@]}]}
  at_ms=$((200 + RANDOM % 1300))
  label="fault-trial-$$-$trial"
  : >"$shm_pids_file"
  timeout $((timeout_s * 3 + 30)) "$chorusrun" -n "$ranks" --timeout "$timeout_s" --failure-grace $((timeout_s + 5)) \
    "${launcher_args[@]}" "${record_pids[@]}" "$program" --victim "$victim" --at-ms "$at_ms" --how "$how" --op "$op" --bytes "$bytes" \
    --iterations 1000000000 --label "$label" >"$log" 2>&1
  status=$?
  sleep 0.2
  problems=()
  if [ "$status" -eq 124 ]; then problems+=("hang"); hangs=$((hangs + 1)); fi
  [ "$status" -ne 0 ] || problems+=("chorusrun exited 0")
  grep -q "^chorusrun: rank $victim (pid" "$log" || problems+=("chorusrun did not name rank $victim")
  named=$(grep -c 'names the failed peer' "$log")
  if [ "$named" -ne $((ranks - 1)) ]; then problems+=("$named of $((ranks - 1)) survivors named rank $victim"); fi
  if grep -q 'DOES NOT NAME\|no error after\|WRONG RESULT' "$log"; then
    problems+=("a survivor misreported"); misreported=$((misreported + 1))
  fi
  if grep -q 'Segmentation fault\|Aborted\|AddressSanitizer\|runtime error:\|terminate called' "$log"; then
    problems+=("crash"); crashes=$((crashes + 1))
  fi
  # Seconds from the fault to the last survivor's error (both print wall-clock times).
  latency=$(awk '/failing now/ {fault = $2} /error after/ {if ($2 > last) last = $2}
                 END {if (fault == "" || last == "") print "-"; else printf "%.2f", last - fault}' "$log")
  if [ "$latency" = "-" ] || [ "$(echo "$latency > $timeout_s" | bc)" = 1 ]; then
    problems+=("survivors reported after ${latency}s")
  elif [ "$(echo "$latency > $slowest" | bc)" = 1 ]; then
    slowest=$latency
  fi
  # Nothing of the job may stay in /dev/shm: a killed rank cannot remove its
  # shm files, chorusrun does (common/shm_regions.hpp); the others remove
  # their own. Every rank's pid is checked, not only the victim's.
  recorded=$(wc -l <"$shm_pids_file")
  [ "$recorded" -eq "$ranks" ] || problems+=("$recorded of $ranks ranks recorded their pid")
  left=$(shm_left_by "$shm_pids_file")
  if [ -n "$left" ]; then
    problems+=("left in /dev/shm: $left"); shm_left=$((shm_left + 1))
    for name in $left; do rm -f "/dev/shm/$name"; done
  fi
  if pgrep -f -- "$label" >/dev/null; then
    problems+=("processes left"); leftovers=$((leftovers + 1)); pkill -9 -f -- "$label"
  fi
  summary="trial $trial/$trials: $ranks ranks, $op of $bytes B, $how rank $victim at ${at_ms} ms:"
  if [ ${#problems[@]} -eq 0 ]; then
    passed=$((passed + 1)); detected=$((detected + 1))
    echo "$summary $named/$((ranks - 1)) survivors named rank $victim in ${latency}s; chorusrun exit $status"
  else
    echo "$summary FAILED: $(IFS=';'; echo "${problems[*]}")"
    sed 's/^/    | /' "$log" | cut -c1-400 | tail -n 20
  fi
done

echo "fault_trials: $name: $trials trials, $detected faults reported by every survivor naming the failed rank," \
     "$misreported misreported, $hangs hangs, $crashes crashes, $leftovers with processes left," \
     "$shm_left with files left in /dev/shm;" \
     "slowest report ${slowest}s after the fault (CHORUS_TIMEOUT ${timeout_s}s)"
[ "$passed" -eq "$trials" ] || exit 1
echo "fault_trials: OK"
