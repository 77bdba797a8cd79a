#!/usr/bin/env bash
# Tests of the benchmark suite:
#   1. the runner's Python unit tests (bench/tests/test_runner.py)
#   2. every benchmark program in -v verification mode, np 2 (mpairs and fanout np 4, fanout np 3,
#      collectives also np 3) over ob1 + vader, small sizes
#   3. the verification itself: an injected mismatch must make the program
#      exit non-zero; bad options exit 2; the overhead probe runs
#   4. the callgrind gate's comparison (bench/callgrind-gate.sh --compare) on
#      tables made from the committed baseline, without running callgrind
#   5. the between-node runs' placement: tests/pretend-nodes.sh's core
#      placement under the runner's launch arguments
#   6. bench/callgrind.sh -l: a count between two pretend nodes (3
#      iterations of mtl_ofi-rxm under callgrind)
#   7. bench/main-job.sh's commands on efa (--dry-run): efa's shm off
#      between pretend nodes, for every configuration alike
# Prints "PASS name" / "FAIL name" lines and the closing line
# "N passed, N failed"; exits non-zero when something failed.
# Environment: BENCH_BIN_DIR (programs; built with bench/build-bench.sh into
# bench/_build when missing there), BENCH_TEST_TIMEOUT (seconds per run, 120).
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench=$(dirname "$here")
tmo=${BENCH_TEST_TIMEOUT:-120}
pass=0
fail=0
logdir=$(mktemp -d "${TMPDIR:-/tmp}/bench-tests.XXXXXX")
trap 'rm -rf "$logdir"' EXIT

ok() {
    echo "PASS $1"
    pass=$((pass + 1))
}
ko() {
    echo "FAIL $1${2:+: $2}"
    fail=$((fail + 1))
}

# ---- 1. runner unit tests
while read -r verdict name rest; do
    case $verdict in
    PASS) ok "runner/$name" ;;
    FAIL) ko "runner/$name" "$rest" ;;
    esac
done < <(python3 "$here/run_py_tests.py" 2>"$logdir/py.err")
if ! grep -q '^OK' "$logdir/py.err"; then
    sed 's/^/  | /' "$logdir/py.err" | tail -40
    grep -q '^FAILED' "$logdir/py.err" || ko "runner/unittest-run" "the test run did not finish"
fi

# ---- 2. programs in verification mode
programs=(bench_pt2pt bench_rma bench_coll bench_overhead)
bin=${BENCH_BIN_DIR:-}
have_all() {
    local p
    for p in "${programs[@]}"; do [[ -x $1/$p ]] || return 1; done
}
if [[ -z $bin ]] || ! have_all "$bin"; then
    [[ -n $bin ]] && echo "note: bench programs not in $bin; building them with bench/build-bench.sh"
    if ! bin=$("$bench/build-bench.sh" 2>"$logdir/build.err"); then
        sed 's/^/  | /' "$logdir/build.err" | tail -20
        ko "build-bench" "bench/build-bench.sh failed"
        echo "$pass passed, $fail failed"
        exit 1
    fi
fi

if [[ $(id -u) == 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
transport=(--mca pml ob1 --mca btl "self,vader")
cores=$(nproc 2>/dev/null || echo 1)

launch() { # launch NP: mpirun's placement options
    if (($1 <= cores)); then
        echo "-np $1 --bind-to core"
    else
        echo "-np $1 --oversubscribe --bind-to none"
    fi
}

# verify NAME NP PROGRAM ARGS...: passes when the run exits 0 and reports verify=ok
verify() {
    local name=$1 np=$2 prog=$3
    shift 3
    local log=$logdir/${name//\//_}.log
    # shellcheck disable=SC2046
    timeout -k 10 "$tmo" mpirun $(launch "$np") "${transport[@]}" "$bin/$prog" "$@" -v >"$log" 2>&1
    local rc=$?
    if ((rc == 0)) && grep -q '^# verify=ok' "$log" && grep -qE '^[0-9]+ [0-9.]+' "$log"; then
        ok "$name"
    else
        ko "$name" "exit $rc; $(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import runner; print(runner.first_error_line(open(sys.argv[2], errors="replace").read()))' "$bench" "$log")"
    fi
}

small=(-m 1 -M 16K -f 4 -i 20 -x 2)
verify pt2pt/latency 2 bench_pt2pt -t latency "${small[@]}"
verify pt2pt/bw 2 bench_pt2pt -t bw "${small[@]}" -w 16
verify pt2pt/bibw 2 bench_pt2pt -t bibw "${small[@]}" -w 16
verify pt2pt/msgrate-w64 2 bench_pt2pt -t msgrate "${small[@]}" -w 64
verify pt2pt/msgrate-w256 2 bench_pt2pt -t msgrate -m 1 -M 1K -f 8 -i 5 -x 1 -w 256
verify pt2pt/mpairs-np4 4 bench_pt2pt -t mpairs "${small[@]}" -w 16
verify pt2pt/fanout-np4 4 bench_pt2pt -t fanout "${small[@]}" -w 16
verify pt2pt/fanout-np3 3 bench_pt2pt -t fanout "${small[@]}" -w 16
verify pt2pt/large-above-threshold 2 bench_pt2pt -t bw -m 64K -M 256K -f 4 -i 10 -x 1 -w 4 -L 8K
for m in put_lat get_lat put_bw get_bw acc_lat fop_lat cas_lat; do
    verify "rma/$m" 2 bench_rma -t "$m" "${small[@]}" -w 16
done
for m in allreduce alltoall; do
    verify "coll/$m-np2" 2 bench_coll -t "$m" "${small[@]}"
    verify "coll/$m-np3" 3 bench_coll -t "$m" -m 4 -M 4K -f 8 -i 10 -x 1
done

# ---- 3. the checks themselves
# an injected mismatch must be reported and make the program fail
log=$logdir/inject.log
# shellcheck disable=SC2046
BENCH_VERIFY_INJECT=1 timeout -k 10 "$tmo" mpirun $(launch 2) "${transport[@]}" \
    "$bin/bench_pt2pt" -t latency -m 8 -M 8 -i 3 -x 0 -v >"$log" 2>&1
rc=$?
if ((rc != 0 && rc != 124)) && grep -q 'verification failed' "$log"; then
    ok "verify/injected-mismatch-fails"
else
    ko "verify/injected-mismatch-fails" "exit $rc"
fi

# bad arguments: exit 2 with a usage text; -h: exit 0
# shellcheck disable=SC2046
timeout -k 10 "$tmo" mpirun $(launch 2) "${transport[@]}" "$bin/bench_rma" -t nosuchmode \
    >"$logdir/bad.log" 2>&1
rc=$?
if ((rc != 0)) && grep -q 'unknown mode' "$logdir/bad.log"; then
    ok "args/unknown-mode-rejected"
else
    ko "args/unknown-mode-rejected" "exit $rc"
fi
# shellcheck disable=SC2046
if timeout -k 10 "$tmo" mpirun $(launch 2) "${transport[@]}" "$bin/bench_coll" -h \
    >"$logdir/help.log" 2>&1 && grep -q 'usage:' "$logdir/help.log"; then
    ok "args/help"
else
    ko "args/help"
fi

# the overhead probe (what bench/callgrind.sh runs), natively, with its fifo
fifo=$logdir/probe.fifo
mkfifo "$fifo"
if timeout -k 10 "$tmo" mpirun --bind-to core "${transport[@]}" \
    -np 1 "$bin/bench_overhead" -n 50 -F "$fifo" : -np 1 "$bin/bench_overhead" -n 50 -F "$fifo" \
    >"$logdir/probe.log" 2>&1 && grep -q '^# bench=overhead' "$logdir/probe.log"; then
    ok "overhead/fifo-probe"
else
    ko "overhead/fifo-probe"
fi
rm -f "$fifo" && mkfifo "$fifo"
if timeout -k 10 "$tmo" mpirun --bind-to core "${transport[@]}" \
    -np 1 "$bin/bench_overhead" -n 50 -b -F "$fifo" : -np 1 "$bin/bench_overhead" -n 50 -b -F "$fifo" \
    >"$logdir/probe-b.log" 2>&1 && grep -q '^# bench=overhead' "$logdir/probe-b.log"; then
    ok "overhead/fifo-probe-blocking"
else
    ko "overhead/fifo-probe-blocking"
fi

# the provider floor, on shm (every libfabric has it).  A run has ended in
# an MPI_Abort whose cause the log did not keep: a failed run says the
# program's own error line, and is tried once more, which the PASS line
# then says.
floor_run() {
    timeout -k 10 "$tmo" mpirun --bind-to core "${transport[@]}" -np 2 "$bin/bench_floor" -p shm \
        -m 1 -M 64 -f 8 -i 200 -x 20 >"$logdir/floor.log" 2>&1 &&
        grep -q '^# bench=latency' "$logdir/floor.log" && grep -q '^64 ' "$logdir/floor.log"
}
floor_why() {
    grep -m1 -a -E 'fi_[a-z_]+|cq error|failed|error' "$logdir/floor.log" ||
        grep -a -v -E '^-+$|^$' "$logdir/floor.log" | head -1
}
if floor_run; then
    ok "floor/shm"
else
    first=$(floor_why)
    cp "$logdir/floor.log" "$logdir/floor-1.log"
    if floor_run; then
        ok "floor/shm (second try; the first failed: $first)"
    else
        ko "floor/shm" "first try: $first; second: $(floor_why)"
    fi
fi

# the runner drives a real configuration end to end
if python3 "$bench/runner.py" --bin-dir "$bin" -c ob1_vader -b latency,fop_lat -r 1 -s 1:64:8 \
    --iters 20 --warmup 2 --timeout "$tmo" --no-plots -o "$logdir/runner-out" \
    >"$logdir/runner.log" 2>&1 && grep -q '| status | ok 1/1 |' "$logdir/runner-out/summary.md"; then
    ok "runner/ob1_vader-end-to-end"
else
    ko "runner/ob1_vader-end-to-end" "$(tail -1 "$logdir/runner.log")"
fi

# ---- 4. the callgrind gate's comparison, on tables made from the baseline
gate=$bench/callgrind-gate.sh
base=$bench/callgrind-baseline.txt
g=$logdir/gate
mkdir -p "$g"
# today's table as callgrind.sh writes it: every configuration of the baseline
awk '!/^#/ && NF >= 2 {printf "%s\t%s\t%s\t%s\t0\t99\tok\n", $1, $2, $2, $2}' "$base" >"$g/today.tsv"
first=$(awk '!/^#/ && NF >= 2 {print $1; exit}' "$base")
# scaled FACTOR: the baseline with the first configuration's count times FACTOR
scaled() {
    awk -v c="$first" -v f="$1" '!/^#/ && $1 == c {$2 = int($2 * f + 0.5)} {print}' "$base"
}
# gate_case NAME WANT_RC BASELINE PATTERN: the gate's exit status, and a line of its output
gate_case() {
    "$gate" --compare "$g/today.tsv" --baseline "$3" >"$g/$1.log" 2>&1
    local rc=$?
    if ((rc == $2)) && grep -qE "$4" "$g/$1.log" && tail -1 "$g/$1.log" | grep -qE '^[0-9]+ passed, [0-9]+ failed$'; then
        ok "callgrind-gate/$1"
    else
        ko "callgrind-gate/$1" "exit $rc (want $2); $(grep -m1 "$first" "$g/$1.log")"
    fi
}
gate_case same-as-baseline 0 "$base" ' 0 failed$'
scaled 0.95 >"$g/base-5.txt"
gate_case 5pc-rise-fails 1 "$g/base-5.txt" "^\| $first \|.*\| \+5\.[0-9] % \| FAIL more than 3 %"
scaled 0.99 >"$g/base-1.txt"
gate_case 1pc-rise-passes 0 "$g/base-1.txt" "^\| $first \|.*\| \+1\.[0-9] % \| ok \|"
grep -v "^$first " "$base" >"$g/base-missing.txt"
gate_case missing-config-reported 1 "$g/base-missing.txt" "^FAIL $first: not in the baseline"
cp "$g/today.tsv" "$g/today-ok.tsv"
awk -v c="$first" -F'\t' -v OFS='\t' '$1 == c {$2 = $4 = "-"; $7 = "failed: boom"} {print}' \
    "$g/today-ok.tsv" >"$g/today.tsv"
gate_case failed-run-fails 1 "$base" "^FAIL $first: failed: boom"

# 5. The between-node runs' placement (tests/pretend-nodes.sh DIR 1 core):
# two ranks on two pretend nodes, each bound to a core of its own, under
# the runner's launch arguments (which leave a rankfile's binding alone).
pn=$(mktemp -d)
mapfile -t place < <(bash "$bench/../tests/pretend-nodes.sh" "$pn" 1 core)
launch=$(python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import runner_launch as l; print(" ".join(l.launch_args(2, 2, tuple(sys.argv[2:]))))' "$bench" "${place[@]}")
# shellcheck disable=SC2086,SC2016 # (launch: one argument per word; the rank's shell expands)
where=$(timeout -k 5 60 mpirun $launch sh -c 'echo "$(hostname) $(sed -n "s/^Cpus_allowed_list:[[:space:]]*//p" /proc/self/status)"' 2>"$pn/err" | sort)
hosts=$(awk '{print $1}' <<<"$where" | sort -u | wc -l)
cpus=$(awk '{print $2}' <<<"$where" | sort -u | tr '\n' ' ')
want="0 1 "
(($(nproc) < 2)) && want="0 "
if [ "$hosts" = 2 ] && [ "$cpus" = "$want" ]; then
    ok "pretend-nodes/core-placement"
else
    ko "pretend-nodes/core-placement" "ranks at [$where] (want 2 hosts, cores $want); $(head -3 "$pn/err")"
fi

# 6. bench/callgrind.sh -l: the launch arguments reach mpirun, so that the
# counted rank and its peer are on two nodes (mpirun's map names both).
if ! command -v valgrind >/dev/null; then
    ko "callgrind/between-nodes" "valgrind not found (scripts/install-deps.sh installs it)"
else
    hostargs=$(bash "$bench/../tests/pretend-nodes.sh" "$pn" 1 core | tr '\n' ' ')
    cg=$logdir/callgrind-l
    BENCH_BIN_DIR=$bin bash "$bench/callgrind.sh" -p rxm -n 3 -r 1 -t "$tmo" \
        -l "$hostargs --display-map" -o "$cg" mtl_ofi-rxm >"$logdir/callgrind-l.log" 2>&1
    nodes=$(sed -n 's/^ *Data for node: *\([^[:space:]]*\).*/\1/p' "$cg"/*.log 2>/dev/null | sort -u | wc -l)
    if grep -q '^mtl_ofi-rxm[[:space:]].*[[:space:]]ok$' "$cg/counts.tsv" 2>/dev/null && [ "$nodes" = 2 ]; then
        ok "callgrind/between-nodes"
    else
        ko "callgrind/between-nodes" "$nodes node(s) in the map (want 2); $(tail -1 "$logdir/callgrind-l.log")"
    fi
fi
rm -rf "$pn"

# 7. bench/main-job.sh on efa (MAIN_JOB_PROVIDER; its runs as --dry-run,
# which prints each run's command): between pretend nodes (parts c. and
# d.) every configuration's command sets FI_EFA_ENABLE_SHM_TRANSFER=0, so
# that efa's shm does not carry "between nodes"; on one node (a., b.)
# none does.  The job's own placement check runs (two ranks, seconds).
mj=$logdir/main-job-efa.log
MAIN_JOB_PROVIDER=efa BENCH_BIN_DIR=$bin timeout -k 10 "$tmo" bash "$bench/main-job.sh" \
    --no-deps --no-build --dry-run >"$mj" 2>&1
rc=$?
# per part (the letter of its step line), its commands, and those without the setting
counts=$(awk 'match($0, /^== \[ *[0-9]+s\] [a-e]\. /){part = substr($0, RSTART + RLENGTH - 3, 2)}
    /^mpirun /{n[part]++; if ($0 !~ / -x FI_EFA_ENABLE_SHM_TRANSFER=0 /) off[part]++}
    END {printf "%d %d %d %d %d %d %d %d", n["a."], off["a."], n["b."], off["b."], n["c."], off["c."], n["d."], off["d."]}' "$mj")
read -r na offa nb offb nc offc nd offd <<<"$counts"
if ((rc == 0 && na > 0 && offa == na && nb > 0 && offb == nb && nc > 0 && offc == 0 && nd > 0 && offd == 0)) &&
    grep -q '^== .* c\. between pretend nodes, provider efa, efa.s shm off' "$mj"; then
    ok "main-job/efa-between-nodes-shm-off"
else
    ko "main-job/efa-between-nodes-shm-off" "exit $rc; commands (with the setting / all): a $((na - offa))/$na, b $((nb - offb))/$nb, c $((nc - offc))/$nc, d $((nd - offd))/$nd; $(grep -m1 -E '^(main-job|runner):' "$mj")"
fi

echo "$pass passed, $fail failed"
((fail == 0))
