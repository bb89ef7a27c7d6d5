#!/bin/sh
# compare-openmpi's placement check: a launch with a core-hop reading above
# 1.5x the lowest before or after it runs again, at most --placement-retries
# times, the same for both sides; its results are still checked.
# The benchmarks are the real ones; core-hop is replaced by a script that
# replays set readings (the host's placement cannot be moved on demand).
# usage: compare_placement.sh COMPARE_OPENMPI BUILD_DIR
set -eu
compare=$1 build=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/compare-placement.XXXXXX")
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/bench" "$dir/launcher"
ln -s "$build/bench/chorus-bench" "$build/bench/osu_style_bench" "$dir/bench/"
ln -s "$build/launcher/chorusrun" "$dir/launcher/"
# Readings in turn (start, then before/after each run); the last repeats.
# chorus 1: 30/31 near; ompi 1: 100/30, 30/200, 200/30 moved (3 runs
# again), 30/200 kept though moved; chorus 2: 200/200 apart; ompi 2:
# 200/200 apart. The row compares within "apart" (both sides have it).
printf '%s\n' 30 30 31 100 30 30 200 200 30 30 200 200 200 200 200 > "$dir/readings"
cat > "$dir/bench/core-hop" <<FAKE
#!/bin/sh
n=\$(cat "$dir/count" 2>/dev/null || echo 0)
echo \$((n + 1)) > "$dir/count"
line=\$(sed -n "\$((n + 1))p" "$dir/readings")
[ -n "\$line" ] || line=\$(tail -n 1 "$dir/readings")
echo "\$line"
FAKE
chmod +x "$dir/bench/core-hop"
out=$("$compare" --no-build --build-dir "$dir" --paths shm --ops allreduce --max-bytes 64 --repeat 2 2>&1) || {
  echo "$out"; echo "compare_placement: compare-openmpi failed"; exit 1; }
echo "$out"
expect() {
  echo "$out" | grep -qF -- "$1" || { echo "compare_placement: missing in the output: $1"; exit 1; }
}
expect "# placement check: core-hop CPUs 0,1 at start 30 ns"
expect "# placement: 4 launches, 3 runs again (core-hop lowest 30 ns), 1 kept though moved after 3 runs again:"
expect "placement of the rows (near: the CPUs shared a cache, core-hop <= 45.0 ns, in both sides' launches): near 0 apart 5 moved 0 mixed 0"
echo "$out" | grep -qE "^\|       4 B \|.*\| apart +\|$" || { echo "compare_placement: the 4 B row is not compared within apart"; exit 1; }
expect "#   kept: ompi shm np2 --sync --op allreduce --min-bytes 4 --max-bytes 64"
expect "compare-openmpi: OK, every result on both sides correct"
[ "$(cat "$dir/count")" = 15 ] || { echo "compare_placement: core-hop read $(cat "$dir/count") times, expected 15"; exit 1; }
off=$("$compare" --no-build --build-dir "$dir" --paths shm --ops allreduce --max-bytes 4 --no-placement-check 2>&1)
echo "$off" | grep -qF "# placement check: off (--no-placement-check)" || { echo "$off"; exit 1; }
[ "$(cat "$dir/count")" = 15 ] || { echo "compare_placement: core-hop ran with --no-placement-check"; exit 1; }
echo "compare_placement: OK"
