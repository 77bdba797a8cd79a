#!/usr/bin/env bash
# Instrumented builds of this checkout, beside the normal one (_build):
#   scripts/build-instrumented.sh asan   # _build-asan, installed into _install-asan:
#                                        # components, core, unit and MPI test programs
#                                        # with AddressSanitizer + UndefinedBehaviorSanitizer (gcc)
#   scripts/build-instrumented.sh fuzz   # _build-fuzz: the libFuzzer harnesses of
#                                        # tests/fuzz (clang, with ASan + UBSan)
# Open MPI itself stays uninstrumented.  Prints the build directory.
# EFA_INSTRUMENTED_CONFIGURE_ARGS: more configure arguments, e.g.
# "--with-libfabric=DIR" or "--with-ompi=DIR --with-ompi-source=SRC" for
# the same builds against another stack (docs/PLATFORMS.md).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-}
jobs=$(nproc 2>/dev/null || echo 2)
read -r -a extra <<<"${EFA_INSTRUMENTED_CONFIGURE_ARGS:-}"
case $kind in
asan)
    build=$top/_build-asan
    # -O1: ASan's reports keep their line numbers and the suites stay quick.
    args=(--prefix="$top/_install-asan" --enable-sanitizers=address,undefined
          CFLAGS="-g -O1" CXXFLAGS="-g -O1")
    dirs=(tests/unit tests/mpi tests/osc)
    ;;
fuzz)
    build=$top/_build-fuzz
    args=(--prefix="$top/_install-fuzz" --enable-sanitizers=address,undefined --enable-fuzzers
          CC=clang CXX=clang++ CFLAGS="-g -O1" CXXFLAGS="-g -O1")
    dirs=(tests/fuzz)
    ;;
*)
    echo "usage: $0 asan|fuzz" >&2
    exit 2
    ;;
esac

cd "$top"
if [ ! -x configure ] || [ configure.ac -nt configure ] || [ configure.m4 -nt configure ] ||
   [ common/configure.m4 -nt configure ]; then
    autoreconf -fi >/dev/null
fi
mkdir -p "$build"
cd "$build"
if [ ! -f Makefile ] || [ "$top/configure" -nt config.status ]; then
    "$top/configure" "${args[@]}" "${extra[@]}" >configure.out 2>&1 ||
        { tail -30 configure.out; echo "build-instrumented: configure failed ($build/configure.out)"; exit 1; }
fi
if [ "$kind" = asan ]; then
    make -j"$jobs" >make.out 2>&1 || { grep -E "error|Error" -A3 make.out | head -40; echo "build-instrumented: make failed ($build/make.out)"; exit 1; }
    make install >make-install.out 2>&1 || { tail -20 make-install.out; exit 1; }
else
    # The harnesses need the core only, not the Open MPI components.
    make -C common -j"$jobs" libefa_core.la >make.out 2>&1 ||
        { grep -E "error|Error" -A3 make.out | head -40; echo "build-instrumented: make failed ($build/make.out)"; exit 1; }
fi
: >make-check.out
for d in "${dirs[@]}"; do
    make -C "$d" -j"$jobs" check TESTS= >>make-check.out 2>&1 ||
        { grep -E "error|Error" -A3 make-check.out | head -40; echo "build-instrumented: building $d failed"; exit 1; }
done
if grep -q "warning:" make.out make-check.out; then
    echo "build-instrumented: the build printed warnings:"
    grep "warning:" make.out make-check.out | sort -u | head -20
fi
echo "$build"
