#!/usr/bin/env bash
# Runs one case of chorus-local-args (local_args.c) under chorusrun and
# checks every rank's lines (docs/errors.md, "Bad arguments" and "Finalize
# with requests outstanding"): which rank reports which text, that each
# call, the allreduce after it and finalize took at most 2.5 s (CHORUS_TIMEOUT
# is 10 s here), that the communicator is usable where it must be, and that
# every rank reached its end (no crash, no hang).
#   local_args.sh CHORUSRUN PROGRAM RANKS CASE [chorusrun args]
set -uo pipefail
chorusrun=$1 program=$2 ranks=$3 case=$4
shift 4
log=$(mktemp)
trap 'rm -f "$log"' EXIT

timeout 60 "$chorusrun" -n "$ranks" --timeout 10 "$@" "$program" --case "$case" >"$log" 2>&1
status=$?
cut -c1-700 "$log"
failures=0
fail() { echo "FAIL: $*"; failures=1; }
# The lines rank R printed, without chorusrun's "[R] " prefix.
lines() { grep -F "[$1] rank $1: " "$log" | sed "s/^\[$1\] //"; }
# expect R PREFIX [TEXT]: rank R printed a line starting with PREFIX that contains TEXT.
expect() {
  lines "$1" | grep -F "rank $1: $2" | grep -qF -- "${3:-}" || fail "rank $1 printed no line \"$2...${3:-}\""
}
# quick R WHAT [LIMIT]: rank R's "WHAT took S s" is at most LIMIT (2.5) seconds.
quick() {
  local took
  took=$(lines "$1" | sed -n "s/^rank $1: $2 took \([0-9.]*\) s$/\1/p" | head -1)
  if [ -z "$took" ] || ! awk -v t="$took" -v limit="${3:-2.5}" 'BEGIN { exit !(t <= limit) }'; then
    fail "rank $1: $2 took ${took:-?} s (at most ${3:-2.5} s expected)"
  fi
}

[ "$status" -eq 0 ] || fail "chorusrun exited with $status"
grep -q 'WRONG RESULT' "$log" && fail "a wrong result"
everyone=$(seq 0 $((ranks - 1)))
for r in $everyone; do expect "$r" "exit"; done

# A point-to-point call that only rank 1 makes: refused there, nothing else changes.
p2p_text() {
  case "$1" in
    send_null) echo "send: null buffer with 4 bytes" ;;
    recv_null) echo "recv: null buffer with 4 bytes" ;;
    isend_null) echo "isend: null buffer with 4 bytes" ;;
    irecv_null) echo "irecv: null buffer with 4 bytes" ;;
    isend_null_big) echo "isend: null buffer with 1048576 bytes" ;;
    send_peer) echo "send: peer $ranks is not a rank of this communicator" ;;
    recv_peer) echo "peer -5 is not a rank" ;;
    send_tag) echo "send: tag -1 outside" ;;
    irecv_tag) echo "irecv: tag -7 outside" ;;
    send_huge) echo "send: 18446744073709551615 bytes is more than the largest message" ;;
  esac
}
# A collective where one rank's buffer is null: "BAD_RANK|that rank's error".
collective_case() {
  local n=$((4 * ranks))
  case "$1" in
    gather_root_null) echo "0|gather on rank 0 (the root) failed: null receive buffer with $n elements" ;;
    gatherv_root_null) echo "0|gatherv on rank 0 (the root) failed: null receive buffer with $n elements" ;;
    reduce_root_null | ireduce_root_null) echo "0|reduce on rank 0 (the root) failed: null receive buffer with count 4" ;;
    scatter_root_null) echo "0|scatter on rank 0 (the root) failed: null send buffer with $n elements" ;;
    broadcast_root_null) echo "0|broadcast on rank 0 (the root) failed: null buffer with count 4" ;;
    allreduce_one_null | iallreduce_one_null) echo "1|allreduce on rank 1 failed: null send buffer with count 4" ;;
    gather_nonroot_null) echo "1|gather on rank 1 failed: null send buffer with 4 elements" ;;
    gather_inplace_nonroot) echo "1|gather on rank 1 failed: chorus_gather: CHORUS_IN_PLACE on rank 1, which is not the root (0)" ;;
  esac
}

if [ -n "$(p2p_text "$case")" ]; then
  expect 1 "error: CHORUS_ERR_INVALID_ARGUMENT: " "$(p2p_text "$case")"
  for r in $everyone; do
    expect "$r" "usable"
    quick "$r" call
    quick "$r" check
  done
elif [ -n "$(collective_case "$case")" ]; then
  bad=$(collective_case "$case" | cut -d'|' -f1)
  text=$(collective_case "$case" | cut -d'|' -f2)
  expect "$bad" "error: CHORUS_ERR_INVALID_ARGUMENT: " "$text"
  expect "$bad" "unusable: " "the communicator is unusable after an earlier error: $text"
  for r in $everyone; do
    quick "$r" call
    quick "$r" check
    [ "$r" = "$bad" ] && continue
    # Told in the call where it waits for the bad rank, else by the next call that does.
    lines "$r" | grep -E "^rank $r: (error|unusable): " | grep -qF "rank $bad left the job after an error: $text" ||
      fail "rank $r did not report rank $bad's error: $text"
  done
elif [ "$case" = finalize_detached_failed ]; then
  # Rank 0's detached send failed because rank 1 failed; rank 0 made no call
  # since: its finalize reports it.
  expect 1 "error: CHORUS_ERR_INVALID_ARGUMENT: " "allreduce on rank 1 failed: null send buffer with count 1"
  expect 0 "finalize: CHORUS_ERR_PEER_FAILED: " "failed earlier with nobody waiting for it (a detached request): isend on rank 0 failed: rank 1 left the job after an error: allreduce on rank 1 failed"
  for r in $everyone; do
    quick "$r" finalize
    [ "$r" -gt 1 ] && expect "$r" "finalize: CHORUS_ERR_PEER_FAILED: " "rank 1 left the job after an error: allreduce on rank 1 failed"
  done
elif [ "$case" = finalize_icollective_late ] ||
     { [ "$case" = finalize_icollective ] && lines 0 | grep -q "^rank 0: finalize: CHORUS_ERR_PEER_FAILED: "; }; then
  # Rank 0's detached iallreduce, which nobody joins, failed before rank 0
  # reached finalize: its progress thread found that the others had
  # finalized after one call (docs/errors.md, "Finalize with requests
  # outstanding"). Rank 0's finalize reports that failure; the others learn
  # that rank 0 left after it. Always so when rank 0 comes 2 s late; by
  # chance on a slow host in finalize_icollective (else it is cancelled below).
  lines 0 | grep "^rank 0: finalize: CHORUS_ERR_PEER_FAILED: " |
    grep -F "failed earlier with nobody waiting for it (a detached request): iallreduce on rank 0 failed: " |
    grep -qE "rank [12] left the job \(called finalize\(\)\) after 1 collective call on this communicator; this rank is in call 2 \(iallreduce\), which rank [12] never joins" ||
    fail "rank 0's finalize did not report its detached iallreduce that ranks 1 and 2 never join"
  for r in $everyone; do
    [ "$r" -gt 0 ] && expect "$r" "finalize: CHORUS_ERR_PEER_FAILED: " "rank 0 left the job after an error: iallreduce on rank 0 failed: "
    quick "$r" finalize 4
  done
else
  case "$case" in
    finalize_irecv) cancelled=("0|irecv from rank 1 (tag 5, 64-byte buffer)") ;;
    finalize_irecv_both)
      cancelled=()
      for r in $everyone; do cancelled+=("$r|irecv from rank $(((r + 1) % ranks)) (tag $((5 + r)), 64-byte buffer)"); done ;;
    finalize_isend_detached) cancelled=("0|isend to rank 1 (tag 9, 1048576 bytes)") ;;
    finalize_icollective) cancelled=("0|iallreduce (collective call 2 of its communicator)") ;;
    finalize_matched_late) cancelled=() ;;
    *) fail "unknown case $case" ;;
  esac
  for r in $everyone; do
    entry=$(printf '%s\n' "${cancelled[@]}" | grep "^$r|" | cut -d'|' -f2)
    if [ -z "$entry" ]; then
      expect "$r" "finalize: success"
    else
      expect "$r" "finalize: CHORUS_ERR_INVALID_ARGUMENT: " "was cancelled: $entry"
      case "$case" in
        finalize_irecv*) expect "$r" "kept request: CHORUS_ERR_INVALID_ARGUMENT: " "cancelled $entry" ;;  # the others were freed
      esac
    fi
    # The late match: rank 0 waits in finalize for rank 1's receive, 2 s after it.
    if [ "$case" = finalize_matched_late ]; then quick "$r" finalize 4; else quick "$r" finalize; fi
  done
fi
[ $failures -eq 0 ] || exit 1
echo "local_args: OK: $case on $ranks ranks (chorusrun exit $status)"
