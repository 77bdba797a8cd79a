#!/usr/bin/env bash
# Software overhead per message, a figure that machine noise does not move:
# instructions executed by rank 0 for one 1-byte send + receive, counted by
# valgrind's callgrind (hardware counters via `perf stat -e instructions` are
# not available on this kind of machine; the script says so if they are).
#
# Rank 0 runs bench_overhead under callgrind, rank 1 runs natively. Only the
# function bench_overhead_measured() is counted, and rank 0 never spins while
# waiting for rank 1 (see bench_overhead.c), so a loaded machine only makes
# the run slower, not the count larger. Callgrind writes one profile part per
# iteration (--dump-before on the iteration's function), so every iteration
# is counted on its own. The result is the mean of the iterations that cost
# at most 1.5 times their median: that drops one-off work (tcp;ofi_rxm grows
# a buffer pool, 17 M instructions, near the start of the counted loop in
# some runs and before it in others, which made differences of run totals
# unreliable) and the rare iteration that spun on a late reply, and keeps
# periodic work (opal_progress runs its low-priority callbacks every 8th
# call). Each configuration runs R times; the iterations of all runs pool.
#
# usage: bench/callgrind.sh [-p PROV] [-n N] [-r R] [-s INTERVAL_US] [-m SIZE] [-b]
#                           [-l LAUNCH_ARGS] [-o OUTDIR] [-t TIMEOUT] [CONFIG...]
#   CONFIG  configuration names of bench/configs.ini
#           (default: mtl_efa-PROV mtl_ofi-PROV)
#   -p      provider short name, or a comma list of them for configurations of
#           several providers (default: efa if `fi_info -p efa` works, else rxm)
#   -n      counted iterations per run (default 200)
#   -r      runs per configuration (default 3)
#   -s      rank 0 waits for rank 1's reply blocked on a named pipe that rank 1
#           writes after replying; every INTERVAL us without it, rank 0 drives
#           MPI progress once (default 100000)
#   -m      message size (default 1)
#   -b      blocking: rank 0 uses MPI_Send + MPI_Recv, the calls of the latency
#           benchmark (default MPI_Irecv + MPI_Isend + MPI_Waitall)
#   -l      more mpirun arguments, split at spaces: e.g. the host and rank
#           files of tests/pretend-nodes.sh, so that the two ranks are on two
#           nodes and the count is of the path between nodes (a rankfile
#           binds the ranks: no --bind-to core then)
#   -o      output directory (default bench/results/callgrind-<timestamp>); it
#           gets table.md and counts.tsv (config, instructions/iteration,
#           median, minimum, iterations dropped, iterations, status; "-"
#           where failed)
#   -t      timeout per run in seconds (default 300)
# Environment: BENCH_BIN_DIR (bench programs), EFA_MCA_COMPONENT_PATH (see runner.py).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
iters=200
reps=3
interval=100000
size=1
blocking=()
launch=()
prov=
out=
tmo=300

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

while getopts "p:n:r:s:m:l:o:t:bh" opt; do
    case $opt in
    p) prov=$OPTARG ;;
    n) iters=$OPTARG ;;
    r) reps=$OPTARG ;;
    s) interval=$OPTARG ;;
    m) size=$OPTARG ;;
    b) blocking=(-b) ;;
    l) read -r -a launch <<<"$OPTARG" ;;
    o) out=$OPTARG ;;
    t) tmo=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

for v in iters reps interval size tmo; do
    if ! [[ ${!v} =~ ^[0-9]+$ ]]; then
        echo "callgrind.sh: $v must be a non-negative integer" >&2
        exit 2
    fi
done
if ((iters < 2 || reps < 1)); then
    echo "callgrind.sh: need N >= 2 and R >= 1" >&2
    exit 2
fi
if ! command -v valgrind >/dev/null; then
    echo "callgrind.sh: valgrind not found (apt-get install valgrind)" >&2
    exit 2
fi

# Hardware counters would be cheaper; say whether this machine has them.
if command -v perf >/dev/null &&
    perf stat -x, -e instructions:u true 2>&1 >/dev/null | grep -q '^[0-9]'; then
    echo "note: perf counts instructions here too; callgrind is used for identical results everywhere"
else
    echo "note: hardware instruction counters not available here (perf stat: not supported); using callgrind"
fi

if [[ -z $prov ]]; then
    if fi_info -p efa >/dev/null 2>&1; then prov=efa; else prov=rxm; fi
fi
configs=("$@")
# Each rank bound to a core, unless the launch arguments place ranks by a
# rankfile, which binds them itself (--bind-to would undo that on Open MPI
# 5.0; runner_launch.places_by_rankfile).
bind=(--bind-to core)
for a in "${launch[@]}"; do
    [[ $a == --rankfile || $a == rankfile:* ]] && bind=()
done
if ((${#configs[@]} == 0)); then
    configs=("mtl_efa-${prov%%,*}" "mtl_ofi-${prov%%,*}")
fi

bin=${BENCH_BIN_DIR:-}
if [[ -z $bin ]]; then
    bin=$("$here/build-bench.sh") || exit 2
fi
prog=$bin/bench_overhead
if [[ ! -x $prog ]]; then
    echo "callgrind.sh: $prog not found" >&2
    exit 2
fi

out=${out:-$here/results/callgrind-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
if [[ $(id -u) == 0 ]]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# first line that says what went wrong, as the runner shows it
error_line() {
    python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import runner
print(runner.first_error_line(open(sys.argv[2], errors="replace").read()))' "$here" "$1"
}

# Per-iteration counts of one run, one per line. Parts are numbered in dump
# order; parts dumped while collection was off (warm-up) count nothing. The
# first counted part runs from the start of collection to the first
# iteration, and the final profile (no part number) holds the last
# iteration and the tail of the run: both are left out, N - 1 remain.
iteration_counts() {
    local base=$1 f
    for f in "$base".*; do
        [[ -f $f ]] || continue
        echo "${f##*.} $(awk '/^(totals|summary):/ {print $2; exit}' "$f")"
    done | sort -n | awk '$2 > 0' | awk 'NR > 1 {print $2}'
}

declare -A samples # samples[config] = per-iteration counts of all its runs, one per line
declare -A failed  # failed[config] = first error line

echo "callgrind: configs ${configs[*]}; N=$iters reps=$reps size=${size}B${blocking:+ blocking}; output $out"
start=$SECONDS
for ((rep = 1; rep <= reps; rep++)); do
    for cfg in "${configs[@]}"; do
        [[ -n ${failed[$cfg]:-} ]] && continue
        mapfile -t args < <(python3 "$here/runner.py" -p "$prov" --show-args "$cfg" 2>&1)
        if [[ ${args[0]:-} == runner:* ]]; then
            failed[$cfg]="${args[0]}"
            continue
        fi
        tag="$cfg.rep$rep"
        cg="$out/callgrind.$tag.out"
        log="$out/$tag.log"
        fifo="$out/$tag.fifo"
        rm -f "$fifo" "$cg" "$cg".* && mkfifo "$fifo"
        timeout -k 10 "$tmo" mpirun "${bind[@]}" "${launch[@]}" "${args[@]}" \
            -np 1 valgrind -q --tool=callgrind --collect-atstart=no \
            --toggle-collect=bench_overhead_measured --dump-before=bench_overhead_iteration \
            --callgrind-out-file="$cg" \
            "$prog" -n "$iters" -s "$interval" -m "$size" "${blocking[@]}" -F "$fifo" \
            : -np 1 "$prog" -n "$iters" -s "$interval" -m "$size" "${blocking[@]}" -F "$fifo" \
            >"$log" 2>&1
        rc=$?
        rm -f "$fifo"
        counts=$(iteration_counts "$cg")
        got=$(echo "$counts" | awk 'NF' | wc -l)
        if ((rc != 0 || got < iters - 1)); then
            if ((rc == 124)); then
                failed[$cfg]="timeout after ${tmo} s"
            elif ((rc != 0)); then
                failed[$cfg]=$(error_line "$log")
            else
                failed[$cfg]="$got iteration profiles, expected $((iters - 1))"
            fi
            printf '[%4ds] %-22s rep %d/%d  FAILED %s\n' $((SECONDS - start)) "$cfg" "$rep" "$reps" "${failed[$cfg]}"
            continue
        fi
        samples[$cfg]+="$counts"$'\n'
        printf '[%4ds] %-22s rep %d/%d  median %s instructions per iteration\n' $((SECONDS - start)) \
            "$cfg" "$rep" "$reps" "$(echo "$counts" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')"
    done
done

# mean of the iterations at most 1.5 x the median; prints "mean median dropped total min"
summarize() {
    sort -n | awk 'NF {v[++n] = $1}
        END {
            if (n == 0) { print "- - 0 0 -"; exit }
            med = v[int((n + 1) / 2)]
            for (i = 1; i <= n; i++) if (v[i] <= 1.5 * med) { s += v[i]; k++ }
            printf "%.0f %d %d %d %d\n", s / k, med, n - k, n, v[1]
        }'
}

table=$out/table.md
counts=$out/counts.tsv
: >"$counts"
{
    echo "### instructions per iteration (rank 0: one ${size} B send + one receive${blocking:+, blocking}), callgrind"
    echo
    echo "$reps runs of $iters iterations per configuration, each iteration counted on its own; mean of"
    echo "the iterations at most 1.5 x the median (the others did one-off work, e.g. a buffer pool"
    echo "growing, or spun on a late reply)."
    echo
    echo "| config | instructions/iteration | median | minimum | iterations dropped | status |"
    echo "|---|---:|---:|---:|---:|---|"
    declare -A mean
    for cfg in "${configs[@]}"; do
        if [[ -n ${failed[$cfg]:-} ]]; then
            echo "| $cfg | - | - | - | - | failed: ${failed[$cfg]//|/\\|} |"
            printf '%s\t-\t-\t-\t-\t-\tfailed: %s\n' "$cfg" "${failed[$cfg]}" >>"$counts"
            continue
        fi
        read -r m med dropped total low < <(printf '%s' "${samples[$cfg]}" | summarize)
        mean[$cfg]=$m
        echo "| $cfg | $m | $med | $low | $dropped of $total | ok |"
        printf '%s\t%s\t%s\t%s\t%s\t%s\tok\n' "$cfg" "$m" "$med" "$low" "$dropped" "$total" >>"$counts"
    done
    ref=${configs[0]}
    if [[ -n ${mean[$ref]:-} && ${#configs[@]} -ge 2 ]]; then
        for cfg in "${configs[@]:1}"; do
            [[ -n ${mean[$cfg]:-} ]] || continue
            awk -v a="${mean[$ref]}" -v b="${mean[$cfg]}" -v r="$ref" -v c="$cfg" \
                'BEGIN {if (b > 0) printf "\n%s / %s = %.2f\n", r, c, a / b}'
        done
    fi
} >"$table"
echo
cat "$table"
echo
echo "table: $table"
echo "callgrind files: $out (one part per iteration; callgrind_annotate sums the files it is given:"
echo "  callgrind_annotate $out/callgrind.<config>.rep1.out.*)"
