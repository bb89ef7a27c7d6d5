#!/bin/sh
# More ranks than CPUs, each pinned to one (rank r to the (r mod 2)-th CPU
# this script may use, as bench/compare-openmpi's shm-np4 path and mpirun
# --bind-to core:overload-allowed pin them): every rank must find that it
# shares its CPU (the board's waits then treat such ranks apart;
# collectives/board.cc, keep_cpu_for), and the collective matrix must be
# right over shm in that mode.
#   shared_cpus.sh CHORUSRUN CHORUS_MATRIX RANKS [MATRIX ARGS...]
chorusrun=$1 matrix=$2 ranks=$3
shift 3
command -v taskset >/dev/null || { echo "FAILED: taskset not found (apt-get install util-linux)"; exit 1; }
# The first two CPUs this script may use get the ranks (one CPU: all of them).
cpus=$(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
  awk -F- '{ hi = NF > 1 ? $2 : $1; for (c = $1; c <= hi; ++c) print c }' | head -n 2 | tr '\n' ' ')
CPU0=${cpus%% *}
CPU1=$(echo "$cpus" | awk '{ print (NF > 1 ? $2 : $1) }')
export CPU0 CPU1
output=$("$chorusrun" -n "$ranks" --timeout 120 --transport shm -x CHORUS_LOG_LEVEL=info -x CPU0 -x CPU1 \
  sh -c 'cpu=$CPU0; [ $((CHORUS_LOCAL_RANK % 2)) -eq 0 ] || cpu=$CPU1; exec taskset -c "$cpu" "$0" "$@"' \
  "$matrix" "$@" 2>&1)
status=$?
echo "$output" | grep -v ' info: ' | tail -n 20
found=$(echo "$output" | grep -c 'some ranks share a CPU')
echo "shared_cpus: $found of $ranks ranks pinned to CPUs $CPU0 and $CPU1 found that they share a CPU"
if [ "$status" -ne 0 ]; then echo "FAILED: chorusrun exited $status"; exit 1; fi
if [ "$found" -ne "$ranks" ]; then echo "FAILED: expected every rank to find it"; exit 1; fi
echo "$output" | grep -q "cases, 0 failed" || { echo "FAILED: no passing matrix summary"; exit 1; }
echo "shared_cpus: OK"
