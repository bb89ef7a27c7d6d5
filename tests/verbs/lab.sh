#!/usr/bin/env bash
# lab.sh single|two BUILD_DIR: runs the verbs tests against a real kernel
# verbs stack (soft-RoCE, rdma_rxe) in ../shared/verbslab.
#   single: one guest; ctest -L verbs inside it (2, 3 and 4 ranks on rxe0,
#           SRQ, rdma_cm, faults, CQ sizing). The guest's writes are discarded.
#   two:    two guests on a virtual switch, one rank each (two hosts).
# Exits 77 (skipped) with the reason when the lab is not available.
set -uo pipefail
mode=$1 build=$(cd "$2" && pwd)
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
lab=${CHORUS_VERBSLAB:-$source_dir/../shared/verbslab}
if [ ! -x "$lab/run.sh" ]; then
  echo "SKIPPED: no verbs lab at $lab (set CHORUS_VERBSLAB or place ../shared beside the source tree)"
  exit 77
fi
if [ ! -e /var/cache/verbslab/initrd.img ] && [ -z "${VERBSLAB_CACHE:-}" ]; then
  echo "SKIPPED: the verbs lab is not prepared; run $lab/setup.sh once (.ci/run does)"
  exit 77
fi
cd "$build"
case $mode in
  single)
    exec "$lab/run.sh" -t 3000 -- ctest --test-dir "$build" -L '^verbs$' --output-on-failure ;;
  two)
    exec "$lab/run.sh" -n 2 -t 1800 -- "$source_dir/tests/verbs/two_hosts.sh" "$build" ;;
  *)
    echo "usage: lab.sh single|two BUILD_DIR" >&2
    exit 2 ;;
esac
