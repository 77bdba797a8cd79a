#!/usr/bin/env bash
# Run every libFuzzer harness of tests/fuzz: first over its committed
# corpus (tests/fuzz/corpus/NAME: seeds and the inputs of every crash found
# so far, each a regression test), then for a bounded time of new inputs.
#   tests/fuzz/run-fuzzers.sh [-T SECONDS] [-j JOBS] [-b BUILD_DIR] [NAME...]
# -T  seconds of fuzzing per harness (default 30; 0: the corpus only)
# -j  harnesses run at once (default 1); each is one process on one core,
#     so up to the number of idle cores each still has a core of its own
#     for its SECONDS; their lines are printed in the harnesses' order
# -b  the fuzz build (default _build-fuzz, made by scripts/build-instrumented.sh fuzz)
# A crash, a sanitizer report, a broken invariant or a timeout fails the
# harness; the input is kept in the log directory (FUZZ_LOG_DIR, default
# /tmp/efa-fuzz-logs) with a line to reproduce it.  New inputs the fuzzer
# finds go to that directory, never into the committed corpus.
# Prints "PASS name ..." / "FAIL name ..." per harness and "N passed, N failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
secs=30
jobs=1
build=$top/_build-fuzz
while getopts "T:j:b:h" o; do
    case $o in
    T) secs=$OPTARG ;;
    j) jobs=$OPTARG ;;
    b) build=$OPTARG ;;
    *) sed -n '2,15p' "$0"; exit 2 ;;
    esac
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "run-fuzzers: -j wants a count of 1 or more, not '$jobs'"; exit 2; }
shift $((OPTIND - 1))
# Each harness runs in its own work directory: a relative -b must not
# change meaning there.
[[ $build == /* ]] || build=$PWD/$build
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(fuzz_tag fuzz_params fuzz_peer_blob fuzz_rma fuzz_shm_ring fuzz_engine_frame fuzz_engine_net fuzz_btl_wire fuzz_emul_target fuzz_control_wire)
logs=${FUZZ_LOG_DIR:-/tmp/efa-fuzz-logs}
mkdir -p "$logs"
# Leaks count (the harnesses free what they take); UBSan findings abort.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# run_one NAME: the harness's lines ("PASS ..." or "FAIL ..."), on stdout.
run_one() {
    local n=$1 bin corpus work log start runs art
    bin=$build/tests/fuzz/$n
    if [ ! -x "$bin" ]; then
        echo "FAIL $n (no harness at $bin: scripts/build-instrumented.sh fuzz)"
        return
    fi
    corpus=$here/corpus/$n
    work=$logs/$n
    rm -rf "$work"
    mkdir -p "$work/new" "$work/artifacts"
    log=$logs/$n.log
    # 1. The committed corpus, every input once.
    if ! (cd "$work" && "$bin" -runs=0 -timeout=10 -artifact_prefix="$work/artifacts/" "$corpus") >"$log" 2>&1 ||
        ! grep -q 'Done [0-9]* runs\|INITED\|DONE' "$log"; then
        echo "FAIL $n corpus ($(grep -m1 -E 'ERROR|runtime error|invariant broken' "$log" || echo "see $log"))"
        return
    fi
    if [ "$secs" -eq 0 ]; then
        echo "PASS $n corpus ($(ls "$corpus" | wc -l) inputs)"
        return
    fi
    # 2. New inputs for a bounded time, starting from the corpus.  One
    # input may take at most 10 s (a hang is a failure).
    start=$(date +%s)
    if (cd "$work" && timeout $((secs + 60)) "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$work/artifacts/" -print_final_stats=1 "$work/new" "$corpus") >>"$log" 2>&1; then
        runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
        echo "PASS $n (corpus $(ls "$corpus" | wc -l) inputs, ${runs:-?} runs in $(($(date +%s) - start)) s)"
    else
        art=$(ls "$work/artifacts" 2>/dev/null | head -1)
        echo "FAIL $n ($(grep -m1 -E 'ERROR:|runtime error|invariant broken' "$log" || echo "see $log"))"
        [ -n "$art" ] && echo "  input: $work/artifacts/$art  reproduce: $bin $work/artifacts/$art"
    fi
}

# Up to $jobs harnesses at once, each writing its lines to a file of its
# own (FILE.done once it ended); the files are printed, and counted, in the
# harnesses' order, each as soon as it and those before it are done.
results=$(mktemp -d "$logs/results.XXXXXX") || exit 2
pass=0 fail=0 next=0
print_done() {
    while [ "$next" -lt ${#names[@]} ] && [ -f "$results/$next.done" ]; do
        if [ -s "$results/$next" ]; then
            cat "$results/$next"
        else
            echo "FAIL ${names[$next]} (its run ended with no result)"
        fi
        if grep -qs '^PASS ' "$results/$next"; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
        fi
        next=$((next + 1))
    done
}
running=0
for i in "${!names[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
        print_done
    fi
    { run_one "${names[$i]}" >"$results/$i" 2>&1; touch "$results/$i.done"; } &
    running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
    wait -n
    running=$((running - 1))
    print_done
done
wait
# (every run has ended here: one killed before its .done is counted too)
for i in "${!names[@]}"; do
    touch "$results/$i.done"
done
print_done
rm -rf "$results"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
