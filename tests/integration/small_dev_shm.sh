#!/bin/sh
# A /dev/shm too small for the shm transport's rings (as a container's 64 MiB
# default is for many ranks) must fail every rank at init with a message
# that says what to do, never SIGBUS later. Runs the job in a private mount
# namespace with a 1 MiB tmpfs on /dev/shm; needs root (CI has it), else
# prints SKIP.
#   small_dev_shm.sh CHORUSRUN CHORUS_BENCH
# Exit status: chorusrun's; 77 (ctest SKIP) where the namespace cannot be made.
case "${1:-}" in -h|--help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
chorusrun=$1 bench=$2
if ! unshare -m true 2>/dev/null; then
  echo "SKIP: unshare -m is not permitted here"
  exit 77
fi
exec unshare -m sh -c 'mount -t tmpfs -o size=1M tmpfs /dev/shm &&
  exec "$0" -n 8 --timeout 20 --transport shm "$1" --op barrier --iters 2' "$chorusrun" "$bench"
