#!/usr/bin/env bash
# Build the benchmark programs with mpicc into a build directory
# (default bench/_build), without the project's autotools build.
#   bench/build-bench.sh [OUTDIR]
# Environment: MPICC (default mpicc), CFLAGS (default -O2 -g).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$here/_build}
mpicc=${MPICC:-mpicc}
cflags=${CFLAGS:--O2 -g}
mkdir -p "$out"
common="$here/bench_common.c"
for prog in bench_pt2pt bench_rma bench_coll bench_overhead bench_floor; do
    src=("$here/$prog.c")
    libs=()
    case $prog in
    bench_overhead) ;;
    # calls libfabric directly
    bench_floor) read -r -a libs <<<"$(pkg-config --cflags --libs libfabric 2>/dev/null || echo -lfabric)" ;;
    *) src+=("$common") ;;
    esac
    # rebuild only when a source or header is newer than the binary
    if [[ -x $out/$prog ]]; then
        newer=$(find "${src[@]}" "$here/bench_common.h" -newer "$out/$prog" | head -n 1)
        [[ -z $newer ]] && continue
    fi
    # shellcheck disable=SC2086
    "$mpicc" -std=c11 -Wall -Wextra $cflags -o "$out/$prog" "${src[@]}" "${libs[@]}"
done
echo "$out"
