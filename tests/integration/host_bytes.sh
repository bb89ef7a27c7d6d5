#!/usr/bin/env bash
# Bytes on the network per host (docs/transport-hybrid.md, "Bytes"): 6 ranks
# told by CHORUS_HOST_ID that they are on 3 hosts (3, 1, 2 ranks), placed in
# blocks and round-robin; one call of 4 MiB of allreduce, broadcast (root 0
# and root 5), reduce (root 5), allgather and reduce_scatter with the
# automatic choice (hierarchical), then allreduce and allgather with the
# flat ring for comparison. Each rank logs at
# finalize the payload bytes it sent to and received from other hosts'
# ranks (the engine's counters); summed per host they must stay within the
# bounds of docs/algorithms.md ("hierarchical"), with 10 % for the bench's
# own small calls:
#   allreduce: out and in <= 1.1 x 2(H-1)/H x N
#   broadcast: in <= 1.1 x N, out <= 1.1 x ceil(log2 H) x N
#   reduce:    out <= 1.1 x N, in <= 1.1 x ceil(log2 H) x N
#   allgather, reduce_scatter: out and in <= 1.1 x (P - M_min)/P x N (N minus
#              the smallest host's bundle; P ranks, M_min on the smallest host;
#              N the whole gathered / the whole input vector)
# Then the multi-leader allreduce (the automatic choice from 256 KiB where
# every host has 2 ranks or more) on 3 hosts x 2 ranks, block and
# round-robin: the allreduce bound per host, and every rank carries at
# least half its share, 2(H-1)/H x N/L out (L = 2 ranks per host).
# chorus-bench --stats must show the same per call, and with
# CHORUS_HIERARCHICAL=off the flat ring. Counts, not times. Also
# prints the flat ring's per-host bytes.
#   host_bytes.sh CHORUSRUN CHORUS_BENCH
set -u
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
[ $# -eq 2 ] || { echo "usage: host_bytes.sh CHORUSRUN CHORUS_BENCH" >&2; exit 2; }
chorusrun=$1 bench=$2
bytes=$((4 << 20)) hosts=3 log2_hosts=2 ranks=6 smallest_host=1
failures=0

# per_rank PLACEMENT OP ROOT ALGO: prints "rank out in" per rank.
per_rank() {
  local placement=$1 op=$2 root=$3 algo=$4 output
  output=$(FAKE_HOSTS="$placement" "$chorusrun" -n 6 --timeout 60 -x CHORUS_LOG_LEVEL=info -x CHORUS_TCP_IFACE=lo \
             -x FAKE_HOSTS sh -c 'CHORUS_HOST_ID=$(echo "$FAKE_HOSTS" | cut -d" " -f$((CHORUS_RANK + 1))) exec "$0" "$@"' \
             "$bench" --op "$op" --root "$root" --algo "$algo" --min-bytes "$bytes" --max-bytes "$bytes" --iters 1 \
             --warmup 0 --check 0 2>&1)
  local status=$?
  if [ $status -ne 0 ] || [ "$(echo "$output" | grep -c "payload bytes:")" -ne 6 ]; then
    echo "$output" | tail -10 >&2
    echo "FAILED: host_bytes: $op ($algo) on \"$placement\": chorusrun exit $status" >&2
    return 1
  fi
  echo "$output" | sed -n 's/.*rank \([0-9]*\) payload bytes:.*other hosts. ranks out \([0-9]*\) in \([0-9]*\)$/\1 \2 \3/p'
}

# measure PLACEMENT OP ROOT ALGO: prints "host out in" per host.
measure() {
  local placement=$1 rows
  rows=$(per_rank "$@") || return 1
  echo "$rows" |
    awk -v placement="$placement" 'BEGIN { split(placement, host, " ") }
      { out[host[$1 + 1]] += $2; inb[host[$1 + 1]] += $3 }
      END { for (h in out) print h, out[h], inb[h] }' | sort
}

# check PLACEMENT OP ROOT OUT_LIMIT IN_LIMIT (limits in units of N/100)
check() {
  local placement=$1 op=$2 root=$3 out_limit=$4 in_limit=$5 rows
  rows=$(measure "$placement" "$op" "$root" auto) || { failures=1; return; }
  while read -r host out in; do
    local verdict=ok
    if [ $((out * 100)) -gt $((out_limit * bytes)) ] || [ $((in * 100)) -gt $((in_limit * bytes)) ]; then
      verdict=FAILED
      failures=1
    fi
    printf '%-10s %-10s root %s host %s: out %9d in %9d (limits %d %d) %s\n' "$placement" "$op" "$root" "$host" "$out" \
      "$in" $((out_limit * bytes / 100)) $((in_limit * bytes / 100)) "$verdict"
  done <<< "$rows"
}

allreduce_limit=$((110 * 2 * (hosts - 1) / hosts))
bundles_limit=$((110 * (ranks - smallest_host) / ranks))
for placement in "a a a b c c" "a b c a c a"; do
  echo "== placement (ranks 0-5): $placement; N = $bytes bytes, H = $hosts hosts"
  check "$placement" allreduce 0 "$allreduce_limit" "$allreduce_limit"
  check "$placement" broadcast 0 $((110 * log2_hosts)) 110
  check "$placement" broadcast 5 $((110 * log2_hosts)) 110
  check "$placement" reduce 5 110 $((110 * log2_hosts))
  check "$placement" allgather 0 "$bundles_limit" "$bundles_limit"
  check "$placement" reduce_scatter 0 "$bundles_limit" "$bundles_limit"
  for op in allreduce allgather; do
    echo "flat ring $op for comparison (host out in):"
    measure "$placement" $op 0 ring | sed 's/^/  /'
  done
done
# The multi-leader allreduce (every host with 2 ranks: L = 2 slices): the
# same bound per host, and each rank carries its slice, at least half of
# 2(H-1)/H x N/L out, where the leader form leaves the second rank at 0.
slices=2
spread_floor=$((100 * (hosts - 1) / hosts / slices))  # half of 2(H-1)/H x 1/L, in % of N
for placement in "a a b b c c" "a b c a b c"; do
  echo "== multi-leader allreduce, placement (ranks 0-5): $placement"
  check "$placement" allreduce 0 "$allreduce_limit" "$allreduce_limit"
  if rows=$(per_rank "$placement" allreduce 0 auto); then
    while read -r rank out in; do
      verdict=ok
      if [ $((out * 100)) -lt $((spread_floor * bytes)) ]; then verdict=FAILED; failures=1; fi
      printf '  rank %s: out %9d in %9d (at least %d out) %s\n' "$rank" "$out" "$in" $((spread_floor * bytes / 100)) "$verdict"
    done <<< "$rows"
  else
    failures=1
  fi
done
# chorus-bench --stats shows the same counts per call: its "net out" column
# (the busiest host's) for 2 timed allreduces of N, round-robin, 3 x 2 ranks,
# between 0.9 and 1.1 x 2(H-1)/H x N.
# bench_row [CHORUSRUN ARGS...]: chorus-bench --stats's row for one allreduce
# of N (2 timed calls), round-robin on 3 x 2 ranks.
bench_row() {
  FAKE_HOSTS="a b c a b c" "$chorusrun" -n 6 --timeout 60 -x CHORUS_TCP_IFACE=lo -x FAKE_HOSTS "$@" \
    sh -c 'CHORUS_HOST_ID=$(echo "$FAKE_HOSTS" | cut -d" " -f$((CHORUS_RANK + 1))) exec "$0" "$@"' \
    "$bench" --op allreduce --min-bytes "$bytes" --max-bytes "$bytes" --iters 2 --warmup 1 --check 1 --stats 2>&1 |
    sed 's/^\[[0-9]*\] //' | grep -E "^ +$bytes "  # without chorusrun's rank prefix
}
expected=$((2 * (hosts - 1) * bytes / hosts))
row=$(bench_row)
echo "$row"
net_out=$(echo "$row" | awk '{print $(NF - 1)}')
if [ -z "$row" ] || [ "$((net_out * 10))" -lt "$((expected * 9))" ] || [ "$((net_out * 10))" -gt "$((expected * 11))" ]; then
  echo "FAILED: host_bytes: chorus-bench --stats: net out \"${net_out:-none}\" per call, expected $expected within 10 %"
  failures=1
else
  echo "chorus-bench --stats: net out $net_out bytes per call (2(H-1)/H x N = $expected): ok"
fi
# CHORUS_HIERARCHICAL=off: the flat table's ring, whose round-robin ring
# crosses hosts at every step (about 2 x M x N out of a host, M = 2 here).
row=$(bench_row -x CHORUS_HIERARCHICAL=off)
echo "$row"
net_out=$(echo "$row" | awk '{print $(NF - 1)}')
if [ "$(echo "$row" | awk '{print $3}')" != ring ] || [ "$((${net_out:-0} * 10))" -lt "$((expected * 20))" ]; then
  echo "FAILED: host_bytes: CHORUS_HIERARCHICAL=off: expected the flat ring moving over 2 x $expected bytes out of a host"
  failures=1
else
  echo "CHORUS_HIERARCHICAL=off: the flat ring, net out $net_out bytes per call: ok"
fi
[ $failures -eq 0 ] && echo "host_bytes: OK" || echo "host_bytes: FAILED"
exit $failures
