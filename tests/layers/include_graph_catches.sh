#!/usr/bin/env bash
# include_graph.py can fail: on a copy of the repository's layer table and
# folders with one upward include added (transports including the p2p
# engine), it must exit 1 naming that file; on the copy without it, 0.
#   include_graph_catches.sh REPO
set -uo pipefail
if [ "${1:-}" = "--help" ] || [ $# -ne 1 ]; then
  sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; [ "${1:-}" = "--help" ]; exit $?
fi
repo=$1 script=$(dirname "$0")/include_graph.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$repo/CMakeLists.txt" "$work/"
mkdir -p "$work/src" && cp -r "$repo/src/base" "$repo/src/p2p" "$repo/src/front" "$work/src/"
cp -r "$repo/transports" "$repo/collectives" "$work/"
if ! /usr/bin/python3 "$script" "$work" >"$work/clean.out"; then
  echo "FAIL: the unchanged copy was reported:"; cat "$work/clean.out"; exit 1
fi
printf '#include "p2p/engine.hpp"\n' >"$work/transports/upward_probe.hpp"
/usr/bin/python3 "$script" "$work" >"$work/upward.out"
status=$?
if [ "$status" -ne 1 ] || ! grep -q "UPWARD: transports/upward_probe.hpp:1: transports (layer transports) includes a header of layer p2p" "$work/upward.out"; then
  echo "FAIL: an upward include was not reported (exit $status):"; cat "$work/upward.out"; exit 1
fi
echo "include_graph_catches: OK, the upward include was named: $(grep UPWARD "$work/upward.out")"
