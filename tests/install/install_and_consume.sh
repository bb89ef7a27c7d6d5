#!/usr/bin/env bash
# install_and_consume.sh BUILD_DIR VERSION
# Installs the build tree into a temporary prefix, then configures, builds and
# runs downstream programs against it, none of which sets C++20 or
# LD_LIBRARY_PATH itself: find_package, pkg-config through CMake, pkg-config
# with a plain compiler (C++ and C), the MPI wrappers; then the same
# pkg-config files for a multiarch libdir (lib/<triplet>).
set -euo pipefail
build_dir=$1 version=$2
source_dir=$(cd "$(dirname "$0")" && pwd)
project_dir=$(cd "$source_dir/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset LD_LIBRARY_PATH
export FI_TCP_IFACE=lo
fail() { echo "install_and_consume: FAILED: $*"; exit 1; }

prefix=$work/prefix
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
for program in chorusrun chorus-bench chorus_info chorus-mpicc chorus-mpicxx; do
  test -x "$prefix/bin/$program" || fail "$program was not installed in bin"
done
# Names that could clash in /usr/bin live in libexec/chorus.
for program in compare-openmpi osu_style_bench compare-overlap osu_style_overlap core-hop; do
  test ! -e "$prefix/bin/$program" || fail "$program was installed in bin (its name could clash in /usr/bin)"
  if [ -x "$build_dir/bench/osu_style_bench" ]; then
    test -x "$prefix/libexec/chorus/$program" || fail "$program was not installed in libexec/chorus"
  fi
done
for header in chorus/chorus.h chorus/chorus.hpp chorus/version.h chorus/mpi/mpi.h; do
  test -f "$prefix/include/$header" || fail "$header was not installed"
done
libdir=$(dirname "$(find "$prefix" -name 'libchorus.so' | head -n 1)")

# Installed programs run without LD_LIBRARY_PATH and agree on the version.
[ "$("$prefix/bin/chorus_info" --version)" = "chorus_info (chorus) $version" ] || fail "chorus_info --version"
[ "$("$prefix/bin/chorusrun" --version)" = "chorusrun (chorus) $version" ] || fail "chorusrun --version"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
[ "$(pkg-config --modversion chorus)" = "$version" ] || fail "chorus.pc's version is not $version"
if [ -x "$prefix/libexec/chorus/compare-openmpi" ]; then
  # iallreduce: its overlap run finds compare-overlap and osu_style_overlap there too.
  "$prefix/libexec/chorus/compare-openmpi" --no-build --quick --paths shm --ops barrier,iallreduce --max-bytes 4K \
    >"$work/compare.out" 2>&1 ||
    { cat "$work/compare.out"; fail "the installed compare-openmpi did not run"; }
  # Its placement check found core-hop beside it.
  grep -q '^# placement check: core-hop CPUs 0,1 at start' "$work/compare.out" ||
    { cat "$work/compare.out"; fail "the installed compare-openmpi ran without core-hop"; }
fi

# CMake: find_package and pkg_check_modules.
cmake -S "$source_dir/consumer" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/build" >/dev/null
for program in consumer_cmake consumer_pkgconfig consumer_pkgconfig_c consumer_mpi_cmake; do
  "$work/build/$program" || fail "$program"
done

# pkg-config with a plain compiler, as a Makefile would.
# shellcheck disable=SC2046  # pkg-config's flags are word lists
build_plain() { # pc-module out compiler source
  "$3" -Wall -Wextra -Werror $(pkg-config --cflags "$1") -o "$2" "$4" $(pkg-config --libs "$1")
}
build_plain chorus "$work/plain_cxx" c++ "$source_dir/consumer/consumer.cc"
build_plain chorus-c "$work/plain_c" cc "$source_dir/consumer/consumer.c"
"$work/plain_cxx" || fail "a C++ program built with pkg-config chorus"
"$work/plain_c" || fail "a C program built with pkg-config chorus-c"

# A multiarch libdir: the same files laid out as lib/<triplet>, the .pc files
# written by the same code (cmake/chorus_pkgconfig.cmake) for that libdir.
triplet=$(cc -print-multiarch 2>/dev/null || true)
[ -n "$triplet" ] || triplet=x86_64-linux-gnu
multi=$work/multiarch
mkdir -p "$multi/lib/$triplet"
cp -a "$prefix/include" "$multi/"
cp -a "$libdir"/libchorus*.so* "$multi/lib/$triplet/"
extra_libs=$(sed -n 's/^Libs: .*-lchorus//p' "$libdir/pkgconfig/chorus.pc")
cmake -DOUTPUT_DIR="$multi/lib/$triplet/pkgconfig" -DLIBDIR="lib/$triplet" -DINCLUDEDIR=include -DVERSION="$version" \
  -DRPATH=ON "-DEXTRA_LIBS=$extra_libs" -P "$project_dir/cmake/chorus_pkgconfig.cmake"
export PKG_CONFIG_PATH="$multi/lib/$triplet/pkgconfig"
[ "$(realpath "$(pkg-config --variable=prefix chorus)")" = "$(realpath "$multi")" ] ||
  fail "multiarch: chorus.pc's prefix is $(pkg-config --variable=prefix chorus), not $multi"
build_plain chorus "$work/multi_cxx" c++ "$source_dir/consumer/consumer.cc"
build_plain chorus-c "$work/multi_c" cc "$source_dir/consumer/consumer.c"
loaded=$(ldd "$work/multi_cxx" | sed -n 's/^[[:space:]]*libchorus\.so[^ ]* => \([^ ]*\) .*/\1/p')
[ "$(realpath "$loaded")" = "$(realpath "$multi/lib/$triplet/libchorus.so.0")" ] ||
  fail "multiarch: runs with libchorus from \"$loaded\", not from $multi/lib/$triplet"
"$work/multi_cxx" || fail "multiarch: a C++ program built with pkg-config chorus"
"$work/multi_c" || fail "multiarch: a C program built with pkg-config chorus-c"

# The installed wrapper finds its prefix from where it is, even when moved.
mv "$prefix" "$work/moved"
"$work/moved/bin/chorus-mpicc" -Wall -Wextra -Werror -o "$work/mpi_consumer" "$source_dir/consumer/mpi_consumer.c"
"$work/moved/bin/chorus-mpicxx" -x c++ -Wall -Wextra -Werror -o "$work/mpi_consumer_cxx" "$source_dir/consumer/mpi_consumer.c"
"$work/mpi_consumer"
"$work/mpi_consumer_cxx"
echo "install_and_consume: OK"
