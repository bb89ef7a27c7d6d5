#!/usr/bin/env bash
# A real, tiny Slurm cluster on this one machine, for tests: munged with a
# generated key, slurmctld and 4 slurmd (h0..h3), each daemon in its own
# network, UTS and mount namespace, joined by a bridge that lives in a
# namespace of its own, on private addresses (10.213.0.0/24) that exist only
# inside those namespaces. The machine's own interfaces, routes, /etc/hosts
# and /etc/munge are never touched: every file (key, sockets, slurm.conf,
# state, spool, logs) lies in a temporary directory.
#
#   cluster.sh [--keep] -- COMMAND [ARGS...]
#
# Starts the cluster, waits (bounded) until sinfo shows 4 idle nodes, then
# runs COMMAND in the controller's namespace (hostname "ctl", 10.213.0.254)
# with SLURM_CONF set to the generated slurm.conf, so that srun, sinfo,
# squeue, scancel talk to this cluster. Exits with COMMAND's status. On any
# exit (also INT, TERM) every process in the namespaces and munged are
# killed, the namespaces and the bridge removed, the temporary directory
# deleted.
#
#   --keep   keep the temporary directory (slurm.conf, daemon logs) after
#            the teardown and print its path; the daemons are stopped anyway.
#   --help   this text.
#
# Exit 77 (ctest SKIP) with the failing command and its stderr where root,
# a package, the namespaces or a daemon are missing or do not start.
# Environment: CLUSTER_WAIT (seconds to wait for 4 idle nodes, default 60).
#
# Inside COMMAND: nodes h0..h3 (10.213.0.1-4), 4 CPUs each (2 real cores
# shared by all: oversubscribed), partition "debug" (default) with all 4;
# MpiDefault=pmix when Slurm's mpi/pmix plugin loads, else none (said so).
# Debian 12 packages: slurmctld slurmd slurm-client munge (mpi_pmix.so is in
# slurm-wlm-basic-plugins and dlopens libpmix.so from libpmix-dev).
set -u

self=$(readlink -f "$0")

# Internal: the first thing run inside a daemon's (or COMMAND's) namespaces,
# made by `nsenter --net=NS unshare --uts --mount`: the hostname, a private
# /etc/hosts and, for a node, its own spool, run, tmp and log directories
# bind-mounted on the paths that slurm.conf names. Then exec.
if [ "${1:-}" = "--_enter" ]; then
  name=$2 dir=$3
  shift 4   # name dir --
  hostname "$name" || { echo "cluster.sh: hostname $name failed in the new UTS namespace" >&2; exit 77; }
  mount --bind "$dir/hosts" /etc/hosts || { echo "cluster.sh: mount --bind $dir/hosts /etc/hosts failed" >&2; exit 77; }
  case $name in
    h[0-9])
      for d in spool run tmp log; do
        mount --bind "$dir/$name/$d" "$dir/node/$d" || { echo "cluster.sh: mount --bind $dir/$name/$d $dir/node/$d failed" >&2; exit 77; }
      done ;;
  esac
  exec "$@"
fi

usage() { sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$self"; }
keep=0
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "usage: cluster.sh [--keep] -- COMMAND [ARGS...] (see --help)" >&2; exit 2; }

t_start=$(date +%s.%N)
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "cluster.sh: $*" >&2; }
skip() { say "SKIP: $*"; exit 77; }
# The last lines of the files that exist, each named.
tails() {
  local f
  for f in "$@"; do [ -s "$f" ] && { echo; echo "--- $f:"; tail -n 8 "$f"; }; done
}

# ---- preconditions (before anything is created) ----
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, bridges, bind mounts, slurmd)"
for c in ip nsenter unshare hostname mount munged mungekey munge unmunge slurmctld slurmd srun sinfo scontrol awk; do
  command -v "$c" >/dev/null || skip "no '$c' command (Debian: apt-get install iproute2 util-linux munge slurmctld slurmd slurm-client)"
done

tag=sl$$
br_ns=${tag}br
nodes=(h0 h1 h2 h3)
subnet=10.213.0
ctl_addr=$subnet.254
wait_s=${CLUSTER_WAIT:-60}
T=""
munged_pid=""
made_ns=()
bg=()   # background daemons and the command: disowned at teardown (no "Killed" lines)

ns_pids() {
  local ns
  for ns in "${made_ns[@]}"; do ip netns pids "$ns" 2>/dev/null; done | tr '\n' ' ' | sed 's/ *$//'
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  local t0 ns pids i sig end
  t0=$(date +%s.%N)
  [ ${#bg[@]} -gt 0 ] && disown "${bg[@]}" 2>/dev/null
  # Every process in our namespaces: slurmd, slurmstepd, tasks, slurmctld,
  # srun. TERM, up to 2 s to go (srun would wait for the steps longer), KILL.
  for sig in TERM KILL; do
    pids=$(ns_pids)
    [ -z "$pids" ] && break
    kill -"$sig" $pids 2>/dev/null
    end=$(( $(date +%s%N) + 2000000000 ))
    while [ -n "$(ns_pids)" ] && [ "$(date +%s%N)" -lt $end ]; do sleep 0.1; done
  done
  if [ -n "$munged_pid" ]; then
    kill -TERM "$munged_pid" 2>/dev/null
    for i in $(seq 1 30); do kill -0 "$munged_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$munged_pid" 2>/dev/null
    wait "$munged_pid" 2>/dev/null
  fi
  wait 2>/dev/null
  for ns in "${made_ns[@]}"; do ip netns del "$ns" 2>/dev/null; done
  if [ -n "$T" ] && [ -d "$T" ]; then
    if [ $keep = 1 ]; then say "kept $T (slurm.conf, logs)"; else rm -rf "$T"; fi
  fi
  say "teardown took $(since "$t0") s (exit $rc)"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Run a step that must succeed; on failure skip with the command and its stderr.
must() {
  local err
  err=$("$@" 2>&1 >/dev/null) || skip "'$*' failed: ${err:-(no stderr)}"
}

T=$(mktemp -d /tmp/chorus-slurm.XXXXXX) || skip "mktemp -d failed"
chmod 700 "$T"

# ---- network: a bridge namespace, one namespace per daemon, veth pairs ----
must ip netns add "$br_ns"
made_ns+=("$br_ns")
in_br() { ip netns exec "$br_ns" "$@"; }
must in_br ip link set lo up
must in_br ip link add br0 type bridge
must in_br ip link set br0 up
names=(ctl "${nodes[@]}")
addrs=("$ctl_addr" "$subnet.1" "$subnet.2" "$subnet.3" "$subnet.4")
for i in "${!names[@]}"; do
  n=${names[$i]}
  ns=$tag$n
  must ip netns add "$ns"
  made_ns+=("$ns")
  # The veth pair is born in the bridge namespace: nothing appears in the root one.
  must in_br ip link add "v$n" type veth peer name eth0
  must in_br ip link set eth0 netns "$ns"
  must in_br ip link set "v$n" master br0
  must in_br ip link set "v$n" up
  must ip netns exec "$ns" ip link set lo up
  must ip netns exec "$ns" ip addr add "${addrs[$i]}/24" dev eth0
  must ip netns exec "$ns" ip link set eth0 up
done

# ---- files ----
{
  echo "127.0.0.1 localhost"
  for i in "${!names[@]}"; do echo "${addrs[$i]} ${names[$i]}"; done
} > "$T/hosts"
mkdir -p "$T/munge" "$T/ctl/state" "$T/node/"{spool,run,tmp,log} || skip "mkdir in $T failed"
for n in "${nodes[@]}"; do mkdir -p "$T/$n/"{spool,run,tmp,log} || skip "mkdir in $T failed"; done
chmod 700 "$T/munge"

# ---- munged: its own key, socket, pid, seed and log files ----
must mungekey --create --keyfile="$T/munge/munge.key" --bits=1024
chmod 600 "$T/munge/munge.key"
sock=$T/munge/munge.socket
munged -F --force --key-file="$T/munge/munge.key" --socket="$sock" \
  --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/munged.seed" \
  --log-file="$T/munge/munged.log" > "$T/munge/munged.out" 2>&1 &
munged_pid=$!
for i in $(seq 1 50); do [ -S "$sock" ] && break; kill -0 $munged_pid 2>/dev/null || break; sleep 0.1; done
[ -S "$sock" ] || skip "munged did not start: $(tails "$T/munge/munged.out" "$T/munge/munged.log")"
err=$(munge -n -S "$sock" 2>&1 | unmunge -S "$sock" 2>&1 >/dev/null) || skip "munge -n | unmunge on $sock failed: $err"

# ---- slurm.conf ----
mpi=pmix
mpi_note="mpi/pmix plugin"
plugdir=$(ls -d /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib64/slurm /usr/lib/slurm 2>/dev/null | head -1)
if [ -z "$plugdir" ] || ! ls "$plugdir"/mpi_pmix*.so >/dev/null 2>&1; then
  mpi=none; mpi_note="no mpi_pmix*.so in ${plugdir:-the Slurm plugin dir} (Debian: slurm-wlm-basic-plugins): MpiDefault=none"
fi
conf=$T/slurm.conf
write_conf() {
cat > "$conf" <<EOF
# generated by tests/slurm/cluster.sh
ClusterName=chorus
MailProg=/bin/true
SlurmctldHost=ctl($ctl_addr)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$T/ctl/state
SlurmctldPidFile=$T/ctl/slurmctld.pid
SlurmctldLogFile=$T/ctl/slurmctld.log
SlurmctldDebug=info
# The node paths are the same for every slurmd; each one's mount namespace
# binds its own $T/hN/{spool,run,tmp,log} on them.
SlurmdSpoolDir=$T/node/spool
SlurmdPidFile=$T/node/run/slurmd.pid
SlurmdLogFile=$T/node/log/slurmd.log
TmpFS=$T/node/tmp
SlurmdDebug=info
# No cgroups.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=$mpi
SwitchType=switch/none
# backfill: heterogeneous jobs (srun A : B) need it; it runs every second.
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# 4 CPUs per node on 2 real cores: trust this file, not the hardware.
SlurmdParameters=config_overrides
ReturnToService=2
# Short timeouts: fast start-up and fast failure.
SlurmctldTimeout=10
SlurmdTimeout=30
MessageTimeout=5
TCPTimeout=2
KillWait=2
MinJobAge=10
InactiveLimit=0
Waittime=0
EOF
  for i in "${!nodes[@]}"; do
    echo "NodeName=${nodes[$i]} NodeAddr=$subnet.$((i + 1)) NodeHostname=${nodes[$i]} CPUs=4 Sockets=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN" >> "$conf"
  done
  echo "PartitionName=debug Nodes=h[0-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" >> "$conf"
}
write_conf
export SLURM_CONF=$conf

# enter NAME CMD...: run CMD in NAME's network namespace, in new UTS and
# mount namespaces (hostname NAME, private /etc/hosts, node directories).
# nsenter --net, not `ip netns exec`: the latter mounts a fresh /sys, which
# hides /sys/fs/cgroup, and slurmd 22.05 fails to start without it ("No
# filesystem mounted on /sys/fs/cgroup", "Unable to initialize cgroup
# plugin") even with proctrack/linuxproc and task/none. It only reads it.
# enter execs: call it only in a subshell (&, $(...), a pipeline), so that the
# pid of a background one is the daemon's own.
enter() {
  local name=$1
  shift
  exec nsenter --net="/run/netns/$tag$name" unshare --uts --mount --propagation private "$self" --_enter "$name" "$T" -- "$@"
}
in_ctl() { enter ctl env SLURM_CONF="$conf" "$@"; }

# The pmix plugin: is it there for srun (srun --mpi=list)? Whether it loads
# (it dlopens libpmix.so, from libpmix-dev) is checked with a real step below.
if [ $mpi = pmix ]; then
  list=$(srun --mpi=list 2>&1)
  if ! echo "$list" | grep -q pmix; then
    mpi=none; mpi_note="srun --mpi=list does not show pmix: $(echo "$list" | tr '\n' ' '): MpiDefault=none"
    write_conf
  fi
fi

# ---- slurmctld ----
enter ctl slurmctld -D -i -f "$conf" > "$T/ctl/slurmctld.out" 2>&1 &
ctl_pid=$!
bg+=($ctl_pid)
up=0
for i in $(seq 1 100); do
  kill -0 $ctl_pid 2>/dev/null || break
  if in_ctl scontrol ping 2>/dev/null | grep -q "is UP"; then up=1; break; fi
  sleep 0.2
done
[ $up = 1 ] || skip "slurmctld did not answer 'scontrol ping': $(tails "$T/ctl/slurmctld.out" "$T/ctl/slurmctld.log")"
say "slurmctld up in ctl ($ctl_addr) after $(since "$t_start") s"

# ---- slurmd h0..h3 ----
declare -A slurmd_pid
for n in "${nodes[@]}"; do
  enter "$n" slurmd -D -N "$n" -f "$conf" > "$T/$n/slurmd.out" 2>&1 &
  slurmd_pid[$n]=$!
  bg+=($!)
done

# wait_idle: until sinfo shows 4 idle nodes (bounded, progress lines), or
# skip where a daemon exited or the time is up.
wait_idle() {
  local deadline last="" idle
  deadline=$(( $(date +%s) + wait_s ))
  while :; do
    for n in "${nodes[@]}"; do
      kill -0 "${slurmd_pid[$n]}" 2>/dev/null ||
        skip "slurmd on $n exited: $(tails "$T/$n/slurmd.out" "$T/$n/log/slurmd.log")"
    done
    kill -0 $ctl_pid 2>/dev/null || skip "slurmctld exited: $(tails "$T/ctl/slurmctld.out" "$T/ctl/slurmctld.log")"
    states=$(in_ctl sinfo -h -N -o '%N=%T' 2>&1 | sort -u | tr '\n' ' ')
    idle=$(echo "$states" | tr ' ' '\n' | grep -c '=idle$')
    [ "$idle" -ge 4 ] && return 0
    if [ "$(date +%s)" -ge $deadline ]; then
      skip "after ${wait_s} s sinfo shows $idle idle nodes: $states; $(tails "$T/ctl/slurmctld.log" "$T"/h?/log/slurmd.log)"
    fi
    [ "$states" != "$last" ] && say "waiting for 4 idle nodes: $states"
    last=$states
    sleep 0.5
  done
}
wait_idle

# One real PMIx step on all 4 nodes; if it fails, MpiDefault=none, said so.
if [ $mpi = pmix ]; then
  if out=$(in_ctl timeout 30 srun -N 4 -n 4 --mpi=pmix true 2>&1); then
    mpi_note="checked: srun -N 4 -n 4 --mpi=pmix true ran"
  else
    mpi=none
    mpi_note="'srun -N 4 -n 4 --mpi=pmix true' failed: $(echo "$out" | tr '\n' ' ')"
    write_conf
    err=$(in_ctl scontrol reconfigure 2>&1) || skip "scontrol reconfigure (for MpiDefault=none) failed: $err"
  fi
  wait_idle
fi
say "MpiDefault=$mpi ($mpi_note)"
say "4 idle nodes (${states% }) after $(since "$t_start") s; running: $*"

# In the background and waited for, so that a TERM to this script is acted on
# at once (bash defers traps until a foreground child ends); stdin passed on
# explicitly (a background command would get /dev/null).
enter ctl env SLURM_CONF="$conf" "$@" <&0 &
cmd_pid=$!
bg+=($cmd_pid)
wait $cmd_pid
rc=$?
say "command exited $rc"
exit $rc
