#!/usr/bin/env bash
# Runs in each of the two lab guests (VERBSLAB_RANK 0 or 1): one chorus rank
# per guest, started torchrun-style (rank 0 serves the store at MASTER_ADDR),
# so the ranks talk over rxe0 across the virtual switch.
set -uo pipefail
build=$1
export RANK=$VERBSLAB_RANK WORLD_SIZE=$VERBSLAB_NRANKS LOCAL_RANK=0 LOCAL_WORLD_SIZE=1
export MASTER_ADDR=${VERBSLAB_IPS%% *} MASTER_PORT=29517
export CHORUS_TRANSPORT=verbs CHORUS_TIMEOUT=120 FI_TCP_IFACE=vl0
# The switch drops a few percent of packets: retransmit after ~67 ms, not seconds.
export CHORUS_VERBS_QP_TIMEOUT=14
status=0
# The whole matrix over per-QP receives, then SRQ with rdma_cm.
run() {
  echo "== two hosts: $*"
  env "$@" MASTER_PORT=$((MASTER_PORT++)) "$build/tests/integration/chorus-matrix" || status=1
}
run CHORUS_VERBS_CONNECT=bootstrap CHORUS_VERBS_SRQ=0
run CHORUS_VERBS_CONNECT=rdmacm CHORUS_VERBS_SRQ=1
exit $status
