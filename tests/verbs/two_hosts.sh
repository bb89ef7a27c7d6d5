#!/usr/bin/env bash
# Runs in each of the two lab guests (tests/lab/run.sh -n 2; CHORUS_LAB_RANK 0
# or 1): one chorus rank per guest, started torchrun-style (rank 0 serves the
# store at MASTER_ADDR), so the ranks talk over rxe0 across the virtual switch.
# Prints one verdict line per configuration ("passed", "STALL", "failed") and
# exits 0 only when every configuration passed (run.sh returns the first
# non-zero guest status). The verdict on the test is lab.sh's: it runs a
# stalled configuration once more in fresh guests.
set -uo pipefail
build=$1
export RANK=$CHORUS_LAB_RANK WORLD_SIZE=$CHORUS_LAB_RANKS LOCAL_RANK=0 LOCAL_WORLD_SIZE=1
export MASTER_ADDR=${CHORUS_LAB_IPS%% *}
# The NIC under rxe0 (eth0 with several guests, lab0 in a single one).
netdev=$(cat "/sys/class/infiniband/${CHORUS_LAB_DEV:-rxe0}/ports/1/gid_attrs/ndevs/0" 2>/dev/null)
export CHORUS_TRANSPORT=verbs CHORUS_TIMEOUT=120 FI_TCP_IFACE=${netdev:-eth0}
# The switch drops a few percent of packets: retransmit after ~67 ms, not seconds.
export CHORUS_VERBS_QP_TIMEOUT=14
status=0
log=$(mktemp)

# rxe's counters after each run: retransmissions and duplicates tell a lossy
# link from a stalled QP when a run fails.
counters=/sys/class/infiniband/${CHORUS_LAB_DEV:-rxe0}/ports/1/hw_counters
rxe_counters() {
  local name
  for name in sent_pkts rcvd_pkts completer_retry_err duplicate_request; do
    [ -r "$counters/$name" ] && printf '%s=%s ' "$name" "$(cat "$counters/$name")"
  done
}
# Every counter rxe keeps, and what the kernel said, for a run that stalled:
# send_err (frames the guest's own stack refused) and the sequence errors
# tell a lost frame from a QP whose retransmissions are never accepted.
rxe_state() {
  local file
  for file in "$counters"/*; do [ -r "$file" ] && printf '%s=%s ' "${file##*/}" "$(cat "$file")"; done
  echo
  dmesg 2>/dev/null | grep -iE 'rxe|rdma|infiniband' | tail -n 5
}

# matrix PORT VAR=VALUE...: the collective matrix with these settings. By
# default --every-size: every collective, algorithm, root and size (the MiB
# ones, multi-chunk READs, too) with the dtype and op product cut to what
# changes bytes on the wire; the full matrix (MATRIX_FLAGS= empty) took 190 s
# per configuration here (docs/testing.md, "Matrix depths").
matrix() {
  local port=$1
  shift
  # shellcheck disable=SC2086 # MATRIX_FLAGS: words for the matrix, e.g. --quick
  env "$@" MASTER_PORT="$port" "$build/tests/integration/chorus-matrix" ${MATRIX_FLAGS---every-size} > "$log" 2>&1
  local rc=$?
  cat "$log"
  echo "rxe0 counters so far: $(rxe_counters)"
  return $rc
}

# run INDEX VAR=VALUE...: one configuration. A run that ends in a timeout
# (both ranks alive, a transfer that never completed: rxe under the switch's
# loss, docs/testing.md "Two lab guests") is a STALL, said with rxe's state;
# lab.sh runs it once more in fresh guests (a guest whose rxe stalled once
# has been seen to stall the next run too). Anything else is a failure.
run() {
  local index=$1
  shift
  # TWO_HOSTS_RUNS="3 4": only these configurations (to reproduce one).
  case " ${TWO_HOSTS_RUNS:-$index} " in *" $index "*) ;; *) return 0 ;; esac
  echo "== two hosts: configuration $index: $*"
  if matrix $((29510 + 10 * index)) "$@"; then
    echo "two_hosts: configuration $index passed"
  elif grep -q "timed out after" "$log"; then
    echo "two_hosts: STALL in configuration $index ($*); rxe: $(rxe_state)"
    status=1
  else
    echo "two_hosts: configuration $index failed ($*)"
    status=1
  fi
}

# The matrix over per-QP receives, then SRQ with rdma_cm; the second
# --quick (by default: TWO_HOSTS_SECOND_FLAGS): what it changes is the
# connection setup and the receive path, which small sizes show; the MiB
# READs are the first configuration's (CI time, stop 54).
run 1 CHORUS_VERBS_CONNECT=bootstrap CHORUS_VERBS_SRQ=0
MATRIX_FLAGS=${TWO_HOSTS_SECOND_FLAGS---quick} run 2 CHORUS_VERBS_CONNECT=rdmacm CHORUS_VERBS_SRQ=1
# UD mode, then UD mode with 10 % of the frames this guest sends dropped
# (netem on its NIC, both guests): software retransmission must repair it.
# The quick matrix (every collective, sizes across the eager limit): the
# MiB-sized cases of the whole one (NETEM_MATRIX_FLAGS=) take rxe's RC READ
# a QP timeout per lost response packet, which makes it run for an hour.
run 3 CHORUS_VERBS_MODE=ud
case " ${TWO_HOSTS_RUNS:-4} " in
  *" 4 "*)
    if tc qdisc add dev "${netdev:-eth0}" root netem loss 10% 2> "$log"; then
      echo "== netem: dropping 10% of the frames $netdev sends"
      MATRIX_FLAGS=${NETEM_MATRIX_FLAGS---quick} run 4 CHORUS_VERBS_MODE=ud CHORUS_LOG_LEVEL=info
      tc qdisc del dev "$netdev" root
    else
      echo "two_hosts: configuration 4 failed: cannot add netem loss on ${netdev:-eth0}: $(cat "$log")"
      status=1
    fi ;;
esac

# hybrid INDEX VAR=VALUE...: 2 ranks per guest (4 in all), shm between the
# two of a guest and verbs between the guests (docs/transport-hybrid.md).
# The guests share one hostname, so CHORUS_HOST_ID tells them apart. Every
# rank must pass and say it connected over shm+verbs. --quick by default
# (HYBRID_MATRIX_FLAGS): 2 ranks on each 1-CPU guest; --every-size took
# 5.8 min a configuration (docs/transport-hybrid.md).
hybrid() {
  local index=$1
  shift
  case " ${TWO_HOSTS_RUNS:-$index} " in *" $index "*) ;; *) return 0 ;; esac
  echo "== two hosts: configuration $index: 2 ranks per host, shm inside, verbs between: $*"
  local local_rank pids=() rc=0 logs=()
  for local_rank in 0 1; do
    logs+=("$(mktemp)")
    # shellcheck disable=SC2086 # HYBRID_MATRIX_FLAGS: words for the matrix
    env "$@" RANK=$((2 * CHORUS_LAB_RANK + local_rank)) WORLD_SIZE=$((2 * CHORUS_LAB_RANKS)) LOCAL_RANK=$local_rank \
      LOCAL_WORLD_SIZE=2 CHORUS_HOST_ID="lab-guest-$CHORUS_LAB_RANK" CHORUS_LOCAL_TRANSPORT=shm CHORUS_LOG_LEVEL=info \
      MASTER_PORT=$((29510 + 10 * index)) "$build/tests/integration/chorus-matrix" ${HYBRID_MATRIX_FLAGS---quick} \
      > "${logs[$local_rank]}" 2>&1 &
    pids+=($!)
  done
  for local_rank in 0 1; do wait "${pids[$local_rank]}" || rc=1; done
  cat "${logs[@]}" > "$log"
  rm -f "${logs[@]}"
  grep -E "connected over|cases|passed$|error|FAILED" "$log" | head -12
  echo "rxe0 counters so far: $(rxe_counters)"
  local connected
  connected=$(grep -c "connected over shm+verbs" "$log")
  if [ $rc -eq 0 ] && [ "$connected" -eq 2 ] && [ "$(grep -c "chorus-matrix: rank [0-9]* passed$" "$log")" -eq 2 ]; then
    echo "two_hosts: configuration $index passed"
  elif grep -q "timed out after" "$log"; then
    echo "two_hosts: STALL in configuration $index ($*); rxe: $(rxe_state)"
    status=1
  else
    tail -20 "$log"
    echo "two_hosts: configuration $index failed ($*; $connected of 2 ranks of this guest connected over shm+verbs)"
    status=1
  fi
}
hybrid 5 CHORUS_VERBS_MODE=rc
hybrid 6 CHORUS_VERBS_MODE=ud
rm -f "$log"
[ $status = 0 ] && echo "two_hosts: every configuration run passed on two hosts"
exit $status
