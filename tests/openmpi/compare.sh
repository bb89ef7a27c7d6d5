#!/usr/bin/env bash
# Runs the same case list through Open MPI (mpirun + ompi_collectives) and
# chorus (chorusrun + chorus_collectives) on N ranks, loopback only, and fails
# on any difference, naming the first differing case.
#
#   compare.sh N MPIRUN OMPI_PROGRAM CHORUSRUN CHORUS_PROGRAM [chorusrun options...]
#
# Every line "case <key> => <digests> | first=.. last=.." that chorus prints
# (one per algorithm with --algo all, tagged " (algorithm)") must equal Open
# MPI's line for the same key, and both must cover the same keys.
set -euo pipefail

if [ $# -lt 5 ]; then
  echo "usage: $0 N MPIRUN OMPI_PROGRAM CHORUSRUN CHORUS_PROGRAM [chorusrun options...]" >&2
  exit 2
fi
ranks=$1 mpirun=$2 ompi_program=$3 chorusrun=$4 chorus_program=$5
shift 5

work=$(mktemp -d "${TMPDIR:-/tmp}/chorus-ompi-compare.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Open MPI: shared memory between ranks (vader), TCP out-of-band on loopback
# only, ob1 so the btl list is what runs (not UCX). No single-copy (CMA): it
# needs ptrace rights some containers lack, and results do not depend on it.
ompi_args=(--allow-run-as-root --oversubscribe --bind-to none -n "$ranks"
  --mca pml ob1 --mca btl self,vader --mca btl_vader_single_copy_mechanism none
  --mca oob_tcp_if_include lo)
start=$SECONDS
if ! "$mpirun" "${ompi_args[@]}" "$ompi_program" >"$work/ompi.out" 2>"$work/ompi.err"; then
  echo "compare: Open MPI run failed: $mpirun ${ompi_args[*]} $ompi_program" >&2
  tail -n 20 "$work/ompi.err" >&2
  exit 1
fi
ompi_seconds=$((SECONDS - start))

start=$SECONDS
if ! "$chorusrun" -n "$ranks" --timeout 120 --no-tag-output "$@" "$chorus_program" --algo all \
    >"$work/chorus.out" 2>"$work/chorus.err"; then
  echo "compare: chorus run failed: $chorusrun -n $ranks $* $chorus_program --algo all" >&2
  tail -n 20 "$work/chorus.err" >&2
  exit 1
fi
chorus_seconds=$((SECONDS - start))

for side in ompi chorus; do
  if ! grep -q '^# .*: done, ' "$work/$side.out"; then
    echo "compare: the $side program did not finish its case list" >&2
    tail -n 5 "$work/$side.out" "$work/$side.err" >&2
    exit 1
  fi
done
# Every rank of both runs printed its pass line after finalize: an exit
# status of 0 from a launcher alone does not show that every rank finished.
for side in ompi chorus; do
  for ((r = 0; r < ranks; ++r)); do
    if ! grep -qx "${side}_collectives: rank $r passed" "$work/$side.out"; then
      echo "compare: FAILED: rank $r of the $side run did not print its pass line" >&2
      exit 1
    fi
  done
done
head -n 1 "$work/ompi.out"
head -n 1 "$work/chorus.out"

# awk: index Open MPI's lines by key, then check every chorus line.
awk -v ranks="$ranks" '
  function key_of(line) { sub(/^case /, "", line); sub(/ =>.*/, "", line); return line }
  function value_of(line) { sub(/^.* => /, "", line); sub(/ \([a-z_0-9]+\)$/, "", line); return line }
  FNR == NR {
    if ($1 != "case") next
    k = key_of($0)
    if (k in ompi) { printf "compare: Open MPI printed case \"%s\" twice\n", k; bad = 1 }
    ompi[k] = value_of($0); ompi_order[++n_ompi] = k
    next
  }
  $1 == "case" {
    k = key_of($0)
    algo = ""
    if (match($0, / \([a-z_0-9]+\)$/)) algo = substr($0, RSTART + 2, RLENGTH - 3)
    ++n_chorus; seen[k] = 1
    if (!(k in ompi)) {
      if (!bad) printf "compare: FIRST DIFFERENCE: case \"%s\" (%s) only in chorus output\n", k, algo
      ++differ; bad = 1; next
    }
    if (value_of($0) != ompi[k]) {
      if (!bad) {
        printf "compare: FIRST DIFFERENCE: np=%s case \"%s\", chorus algorithm %s\n", ranks, k, algo
        printf "  Open MPI: %s\n  chorus:   %s\n", ompi[k], value_of($0)
        printf "  (per-rank FNV-1a digests of result and unchanged send buffer, in rank order)\n"
      }
      ++differ; bad = 1
    }
  }
  END {
    for (i = 1; i <= n_ompi; ++i) if (!(ompi_order[i] in seen)) {
      if (!bad) printf "compare: FIRST DIFFERENCE: case \"%s\" missing from chorus output\n", ompi_order[i]
      ++differ; bad = 1
    }
    if (n_ompi == 0) { print "compare: Open MPI printed no cases"; bad = 1 }
    printf "compare: np=%s: %d Open MPI cases, %d chorus runs (every algorithm), %d differ\n", ranks, n_ompi, n_chorus, differ
    exit bad
  }' "$work/ompi.out" "$work/chorus.out" || {
  echo "compare: FAILED (Open MPI ${ompi_seconds}s, chorus ${chorus_seconds}s)"
  exit 1
}
echo "compare: OK, chorus matches Open MPI on every case (Open MPI ${ompi_seconds}s, chorus ${chorus_seconds}s)"
