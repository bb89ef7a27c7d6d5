#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then configures, builds and
# runs a downstream project against it (find_package and pkg-config).
set -euo pipefail
build_dir=$1
source_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
test -x "$work/prefix/bin/chorusrun" || { echo "chorusrun was not installed"; exit 1; }
test -x "$work/prefix/bin/chorus-bench" || { echo "chorus-bench was not installed"; exit 1; }
test -x "$work/prefix/bin/chorus_info" || { echo "chorus_info was not installed"; exit 1; }
libdir=$(ls -d "$work"/prefix/lib*/ | head -n 1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cmake -S "$source_dir/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
export LD_LIBRARY_PATH="$libdir"
export FI_TCP_IFACE=lo
"$work/build/consumer_cmake"
"$work/build/consumer_pkgconfig"
echo "install_and_consume: OK"
