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

# shellcheck source=build-steps.sh
. "$top/scripts/build-steps.sh"

configure_once build.sh "$top" "$build" --prefix="$prefix" "$@"
make_logged build.sh -j"$jobs"
# Test and benchmark programs (check_PROGRAMS), directory by directory: the
# top-level "make check" runs the whole test suite, which is not wanted here.
# The unit tests' own C++ files at -O0 (they test the core's library, built
# as configured; at -O0 they compile in about half the time); the C programs
# keep CFLAGS.
TEST_CXXFLAGS=$(sed -n 's/^CXXFLAGS = //p' tests/unit/Makefile | sed -E 's/-O([1-3sz]|fast)?\b/-O0/g')
build_test_programs build.sh "$jobs" tests/unit tests/mpi tests/osc tests/soak tests/netns bench
make install >make-install.out 2>&1 || { tail -20 make-install.out; exit 1; }
report_warnings build.sh
echo "$prefix/lib/openmpi"
