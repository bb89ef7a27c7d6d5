#!/usr/bin/env bash
# bench_conventions.sh CHORUSRUN CHORUS_BENCH
# chorus-bench times and checks as nccl-tests does (issue 21):
#  - nccl-tests' short options (-b -e -f -n -w -c) and long spellings work;
#  - the header names iters, warmup, check and sync;
#  - a row gives the bytes actually moved (3 ranks, float32: a 16 B
#    allgather moves 12 B);
#  - verification runs in separate untimed iterations: a rank whose check
#    takes 300 ms (--check-delay-for-test) does not show in any time;
#  - --sync gives the median over the calls of each call's slowest rank: one
#    call a rank made 1 s longer (--delay-one-call-for-test) does not show
#    (a mean of 5 calls would be over 200 ms);
#  - --roofline: the copy rates in the header, a limit and %limit on every
#    row of a modelled algorithm, "-" on the board's, three CSV columns.
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

out=$("$run" -n 3 --timeout 60 "$bench" --op allreduce -b 64K -e 64K -n 5 -w 1 -c 1 --sync --csv \
  --delay-one-call-for-test 1000 2>&1)
echo "$out"
grep -q "sync on  (time: each call alone after a barrier, the median" <<<"$out" ||
  grep -q "^\[0\] op,algorithm," <<<"$out" || fail "--sync: no header"
row=$(awk -F, '/^\[0\] allreduce,/ { print }' <<<"$out")
[ -n "$row" ] || fail "--sync: no allreduce row"
slow=$(awk -F, '/^\[0\] allreduce,/ && $8 + 0 >= 100000 { print }' <<<"$out")
[ -z "$slow" ] || fail "--sync: one delayed call moved the row's time, not a median: $slow"
grep -q "all results correct" <<<"$out" || fail "--sync with a delayed call: the check did not pass"

out=$("$run" -n 3 --timeout 60 "$bench" --op allreduce,broadcast -b 8 -e 1M -f 128 -n 3 -w 1 -c 1 --sync --roofline 2>&1)
echo "$out"
grep -Eq "# roofline: memcpy of 64 MiB: [0-9]+[.][0-9]+ GB/s per rank with all 3 ranks copying at once .* [0-9]+[.][0-9]+ GB/s one rank alone" \
  <<<"$out" || fail "--roofline: the header does not give the copy rates"
grep -Eq "^\[0\] +1048576 +262144 ring +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 +[0-9]+[.][0-9]+ +[0-9]+[.][0-9]$" <<<"$out" ||
  fail "--roofline: the 1 MiB ring allreduce row has no limit and %limit"
grep -Eq "^\[0\] +8 +2 +board .* - +-$" <<<"$out" || fail "--roofline: a board row should show - for its limit"
out=$("$run" -n 2 --timeout 60 "$bench" --op broadcast -b 1M -e 1M -n 2 -w 1 --roofline --csv 2>&1)
echo "$out"
grep -q "^\[0\] op,.*,wrong,limit_us,op_limit_us,percent_of_limit$" <<<"$out" || fail "--roofline --csv: no limit columns"
grep -Eq "^\[0\] broadcast,binomial,1048576,.*,[0-9]+[.][0-9]+,[0-9]+[.][0-9]+,[0-9]+[.][0-9]$" <<<"$out" ||
  fail "--roofline --csv: the broadcast row has no limits"

[ $failures -eq 0 ] && echo "bench_conventions: OK"
