#!/usr/bin/env bash
# bench_conventions.sh CHORUSRUN CHORUS_BENCH
# chorus-bench times and checks as nccl-tests does (issue 21):
#  - nccl-tests' short options (-b -e -f -n -w -c) and long spellings work;
#  - the header names iters, warmup, check and sync;
#  - a row gives the bytes actually moved (3 ranks, float32: a 16 B
#    allgather moves 12 B);
#  - verification runs in separate untimed iterations: a rank whose check
#    takes 300 ms (--check-delay-for-test) does not show in any time.
# Prints "bench_conventions: OK" or "FAILED: ..." lines.
set -uo pipefail
run=$1 bench=$2
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

out=$("$run" -n 3 --timeout 60 "$bench" --op allgather -b 16 -e 16 -f 2 -n 2 -w 1 -c 1 2>&1)
echo "$out"
grep -q "# iters 2  warmup 1  check 1  sync off" <<<"$out" || fail "the header does not name iters, warmup, check and sync"
grep -Eq "^\[0\] +12 +1 " <<<"$out" || fail "a 3-rank float32 allgather of 16 B moves 12 B, the row says otherwise"
grep -q "all results correct" <<<"$out" || fail "short options: the check did not pass"

out=$("$run" -n 3 --timeout 60 "$bench" --op allreduce --minbytes 64 --maxbytes 256 --stepfactor 4 --iters 2 \
  --warmup_iters 0 --check 2 -d int32 -o max 2>&1)
echo "$out"
grep -q "# iters 2  warmup 0  check 2  sync off" <<<"$out" || fail "nccl-tests' long options were not taken"
grep -Eq "dtype int32  redop max" <<<"$out" || fail "-d int32 -o max were not taken"
grep -q "all results correct" <<<"$out" || fail "long options: the check did not pass"

# 300 ms of checking on the last rank, 3 check iterations: no timed call may
# wait for it (times of a 64 KiB broadcast are well under 100 ms even here).
out=$("$run" -n 2 --timeout 60 "$bench" --op broadcast,allreduce -b 64K -e 64K -n 5 -w 1 -c 3 --csv \
  --check-delay-for-test 300 2>&1)
echo "$out"
slow=$(awk -F, '/^\[0\] (broadcast|allreduce),/ && $8 + 0 >= 100000 { print }' <<<"$out")
[ -z "$slow" ] || fail "a rank's verification shows in the timed calls: $slow"
[ "$(grep -Ec '^\[0\] (broadcast|allreduce),' <<<"$out")" -eq 2 ] || fail "expected one CSV row per op"
grep -q "all results correct" <<<"$out" || fail "delayed check: the check did not pass"

[ $failures -eq 0 ] && echo "bench_conventions: OK"
