#!/usr/bin/env bash
# Regression gate on the software overhead of the defaults: instructions
# per 1 B blocking send + receive (bench/callgrind.sh -b, rank 0, load does
# not move them) of every component with nothing set but the provider, on
# one node and between two pretend nodes, compared with a committed
# baseline. A gated configuration more
# than TOL % above its baseline fails; so does one that failed to run or has
# no baseline. Prints the whole table (config, baseline, now, change) and
# ends with "N passed, N failed", one per gated configuration.
#
# Gated: on one node mtl_efa-{rxm,rxd,shm}, btl_efa-{rxm,rxd,shm} and the
# anchor ob1_vader; between two nodes (tests/pretend-nodes.sh, one rank
# on each: the path through the provider) mtl_efa-rxm@2nodes and
# btl_efa-rxm@2nodes. mtl_ofi-rxm is measured for reference, never gated.
#
# The statistic is the cheapest iteration of one run of N: one message with
# no periodic or paced work, the same to the instruction run after run. The
# mean that callgrind.sh reports is shown too, not gated: it includes the
# provider polls that the paced poll makes every net_poll_interval us, and
# rank 0 runs 50 times slower under callgrind, so their share follows the
# machine's load (mtl_efa-rxm: 17 to 235 of 399 iterations without a poll,
# mean 3005 to 3203 over four runs while others built; minimum 2845 in all).
#
# The runs between nodes need tests/pretend-nodes.sh to work (it does
# wherever mpirun's rsh launcher can be pointed at its stand-in); where it
# cannot, those configurations fail as not measured.
#
# usage: bench/callgrind-gate.sh [--update] [--compare TABLE] [--baseline FILE]
#                                [--tolerance TOL] [-n N] [-r R] [-o OUTDIR]
#                                [--no-reference]
#   --update      write the baseline from this run (or from TABLE) instead of
#                 comparing; refused when a gated configuration failed
#   --compare     compare a saved table (counts.tsv of callgrind.sh -o DIR)
#                 instead of running callgrind
#   --baseline    baseline file (default bench/callgrind-baseline.txt under
#                 Open MPI 4.1, what CI runs; under another Open MPI X.Y,
#                 bench/callgrind-baseline-ompiX.Y.txt: its pml and
#                 runtime are other code, so other counts)
#   --tolerance   allowed rise in percent (default 3)
#   -n, -r        iterations per run and runs per configuration (default 400, 1;
#                 under load few iterations escape the paced poll: keep N large)
#   -o            callgrind.sh's output directory
#   --no-reference  leave out the reference configuration (CI: it is never
#                 gated, and its valgrind run costs as much as a gated one)
# Environment: as bench/callgrind.sh (BENCH_BIN_DIR, EFA_MCA_COMPONENT_PATH).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
onnode=(mtl_efa-rxm mtl_efa-rxd mtl_efa-shm btl_efa-rxm btl_efa-rxd btl_efa-shm ob1_vader)
# between two pretend nodes: the configurations, gated as NAME@2nodes
between=(mtl_efa-rxm btl_efa-rxm)
gated=("${onnode[@]}" "${between[@]/%/@2nodes}")
reference=(mtl_ofi-rxm)
baseline=$here/callgrind-baseline.txt
ompi_ver=$(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full:\([0-9]*\.[0-9]*\).*/\1/p')
if [[ -n $ompi_ver && $ompi_ver != 4.1 ]]; then
    baseline=$here/callgrind-baseline-ompi$ompi_ver.txt
fi
tol=3
iters=400
reps=1
update=0
table=
out=

usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
while (($#)); do
    case $1 in
    --update) update=1 ;;
    --compare) table=${2:?}; shift ;;
    --baseline) baseline=${2:?}; shift ;;
    --tolerance) tol=${2:?}; shift ;;
    -n) iters=${2:?}; shift ;;
    -r) reps=${2:?}; shift ;;
    -o) out=${2:?}; shift ;;
    --no-reference) reference=() ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
    shift
done

if [[ -z $table ]]; then
    out=${out:-$here/results/callgrind-gate-$(date +%Y%m%d-%H%M%S)}
    "$here/callgrind.sh" -b -p rxm,rxd,shm -n "$iters" -r "$reps" -o "$out" \
        "${onnode[@]}" "${reference[@]}"
    table=$out/counts.tsv
    # Between two pretend nodes: a run of its own (its launch arguments),
    # its rows added to the table under NAME@2nodes.
    pn=$(mktemp -d)
    if hosts=$(bash "$here/../tests/pretend-nodes.sh" "$pn" 1 core 2>"$pn/err" | tr '\n' ' ') &&
        [[ -n $hosts ]]; then
        "$here/callgrind.sh" -b -p rxm -n "$iters" -r "$reps" -l "$hosts --display-map" \
            -o "$out/2nodes" "${between[@]}"
        # Counted only where mpirun's map put the ranks on two nodes (one
        # node would count the on-node path, far below the baseline).
        for c in "${between[@]}"; do
            nodes=$(sed -n 's/^ *Data for node: *\([^[:space:]]*\).*/\1/p' "$out/2nodes/$c".rep*.log \
                2>/dev/null | sort -u | wc -l)
            awk -F'\t' -v OFS='\t' -v c="$c" -v nodes="$nodes" '$1 == c {
                    $1 = $1 "@2nodes"
                    if ($7 == "ok" && nodes != 2) { $2 = $4 = "-"; $7 = "failed: ranks on " nodes " node(s), not 2" }
                    print
                }' "$out/2nodes/counts.tsv" >>"$table"
        done
    else
        echo "callgrind-gate: no pretend nodes ($(head -1 "$pn/err")): the runs between nodes fail"
    fi
    rm -rf "$pn"
fi
if [[ ! -s $table ]]; then
    echo "callgrind-gate: no table $table"
    echo "0 passed, ${#gated[@]} failed"
    exit 1
fi

if ((update)); then
    missing=$(printf '%s\n' "${gated[@]}" | while read -r c; do
        awk -F'\t' -v c="$c" '$1 == c && $7 == "ok" {f = 1} END {exit !f}' "$table" || echo "$c"
    done)
    if [[ -n $missing ]]; then
        echo "callgrind-gate: not updating $baseline: no count for ${missing//$'\n'/ }"
        exit 1
    fi
    commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)
    # tracked files changed since the commit, the baseline itself aside
    self=$(realpath --relative-to="$here/.." "$baseline")
    [[ -n $(git -C "$here/.." status --porcelain --untracked-files=no -- . ":(exclude)$self" \
        2>/dev/null) ]] && commit+="+changes"
    {
        echo "# bench/callgrind-gate.sh baseline: instructions per 1 B blocking send + receive"
        echo "# (rank 0; bench/callgrind.sh -b -n $iters -r $reps, the cheapest iteration)."
        echo "# Rewrite with bench/callgrind-gate.sh --update."
        echo "# Open MPI $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p'), $(fi_info --version 2>/dev/null | sed -n 's/^libfabric: *//p' | head -1 | sed 's/^/libfabric /')"
        echo "# config instructions commit date"
        awk -F'\t' -v commit="$commit" -v date="$(date -u +%Y-%m-%dT%H:%MZ)" \
            '$7 == "ok" {print $1, $4, commit, date}' "$table"
    } >"$baseline"
    echo "callgrind-gate: baseline written to $baseline"
    cat "$baseline"
    exit 0
fi

bsrc=$baseline
if [[ ! -f $baseline ]]; then
    echo "callgrind-gate: no baseline $baseline (bench/callgrind-gate.sh --update writes it)"
    bsrc=/dev/null
fi
# The comparison: gated and reference configurations in order, each with
# its baseline and today's count; the verdict line per failure, then counts.
awk -v tol="$tol" -v gated="${gated[*]}" -v reference="${reference[*]}" -v bfile="$bsrc" '
    FILENAME == bfile {
        if ($0 !~ /^#/ && NF >= 2) { base[$1] = $2; from[$1] = $3 " " $4 }
        next
    }
    { split($0, f, "\t"); now[f[1]] = f[4]; mean[f[1]] = f[2]; status[f[1]] = f[7] }
    function row(c, is_gated,   b, n, st, change, verdict) {
        b = (c in base) ? base[c] : "-"
        st = (c in status) ? status[c] : "not measured"
        n = (st == "ok") ? now[c] : "-"
        change = "-"
        if (b != "-" && n != "-") change = sprintf("%+.1f %%", (n - b) * 100 / b)
        if (!is_gated) verdict = "reference, not gated"
        else if (n == "-") verdict = "FAIL " st
        else if (b == "-") verdict = "FAIL not in the baseline (bench/callgrind-gate.sh --update)"
        else if ((n - b) * 100 > tol * b) verdict = "FAIL more than " tol " % above the baseline"
        else if ((b - n) * 100 > tol * b) verdict = "ok, more than " tol " % below: --update to keep it"
        else verdict = "ok"
        printf "| %s | %s | %s | %s | %s | %s |\n", c, b, n, change, verdict, (st == "ok") ? mean[c] : "-"
        if (!is_gated) return
        if (verdict ~ /^ok/) passed++
        else { failed++; why[failed] = c ": " substr(verdict, 6) }
    }
    END {
        printf "\n### callgrind gate: instructions per 1 B blocking send + receive, rank 0\n\n"
        print "| config | baseline | now | change | verdict | mean, not gated |"
        print "|---|---:|---:|---:|---|---:|"
        ng = split(gated, g, " ")
        for (i = 1; i <= ng; i++) row(g[i], 1)
        nr = split(reference, r, " ")
        for (i = 1; i <= nr; i++) row(r[i], 0)
        print ""
        print "baseline: " bfile " (" from[g[1]] "); allowed rise " tol " %"
        for (i = 1; i <= failed; i++) print "FAIL " why[i]
        printf "%d passed, %d failed\n", passed, failed
        exit (failed > 0)
    }' "$bsrc" "$table"
