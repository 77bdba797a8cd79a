#!/usr/bin/env bash
# Every installed library of the components must resolve all its symbols
# (ldd -r) against the libraries it names: an undefined one (say
# __sync_val_compare_and_swap_16, when the components are compiled without
# the machine flags of Open MPI's own build) only shows when a program
# first reaches it, and kills the process there.
#   tests/check-symbols.sh <component-dir> <common-library-dir>
set -u
compdir=$1
libdir=$2
pass=0
fail=0
for so in "$compdir"/mca_mtl_efa.so "$compdir"/mca_btl_efa.so "$libdir"/libmca_common_efa.so; do
    name=$(basename "$so")
    if [ ! -f "$so" ]; then
        echo "FAIL symbols/$name: not installed"
        fail=$((fail + 1))
        continue
    fi
    undefined=$(ldd -r "$so" 2>&1 | grep -i "undefined symbol")
    if [ -n "$undefined" ]; then
        echo "FAIL symbols/$name:"
        head -5 <<<"$undefined" | sed 's/^/    /'
        fail=$((fail + 1))
    else
        echo "PASS symbols/$name"
        pass=$((pass + 1))
    fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
