#!/usr/bin/env bash
# plots_current.sh SOURCE_DIR: the current results of docs/performance.md
# stay drawable and attributed. Every CSV in bench/results names its machine,
# commit, date and load ("# machine: ..." lines above the header), has its
# PNG in docs/images, embedded in docs/performance.md, and bench/plot-results
# makes a non-empty PNG of each into a temporary directory. Exits 1 on the
# first kind of failure (listing every case), 77 (skipped) when no python3
# with matplotlib is found, after the metadata checks, which need none.
set -euo pipefail
# shellcheck source=source_dir.sh source-path=SCRIPTDIR
source "$(dirname "$0")/source_dir.sh"
enter_source_dir "$@" <<'USAGE'
Usage: tests/docs/plots_current.sh SOURCE_DIR
Checks bench/results/*.csv (machine, commit, date, load) and that bench/plot-results draws each.
USAGE

shopt -s nullglob
csvs=(bench/results/*.csv)
if ((${#csvs[@]} == 0)); then
  echo "plots_current: FAILED: bench/results has no CSV file"
  exit 1
fi

failed=0
for csv in "${csvs[@]}"; do
  name=$(basename "$csv" .csv)
  for key in machine commit date load; do
    # The comment lines before the header row; the value must not be empty.
    if ! awk -v key="$key" '!/^#/ {exit} $0 ~ "^# *" key " *: *[^ ]" {found = 1} END {exit !found}' "$csv"; then
      echo "$csv: no \"# $key: ...\" line above the header (every result names its machine, commit, date and load)"
      failed=1
    fi
  done
  if [[ ! -s docs/images/$name.png ]]; then
    echo "$csv: docs/images/$name.png is missing (run bench/plot-results)"
    failed=1
  fi
  if ! grep -qF "(images/$name.png)" docs/performance.md; then
    echo "$csv: docs/performance.md does not embed images/$name.png"
    failed=1
  fi
done
if ((failed)); then
  echo "plots_current: FAILED"
  exit 1
fi

# PLOTS_CURRENT_PYTHONS: the interpreters to try (a test of this test sets it).
python=
for candidate in ${PLOTS_CURRENT_PYTHONS:-python3 /usr/bin/python3}; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import matplotlib' 2>/dev/null; then
    python=$candidate
    break
  fi
done
if [[ -z $python ]]; then
  echo "SKIP: no python3 with matplotlib (Debian: apt-get install python3-matplotlib); the ${#csvs[@]} CSVs' metadata is fine"
  exit 77
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! "$python" bench/plot-results bench/results "$out" >"$out/log" 2>&1; then
  cat "$out/log"
  echo "plots_current: FAILED: bench/plot-results exited non-zero"
  exit 1
fi
for csv in "${csvs[@]}"; do
  png=$out/$(basename "$csv" .csv).png
  if [[ ! -s $png ]]; then
    echo "$csv: bench/plot-results made no PNG ($png missing or empty)"
    failed=1
  elif [[ $(head -c 8 "$png" | od -An -tx1 | tr -d ' \n') != 89504e470d0a1a0a ]]; then
    echo "$csv: $png is not a PNG"
    failed=1
  fi
done
if ((failed)); then
  echo "plots_current: FAILED"
  exit 1
fi
echo "plots_current: OK: ${#csvs[@]} CSVs name machine, commit, date and load; each drawn as a non-empty PNG ($python)"
