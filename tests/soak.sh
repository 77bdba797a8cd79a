#!/usr/bin/env bash
# Soak: tests/soak/soak (a seeded random mix of point-to-point in every
# mode and one-sided operations, every byte checked) on namespace hosts
# (tests/netns) with random loss between them, for a while.
#   tests/soak.sh [-m MINUTES | -t SECONDS] [-c CONFIG[,CONFIG...]] [-l LOSS%]
#                 [-H HOSTS] [-n NP] [-s SEED]
#   -m / -t  how long each configuration runs (default 10 minutes)
#   -c  PML-PROVIDER: cm-rxd, cm-rxm (pml cm + mtl_efa), cm-own-rxd,
#       cm-own-rxm (mtl_efa matching itself over untagged provider
#       messages), cm-direct-rxd, cm-direct-rxm (the same in the forced
#       efa-direct-like mode, common_efa_force_direct_mode), ob1-rxd,
#       ob1-rxm (pml ob1 + btl_efa); one-sided through osc/rdma + btl_efa
#       in all (default cm-rxd,ob1-rxm)
#   -l  percentage of frames between hosts dropped at random (default 3)
#   -H  namespace hosts (default 2), -n processes (default 4, round-robin
#       over the hosts), -s seed (default: the date, printed)
# Environment: EFA_MCA_COMPONENT_PATH (default _install/lib/openmpi),
# SOAK_BIN (default _build/tests/soak/soak), SOAK_LOG_DIR (default
# /tmp/efa-soak).
# The hosts are made here and removed at the end, also on failure or
# interruption; where they cannot be made (not root, no ip or nft) every
# configuration is a SKIP with the reason.  Prints "PASS soak CONFIG ..." or
# "FAIL soak CONFIG (reason)" per configuration with the program's totals,
# then "N passed, N failed, N skipped"; exits non-zero on any failure.
# An rxd configuration that ends because ofi_rxd lost a message (mtl_efa's
# message-lost or short-delivery text, or btl_efa's message-lost, in the log)
# runs once more with the next seed, and the result line says so; if that
# run ends the same way too, the configuration is a SKIP (known defect)
# with both logs named.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=netns/common.sh
. "$top/tests/netns/common.sh"
# shellcheck source=netns/configs.sh
. "$top/tests/netns/configs.sh"
comp=${EFA_MCA_COMPONENT_PATH:-$top/_install/lib/openmpi}
bin=${SOAK_BIN:-$top/_build/tests/soak/soak}
logdir=${SOAK_LOG_DIR:-/tmp/efa-soak}
secs=600 configs=cm-rxd,ob1-rxm loss=3 hosts=2 np=4 seed=$(date +%Y%m%d%H%M)
while getopts "m:t:c:l:H:n:s:h" o; do
    case $o in
    m) secs=$((OPTARG * 60)) ;;
    t) secs=$OPTARG ;;
    c) configs=$OPTARG ;;
    l) loss=$OPTARG ;;
    H) hosts=$OPTARG ;;
    n) np=$OPTARG ;;
    s) seed=$OPTARG ;;
    *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
    esac
done
for v in "$secs" "$loss" "$hosts" "$np" "$seed"; do
    [[ $v =~ ^[0-9]+$ ]] || { echo "soak.sh: '$v' is not a number" >&2; exit 2; }
done

npass=0 nfail=0 nskip=0
finish() {
    echo "$npass passed, $nfail failed, $nskip skipped"
    [ $nfail -eq 0 ]
}

if ! netns_make_hosts "$hosts"; then
    for c in ${configs//,/ }; do
        echo "$NETNS_VERDICT soak $c ($NETNS_WHY)"
        if [ "$NETNS_VERDICT" = SKIP ]; then nskip=$((nskip + 1)); else nfail=$((nfail + 1)); fi
    done
    finish
    exit
fi
trap '"$top/tests/netns/teardown.sh"' EXIT
trap 'exit 130' INT TERM
"$top/tests/netns/fault.sh" loss "$loss" || exit 1
netns_args_out=$("$top/tests/netns/mpirun-args.sh" "$logdir" "$np") ||
    { echo "$(basename "$0"): mpirun-args.sh failed: $netns_args_out" >&2; exit 1; }
mapfile -t netns_args <<<"$netns_args_out"
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$logdir"

# run_soak SEED: one run of configuration $c into $log; sets rc
run_soak() {
    # the program stops itself after $secs; the watchdog and the timeout
    # leave room for start-up and a last round under loss
    local cmd=(timeout -k 15 $((secs + 180)) mpirun -np "$np" --oversubscribe --bind-to none
        --mca mca_base_component_path "$pkglibdir:$comp" "${netns_args[@]}" "${args[@]}"
        -x MPI_TEST_TIMEOUT=$((secs + 150)) "$bin" -t "$secs" -s "$1")
    echo "# $(printf '%q ' "${cmd[@]}")" >"$log"
    "$top/tests/netns/fault.sh" show | grep -E 'loss|counter' >>"$log"
    "${cmd[@]}" </dev/null >>"$log" 2>&1
    rc=$?
}

# provider_lost LOG: prints which and succeeds if the run ended because the
# provider lost a message (mtl_efa's help texts message-lost and
# short-delivery, btl_efa's message-lost), not through a fault of ours
provider_lost() {
    if grep -q 'A message of this job that travelled between nodes through the provider' "$1"; then
        echo "mtl_efa: message-lost"
    elif grep -q 'The provider completed a receive with a truncation error, yet it had' "$1"; then
        echo "mtl_efa: short-delivery"
    elif grep -q 'A message of this job that arrived through the provider was lost' "$1"; then
        echo "btl_efa: message-lost"
    else
        return 1
    fi
}

for c in ${configs//,/ }; do
    config_mpirun_args "$c" ||
        { echo "soak.sh: unknown configuration $c (PML-PROVIDER: cm-rxd, cm-rxm, cm-own-rxd, cm-own-rxm, cm-direct-rxd, cm-direct-rxm, ob1-rxd, ob1-rxm)" >&2; exit 2; }
    log=$logdir/soak-$c.log
    t0=$(date +%s)
    run_soak "$seed"
    rerun=
    if [ $rc -ne 0 ] && why_lost=$(provider_lost "$log") && [[ $c == *-rxd ]]; then
        # ofi_rxd (the stand-in) loses a message under loss at times and
        # our components then say so and stop (docs/RELIABILITY.md): run
        # again once with the next seed, and say so on the result line.
        mv "$log" "$log.first"
        rerun="rerun with seed $((seed + 1)): the first run hit ofi_rxd's known loss of a message ($why_lost; log $log.first)"
        run_soak $((seed + 1))
    fi
    dropped=$("$top/tests/netns/fault.sh" show | sed -n 's/.*counter packets \([0-9]*\) .*loss.*/\1/p' | head -1)
    stats=$(grep -m1 '^soak: ' "$log" | sed 's/^soak: //')
    if [ $rc -eq 0 ] && grep -q '^ok soak ' "$log"; then
        echo "PASS soak $c np=$np loss=$loss% ($stats; $dropped frames dropped so far${rerun:+; $rerun})"
        npass=$((npass + 1))
    elif [ -n "$rerun" ] && why_lost=$(provider_lost "$log"); then
        echo "SKIP soak $c np=$np loss=$loss% (known defect: ofi_rxd lost a message in two runs in a row: $why_lost; logs $log.first, $log)"
        nskip=$((nskip + 1))
    else
        why=$(grep -m1 -E '^FAIL|^ERROR' "$log" || provider_lost "$log")
        [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="timeout after $((secs + 180)) s${why:+: $why}"
        echo "FAIL soak $c np=$np loss=$loss% (exit $rc${why:+: $why}${stats:+; $stats}; $(($(date +%s) - t0)) s; log $log${rerun:+; $rerun})"
        nfail=$((nfail + 1))
    fi
done
finish
