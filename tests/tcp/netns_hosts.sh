#!/usr/bin/env bash
# Several "hosts" for the tcp transport: 4 network namespaces, each joined by
# a veth pair to a bridge in a fifth namespace, private addresses
# (10.203.7.0/24) that exist only inside them. chorusrun runs in the first
# and starts the ranks with a remote shell that is `ip netns exec`
# (netns_rsh.sh), 1-2 ranks per namespace, running the collective matrix
# over --transport tcp; with --lossy instead once over a lossy, delayed link
# (tc netem delay 100us loss 1% when the kernel has netem; else 1% loss by
# nftables and no delay, said so) with --quick. Everything is created and
# removed here, also on failure; the machine's own interfaces are never
# touched.
#
#   netns_hosts.sh [--lossy] CHORUSRUN MATRIX [MATRIX ARGS...]
#   netns_hosts.sh --hybrid CHORUSRUN MATRIX FAULT_PROGRAM [MATRIX ARGS...]
# --hybrid (docs/transport-hybrid.md): every rank also gets its namespace's
# hostname (its own UTS namespace, set by netns_rsh.sh), and 10 ranks run
# 3, 1, 4, 2 per host, placed by slot (block) and by node (round-robin, --quick),
# every host link shaped to 1 Gbit/s each way (tc tbf), over the automatic
# transport: shm to the ranks of their host, tcp to the
# others; each rank's log must say so. Then a fault: one rank of h2 SIGKILLs
# itself in an allreduce, and every survivor must name it within 2 s.
# Exit 77 (ctest SKIP) with the reason where namespaces cannot be made, or
# (--lossy) where no link can be made lossy: a step that did not run is
# never reported as passed.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
lossy=0 hybrid=0
if [ "${1:-}" = "--lossy" ]; then lossy=1; shift; fi
if [ "${1:-}" = "--hybrid" ]; then hybrid=1; shift; fi
[ $# -ge $((2 + hybrid)) ] || { echo "usage: netns_hosts.sh [--lossy|--hybrid] CHORUSRUN MATRIX [FAULT_PROGRAM] [MATRIX ARGS...] (see --help)" >&2; exit 2; }
chorusrun=$1
matrix=$2
shift 2
if [ $hybrid -eq 1 ]; then fault=$1; shift; fi
matrix_args=("$@")
here=$(cd "$(dirname "$0")" && pwd)

tag=c$$
bridge_ns=${tag}br
hosts=("${tag}h0" "${tag}h1" "${tag}h2" "${tag}h3")
subnet=10.203.7

cleanup() {
  for ns in "${hosts[@]}" "$bridge_ns"; do ip netns del "$ns" 2>/dev/null; done
}
trap cleanup EXIT INT TERM

skip() {
  echo "SKIP: $*"
  exit 77
}

[ "$(id -u)" = 0 ] || skip "network namespaces need root"
command -v ip >/dev/null || skip "no ip command (apt-get install iproute2)"
ip netns add "$bridge_ns" 2>/tmp/netns_err.$$ || skip "cannot create a network namespace: $(cat /tmp/netns_err.$$)"
rm -f /tmp/netns_err.$$
in_bridge() { ip netns exec "$bridge_ns" "$@"; }
in_bridge ip link add br0 type bridge || skip "cannot create a bridge inside a namespace"
in_bridge ip link set br0 up
in_bridge ip link set lo up

for i in "${!hosts[@]}"; do
  ns=${hosts[$i]}
  ip netns add "$ns" || { echo "FAILED: ip netns add $ns"; exit 1; }
  # The veth pair is born in the bridge namespace: nothing appears in the root one.
  in_bridge ip link add "h$i" type veth peer name "eth$i" || skip "cannot create veth pairs inside a namespace"
  in_bridge ip link set "eth$i" netns "$ns"
  in_bridge ip link set "h$i" master br0
  in_bridge ip link set "h$i" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip addr add "$subnet.$((i + 1))/24" dev "eth$i"
  ip netns exec "$ns" ip link set "eth$i" up
done

# --hybrid: every host's link shaped to 1 Gbit/s each way (tc tbf on both
# ends of its veth), as a host's NIC would be: a bridge, not a free loopback.
if [ $hybrid -eq 1 ]; then
  command -v tc >/dev/null || skip "no tc command (apt-get install iproute2) to shape the links"
  for i in "${!hosts[@]}"; do
    in_bridge tc qdisc add dev "h$i" root tbf rate 1gbit burst 256kb latency 50ms 2>/tmp/netns_err.$$ &&
      ip netns exec "${hosts[$i]}" tc qdisc add dev "eth$i" root tbf rate 1gbit burst 256kb latency 50ms \
        2>>/tmp/netns_err.$$ || skip "cannot shape a link with tc tbf: $(cat /tmp/netns_err.$$)"
  done
  rm -f /tmp/netns_err.$$
  echo "netns_hosts: every host link shaped: tbf 1gbit each way"
fi

run_matrix() {
  local what=$1 log_level=$2
  shift 2
  echo "netns_hosts: $what: 6 ranks on 4 hosts (${hosts[*]}), --transport tcp"
  local output
  output=$(ip netns exec "${hosts[0]}" "$chorusrun" -n 6 --hosts "${hosts[0]}:2,${hosts[1]}:2,${hosts[2]}:1,${hosts[3]}:1" \
             --rsh "$here/netns_rsh.sh" --store-addr "$subnet.1" --transport tcp --timeout 120 -x CHORUS_LOG_LEVEL="$log_level" \
             "$matrix" "$@" 2>&1)
  local status=$?
  echo "$output" | grep -E "listens on|cases|FAILED|error" | head -20
  # Every rank's pass line, for the verdict (tests/job_verdict.py).
  echo "$output" | grep -E "chorus-matrix: rank [0-9]+ passed$"
  if [ $status -ne 0 ] || ! echo "$output" | grep -q "cases, 0 failed"; then
    echo "$output" | tail -20
    echo "FAILED: $what (chorusrun exit $status)"
    exit 1
  fi
}

# run_hybrid PLACEMENT [CHORUSRUN OPTIONS]: the matrix on 3, 1, 4, 2 ranks.
# Every rank must log its transport: shm+tcp, also rank 3 alone on h1 (the
# choice is the job's: every address has the same form), and the ranks of
# its own host as the ones it reaches over shm.
run_hybrid() {
  local placement=$1
  shift
  echo "netns_hosts: hybrid, $placement: 10 ranks on 4 hosts with their own hostnames (3,1,4,2)"
  local output status
  output=$(NETNS_RSH_HOSTNAME=1 ip netns exec "${hosts[0]}" "$chorusrun" -n 10 \
             --hosts "${hosts[0]}:3,${hosts[1]}:1,${hosts[2]}:4,${hosts[3]}:2" "$@" \
             --rsh "$here/netns_rsh.sh" --store-addr "$subnet.1" --timeout 120 -x CHORUS_LOG_LEVEL=info \
             "$matrix" "${hybrid_matrix_args[@]}" 2>&1)
  status=$?
  echo "$output" | grep -E "reaches ranks|cases|FAILED|error" | head -24
  echo "$output" | grep -E "chorus-matrix: rank [0-9]+ passed$"
  local hybrid_ranks right_hosts r expected
  hybrid_ranks=$(echo "$output" | grep -c "connected over shm+tcp")
  right_hosts=0
  for ((r = 0; r < 10; r++)); do
    expected=${host_ranks[$r]}
    echo "$output" | grep -q "transport: rank $r reaches ranks $expected (this host) over shm" && right_hosts=$((right_hosts + 1))
  done
  echo "netns_hosts: $placement: $hybrid_ranks of 10 ranks over shm+tcp, $right_hosts of 10 with the right host's ranks over shm"
  if [ $status -ne 0 ] || ! echo "$output" | grep -q "cases, 0 failed" || [ "$hybrid_ranks" -ne 10 ] ||
     [ "$right_hosts" -ne 10 ]; then
    echo "$output" | tail -20
    echo "FAILED: hybrid, $placement (chorusrun exit $status; expected 10 ranks over shm+tcp, each with its host's ranks)"
    exit 1
  fi
}

if [ $hybrid -eq 1 ]; then
  export NETNS_RSH_HOSTNAME=1
  # host_ranks[r]: the ranks on rank r's host, as its log line lists them.
  host_ranks=(0,1,2 0,1,2 0,1,2 3 4,5,6,7 4,5,6,7 4,5,6,7 4,5,6,7 8,9 8,9)
  hybrid_matrix_args=("${matrix_args[@]}")
  run_hybrid "block placement (--map-by slot)"
  # Round-robin changes which ranks lead and share a host, not what a dtype
  # or op or a MiB message over the shaped links does: --quick (CI time: with
  # --every-size the MiB cases over 1 Gbit/s kept the test at 226 s).
  hybrid_matrix_args=(--quick)
  # By node: 0 h0, 1 h1, 2 h2, 3 h3, 4 h0, 5 h2, 6 h3, 7 h0, 8 h2, 9 h2.
  host_ranks=(0,4,7 1 2,5,8,9 3,6 0,4,7 2,5,8,9 3,6 0,4,7 2,5,8,9 2,5,8,9)
  run_hybrid "round-robin placement (--map-by node)" --map-by node
  # Block: ranks 4-7 are on h2; rank 5 dies, on a host of its own group.
  echo "netns_hosts: hybrid, fault: rank 5 (${hosts[2]}) SIGKILLs itself in an allreduce of 64 KiB"
  log=$(ip netns exec "${hosts[0]}" "$chorusrun" -n 10 \
          --hosts "${hosts[0]}:3,${hosts[1]}:1,${hosts[2]}:4,${hosts[3]}:2" \
          --rsh "$here/netns_rsh.sh" --store-addr "$subnet.1" --timeout 20 --failure-grace 30 \
          "$fault" --victim 5 --after 20 --how kill --bytes 65536 2>&1)
  status=$?
  echo "$log" | grep -E "failing now|error after|no error|WRONG" | cut -c1-240
  named=$(echo "$log" | grep -c "names the failed peer (peer 5)")
  echo "netns_hosts: hybrid, fault: chorusrun exited $status; $named of 9 survivors named rank 5"
  # chorusrun starts each line with "[RANK] ".
  killed_at=$(echo "$log" | sed -n 's/^\[5\] \([0-9.]*\) rank 5: failing now.*/\1/p')
  worst=$(echo "$log" | sed -n 's/^\[[0-9]*\] \([0-9.]*\) rank [0-9]*: error after .*/\1/p' |
    awk -v k="${killed_at:-0}" 'BEGIN { w = 0 } { if ($1 - k > w) w = $1 - k } END { printf "%.2f", w }')
  echo "netns_hosts: hybrid, fault: the last survivor failed ${worst} s after rank 5 died"
  if [ $status -eq 0 ] || [ "$named" -ne 9 ] || [ -z "$killed_at" ] || ! awk -v w="$worst" 'BEGIN { exit !(w <= 2) }'; then
    echo "$log" | tail -20
    echo "FAILED: hybrid fault (expected a non-zero exit and 9 survivors naming rank 5 within 2 s)"
    exit 1
  fi
  echo "netns_hosts: OK (hybrid: block, round-robin, fault)"
  exit 0
fi

if [ $lossy -eq 0 ]; then
  # Every rank says where it listens: on its namespace's address, not loopback.
  run_matrix "plain links" info "${matrix_args[@]}"
  echo "netns_hosts: OK (plain links)"
  exit 0
fi

impair=""
for i in "${!hosts[@]}"; do
  if ip netns exec "${hosts[$i]}" tc qdisc add dev "eth$i" root netem delay 100us loss 1% 2>/dev/null; then
    impair="tc netem delay 100us loss 1%"
  elif command -v nft >/dev/null && ip netns exec "${hosts[$i]}" nft -f - <<EOF
table inet chorus_loss {
  chain input { type filter hook input priority 0; iifname "eth$i" numgen random mod 100 < 1 drop; }
}
EOF
  then
    impair="1% loss on input by nftables (this kernel has no netem qdisc: no added delay)"
  else
    impair=""
    break
  fi
done
if [ -z "$impair" ]; then
  skip "lossy links: this kernel has no netem qdisc and nftables is missing or unusable"
fi
run_matrix "lossy links: $impair" warn --quick
echo "netns_hosts: OK (lossy links: $impair)"
