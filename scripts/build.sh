#!/usr/bin/env bash
# Build the components out of tree into _build/ and install them into
# _install/ (no root needed, nothing outside the checkout is touched).
# Prints the component directory to put on mca_base_component_path.
#   scripts/build.sh [extra configure args]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/_build
prefix=$top/_install
jobs=$(nproc 2>/dev/null || echo 2)

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ configure.m4 -nt configure ] ||
   [ common/configure.m4 -nt configure ]; then
    autoreconf -fi >/dev/null
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
    "$top/configure" --prefix="$prefix" "$@" >configure.out 2>&1 ||
        { tail -30 configure.out; echo "build.sh: configure failed (full log: $build/configure.out)"; exit 1; }
fi
make -j"$jobs" >make.out 2>&1 || { grep -E "error|Error" -A3 make.out | head -40; echo "build.sh: make failed (full log: $build/make.out)"; exit 1; }
# Test and benchmark programs (check_PROGRAMS), directory by directory: the
# top-level "make check" runs the whole test suite, which is not wanted here.
: >make-check.out
for d in tests/unit tests/mpi tests/osc tests/soak tests/netns bench; do
    [ -f "$d/Makefile" ] || continue
    make -C "$d" -j"$jobs" check TESTS= >>make-check.out 2>&1 ||
        { grep -E "error|Error" -A3 make-check.out | head -40; echo "build.sh: building $d failed"; exit 1; }
done
make install >make-install.out 2>&1 || { tail -20 make-install.out; exit 1; }
if grep -q "warning:" make.out make-check.out; then
    echo "build.sh: the build printed warnings:"
    grep "warning:" make.out make-check.out | sort -u | head -20
fi
echo "$prefix/lib/openmpi"
