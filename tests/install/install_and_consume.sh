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
for wrapper in chorus-mpicc chorus-mpicxx; do
  test -x "$work/prefix/bin/$wrapper" || { echo "$wrapper was not installed"; exit 1; }
done
test -f "$work/prefix/include/chorus/mpi/mpi.h" || { echo "chorus/mpi/mpi.h was not installed"; exit 1; }
libdir=$(ls -d "$work"/prefix/lib*/ | head -n 1)
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cmake -S "$source_dir/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" >/dev/null
export LD_LIBRARY_PATH="$libdir"
export FI_TCP_IFACE=lo
"$work/build/consumer_cmake"
"$work/build/consumer_pkgconfig"
"$work/build/consumer_mpi_cmake"
# The installed wrapper finds its prefix from where it is, even when moved.
mv "$work/prefix" "$work/moved"
"$work/moved/bin/chorus-mpicc" -Wall -Wextra -Werror -o "$work/mpi_consumer" "$source_dir/consumer/mpi_consumer.c"
"$work/moved/bin/chorus-mpicxx" -x c++ -Wall -Wextra -Werror -o "$work/mpi_consumer_cxx" "$source_dir/consumer/mpi_consumer.c"
env -u LD_LIBRARY_PATH "$work/mpi_consumer"
env -u LD_LIBRARY_PATH "$work/mpi_consumer_cxx"
echo "install_and_consume: OK"
