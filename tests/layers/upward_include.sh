#!/usr/bin/env bash
# The build keeps the layers in order (docs/architecture.md, "Layers"): a
# component compiles with the include directory of its own layer
# (build/layers/<layer>, one link per folder it may see), so a header of a
# higher layer is not found. For every layer this compiles two one-line
# files with that layer's include paths, as the build compiles its sources:
# one including a header of its own layer, which must compile (the check
# itself works), and one including a header of each higher layer, which must
# fail because the header is not found.
#   upward_include.sh COMPILER BUILD_DIR REPO
set -uo pipefail
if [ "${1:-}" = "--help" ] || [ $# -ne 3 ]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  [ "${1:-}" = "--help" ]; exit $?
fi
compiler=$1 build=$2 repo=$3
# One header of each layer, bottom to top: what a component of that layer
# or above may include.
layers=(base transports p2p collectives front)
headers=("common/error.hpp" "transports/transport.hpp" "p2p/engine.hpp" "collectives/collectives.hpp"
         "api/communicator_impl.hpp")
failures=0 checks=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compile() {  # layer header -> compiler's status; its output in $work/out
  printf '#include "%s"\nint main() { return 0; }\n' "$2" >"$work/probe.cc"
  "$compiler" -std=c++20 -fsyntax-only -I"$repo/include" -I"$build/include" -I"$build/layers/$1" \
    $(pkg-config --cflags-only-I libfabric hwloc 2>/dev/null) "$work/probe.cc" >"$work/out" 2>&1
}
for i in "${!layers[@]}"; do
  layer=${layers[$i]}
  if [ ! -d "$build/layers/$layer" ]; then
    echo "FAIL: $build/layers/$layer is missing (configure the build first)"; exit 1
  fi
  checks=$((checks + 1))
  if ! compile "$layer" "${headers[$i]}"; then
    echo "FAIL: layer $layer cannot include its own ${headers[$i]}:"; head -n 5 "$work/out"
    failures=$((failures + 1))
  fi
  for ((j = i + 1; j < ${#layers[@]}; j++)); do
    checks=$((checks + 1))
    if compile "$layer" "${headers[$j]}"; then
      echo "FAIL: layer $layer included ${headers[$j]} of the higher layer ${layers[$j]}: it compiled"
      failures=$((failures + 1))
    elif ! grep -q "${headers[$j]}: No such file or directory" "$work/out"; then
      echo "FAIL: layer $layer including ${headers[$j]} failed, but not because the header was not found:"
      head -n 5 "$work/out"; failures=$((failures + 1))
    else
      echo "ok: layer $layer: #include \"${headers[$j]}\" (layer ${layers[$j]}) does not compile"
    fi
  done
done
if [ "$failures" -ne 0 ]; then
  echo "upward_include: FAILED, $failures of $checks checks"; exit 1
fi
echo "upward_include: OK, $checks checks: each layer compiles its own header and none of a higher layer"
