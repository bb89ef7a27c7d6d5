#!/bin/sh
# compare-openmpi's placement check: a launch whose core-hop readings before
# and after differ by more than 1.5x runs again, at most --placement-retries
# times, the same for both sides, its results still checked; each row
# compares the sides within one group of readings.
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
# chorus 1: 30/31 (one placement); ompi 1: 100/30, 30/200, 200/30 moved
# (3 runs again), 30/200 kept though moved; chorus 2 and ompi 2: 200/200.
# The kept readings group into "30 ns" (30, 31) and "200 ns"; the row
# compares within "200 ns", the only group both sides have.
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
expect "# placement: 4 launches, 3 runs again, 1 kept though moved after 3 runs again:"
expect "rows by placement (the core-hop group, by its lowest reading, where both sides' launches ran): 200 ns: 5"
echo "$out" | grep -qE "^\|       4 B \|.*\| 200 ns +\|$" || { echo "compare_placement: the 4 B row is not compared within 200 ns"; exit 1; }
expect "#   kept: ompi shm np2 --sync --op allreduce --min-bytes 4 --max-bytes 64"
expect "compare-openmpi: OK, every result on both sides correct"
[ "$(cat "$dir/count")" = 15 ] || { echo "compare_placement: core-hop read $(cat "$dir/count") times, expected 15"; exit 1; }
off=$("$compare" --no-build --build-dir "$dir" --paths shm --ops allreduce --max-bytes 4 --no-placement-check 2>&1)
echo "$off" | grep -qF "# placement check: off (--no-placement-check)" || { echo "$off"; exit 1; }
[ "$(cat "$dir/count")" = 15 ] || { echo "compare_placement: core-hop ran with --no-placement-check"; exit 1; }
echo "compare_placement: OK"
