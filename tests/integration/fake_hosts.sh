#!/usr/bin/env bash
# The hybrid transport and the hierarchical collectives on one machine, no
# root needed: 6 ranks told by CHORUS_HOST_ID that they are on 3 hosts
# (docs/transport-hybrid.md), shm between the ranks of a "host", tcp over
# loopback between "hosts"; the collective matrix with uneven hosts (3, 1,
# 2 ranks) placed in blocks, then round-robin (there --every-size when the
# block run had the whole matrix). Every rank must pass and log
# its host's ranks as its shm peers. (tests/tcp/netns_hosts.sh --hybrid does
# the same across real network namespaces with their own hostnames.)
#   fake_hosts.sh CHORUSRUN MATRIX [MATRIX ARGS...]
set -u
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
[ $# -ge 2 ] || { echo "usage: fake_hosts.sh CHORUSRUN MATRIX [MATRIX ARGS...]" >&2; exit 2; }
chorusrun=$1 matrix=$2
shift 2
failures=0

# run NAME HOSTS...: HOSTS[r] is rank r's host; EXPECT[r] the ranks it lists.
run() {
  local name=$1 hosts=$2 r output status right=0
  echo "== fake_hosts: $name: CHORUS_HOST_ID of ranks 0-5: $hosts"
  output=$(FAKE_HOSTS="$hosts" "$chorusrun" -n 6 --timeout 120 -x CHORUS_LOG_LEVEL=info -x CHORUS_TCP_IFACE=lo \
             -x FAKE_HOSTS sh -c 'CHORUS_HOST_ID=$(echo "$FAKE_HOSTS" | cut -d" " -f$((CHORUS_RANK + 1))) exec "$0" "$@"' \
             "$matrix" "${@:3}" 2>&1)
  status=$?
  echo "$output" | grep -E "cases|FAILED|error" | head -10
  echo "$output" | grep -E "chorus-matrix: rank [0-9]+ passed$"
  for ((r = 0; r < 6; r++)); do
    echo "$output" | grep -q "transport: rank $r reaches ranks ${EXPECT[$r]} (this host) over shm" && right=$((right + 1))
  done
  echo "fake_hosts: $name: chorusrun exit $status, $right of 6 ranks list their host's ranks as shm peers"
  if [ $status -ne 0 ] || [ $right -ne 6 ] || ! echo "$output" | grep -q "cases, 0 failed"; then
    echo "$output" | tail -15
    echo "FAILED: fake_hosts: $name"
    failures=1
  fi
}

EXPECT=(0,1,2 0,1,2 0,1,2 3 4,5 4,5)
run "block (3, 1, 2)" "a a a b c c" "$@"
# Round-robin changes which ranks lead and share a host, not what a dtype or
# op does: --every-size (every collective, algorithm, root and size) when the
# block run had the whole matrix (CI time; docs/testing.md, "Matrix depths").
round_robin_args=("$@")
[ $# -eq 0 ] && round_robin_args=(--every-size)
EXPECT=(0,3,5 1 2,4 0,3,5 2,4 0,3,5)
run "round-robin (3, 1, 2)" "a b c a c a" "${round_robin_args[@]}"
[ $failures -eq 0 ] && echo "fake_hosts: OK"
exit $failures
