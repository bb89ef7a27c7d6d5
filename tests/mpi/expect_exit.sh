#!/usr/bin/env bash
# Runs a command and passes only if it exits with EXPECTED_STATUS and its
# combined output matches the extended regular expression PATTERN.
#
#   expect_exit.sh EXPECTED_STATUS PATTERN command [args...]
set -uo pipefail
expected=$1 pattern=$2
shift 2
output=$(timeout 120 "$@" 2>&1)
status=$?
echo "$output"
if [ "$status" -ne "$expected" ]; then
  echo "FAILED: exit status $status, expected $expected"
  exit 1
fi
if ! grep -Eq -- "$pattern" <<<"$output"; then
  echo "FAILED: the output does not match: $pattern"
  exit 1
fi
echo "expect_exit: status $status and the expected message"
