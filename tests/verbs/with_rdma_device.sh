#!/usr/bin/env bash
# with_rdma_device.sh PROBE COMMAND...: runs COMMAND when PROBE finds an RDMA
# device, else prints PROBE's reason and exits 77 (ctest: skipped).
probe=$1
shift
"$probe" || exit 77
exec "$@"
