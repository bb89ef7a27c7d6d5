#!/usr/bin/env bash
# Runs chorus-misuse under chorusrun and checks that the named ranks report
# an error containing TEXT, that no rank's call completed silently unless
# allowed, and that the job neither hangs nor crashes.
#   expect_errors.sh CHORUSRUN PROGRAM RANKS REPORTING TEXT [chorusrun args] -- [program args]
# REPORTING: comma-separated ranks that must print "rank R: error: ...TEXT...".
# EXPECT_STATUS (environment, default 3: a rank's exit after its error) is
# chorusrun's exit status the job must end with; 0 also requires every rank
# to print "rank R: completed".
set -uo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
chorusrun=$1 program=$2 ranks=$3 reporting=$4 text=$5
expected_status=${EXPECT_STATUS:-3}
shift 5
source "$(dirname "$0")/../launch_args.sh"

timeout 120 "$chorusrun" -n "$ranks" --failure-grace 30 "${launcher_args[@]}" "$program" "${program_args[@]}" >"$log" 2>&1
status=$?
cat "$log" | cut -c1-600
failures=0
[ "$status" -ne 124 ] || { echo "FAIL: the job hung"; failures=1; }
[ "$status" -lt 128 ] || { echo "FAIL: a process crashed or was killed (status $status)"; failures=1; }
[ "$status" -eq "$expected_status" ] || { echo "FAIL: chorusrun exited $status, expected $expected_status"; failures=1; }
if [ "$expected_status" -eq 0 ]; then
  for ((r = 0; r < ranks; ++r)); do
    grep -q "^\[$r\] rank $r: completed\$" "$log" || { echo "FAIL: rank $r did not complete"; failures=1; }
  done
fi
if grep -q 'WRONG RESULT\|was not refused' "$log"; then echo "FAIL: misuse went unnoticed"; failures=1; fi
if grep -q 'TOO LATE' "$log"; then echo "FAIL: a rank learned of the misuse too late"; failures=1; fi
for r in ${reporting//,/ }; do
  grep -F "rank $r: error: " "$log" | grep -qF -- "$text" ||
    { echo "FAIL: rank $r did not report an error containing: $text"; failures=1; }
done
[ $failures -eq 0 ] || exit 1
echo "expect_errors: OK: ranks $reporting reported \"$text\" (chorusrun exit $status)"
