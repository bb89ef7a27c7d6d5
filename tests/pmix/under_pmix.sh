#!/usr/bin/env bash
# under_pmix.sh HAVE_PMIX MPIRUN RANKS COMMAND...: runs COMMAND as RANKS ranks
# under Open MPI's mpirun, whose PMIx server sets PMIX_NAMESPACE/PMIX_RANK,
# with no chorus store address in the environment (the PMIx bootstrap must
# not need one). RANKS 0 runs COMMAND alone, outside any PMIx server.
# Exits 77 (skipped), saying why, when this build has no PMIx or no mpirun.
set -euo pipefail
have_pmix=$1 mpirun=$2 ranks=$3
shift 3
case $have_pmix in
  ON|on|1|TRUE|true) ;;
  *) echo "under_pmix: SKIP: this build has no PMIx (libpmix-dev not found at configure time, or -DCHORUS_PMIX=OFF)"
     exit 77 ;;
esac
unset CHORUS_STORE_ADDR MASTER_ADDR MASTER_PORT CHORUS_RANK CHORUS_SIZE CHORUS_JOB_SECRET CHORUS_JOB_ID
if [[ $ranks == 0 ]]; then
  unset PMIX_NAMESPACE PMIX_RANK
  exec "$@"
fi
if [[ -z $mpirun || ! -x $mpirun ]]; then
  echo "under_pmix: SKIP: Open MPI's mpirun was not found (apt-get install openmpi-bin): it provides the PMIx server"
  exit 77
fi
# --bind-to none: several ranks share this machine's few cores (mpirun binds to
# cores by default); --oversubscribe: more ranks than cores is expected here.
root=()
[[ $(id -u) == 0 ]] && root=(--allow-run-as-root)
exec "$mpirun" "${root[@]}" --oversubscribe --bind-to none -n "$ranks" "$@"
