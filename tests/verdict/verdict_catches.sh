#!/usr/bin/env bash
# Shows that tests/job_verdict.py fails the jobs a pass regex lets through
# (docs/testing.md, "How a multi-rank test is judged"). Each case runs a
# small chorusrun job of `sh -c` ranks (chorusrun puts CHORUS_RANK in each
# rank's environment) under the verdict and checks the verdict's exit status
# and the reason it gives:
#   - a clean job passes;
#   - a rank that crashes (SIGSEGV) or exits 1 AFTER every rank printed its
#     pass line and rank 0 its summary fails it, by the exit status;
#   - a rank that never prints its pass line fails it, naming that rank,
#     also when another rank prints that rank's line for it;
#   - a missing required line, or a forbidden one, fails it;
#   - a job expected to fail passes only with the expected status;
#   - a job that exits with the skip status is reported skipped (77).
#
#   verdict_catches.sh CHORUSRUN
# Prints one line per case and "verdict_catches: OK: N cases"; exit 1 if any
# case went wrong.
set -uo pipefail
case "${1:-}" in -h|--help|"") sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; [ -n "${1:-}" ]; exit $? ;; esac
chorusrun=$1
verdict=$(cd "$(dirname "$0")/.." && pwd)/job_verdict.py
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cases=0 failures=0

# check NAME EXPECTED_VERDICT_STATUS EXPECTED_TEXT VERDICT_ARGS... -- RANK_SCRIPT
# Runs RANK_SCRIPT on 3 ranks under the verdict.
check() {
  local name=$1 expected=$2 text=$3
  shift 3
  local args=()
  while [ "$1" != "--" ]; do args+=("$1"); shift; done
  shift
  cases=$((cases + 1))
  /usr/bin/python3 "$verdict" "${args[@]}" -- "$chorusrun" -n 3 --timeout 30 sh -c "$1" >"$out" 2>&1
  local status=$?
  if [ "$status" -ne "$expected" ]; then
    echo "verdict_catches: FAILED: $name: the verdict exited $status, expected $expected"
    sed 's/^/    | /' "$out"
    failures=$((failures + 1))
  elif ! grep -qF -- "$text" "$out"; then
    echo "verdict_catches: FAILED: $name: the verdict did not say: $text"
    sed 's/^/    | /' "$out"
    failures=$((failures + 1))
  else
    echo "verdict_catches: $name: verdict exit $status: $(grep -F -- "$text" "$out" | head -n 1)"
  fi
}

# After a crash case: every line a pass regex would have looked for was
# printed, so only the exit status could catch it.
printed_everything() {
  if ! grep -q "^\[0\] fake: summary" "$out" || grep -q "did not print" "$out"; then
    echo "verdict_catches: FAILED: $1: not every pass line and the summary were printed: the case shows nothing"
    failures=$((failures + 1))
  fi
}

pass=(--ranks 3 --pass-line '^fake: rank {rank} passed$' --require 'fake: summary')
# Every rank prints its pass line; rank 0 also the summary a pass regex would look for.
lines='[ "$CHORUS_RANK" = 0 ] && echo "fake: summary"; echo "fake: rank $CHORUS_RANK passed"'

check "clean job" 0 "job_verdict: OK" "${pass[@]}" -- "$lines"
# The crash comes after every line a pass regex would see (the other ranks
# have ended by then): only the exit status shows it.
check "rank 2 crashes after its pass line" 1 "exit status 139 (signal SIGSEGV), expected 0" "${pass[@]}" -- \
  "$lines; [ \"\$CHORUS_RANK\" = 2 ] && { sleep 0.3; kill -SEGV \$\$; }; exit 0"
printed_everything "rank 2 crashes after its pass line"
check "rank 1 exits 1 after its pass line" 1 "exit status 1, expected 0" "${pass[@]}" -- \
  "$lines; [ \"\$CHORUS_RANK\" = 1 ] && { sleep 0.3; exit 1; }; exit 0"
printed_everything "rank 1 exits 1 after its pass line"
check "rank 1 never prints its pass line" 1 "rank 1 did not print its pass line" "${pass[@]}" -- \
  "[ \"\$CHORUS_RANK\" = 0 ] && echo 'fake: summary'; [ \"\$CHORUS_RANK\" = 1 ] || echo \"fake: rank \$CHORUS_RANK passed\"; exit 0"
check "rank 0 prints rank 1's pass line for it" 1 "rank 1 did not print its pass line" "${pass[@]}" -- \
  "[ \"\$CHORUS_RANK\" = 0 ] && { echo 'fake: summary'; echo 'fake: rank 1 passed'; }; [ \"\$CHORUS_RANK\" = 1 ] || echo \"fake: rank \$CHORUS_RANK passed\"; exit 0"
check "the summary is missing" 1 "no output matches the required 'fake: summary'" "${pass[@]}" -- \
  'echo "fake: rank $CHORUS_RANK passed"'
check "a forbidden line" 1 "matches the forbidden 'FAILED:'" "${pass[@]}" --forbid 'FAILED:' -- \
  "$lines; [ \"\$CHORUS_RANK\" = 2 ] && echo 'FAILED: something'; exit 0"
check "a job expected to fail fails as expected" 0 "job_verdict: OK" --status 1 --require 'fake: refused' -- \
  '[ "$CHORUS_RANK" = 1 ] && { echo "fake: refused"; exit 1; }; sleep 1'
check "a job expected to fail succeeds" 1 "exit status 0, expected 1" --status 1 -- "$lines"
check "a job expected to fail crashes instead" 1 "exit status 139 (signal SIGSEGV), expected 1" --status 1 -- \
  '[ "$CHORUS_RANK" = 1 ] && kill -SEGV $$; sleep 1'
check "a step that could not run" 77 "job_verdict: SKIPPED" "${pass[@]}" --skip-status 77 -- \
  'echo "SKIP: no such thing here"; exit 77'

if [ "$failures" -ne 0 ]; then
  echo "verdict_catches: FAILED: $failures of $cases cases"
  exit 1
fi
echo "verdict_catches: OK: $cases cases"
