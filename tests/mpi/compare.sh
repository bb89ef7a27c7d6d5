#!/usr/bin/env bash
# Runs one MPI test program built twice -- with Open MPI's mpicc under
# mpirun, and with chorus-mpicc under chorusrun -- and compares what they
# print on stdout. Passes when both exit with the expected status and print
# the same, non-empty output, and (expected status 0) every rank of both runs
# printed its pass line "NAME: rank R passed" (report.h).
#
#   compare.sh NAME RANKS EXPECTED_STATUS CHORUSRUN CHORUS_PROGRAM MPIRUN OMPI_PROGRAM [chorusrun options...]
#
# Open MPI runs over shared memory only (btl self,vader) with its runtime on
# loopback; chorus on the provider chosen by the options (default: shm).
set -uo pipefail
name=$1 ranks=$2 expected=$3 chorusrun=$4 chorus_program=$5 mpirun=$6 ompi_program=$7
shift 7
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

timeout 180 "$chorusrun" -n "$ranks" --timeout 60 --no-tag-output "$@" "$chorus_program" \
  >"$work/chorus.out" 2>"$work/chorus.err"
chorus_status=$?
timeout 180 "$mpirun" --allow-run-as-root --oversubscribe --mca btl self,vader --mca oob_tcp_if_include lo \
  -n "$ranks" "$ompi_program" >"$work/ompi.out" 2>"$work/ompi.err"
ompi_status=$?

failed=0
report_failure() {
  echo "FAILED: $name np$ranks: $*"
  failed=1
}
[ "$chorus_status" -eq "$expected" ] || report_failure "chorus run exited with $chorus_status, expected $expected"
[ "$ompi_status" -eq "$expected" ] || report_failure "Open MPI run exited with $ompi_status, expected $expected"
[ -s "$work/chorus.out" ] || report_failure "the chorus run printed nothing"
# A job that ends well: every rank of each run printed "NAME: rank R passed"
# after MPI_Finalize (report.h); the launcher's status alone does not show
# that every rank got there. Those lines come in any order, so they are
# checked here and left out of the comparison.
for side in chorus ompi; do
  if [ "$expected" -eq 0 ]; then
    for ((r = 0; r < ranks; ++r)); do
      grep -qx "$name: rank $r passed" "$work/$side.out" || report_failure "rank $r of the $side run did not print its pass line"
    done
  fi
  grep -v "^$name: rank [0-9]* passed\$" "$work/$side.out" >"$work/$side.compared"
done
if ! diff -u "$work/ompi.compared" "$work/chorus.compared" >"$work/diff"; then
  report_failure "outputs differ (- Open MPI, + chorus):"
  cat "$work/diff"
fi
if [ "$failed" -ne 0 ]; then
  echo "--- chorus stderr (last lines):"
  tail -n 20 "$work/chorus.err"
  echo "--- Open MPI stderr (last lines):"
  tail -n 20 "$work/ompi.err"
  exit 1
fi
echo "compare $name np$ranks: identical output ($(wc -l <"$work/chorus.out") lines), both exited with $expected"
