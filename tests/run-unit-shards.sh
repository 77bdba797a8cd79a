#!/usr/bin/env bash
# tests/run-unit-shards.sh BINARY LOG [SHARDS]
# The GoogleTest unit suite in SHARDS processes at once (default 4,
# GoogleTest's GTEST_TOTAL_SHARDS): most of its time is tests waiting out a
# deadline or a retry, not CPU, so the shards overlap their waits.  Every
# shard's output goes into LOG, one after the other; the failed tests are
# listed, and the last line printed is "N passed, N failed" (a shard that
# exits non-zero without a failed test counts as one failure: a crash).
set -u
bin=${1:?usage: $0 BINARY LOG [SHARDS]}
log=${2:?usage: $0 BINARY LOG [SHARDS]}
shards=${3:-4}
tmp=$(mktemp -d /tmp/unit-shards.XXXXXX)
pids=()
for ((i = 0; i < shards; i++)); do
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$bin" >"$tmp/$i.log" 2>&1 &
    pids+=($!)
done
passed=0 failed=0 skipped=0
: >"$log"
for ((i = 0; i < shards; i++)); do
    wait "${pids[$i]}"
    rc=$?
    echo "== shard $i of $shards (exit $rc)" >>"$log"
    cat "$tmp/$i.log" >>"$log"
    p=$(grep -oE '\[  PASSED  \] [0-9]+' "$tmp/$i.log" | grep -oE '[0-9]+$')
    f=$(grep -oE '^ *[0-9]+ FAILED TESTS?' "$tmp/$i.log" | grep -oE '[0-9]+')
    # GoogleTest's skips (GTEST_SKIP): counted and named, never silent
    k=$(grep -oE '^\[  SKIPPED \] [0-9]+ tests?, listed below' "$tmp/$i.log" | grep -oE '[0-9]+')
    p=${p:-0} f=${f:-0} k=${k:-0}
    [ $rc -ne 0 ] && [ "$f" -eq 0 ] && f=1
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + k))
done
rm -rf "$tmp"
grep -E '^\[  FAILED  \]' "$log" | sort -u
grep -E '^\[  SKIPPED \] [A-Za-z0-9_/.]+\.' "$log" | sed -E 's/ \([0-9]+ ms\)$//' | sort -u
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
