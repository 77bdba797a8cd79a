#!/usr/bin/env bash
# The main job on a fresh machine, in under 5 minutes:
#   1. install what is missing (scripts/install-deps.sh if the project has it,
#      else the Debian packages listed below)
#   2. build the project (scripts/build.sh if it exists; it installs the
#      components into ./_install and prints the component directory) and the
#      bench programs (bench/build-bench.sh)
#   3. a short side-by-side comparison: latency, bandwidth, message rate,
#      put latency, fetch-and-op latency; 3 interleaved reps; configurations
#      mtl_efa, btl_efa, mtl_ofi (best providers: efa if it exists, else the
#      stand-ins rxm and shm), ob1_tcp, ob1_vader
# Output: bench/results/<timestamp>/ (summary.md, results.csv, plots/*.png).
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
        echo "main-job: $build_script failed; the efa configurations will show as failed" >&2
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

step "comparison (output $out)"
python3 "$here/runner.py" --quick --reps 3 --timeout 30 \
    --configs mtl_efa,btl_efa,mtl_ofi,ob1_tcp,ob1_vader \
    --benches latency,bw,msgrate_w64,put_lat,fop_lat \
    --out "$out" "$@"

step "done in $((SECONDS - start)) s; results in $out"
