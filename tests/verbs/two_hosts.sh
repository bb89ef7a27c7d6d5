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
for connect in bootstrap rdmacm; do
  echo "== two hosts, CHORUS_VERBS_CONNECT=$connect"
  CHORUS_VERBS_CONNECT=$connect MASTER_PORT=$((MASTER_PORT++)) "$build/tests/integration/chorus-matrix" --quick || status=1
done
exit $status
