#!/usr/bin/env bash
# Every installed library of the components must resolve all its symbols
# (ldd -r) against the libraries it names: an undefined one (say
# __sync_val_compare_and_swap_16, when the components are compiled without
# the machine flags of Open MPI's own build) only shows when a program
# first reaches it, and kills the process there.  And the common library
# exports nothing but its C seam.
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
# The common library exports its C seam alone (libmca_common_efa.map):
# Open MPI loads components RTLD_GLOBAL, and an exported C++ symbol (a
# weak std:: instantiation) could bind another library's to this one's.
so=$libdir/libmca_common_efa.so
if [ -f "$so" ]; then
    others=$(nm -D --defined-only "$so" | awk '{print $3}' |
        grep -v -E '^(efa_|mca_common_efa_)' | grep -v -E '^(_init|_fini|_edata|_end|__bss_start)$')
    if [ -n "$others" ]; then
        echo "FAIL symbols/libmca_common_efa.so-exports: $(wc -l <<<"$others") symbols beyond efa_* and mca_common_efa_*, e.g.:"
        head -5 <<<"$others" | sed 's/^/    /'
        fail=$((fail + 1))
    else
        echo "PASS symbols/libmca_common_efa.so-exports"
        pass=$((pass + 1))
    fi
fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
