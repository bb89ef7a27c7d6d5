#!/usr/bin/env bash
# check_bindings.sh CHORUSRUN PROBE RANKS BIND [chorusrun options...]
# Runs RANKS ranks of binding_probe with --report-bindings and --bind=BIND
# (BIND auto: CHORUS_BIND=auto; default: neither) and checks for every rank that
#   - the cpuset chorus reports is what hwloc_get_cpubind reads inside the
#     process (the probe, independent of chorus),
#   - it is what the policy promises on this machine: core (rank mod cores)
#     for core, nic without NIC locality and auto with up to 2 ranks; every
#     CPU (unbound) for auto with more ranks than cores; for default, the
#     CPUs this script may use (all of them, or a taskset's),
#   - the engine calls the ranks oversubscribed exactly when they outnumber
#     the cores (a rank bound to one core is not oversubscribed),
#   - with CHECK_CQ_VECTORS=1 (verbs), each report names a completion vector;
#   - with EXPORT_TOPOLOGY=1, the ranks read this machine's topology from an
#     lstopo XML export (CHORUS_TOPOLOGY_XML) instead of discovering it.
# Prints "check_bindings: OK" or "FAILED: ..." lines.
set -uo pipefail
run=$1 probe=$2 ranks=$3 bind=$4
shift 4
# default: no --bind (chorus binds nothing, a launcher's binding is kept);
# auto: CHORUS_BIND=auto (Open MPI's default, NIC-aware).
bind_option=()
case $bind in
  default) ;;
  auto) bind_option=(-x CHORUS_BIND=auto) ;;
  *) bind_option=(--bind="$bind") ;;
esac

if [ "${EXPORT_TOPOLOGY:-0}" = 1 ]; then
  xml=$(mktemp --suffix=.xml)
  trap 'rm -f "$xml"' EXIT
  lstopo-no-graphics --force --of xml "$xml" || { echo "FAILED: lstopo could not export the topology"; exit 1; }
  set -- -x CHORUS_TOPOLOGY_XML="$xml" "$@"
fi

cores=$(hwloc-calc -N core machine:0)
all_cpus=$(hwloc-calc --po -I pu machine:0 --sep ,)
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

# "0-2,5" -> "0,1,2,5"
expand() {
  local out="" part
  IFS=, read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    if [[ $part == *-* ]]; then out+="$(seq -s, "${part%-*}" "${part#*-}"),"; else out+="$part,"; fi
  done
  echo "${out%,}"
}

# What this script may run on: a taskset around it is the "launcher's binding".
allowed_cpus=$(expand "$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)")

output=$("$run" -n "$ranks" --timeout 60 "${bind_option[@]}" --report-bindings -x CHORUS_LOG_LEVEL=info "$@" "$probe" 2>&1)
status=$?
echo "$output" | grep -E "chorus bindings:|probe:|FAILED|oversubscri|more local ranks|no CPU locality"
[ $status -eq 0 ] || fail "chorusrun exited with status $status"

for ((rank = 0; rank < ranks; rank++)); do
  report=$(echo "$output" | grep -E "^\[$rank\] chorus bindings: .* rank=$rank ")
  reported=$(expand "$(echo "$report" | sed -n 's/.* cpuset=\([^ ]*\) .*/\1/p')")
  probed=$(echo "$output" | grep -E "^\[$rank\] probe: rank=$rank " | sed -n 's/.*cpubind=\([^ ]*\) .*/\1/p')
  [ -n "$report" ] || fail "rank $rank printed no binding report"
  if [ "${CHECK_CQ_VECTORS:-0}" = 1 ] && ! [[ $report =~ cq_vector=[0-9]+ ]]; then
    fail "rank $rank: no completion vector in the report"
  fi
  [ "$reported" = "$probed" ] || fail "rank $rank: chorus reports cpuset $reported, hwloc_get_cpubind in the process reads $probed"
  if [ "$bind" = core ] || [ "$bind" = nic ] || { [ "$bind" = auto ] && [ "$ranks" -le 2 ] && [ "$ranks" -le "$cores" ]; }; then
    if [ "$bind" != core ] && ! [[ $report == *"(no locality)"* ]]; then
      continue  # a NIC with locality: the unit tests check the order
    fi
    expected=$(hwloc-calc --po -I pu "core:$((rank % cores))" --sep ,)
  elif [ "$bind" = default ]; then
    # Never moved by chorus: where the launcher (or nobody) put it.
    expected=$allowed_cpus
    [[ $report == *"not bound by chorus"* ]] || fail "rank $rank: bound by chorus without being asked: $report"
  elif [ "$bind" = auto ] && [ "$ranks" -gt "$cores" ]; then
    expected=$all_cpus
    [[ $report == *"not bound by chorus"* ]] || fail "rank $rank: more ranks than cores but bound: $report"
  else
    continue
  fi
  [ "$probed" = "$expected" ] || fail "rank $rank: bound to $probed, expected $expected"
done

oversubscribed=$(echo "$output" | grep -c "more local ranks ($ranks) than usable cores")
if [ "$ranks" -gt "$cores" ]; then
  [ "$oversubscribed" -eq "$ranks" ] || fail "$ranks ranks on $cores cores: $oversubscribed ranks noticed oversubscription"
else
  [ "$oversubscribed" -eq 0 ] || fail "$ranks ranks on $cores cores: $oversubscribed ranks think they are oversubscribed"
fi
[ "$(echo "$output" | grep -c "allreduce=ok")" -eq "$ranks" ] || fail "not every rank's allreduce was right"

[ $failures -eq 0 ] && echo "check_bindings: OK ($ranks ranks, bind=$bind, $cores cores)"
exit $((failures != 0))
