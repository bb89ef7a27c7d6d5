#!/usr/bin/env bash
# shellcheck disable=SC2016 # the guest commands expand their variables in the guest
# self_test.sh: checks what the lab promises (docs/lab.md) with two boots:
#   one guest:  rxe0 is active; the command runs in the caller's directory
#               with the caller's environment; stdout and stderr come back
#               apart; -w directories are written through, the rest of the
#               host is not touched; the command's exit status comes back;
#               a 50000-line burst that ends the command comes back whole
#               (the end of the output once got lost on a loaded host).
#   two guests: an RC ping-pong between them across the virtual switch, and
#               the first non-zero status of the two is returned.
# Exits 77 (ctest: skipped) with the reason when the lab cannot run here.
set -euo pipefail
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
lab=$(cd "$(dirname "$0")" && pwd)/run.sh
if ! reason=$("$lab" --check -n 2); then echo "SKIPPED: $reason"; exit 77; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/chorus-lab-self-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/shared" "$work/cwd"
failures=0
check() {   # check DESCRIPTION CONDITION...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}

# --- one guest
cd "$work/cwd"
status=0
LAB_SELF_TEST_WORD=passed-through "$lab" -w "$work/shared" -c '
  ibv_devinfo -d "$CHORUS_LAB_DEV" | grep -q PORT_ACTIVE && echo "rxe0 active"
  echo "directory $PWD"
  echo "variable $LAB_SELF_TEST_WORD"
  echo "to stderr" >&2
  echo written > '"$work/shared/file"'
  echo discarded > '"$work/cwd/file"'
  seq -f "burst %g" 1 50000
  exit 7' > "$work/stdout" 2> "$work/stderr" || status=$?
grep -v '^burst ' "$work/stdout" || true
cat "$work/stderr"
check "the command's exit status (7) comes back" test "$status" = 7
check "rxe0 is active in the guest" grep -qx "rxe0 active" "$work/stdout"
check "the command runs in the caller's directory" grep -qx "directory $work/cwd" "$work/stdout"
check "the caller's environment reaches the command" grep -qx "variable passed-through" "$work/stdout"
check "stderr comes back on stderr" grep -qx "to stderr" "$work/stderr"
check "stderr stays out of stdout" bash -c '! grep -q "to stderr" "$1"' _ "$work/stdout"
check "a -w directory is written through" grep -qx written "$work/shared/file"
check "other host paths are not written" test ! -e "$work/cwd/file"
check "a 50000-line burst at the end comes back whole, in order, no end marker" \
  bash -c '[[ $(grep -c "^burst " "$1") == 50000 && $(tail -n 1 "$1") == "burst 50000" ]] && ! grep -q chorus-lab-end "$1"' _ "$work/stdout"

# --- two guests: rank 0 serves, rank 1 connects (and retries while rank 0
# is still starting); rank 1 then exits 5, rank 0 with 0.
status=0
"$lab" -n 2 -c '
  server=${CHORUS_LAB_IPS%% *}
  if [ "$CHORUS_LAB_RANK" = 0 ]; then
    ibv_rc_pingpong -d "$CHORUS_LAB_DEV" -g "$CHORUS_LAB_GID_INDEX" -n 10
  else
    for try in 1 2 3 4 5 6 7 8 9 10; do
      ibv_rc_pingpong -d "$CHORUS_LAB_DEV" -g "$CHORUS_LAB_GID_INDEX" -n 10 "$server" && exit 5
      sleep 1
    done
    exit 1
  fi' > "$work/stdout" 2> "$work/stderr" || status=$?
cat "$work/stdout" "$work/stderr"
check "two guests: the first non-zero status (rank 1's 5) comes back" test "$status" = 5
check "two guests: rank 0 completed the ping-pong" grep -q '^\[r0\] 10 iters in' "$work/stdout"
check "two guests: rank 1 completed the ping-pong" grep -q '^\[r1\] 10 iters in' "$work/stdout"

if ((failures)); then echo "lab self test: $failures check(s) FAILED"; exit 1; fi
echo "lab self test: OK"
