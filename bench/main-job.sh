#!/usr/bin/env bash
# The main job on a fresh machine, in about 10 minutes:
#   1. install what is missing (scripts/install-deps.sh if the project has it,
#      else the Debian packages listed below)
#   2. build the project (scripts/build.sh if it exists; it installs the
#      components into ./_install and prints the component directory) and the
#      bench programs (bench/build-bench.sh)
#   3. four short side-by-side comparisons, 5 interleaved reps each, on the
#      network provider a multi-node job would load (efa if it exists, else
#      the stand-in tcp;ofi_rxm). Each leads with mtl_efa (pml cm) and
#      btl_efa carrying the job (--mca btl efa,self, its documented usage),
#      nothing else set but the provider, against their anchor, with the
#      ratio to it. (Not what a job with nothing set gets on one node:
#      there btl_efa yields to vader, btl_efa_component.c.) Every variant
#      follows in its own table, titled by what it changes, against the
#      same anchor; btl_efa_intrinsic, whose osc setting its anchor lacks,
#      without a ratio. The configurations' order turns by one each rep.
#      The parts:
#      a. on one node (2 ranks bound to cores): latency, bandwidth and
#         message rate against ob1 + vader; variants: provider matching
#         (mtl_efa_provmatch), the provider polled on every call (*_unpaced);
#      b. one-sided on one node: put, get, fetch-and-op and
#         compare-and-swap latency of btl_efa against osc/rdma over vader;
#         variants: btl_efa_intrinsic, btl_efa_cmaonly;
#      c. between nodes (2 pretend nodes of tests/pretend-nodes.sh, each
#         rank bound to a core of its own, as on hosts of their own):
#         mtl_efa against mtl_ofi, btl_efa against ob1 + tcp;
#         variant: mtl_efa_provmatch. On efa the pretend nodes share the
#         instance's device, whose peers libfabric's efa reaches through
#         its shm: every configuration of c. and d. then runs with
#         FI_EFA_ENABLE_SHM_TRANSFER=0 (mpirun -x), said in the titles;
#      d. one-sided between nodes: btl_efa against osc/pt2pt over ob1 + tcp;
#         variant: btl_efa_intrinsic.
#      e. several NICs: 2 namespace hosts (tests/netns, root), one rank
#         each, 1, 2 and 4 links per host shaped at 1 Gbit/s, each link a
#         NIC: bandwidth of 1 to 16 MiB messages of mtl_efa and btl_efa
#         against ob1 + tcp over the same links (btl/tcp stripes over its
#         interfaces), and mtl/ofi on one link; the bandwidth of 32 and
#         128 KiB messages (below common_efa_stripe_min: not striped, but
#         their data takes the peer's NICs in turn) with one rank per host;
#         then two ranks per host, each streaming 32 and 128 KiB messages
#         to both ranks of the other host (fanout: peers spread over the
#         NICs), against the same; said and left out where namespaces
#         cannot be made.  The runs of messages below stripe_min warm up
#         for 10 iterations (each NIC's first transfers, connections made
#         on first use over tcp;ofi_rxm, are slow).
#      Never one kind against the other: an on-node path beats any network.
# Output: bench/results/<timestamp>-{onnode,onnode-rma,network,network-rma,
# nics-K,peer-K,fanout-K for K = 1, 2, 4}/ (summary.md, results.csv,
# plots/*.png).  Exits non-zero where the build failed, where the
# between-node ranks did not get a pretend node each, or where a comparison
# had a configuration without one successful run of a benchmark.
# MAIN_JOB_PROVIDER (rxm or efa) overrides the provider found, for testing
# (bench/tests/run-bench-tests.sh: the commands of --dry-run on efa).
#   bench/main-job.sh [--no-deps] [--no-build] [runner.py arguments, e.g. --reps 5]
set -euo pipefail

do_deps=1
do_build=1
while (($#)); do
    case $1 in
    --no-deps) do_deps=0 ;;
    --no-build) do_build=0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) break ;;
    esac
    shift
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
start=$SECONDS
stamp=$(date +%Y%m%d-%H%M%S)
out=$here/results/$stamp
step() { printf '\n== [%3ds] %s\n' $((SECONDS - start)) "$*"; }
# run_runner ARGS: one comparison (runner.py); one whose configurations had
# no successful run of a benchmark is counted, and the job ends non-zero
# after the others ran.
failed_parts=0
run_runner() {
    local rc=0
    python3 "$here/runner.py" "$@" || rc=$?
    [ $rc -eq 130 ] && exit 130
    [ $rc -eq 0 ] || failed_parts=$((failed_parts + 1))
    return 0
}
# mpirun refuses root without these (a fresh container runs as root)
if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

# the project's build script (MAIN_JOB_BUILD_SCRIPT overrides it, for testing)
build_script=${MAIN_JOB_BUILD_SCRIPT:-$repo/scripts/build.sh}
packages=(libopenmpi-dev openmpi-bin libfabric-dev libfabric-bin libhwloc-dev hwloc autoconf
    automake libtool pkg-config gnuplot-nox g++ make python3)

step "dependencies"
if ((!do_deps)); then
    echo "skipped (--no-deps)"
else
    if [[ -f $repo/scripts/install-deps.sh ]]; then
        bash "$repo/scripts/install-deps.sh" || echo "main-job: scripts/install-deps.sh failed; checking packages myself"
    fi
    # whatever install-deps.sh did, the benchmarks need these
    missing=()
    for p in "${packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        echo "installing: ${missing[*]}"
        sudo=()
        if [[ $(id -u) != 0 ]]; then
            command -v sudo >/dev/null || {
                echo "main-job: need root or sudo to install ${missing[*]}" >&2
                exit 1
            }
            sudo=(sudo)
        fi
        export DEBIAN_FRONTEND=noninteractive
        "${sudo[@]}" apt-get update -q
        "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
    else
        echo "all present: ${packages[*]}"
    fi
fi

step "build"
if ((!do_build)); then
    echo "component build skipped (--no-build); EFA_MCA_COMPONENT_PATH=${EFA_MCA_COMPONENT_PATH:-(unset)}"
elif [[ -f $build_script ]]; then
    log=$(mktemp)
    if ! (cd "$repo" && bash "$build_script") 2>&1 | tee "$log"; then
        # (measuring an earlier build's components, or none, would say
        # nothing of this checkout: --no-build is the way to reuse one)
        echo "main-job: $build_script failed (its output above); nothing measured" >&2
        rm -f "$log"
        exit 1
    fi
    # the component directory: the last printed line that is a directory,
    # else wherever the components were installed under _install
    compdir=$(tac "$log" | while read -r line; do
        if [[ $line == /* && -d $line ]]; then
            echo "$line"
            break
        fi
    done || true)
    if [[ -z $compdir && -d $repo/_install ]]; then
        so=$(find "$repo/_install" -name 'mca_*_efa.so' -print -quit 2>/dev/null || true)
        if [[ -n $so ]]; then compdir=$(dirname "$so"); fi
    fi
    rm -f "$log"
    if [[ -n $compdir && -z ${EFA_MCA_COMPONENT_PATH:-} ]]; then
        export EFA_MCA_COMPONENT_PATH=$compdir
    fi
    echo "EFA_MCA_COMPONENT_PATH=${EFA_MCA_COMPONENT_PATH:-(not found)}"
else
    echo "note: scripts/build.sh does not exist yet: the EFA components are not built;"
    echo "      the mtl_efa and btl_efa configurations will show as failed"
fi
if [[ -z ${BENCH_BIN_DIR:-} ]]; then
    BENCH_BIN_DIR=$("$here/build-bench.sh")
    export BENCH_BIN_DIR
fi
echo "bench programs: $BENCH_BIN_DIR"

prov=${MAIN_JOB_PROVIDER:-}
if [[ -z $prov ]]; then
    prov=rxm
    fi_info -p efa >/dev/null 2>&1 && prov=efa
fi
common=(--quick --reps 5 --timeout 30 --providers "$prov")
# Each comparison is one interleaved run; its first tables are the
# components as documented, nothing else set but the provider, against the
# anchor, then one table per variant, titled by what the variant changes,
# with its ratio to the same anchor measured in the same run.  btl_efa is
# given the whole job (--mca btl efa,self): on one node a job that names no
# BTL would send through vader, to which btl_efa yields there.
defaults="mtl_efa (pml cm) and btl_efa carrying the job (--mca btl efa,self), nothing else set but the provider"
btl_only="btl_efa carrying the job: --mca btl efa,self, nothing else set but the provider"
provmatch="mtl_efa_provmatch: the provider matches MPI messages (mtl_efa_matching provider)"
unpaced="*_unpaced: the provider polled on every progress call (common_efa_net_poll_interval 0)"
# (no ratio: osc_rdma_acc_single_intrinsic is set on our side only, and
# the anchors, osc/rdma over vader and osc/pt2pt, run without it)
intrinsic="btl_efa_intrinsic: accumulates to one location as one operation (osc_rdma_acc_single_intrinsic; no ratio, the anchor runs without it)"
# Between pretend nodes on efa: the two "nodes" share this instance's EFA
# device, and libfabric's efa sends to a peer on its own device through its
# shm, so "between nodes" would measure efa's shm.  Its shm off, for every
# configuration alike (the runner's --env: mpirun -x).
between_env=()
between_note=""
if [[ $prov == efa ]]; then
    between_env=(--env FI_EFA_ENABLE_SHM_TRANSFER=0)
    between_note=", efa's shm off for every configuration (FI_EFA_ENABLE_SHM_TRANSFER=0)"
fi
cmaonly="btl_efa_cmaonly: put/get by single copy only, not as requests in the peer's ring (btl_efa_onnode_rma_max 0)"

step "a. on one node, provider $prov loaded (output $out-onnode)"
run_runner "${common[@]}" --title "on one node (provider $prov loaded)" \
    --table "$defaults=mtl_efa-$prov,btl_efa-$prov" --table "$provmatch=mtl_efa_provmatch-$prov" \
    --table "$unpaced=mtl_efa_unpaced-$prov,btl_efa_unpaced-$prov" --anchor ob1_vader \
    --benches latency,bw,msgrate_w64 --out "$out-onnode" "$@"

step "b. one-sided on one node, provider $prov loaded (output $out-onnode-rma)"
run_runner "${common[@]}" --title "one-sided on one node (provider $prov loaded)" \
    --table "$btl_only=btl_efa-$prov" --table "$intrinsic=btl_efa_intrinsic-$prov" \
    --table "$cmaonly=btl_efa_cmaonly-$prov" \
    --anchor "btl_efa-$prov,btl_efa_cmaonly-$prov=osc_rdma-ob1_vader" \
    --benches put_lat,get_lat,fop_lat,cas_lat --out "$out-onnode-rma" "$@"

pn=$(mktemp -d)
trap 'rm -rf "$pn"' EXIT
hosts=$(bash "$repo/tests/pretend-nodes.sh" "$pn" 1 core | tr '\n' ' ')
# Figures "between nodes" only where the two ranks are on two nodes: a
# runtime that places both on one host would measure the on-node paths.
# shellcheck disable=SC2086 # (hosts: one argument per word)
# (each rank says how many ranks its node has, as Open MPI counts them:
# host names only differ where a UTS namespace could be made)
# shellcheck disable=SC2016 # (expanded by each rank's shell)
spread=$(timeout -k 5 60 mpirun -np 2 $hosts sh -c 'echo "$(hostname):$OMPI_COMM_WORLD_LOCAL_SIZE"' \
    2>/dev/null | tr '\n' ' ') || true
if [[ $spread != *:1\ *:1\  ]]; then
    echo "main-job: the 2 ranks of the between-node runs do not have a node each [${spread% }];" \
        "no between-node figures (tests/pretend-nodes.sh, mpirun $(mpirun --version 2>&1 | head -1))" >&2
    exit 1
fi
echo "between-node runs: ranks on ${spread% }"
step "c. between pretend nodes, provider $prov$between_note (output $out-network)"
run_runner "${common[@]}" "${between_env[@]}" \
    --title "between pretend nodes (provider $prov$between_note)" \
    --launch-args "$hosts" --table "$defaults=mtl_efa-$prov,btl_efa-$prov" \
    --table "$provmatch=mtl_efa_provmatch-$prov" \
    --anchor "mtl_efa*=mtl_ofi-$prov" --anchor "btl_efa*=ob1_tcp" \
    --benches latency,bw,msgrate_w64 --out "$out-network" "$@"
# The one-sided baseline over ob1 + tcp: osc/pt2pt (4.1); 5.0 has none
# and does it with osc/rdma on btl/tcp.
osc_base=osc_pt2pt-ob1_tcp
ompi_info --parsable 2>/dev/null | grep -q "^mca:osc:pt2pt:" || osc_base=osc_rdma-ob1_tcp
step "d. one-sided between pretend nodes (output $out-network-rma)"
run_runner "${common[@]}" "${between_env[@]}" \
    --title "one-sided between pretend nodes (provider $prov$between_note)" --launch-args "$hosts" \
    --table "$btl_only=btl_efa-$prov" --table "$intrinsic=btl_efa_intrinsic-$prov" \
    --anchor "btl_efa-$prov=$osc_base" --benches put_lat,fop_lat,cas_lat \
    --out "$out-network-rma" "$@"

# e. Several NICs: namespace hosts with K links each, every link a NIC of
# the stand-in (a domain per interface; on EFA hosts the NICs are real and
# this part is not how they are measured).  ob1 + tcp is kept to the same K
# links (btl_tcp_if_include by environment: the launch arguments name link
# 0 for Open MPI's own traffic).
parts="onnode onnode-rma network network-rma"
netns=$repo/tests/netns
setup_rc=0
if [[ $prov == rxm ]]; then
    why=$("$netns/setup.sh" 2 4 1gbit 2>&1 >/dev/null) || setup_rc=$?
fi
if [[ $prov != rxm ]]; then
    echo "e. several NICs: measured on the tcp;ofi_rxm stand-in only (provider here: $prov)"
elif [[ $setup_rc == 77 ]]; then
    echo "e. several NICs: no namespace hosts here, left out (${why#setup.sh: })"
elif [[ $setup_rc != 0 ]]; then
    # (namespaces can be made here, but making them failed: not measured)
    echo "main-job: e. several NICs: tests/netns/setup.sh failed (exit $setup_rc: ${why#setup.sh: })" >&2
    failed_parts=$((failed_parts + 1))
else
    trap '"$netns/teardown.sh" >/dev/null 2>&1 || true; rm -rf "$pn"' EXIT
    # shellcheck source=../tests/netns/common.sh
    . "$netns/common.sh"
    # launch_args K SLOTS: the hosts' mpirun arguments for K links and
    # SLOTS ranks per host, without Open MPI's btl_tcp_if_include (set by
    # environment below), in $launch
    launch_args() {
        local la a skip=0
        local out
        out=$(NETNS_LINKS=$1 "$netns/mpirun-args.sh" "$pn/nics-$1-$2" "$2")
        mapfile -t la <<<"$out"
        launch=""
        for a in "${la[@]}"; do
            if [[ $a == btl_tcp_if_include ]]; then
                skip=2
            fi
            if ((skip > 0)); then
                skip=$((skip - 1))
                launch=${launch% --mca}
                continue
            fi
            launch="$launch $a"
        done
    }
    for k in 1 2 4; do
        launch_args "$k" 1
        nets=""
        for i in $(seq 0 $((k - 1))); do
            nets="$nets$(netns_link_net "$i").0/24,"
        done
        tables=(--table "$defaults=mtl_efa-$prov,btl_efa-$prov")
        if ((k == 1)); then
            tables+=(--table "mtl/ofi (one NIC)=mtl_ofi-$prov")
        fi
        step "e. several NICs: $k link(s) of 1 Gbit/s per host (output $out-nics-$k)"
        OMPI_MCA_btl_tcp_if_include=${nets%,} run_runner --reps 3 --timeout 60 \
            --providers "$prov" --title "several NICs: $k link(s) per host, 1 Gbit/s each" \
            --launch-args "$launch" "${tables[@]}" --anchor ob1_tcp --benches bw_large \
            --sizes 1M:16M:4 --out "$out-nics-$k" "$@"
        parts="$parts nics-$k"
        step "e. several NICs: one peer, messages below stripe_min, $k link(s) (output $out-peer-$k)"
        OMPI_MCA_btl_tcp_if_include=${nets%,} run_runner --reps 3 --timeout 60 \
            --providers "$prov" --title "several NICs, one peer: $k link(s) per host, 1 Gbit/s each" \
            --launch-args "$launch" --table "$defaults=mtl_efa-$prov,btl_efa-$prov" \
            --anchor ob1_tcp --benches bw --sizes 32K:128K:4 --warmup 100 --out "$out-peer-$k" "$@"
        parts="$parts peer-$k"
        launch_args "$k" 2
        step "e. several NICs: fanout, 2 ranks per host, $k link(s) (output $out-fanout-$k)"
        OMPI_MCA_btl_tcp_if_include=${nets%,} run_runner --reps 3 --timeout 60 \
            --providers "$prov" --title "several NICs, fanout: 2 ranks per host, $k link(s) of 1 Gbit/s" \
            --launch-args "$launch" --table "$defaults=mtl_efa-$prov,btl_efa-$prov" \
            --anchor ob1_tcp --benches fanout --sizes 32K:128K:4 --warmup 100 \
            --out "$out-fanout-$k" "$@"
        parts="$parts fanout-$k"
    done
fi

step "done in $((SECONDS - start)) s; results in $out-{${parts// /,}}"
# Each comparison in one line, and where its plots are.
# (a part without summary or plots, as with --no-plots, says nothing of them)
for part in $parts; do
    echo "$part ($out-$part/summary.md):"
    sed -n '/^## Verdicts/,/^## /{/^- /s/^- /  /p}' "$out-$part/summary.md" 2>/dev/null || true
    for plot in "$out-$part"/plots/*.png; do
        if [ -e "$plot" ]; then
            echo "  plot: $plot"
        fi
    done
done
if [ "$failed_parts" -gt 0 ]; then
    echo "main-job: $failed_parts comparison(s) had a configuration without a successful run (above)" >&2
    exit 1
fi
