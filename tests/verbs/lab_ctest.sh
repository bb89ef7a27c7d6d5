#!/usr/bin/env bash
# lab_ctest.sh BUILD_DIR: the verbs tests inside a lab guest (lab.sh single),
# with core dumps on. A rank that crashes leaves a core in the guest (whose
# writes vanish at power-off), so its backtrace is printed here, in the
# test's log: a rare crash in the lab is then diagnosable from one CI run.
set -uo pipefail
build=$1
cores=/tmp/chorus-lab-cores
mkdir -p "$cores"
# %E: the executable's path with '/' written as '!'.
if ! echo "$cores/core.%E.%p" >/proc/sys/kernel/core_pattern 2>/dev/null; then
  echo "lab_ctest: cannot set core_pattern; a crash will have no backtrace"
fi
ulimit -c unlimited
ctest --test-dir "$build" -L '^verbs$' --output-on-failure
status=$?
for core in "$cores"/core.*; do
  [ -e "$core" ] || continue
  name=${core#"$cores"/core.}
  executable=${name%.*}
  executable=${executable//!//}
  echo "lab_ctest: ${executable} (pid ${name##*.}) dumped core; its threads' stacks:"
  if command -v gdb >/dev/null; then
    gdb -q -batch -ex "thread apply all bt 30" "$executable" "$core" 2>&1 | grep -E '^(#|Thread|Program terminated)' | head -150
  else
    echo "lab_ctest: gdb is not installed (.ci/install-deps installs it)"
  fi
done
exit $status
