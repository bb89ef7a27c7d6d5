#!/usr/bin/env bash
# lab.sh single|two BUILD_DIR: runs the verbs tests against a real kernel
# verbs stack (soft-RoCE, rdma_rxe) in the project's lab (tests/lab,
# docs/lab.md).
#   single: one guest; ctest -L verbs inside it (2, 3 and 4 ranks on rxe0,
#           SRQ, rdma_cm, faults, CQ sizing). The guest's writes are discarded.
#   two:    two guests on a virtual switch, one rank each (two hosts).
# Exits 77 (skipped) with the reason when the lab cannot run here.
set -uo pipefail
mode=${1:-} build=$(cd "${2:-.}" && pwd)
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
lab=$source_dir/tests/lab/run.sh
case $mode in
  single) guests=1 ;;
  two) guests=2 ;;
  *) echo "usage: lab.sh single|two BUILD_DIR" >&2; exit 2 ;;
esac
if ! reason=$("$lab" --check -n "$guests"); then
  echo "SKIPPED: $reason"
  exit 77
fi
cd "$build"
case $mode in
  single) exec "$lab" -t 3000 -- "$source_dir/tests/verbs/lab_ctest.sh" "$build" ;;
  two) exec "$lab" -n 2 -t 1800 -- "$source_dir/tests/verbs/two_hosts.sh" "$build" ;;
esac
