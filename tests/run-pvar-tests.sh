#!/usr/bin/env bash
# The core's MPI_T performance variables (common/common_efa_pvars.c,
# README "MPI_T performance variables") read by tests/mpi/pvars.c through
# MPI_T: found with their class and type, never going down, and
# common_efa_completions rising with messages that cross the provider.
#   tests/run-pvar-tests.sh COMPONENT_DIR MPI_TEST_BIN_DIR
set -u
# shellcheck source=runner-args.sh
. "$(dirname "$0")/runner-args.sh"
prog=$bindir/pvars
pass=0 fail=0

# job NAME EXPECT(pass|fail) "expected text" mpirun-args... -- program-args...
job() {
    local name=$1 expect=$2 want=$3 mpiargs=() progargs=()
    shift 3
    while [ $# -gt 0 ] && [ "$1" != -- ]; do mpiargs+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    progargs=("$@")
    local out rc
    out=$(timeout 120 mpirun -np 2 --oversubscribe --mca mca_base_component_path "$path" \
        "${mpiargs[@]}" "$prog" "${progargs[@]}" 2>&1)
    rc=$?
    if { [ "$expect" = pass ] && [ $rc -eq 0 ]; } || { [ "$expect" = fail ] && [ $rc -ne 0 ] && [ $rc -ne 124 ]; } &&
        grep -qF -- "$want" <<<"$out"; then
        echo "PASS pvars/$name"
        pass=$((pass + 1))
    else
        echo "FAIL pvars/$name: expected to $expect with \"$want\" (exit $rc)"
        head -20 <<<"$out" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}

cm_provider=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm"
    --mca mtl_efa_onnode_channel none --mca mtl_efa_matching provider)
ob1_rings=(--mca pml ob1 --mca btl efa,self --mca btl_efa_provider_include "tcp;ofi_rxm")
job cm-provider-path pass "ok pvars np=2" "${cm_provider[@]}" -- -p
job cm-own-matching pass "ok pvars np=2" --mca pml cm --mca mtl efa \
    --mca mtl_efa_provider_include "tcp;ofi_rxm" --mca mtl_efa_onnode_channel none \
    --mca mtl_efa_matching own -- -p
job ob1-rings pass "ok pvars np=2" "${ob1_rings[@]}" --
# The control: the same rise asked of messages that stay in the on-node
# rings must fail, or the check above proves nothing.
job ob1-rings-control fail "common_efa_completions rose by" "${ob1_rings[@]}" -- -p

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
