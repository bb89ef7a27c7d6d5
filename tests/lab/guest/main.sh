#!/bin/bash
# shellcheck disable=SC2154 # the lab_* settings come from params (written by run.sh)
# The lab guest's PID 1 after init has switched to the overlaid host root.
# run.sh copies this file into the run directory (/run/chorus-lab here).
#
# Brings up the network and rxe0, waits for the other guests, runs the
# command with the caller's environment and directory, writes its exit status
# to /run/chorus-lab/status and powers the guest off. Not `set -e`: whatever
# fails, the guest must still power off (run.sh then reports the failure).
run=/run/chorus-lab
# shellcheck source=/dev/null
. $run/params

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# To the serial console (run.sh -v shows it; run.sh prints its tail when the
# guest fails), with the guest's uptime: boot steps are slow under emulation.
log() {
  local uptime
  read -r uptime _ < /proc/uptime
  echo "[lab guest $uptime] $*"
}
power_off() {
  sync
  echo o > /proc/sysrq-trigger   # immediate power-off, no init system to stop
  sleep 10
}

log "rank $lab_rank of $lab_ranks"
hostname "chorus-lab$lab_rank"
ulimit -n 65536

# The command's stdout and stderr: the virtio-serial ports run.sh named.
stdout=/dev/null stderr=/dev/null
for port in /sys/class/virtio-ports/*; do
  case $(cat "$port/name" 2>/dev/null) in
    lab.stdout) stdout=/dev/${port##*/} ;;
    lab.stderr) stderr=/dev/${port##*/} ;;
  esac
done

read -r -a addresses <<< "$lab_addresses"
address=${addresses[lab_rank]}
ip link set lo up

# ---------------------------------------------------------------- network
if ((lab_ranks > 1)); then
  # The virtio NIC on run.sh's virtual switch; its MAC says it is ours.
  modprobe virtio_net
  netdev=
  for _ in {1..200}; do
    for dev in /sys/class/net/*; do
      [[ $(< "$dev/address") == 52:54:00:1a:* ]] && netdev=${dev##*/}
    done
    [[ -n $netdev ]] && break
    sleep 0.05
  done
  [[ -n $netdev ]] || log "no virtio NIC appeared"
else
  # One guest has no NIC. rxe needs an Ethernet device (not lo), so a veth
  # pair gives it one; both ends stay in this network namespace because rxe
  # (6.1) only listens for RoCE packets in the initial one.
  modprobe veth
  netdev=lab0
  ip link add lab0 type veth peer name lab1
  ip link set lab1 mtu "$lab_mtu" up
fi
ip link set "$netdev" mtu "$lab_mtu"
ip addr add "$address/16" dev "$netdev"
ip link set "$netdev" up

# ------------------------------------------------------------------- rxe0
gid_index=
if [[ $lab_rxe == 1 ]]; then
  modprobe -a rdma_rxe ib_uverbs rdma_ucm ib_umad || log "modprobe of the RDMA modules failed"
  rdma link add rxe0 type rxe netdev "$netdev" || log "rdma link add rxe0 failed"
  # rxe fills its GID table shortly after; wait for the IPv4-mapped GID of
  # our address (RoCE v2). Shell builtins only: every fork costs
  # milliseconds under emulation.
  IFS=. read -r a b c d <<< "$address"
  mapped=$(printf 'ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
  for ((try = 0; try < 200 && ${#gid_index} == 0; try++)); do
    for index in 0 1 2 3; do
      read -r gid < /sys/class/infiniband/rxe0/ports/1/gids/$index 2>/dev/null || continue
      [[ $gid == *"$mapped" ]] && { gid_index=$index; break; }
    done
    [[ -n $gid_index ]] || sleep 0.05
  done
  if [[ -n $gid_index ]]; then log "rxe0 on $netdev, $address, GID index $gid_index"
  else log "rxe0: no GID for $address appeared"; fi
fi

# ---------------------------------------------------- barrier (-n N > 1)
# Every guest mounts the directory all share, says it is ready, and waits
# (at most ~5 minutes) for the others, so that no rank starts before its
# peers have rxe0. cache=none: the other guests' files must show up.
if ((lab_ranks > 1)); then
  mkdir -p /run/chorus-lab-all
  mount -t 9p -o trans=virtio,version=9p2000.L,cache=none labshared /run/chorus-lab-all \
    || log "mount of the shared run directory failed"
  : > "/run/chorus-lab-all/ready.$lab_rank"
  for ((try = 0; try < 3000; try++)); do
    ready=0
    for ((r = 0; r < lab_ranks; r++)); do
      [[ -e /run/chorus-lab-all/ready.$r ]] && ready=$((ready + 1))
    done
    ((ready == lab_ranks)) && break
    sleep 0.1
  done
  log "barrier: $ready of $lab_ranks guests ready"
fi

# ---------------------------------------------------------------- command
export CHORUS_LAB_RANK=$lab_rank CHORUS_LAB_RANKS=$lab_ranks CHORUS_LAB_IP=$address
export CHORUS_LAB_IPS=$lab_addresses CHORUS_LAB_DEV=rxe0 CHORUS_LAB_GID_INDEX=${gid_index:-1}
# The caller's exported variables (declare -x lines written by run.sh).
# shellcheck source=/dev/null
. $run/environment
export PATH=$lab_path
cd "$lab_directory" || { log "no directory $lab_directory in the guest; running in /"; cd /; }
log "running: $(< $run/command)"
bash $run/command < /dev/null > "$stdout" 2> "$stderr"
status=$?
echo "$status" > $run/status
log "exit status $status"
# Every byte the command wrote must reach the host before the power-off: the
# virtio-serial queue still holds what qemu has not yet written to the host's
# file (the end of a long output, when the host is loaded). Each port ends
# with run.sh's marker line, and the guest waits until the files in the run
# directory (this very directory, cache=none) end with it.
if [ "$stdout" != /dev/null ] && [ -n "${lab_end_marker:-}" ]; then
  printf '%s\n' "$lab_end_marker" > "$stdout"
  printf '%s\n' "$lab_end_marker" > "$stderr"
  drained=0
  for ((try = 0; try < 1200; try++)); do
    if tail -c 200 $run/stdout | grep -qF -- "$lab_end_marker" &&
       tail -c 200 $run/stderr | grep -qF -- "$lab_end_marker"; then
      drained=1
      break
    fi
    sleep 0.1
  done
  ((drained)) || log "the command's output did not reach the host within 120 s; its end may be lost"
fi
power_off
