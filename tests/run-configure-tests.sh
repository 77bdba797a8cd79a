#!/usr/bin/env bash
# configure with a named libfabric: --with-libfabric=DIR takes DIR/lib64
# where the library is there (the EFA installer's /opt/amazon/efa layout on
# Amazon Linux and RHEL), DIR/lib otherwise, and refuses a libfabric older
# than 1.14.  The prefixes are made of this machine's libfabric (links into
# /usr); configure runs in a scratch directory and is not built.
# Prints "N passed, N failed".
#   run-configure-tests.sh
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
[ -x "$top/configure" ] || { echo "run-configure-tests: no $top/configure (run autoreconf -fi)"; exit 2; }
lib=$(pkg-config --variable=libdir libfabric 2>/dev/null)
inc=$(pkg-config --variable=includedir libfabric 2>/dev/null)
[ -n "$lib" ] && [ -e "$lib/libfabric.so" ] || { echo "run-configure-tests: no libfabric.so from pkg-config"; exit 2; }
scratch=$(mktemp -d /tmp/efa-configure.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
pass=0
fail=0

# prefix NAME LIBDIR-NAME: a prefix with the headers and the library in LIBDIR-NAME
prefix() {
    mkdir -p "$scratch/$1/$2"
    ln -s "$inc" "$scratch/$1/include"
    ln -s "$lib/libfabric.so" "$scratch/$1/$2/libfabric.so"
}

# check NAME WANT-RC WANT-REGEX configure-args...: configure's exit status
# and a line of its output or of the Makefile it made
check() {
    local name=$1 want_rc=$2 want=$3 rc
    shift 3
    mkdir -p "$scratch/build-$name"
    (cd "$scratch/build-$name" && "$top/configure" "$@" > out.log 2>&1)
    rc=$?
    if { [ "$want_rc" = 0 ] && [ $rc -ne 0 ]; } || { [ "$want_rc" != 0 ] && [ $rc -eq 0 ]; }; then
        echo "FAIL configure/$name: exit $rc"
        tail -5 "$scratch/build-$name/out.log" | sed 's/^/    /'
        fail=$((fail + 1))
    elif ! cat "$scratch/build-$name/out.log" "$scratch/build-$name/Makefile" 2>/dev/null |
        grep -qE -- "$want"; then
        echo "FAIL configure/$name: no line matches \"$want\""
        tail -5 "$scratch/build-$name/out.log" | sed 's/^/    /'
        fail=$((fail + 1))
    else
        echo "PASS configure/$name"
        pass=$((pass + 1))
    fi
}

prefix lib64 lib64
prefix lib lib
check libfabric-in-lib64 0 "^LIBFABRIC_LIBS = -L$scratch/lib64/lib64 " --with-libfabric="$scratch/lib64"
check libfabric-in-lib 0 "^LIBFABRIC_LIBS = -L$scratch/lib/lib " --with-libfabric="$scratch/lib"
# headers that say 1.13: refused with the version, not built against
mkdir -p "$scratch/old/include/rdma" "$scratch/old/lib"
cp -r "$inc/rdma/." "$scratch/old/include/rdma/"
sed -i 's/^#define FI_MINOR_VERSION .*/#define FI_MINOR_VERSION 13/; s/^#define FI_MAJOR_VERSION .*/#define FI_MAJOR_VERSION 1/' \
    "$scratch/old/include/rdma/fabric.h"
ln -s "$lib/libfabric.so" "$scratch/old/lib/libfabric.so"
check libfabric-older-than-1.14 1 "libfabric >= 1.14 needed" --with-libfabric="$scratch/old"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
