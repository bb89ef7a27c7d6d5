#!/usr/bin/env bash
# Issue 21's launcher cases with real processes (docs/launcher.md, errors.md):
#   first_hour.sh CASE CHORUSRUN PROGRAM [MPIRUN]
# CASE:
#   leave-early-chorusrun  the last of 3 ranks returns from main early: every
#   leave-early-mpirun     other rank fails within seconds naming it (not at
#                          CHORUS_TIMEOUT=30), and chorusrun names it too
#   segfault-status        a segfaulting rank gives 139 and "signal 11", also when
#                          IPATH_NO_BACKTRACE is unset (PSM's handler would exit 1)
#   interrupt-status       Ctrl-C (SIGINT to chorusrun) gives 130
#   shm-leftovers          ranks killed at random moments of setup, or leaving
#                          by _exit(1) right after init, leave nothing in /dev/shm
set -uo pipefail
case_name=$1 chorusrun=$2 program=$3 mpirun=${4:-}
log=$(mktemp)
pids_file=$(mktemp)
trap 'rm -f "$log" "$pids_file"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
now_ms() { date +%s%3N; }
mpirun_args=(--allow-run-as-root --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo)

expect_leaver_named() {  # LOG ELAPSED_MS LIMIT_MS [SOME]
  # SOME: mpirun kills the job when the first rank exits with an error, so
  # the other survivor may not get to print: one naming rank 2 is enough,
  # and no survivor may blame anything else.
  local elapsed=$2 limit=$3 some=${4:-}
  cut -c1-400 "$1"
  [ "$elapsed" -lt "$limit" ] || fail "the job took ${elapsed} ms (limit ${limit} ms; CHORUS_TIMEOUT is 30 s)"
  local named=0
  for r in 0 1; do
    if grep "rank $r: error: " "$1" | grep -q "rank 2 left the job"; then
      named=$((named + 1))
    elif [ -z "$some" ] || grep -q "rank $r: error: " "$1"; then
      fail "rank $r did not name rank 2 as the rank that left"
    fi
  done
  [ "$named" -ge 1 ] || fail "no rank named rank 2 as the rank that left"
}

case $case_name in
  leave-early-chorusrun)
    start=$(now_ms)
    timeout 120 "$chorusrun" -n 3 --timeout 30 --failure-grace 10 "$program" leave-early >"$log" 2>&1
    status=$? elapsed=$(( $(now_ms) - start ))
    expect_leaver_named "$log" "$elapsed" 8000
    [ "$status" -ne 0 ] || fail "chorusrun exited 0"
    # The rank that left is named first, the survivor that failed because of it
    # after. chorusrun's first line has one of two forms: rank 2 still running
    # when a survivor failed ("rank 2 left the job (...) while the others still
    # ran; then rank 1 ..."), or rank 2 already exited 0 ("rank 2 (pid P on
    # HOST) left the job (...) and exited with status 0 ..."), which a loaded
    # host makes likely.
    first_line=$(grep -m 1 "^chorusrun: " "$log")
    echo "$first_line" | grep -Eq "^chorusrun: rank 2 (\(pid [0-9]+ on [^)]+\) )?left the job \(destroyed its Communicator without finalize\(\)\)" ||
      fail "chorusrun did not name rank 2 first (its first line: ${first_line:-none})"
    grep -Eq "^chorusrun: rank 2 .*; then rank [01] \(pid [0-9]+ on [^)]+\) exited with status 3" "$log" ||
      fail "chorusrun did not name the survivor that failed after rank 2 left"
    ;;
  leave-early-mpirun)
    start=$(now_ms)
    timeout 120 "$mpirun" "${mpirun_args[@]}" -x CHORUS_TIMEOUT=30 -np 3 "$program" leave-early >"$log" 2>&1
    status=$? elapsed=$(( $(now_ms) - start ))
    expect_leaver_named "$log" "$elapsed" 10000 some
    [ "$status" -ne 0 ] || fail "mpirun exited 0"
    ;;
  segfault-status)
    for wrapper in "" "env -u IPATH_NO_BACKTRACE"; do
      # shellcheck disable=SC2086 # the wrapper is words
      timeout 60 "$chorusrun" -n 2 --timeout 10 $wrapper "$program" segfault >"$log" 2>&1
      status=$?
      tail -n 2 "$log"
      [ "$status" -eq 139 ] || fail "status $status for a segfault (wrapper: '${wrapper}'), expected 139"
      grep -q "^chorusrun: rank 1 .* was killed by signal 11" "$log" || fail "chorusrun did not report signal 11"
    done
    ;;
  interrupt-status)
    set -m  # job control: the background job gets SIGINT like a terminal's Ctrl-C would deliver it
    for wrapper in "" "env -u IPATH_NO_BACKTRACE"; do
      # shellcheck disable=SC2086
      timeout 60 "$chorusrun" -n 2 --timeout 10 $wrapper "$program" sleep >"$log" 2>&1 &
      job=$!
      for _ in $(seq 100); do [ "$(grep -c ': ready' "$log")" -ge 2 ] && break; sleep 0.1; done
      kill -INT "$(pgrep -P "$job" chorusrun || echo "$job")"
      wait "$job"
      status=$?
      tail -n 2 "$log"
      [ "$status" -eq 130 ] || fail "status $status after SIGINT (wrapper: '${wrapper}'), expected 130"
    done
    ;;
  shm-leftovers)
    # Each rank records its pid, then execs the program: what /dev/shm holds
    # under those pids afterwards is a leftover.
    recording=(sh -c 'echo $$ >>"$0"; exec "$@"' "$pids_file" "$program")
    trial() {  # DESCRIPTION COMMAND...: runs a job, kills one rank at a random moment of setup
      local description=$1
      shift
      : >"$pids_file"
      "$@" >"$log" 2>&1 &
      local job=$! delay_ms=$((RANDOM % 700))
      sleep "$(printf '0.%03d' "$delay_ms")"
      local victim
      victim=$(shuf -n 1 "$pids_file" 2>/dev/null)
      [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
      wait "$job"
      sleep 0.2
      local left=""
      while read -r pid; do
        left+=$(ls /dev/shm 2>/dev/null | grep "^${pid}:" | tr '\n' ' ')
      done <"$pids_file"
      echo "trial: $description, kill -9 after ${delay_ms} ms: left in /dev/shm: ${left:-nothing}"
      [ -z "$left" ] || fail "$description left $left"
    }
    for _ in 1 2 3 4; do
      trial "chorusrun shm" timeout 60 "$chorusrun" -n 3 --timeout 10 --transport shm "${recording[@]}" all-sizes
    done
    trial "chorusrun ofi shm provider" timeout 60 "$chorusrun" -n 3 --timeout 10 --ofi-provider shm \
      "${recording[@]}" all-sizes
    if [ -n "$mpirun" ]; then
      for _ in 1 2 3; do
        trial "mpirun shm" timeout 60 "$mpirun" "${mpirun_args[@]}" -x CHORUS_TIMEOUT=10 -x CHORUS_TRANSPORT=shm -np 3 \
          "${recording[@]}" all-sizes
      done
    fi
    # No kill: rank 1 leaves by _exit(1) at once after init (no destructors).
    for config in "--transport shm" "--ofi-provider shm"; do
      : >"$pids_file"
      # shellcheck disable=SC2086
      timeout 60 "$chorusrun" -n 3 --timeout 10 $config "${recording[@]}" exit-after-init >"$log" 2>&1
      sleep 0.2
      left=""
      while read -r pid; do left+=$(ls /dev/shm | grep "^${pid}:" | tr '\n' ' '); done <"$pids_file"
      echo "exit-after-init ($config): left in /dev/shm: ${left:-nothing}"
      [ -z "$left" ] || fail "exit-after-init ($config) left $left"
    done
    ;;
  *)
    echo "unknown case $case_name"
    exit 2
    ;;
esac
[ $failures -eq 0 ] || exit 1
echo "first_hour: $case_name: OK"
