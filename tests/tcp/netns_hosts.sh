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
# Exit 77 (ctest SKIP) with the reason where namespaces cannot be made, or
# (--lossy) where no link can be made lossy: a step that did not run is
# never reported as passed.
set -u
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
lossy=0
if [ "${1:-}" = "--lossy" ]; then lossy=1; shift; fi
[ $# -ge 2 ] || { echo "usage: netns_hosts.sh [--lossy] CHORUSRUN MATRIX [MATRIX ARGS...] (see --help)" >&2; exit 2; }
chorusrun=$1
matrix=$2
shift 2
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
