#!/bin/bash
# pytorch.pip_install: chorus_torch as ML users install it. `pip install
# --no-build-isolation --no-deps .` into a fresh venv that sees the system's
# torch, linking the libchorus of this build (installed into a scratch
# prefix: CHORUS_PREFIX) and carrying it in the wheel; then import from
# another directory (the extension must load the wheel's libchorus) and 2
# ranks in torchrun's worker environment all_reduce through the venv.
#   pip_install.sh BUILD_DIR SOURCE_DIR [PYTHON]
set -euo pipefail
build=$(cd "${1:?usage: pip_install.sh BUILD_DIR SOURCE_DIR [PYTHON]}" && pwd)
source_dir=$(cd "${2:?usage: pip_install.sh BUILD_DIR SOURCE_DIR [PYTHON]}" && pwd)
python=${3:-/usr/bin/python3}
work=$(mktemp -d /tmp/chorus-pip.XXXXXX)
trap 'rm -rf "$work"' EXIT
skip() { echo "SKIP: $*"; exit 77; }
"$python" -c 'import venv, ensurepip' 2>/dev/null || skip "$python has no venv/ensurepip module (apt-get install python3-venv)"
"$python" -c 'import setuptools, wheel' 2>/dev/null || skip "$python lacks setuptools or wheel (apt-get install python3-setuptools python3-wheel)"

echo "== install this build into a scratch prefix (CHORUS_PREFIX)"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
echo "== the sources pip needs, copied (pip builds in the tree it is given)"
mkdir -p "$work/src/bindings"
cp "$source_dir"/{setup.py,pyproject.toml,CMakeLists.txt} "$work/src/"
cp -r "$source_dir/bindings/pytorch" "$work/src/bindings/"
rm -rf "$work/src/bindings/pytorch/chorus_torch/lib" "$work/src/bindings/pytorch/chorus_torch/__pycache__"

echo "== fresh venv (--system-site-packages: the system's torch), pip install"
"$python" -m venv --system-site-packages "$work/venv"
# The extension's compile goes through ccache where there is one (CI time):
# the scratch tree is new every run, so its paths are made relative to it.
# torch wants CXX to be one program named like a compiler: a wrapper.
compiler=()
if [ -z "${CXX:-}" ] && command -v ccache >/dev/null && command -v g++ >/dev/null; then
  mkdir -p "$work/ccache-bin"
  printf '#!/bin/sh\nexec ccache %s "$@"\n' "$(command -v g++)" > "$work/ccache-bin/g++"
  chmod +x "$work/ccache-bin/g++"
  compiler=(CXX="$work/ccache-bin/g++" CCACHE_BASEDIR="$work" CCACHE_NOHASHDIR=1)
fi
(cd "$work/src" && env "${compiler[@]}" CHORUS_PREFIX="$work/prefix" "$work/venv/bin/pip" install --no-build-isolation \
  --no-deps --no-index . > "$work/pip.log" 2>&1) || { tail -30 "$work/pip.log"; echo "FAIL: pip install"; exit 1; }
grep -E "Successfully (built|installed)" "$work/pip.log"

echo "== import from another directory"
cd "$work"
installed=$("$work/venv/bin/python" -c 'import chorus_torch, os; print(os.path.dirname(chorus_torch.__file__))')
case "$installed" in "$work/venv/"*) ;; *) echo "FAIL: chorus_torch imported from $installed, not the venv"; exit 1 ;; esac
module=$(ls "$installed"/_C*.so)
loaded=$(ldd "$module" | awk '/libchorus.so.0/ {print $3}')
echo "$module loads $loaded"
[ "$loaded" = "$installed/lib/libchorus.so.0" ] || { echo "FAIL: libchorus is not the wheel's"; exit 1; }

echo "== 2 ranks in torchrun's worker environment, the venv's python"
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
for rank in 0 1; do
  env -u PYTHONPATH MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank \
    LOCAL_WORLD_SIZE=2 GROUP_RANK=0 TORCHELASTIC_RUN_ID=chorus-pip OMP_NUM_THREADS=1 \
    timeout 120 "$work/venv/bin/python" "$source_dir/bindings/pytorch/tests/torchrun_script.py" > "$work/rank$rank.log" 2>&1 &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
cat "$work/rank0.log" "$work/rank1.log"
[ "$status" = 0 ] && [ "$(cat "$work"/rank*.log | grep -c 'torchrun rank ok')" = 2 ] || { echo "FAIL: the ranks did not both finish"; exit 1; }
echo "pip_install: OK"
