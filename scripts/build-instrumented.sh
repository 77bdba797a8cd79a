#!/usr/bin/env bash
# Instrumented builds of this checkout, beside the normal one (_build):
#   scripts/build-instrumented.sh asan   # _build-asan, installed into _install-asan:
#                                        # components, core, unit and MPI test programs
#                                        # with AddressSanitizer + UndefinedBehaviorSanitizer (gcc)
#   scripts/build-instrumented.sh tsan   # _build-tsan, installed into _install-tsan:
#                                        # the same with ThreadSanitizer (clang); of the
#                                        # test programs only those run-tsan-tests.sh runs
#   scripts/build-instrumented.sh fuzz   # _build-fuzz: the libFuzzer harnesses of
#                                        # tests/fuzz (clang, with ASan + UBSan)
# Open MPI itself stays uninstrumented.  Prints the build directory.
# EFA_INSTRUMENTED_CONFIGURE_ARGS: more configure arguments, e.g.
# "--with-libfabric=DIR" or "--with-ompi=DIR --with-ompi-source=SRC" for
# the same builds against another stack (docs/PLATFORMS.md).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=build-steps.sh
. "$top/scripts/build-steps.sh"
kind=${1:-}
jobs=$(nproc 2>/dev/null || echo 2)
read -r -a extra <<<"${EFA_INSTRUMENTED_CONFIGURE_ARGS:-}"
# -g1 (line tables only): the sanitizers' reports still name each frame's
# file and line, in 14 % less compile time than with full debug information
# (the ASan unit tests: 267 against 310 CPU seconds).
case $kind in
asan)
    build=$top/_build-asan
    # -O1: ASan's reports keep their line numbers and the suites stay quick.
    args=(--prefix="$top/_install-asan" --enable-sanitizers=address,undefined
          CFLAGS="-g1 -O1" CXXFLAGS="-g1 -O1")
    dirs=(tests/unit tests/mpi tests/osc)
    ;;
tsan)
    # No one-sided test program starts threads: tests/osc is not needed.
    build=$top/_build-tsan
    args=(--prefix="$top/_install-tsan" --enable-sanitizers=thread
          CC=clang CXX=clang++ CFLAGS="-g1 -O1" CXXFLAGS="-g1 -O1")
    # what tests/run-tsan-tests.sh runs: the unit tests that start threads
    # and the MPI threads test (pingpong: the runner's check that pretend
    # nodes work, tests/runtime-checks.sh)
    dirs=(tests/unit:efa_unit_threaded tests/mpi:threads,pingpong)
    ;;
fuzz)
    build=$top/_build-fuzz
    args=(--prefix="$top/_install-fuzz" --enable-sanitizers=address,undefined --enable-fuzzers
          CC=clang CXX=clang++ CFLAGS="-g1 -O1" CXXFLAGS="-g1 -O1")
    dirs=(tests/fuzz)
    ;;
*)
    echo "usage: $0 asan|tsan|fuzz" >&2
    exit 2
    ;;
esac

configure_once build-instrumented "$top" "$build" "${args[@]}" "${extra[@]}"
if [ "$kind" != fuzz ]; then
    make_logged build-instrumented -j"$jobs"
    make install >make-install.out 2>&1 || { tail -20 make-install.out; exit 1; }
else
    # The harnesses need the core only, not the Open MPI components.
    make_logged build-instrumented -C common -j"$jobs" libefa_core.la
fi
# The test programs' own C++ files (the unit tests) at -O0: under the
# sanitizers they compile about three times faster than at -O1, and what
# the sanitizers watch is chiefly the core and the components, whose own
# files keep -O1 (their inline code compiled into the tests' files is at
# -O0 there).  Never taken from the environment.
TEST_CXXFLAGS=""
if [ "$kind" != fuzz ]; then
    TEST_CXXFLAGS=$(sed -n 's/^CXXFLAGS = //p' tests/unit/Makefile | sed 's/-O1\b/-O0/')
fi
build_test_programs build-instrumented "$jobs" "${dirs[@]}"
report_warnings build-instrumented
echo "$build"
