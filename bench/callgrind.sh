#!/usr/bin/env bash
# Software overhead per message, a figure that machine noise does not move:
# instructions executed by rank 0 for one 1-byte send + receive, counted by
# valgrind's callgrind (hardware counters via `perf stat -e instructions` are
# not available on this kind of machine; the script says so if they are).
#
# Rank 0 runs bench_overhead under callgrind, rank 1 runs natively. Only the
# function bench_overhead_measured() is counted, and rank 0 never spins while
# waiting for rank 1 (see bench_overhead.c), so a loaded machine only makes
# the run slower, not the count larger. Each configuration runs with
# N1 and N2 iterations, R times each; the result is
#     (min count at N2 - min count at N1) / (N2 - N1)
# (the minimum drops rare one-off work such as a buffer pool growing).
#
# usage: bench/callgrind.sh [-p PROV] [-n N1] [-N N2] [-r R] [-s INTERVAL_US] [-m SIZE]
#                           [-b] [-o OUTDIR] [-t TIMEOUT] [CONFIG...]
#   CONFIG  configuration names of bench/configs.ini
#           (default: mtl_efa-PROV mtl_ofi-PROV)
#   -p      provider short name (default: efa if `fi_info -p efa` works, else rxm)
#   -n/-N   iteration counts (default 100 and 500)
#   -r      repetitions per count (default 3)
#   -s      rank 0 waits for rank 1's reply blocked on a named pipe that rank 1
#           writes after replying; every INTERVAL us without it, rank 0 drives
#           MPI progress once (default 10000)
#   -m      message size (default 1)
#   -b      blocking: rank 0 uses MPI_Send + MPI_Recv, the calls of the latency
#           benchmark (default MPI_Irecv + MPI_Isend + MPI_Waitall)
#   -o      output directory (default bench/results/callgrind-<timestamp>)
#   -t      timeout per run in seconds (default 300)
# Environment: BENCH_BIN_DIR (bench programs), EFA_MCA_COMPONENT_PATH (see runner.py).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
n1=100
n2=500
reps=3
interval=10000
size=1
blocking=()
prov=
out=
tmo=300

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

while getopts "p:n:N:r:s:m:o:t:bh" opt; do
    case $opt in
    p) prov=$OPTARG ;;
    n) n1=$OPTARG ;;
    N) n2=$OPTARG ;;
    r) reps=$OPTARG ;;
    s) interval=$OPTARG ;;
    m) size=$OPTARG ;;
    b) blocking=(-b) ;;
    o) out=$OPTARG ;;
    t) tmo=$OPTARG ;;
    h) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

for v in n1 n2 reps interval size tmo; do
    if ! [[ ${!v} =~ ^[0-9]+$ ]]; then
        echo "callgrind.sh: $v must be a non-negative integer" >&2
        exit 2
    fi
done
if ((n2 <= n1 || reps < 1)); then
    echo "callgrind.sh: need N1 < N2 and R >= 1" >&2
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
if ((${#configs[@]} == 0)); then
    configs=("mtl_efa-$prov" "mtl_ofi-$prov")
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

declare -A best  # best[config,N] = minimum count
declare -A counts # counts[config,N] = space separated counts
declare -A failed # failed[config] = first error line

echo "callgrind: configs ${configs[*]}; N1=$n1 N2=$n2 reps=$reps size=${size}B${blocking:+ blocking}; output $out"
start=$SECONDS
for ((rep = 1; rep <= reps; rep++)); do
    for n in "$n1" "$n2"; do
        for cfg in "${configs[@]}"; do
            [[ -n ${failed[$cfg]:-} ]] && continue
            mapfile -t args < <(python3 "$here/runner.py" -p "$prov" --show-args "$cfg" 2>&1)
            if [[ ${args[0]:-} == runner:* ]]; then
                failed[$cfg]="${args[0]}"
                continue
            fi
            tag="$cfg.n$n.rep$rep"
            cg="$out/callgrind.$tag.out"
            log="$out/$tag.log"
            fifo="$out/$tag.fifo"
            rm -f "$fifo" && mkfifo "$fifo"
            timeout -k 10 "$tmo" mpirun --bind-to core "${args[@]}" \
                -np 1 valgrind -q --tool=callgrind --collect-atstart=no \
                --toggle-collect=bench_overhead_measured --callgrind-out-file="$cg" \
                "$prog" -n "$n" -s "$interval" -m "$size" "${blocking[@]}" -F "$fifo" \
                : -np 1 "$prog" -n "$n" -s "$interval" -m "$size" "${blocking[@]}" -F "$fifo" >"$log" 2>&1
            rc=$?
            rm -f "$fifo"
            total=
            if [[ -f $cg ]]; then
                total=$(awk '/^(totals|summary):/ {print $2; exit}' "$cg")
            fi
            if ((rc != 0)) || [[ -z $total ]]; then
                if ((rc == 124)); then
                    failed[$cfg]="timeout after ${tmo} s"
                else
                    failed[$cfg]=$(error_line "$log")
                fi
                printf '[%4ds] %-22s N=%-6s rep %d/%d  FAILED %s\n' $((SECONDS - start)) "$cfg" "$n" "$rep" "$reps" "${failed[$cfg]}"
                continue
            fi
            counts[$cfg,$n]="${counts[$cfg,$n]:-} $total"
            if [[ -z ${best[$cfg,$n]:-} ]] || ((total < best[$cfg,$n])); then
                best[$cfg,$n]=$total
            fi
            printf '[%4ds] %-22s N=%-6s rep %d/%d  %s instructions\n' $((SECONDS - start)) "$cfg" "$n" "$rep" "$reps" "$total"
        done
    done
done

table=$out/table.md
{
    echo "### instructions per iteration (rank 0: one ${size} B send + one receive${blocking:+, blocking}), callgrind"
    echo
    echo "N1=$n1 N2=$n2, $reps reps each: (min count at N2 - min count at N1) / (N2 - N1)."
    echo "'runs at the minimum': runs within 1% of the minimum count at N1 and at N2 (the others"
    echo "did one-off extra work, e.g. a buffer pool growing)."
    echo
    echo "| config | instructions/iteration | runs at the minimum | status |"
    echo "|---|---:|---|---|"
    for cfg in "${configs[@]}"; do
        if [[ -n ${failed[$cfg]:-} ]]; then
            echo "| $cfg | - | - | failed: ${failed[$cfg]//|/\\|} |"
            continue
        fi
        per=$(awk -v a="${best[$cfg,$n1]}" -v b="${best[$cfg,$n2]}" -v d=$((n2 - n1)) \
            'BEGIN {printf "%.0f", (b - a) / d}')
        agree=""
        for n in "$n1" "$n2"; do
            k=$(echo "${counts[$cfg,$n]}" | tr ' ' '\n' | awk -v m="${best[$cfg,$n]}" \
                'NF && $1 <= m * 1.01 {k++} END {print k + 0}')
            agree+="${agree:+, }$k/$reps"
        done
        echo "| $cfg | $per | $agree | ok |"
    done
    if [[ -n ${best[${configs[0]},$n2]:-} && ${#configs[@]} -ge 2 ]]; then
        ref=${configs[0]}
        for cfg in "${configs[@]:1}"; do
            [[ -n ${best[$cfg,$n2]:-} ]] || continue
            awk -v a1="${best[$ref,$n1]}" -v a2="${best[$ref,$n2]}" -v b1="${best[$cfg,$n1]}" \
                -v b2="${best[$cfg,$n2]}" -v r="$ref" -v c="$cfg" \
                'BEGIN {x = a2 - a1; y = b2 - b1; if (y > 0) printf "\n%s / %s = %.2f\n", r, c, x / y}'
        done
    fi
} >"$table"
echo
cat "$table"
echo
echo "table: $table"
echo "callgrind files: $out (callgrind_annotate $out/callgrind.<config>.n$n2.rep1.out)"
