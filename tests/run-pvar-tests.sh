#!/usr/bin/env bash
# The core's MPI_T performance variables (common/common_efa_pvars.c,
# README "MPI_T performance variables") read by tests/mpi/pvars.c through
# MPI_T: found with their class and type, never going down, and each path's
# counts rising with the traffic that took it (provider, on-node rings,
# single copy, the engine's unexpected queue, coalescing, emulated
# one-sided, striping over two NICs), with a control for each kind that
# must fail.
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
    # (Open MPI 5.0's runtime may write NUL bytes among its messages)
    out=$(timeout 120 mpirun -np 2 --oversubscribe --mca mca_base_component_path "$path" \
        "${mpiargs[@]}" "$prog" "${progargs[@]}" 2>&1 | tr -d '\000'; exit "${PIPESTATUS[0]}")
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
# Through the provider (no on-node channel): on one node a put may be done
# by single copy instead, when the target is slow to take the request.
osc=(--mca pml ob1 --mca osc rdma --mca btl efa,self --mca btl_efa_provider_include "tcp;ofi_rxm"
    --mca btl_efa_onnode_channel none)
own=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm"
    --mca mtl_efa_onnode_channel none --mca mtl_efa_matching own)
onnode=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm")
# Single copy (cross-memory attach) needs a kernel that lets a process read
# its sibling's memory: Yama's ptrace_scope 0 or no Yama.
copy=(-c)
scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
skipped=0
if [ "$scope" -ge 1 ]; then
    copy=()
    skipped=1
    echo "SKIP pvars/single-copy: Yama's ptrace_scope is $scope (single copy refused between processes)"
fi
job cm-provider-path pass "ok pvars np=2" "${cm_provider[@]}" -- -p
# A probe before each receive: the provider's peek is no receive.
job cm-provider-probe pass "ok pvars np=2" "${cm_provider[@]}" -- -p -b
# Own matching over the provider: 300 messages sent back to back before
# their receives wait unexpected, and many are packed into shared messages.
job cm-own-matching pass "ok pvars np=2" "${own[@]}" -- -p -u 300 -k
# The defaults on one node: the engine's rings, single copy for 1 MiB.
job cm-onnode pass "ok pvars np=2" "${onnode[@]}" -- -r "${copy[@]}" -u 50
job ob1-rings pass "ok pvars np=2" "${ob1_rings[@]}" -- -r "${copy[@]}"
job osc-emulated pass "ok pvars np=2" "${osc[@]}" --mca btl_efa_rma_mode emulated -- -w -i 50
# The listing (README): every variable, the last of the table too.
job list pass "common_efa_failed_over           counter" "${ob1_rings[@]}" -- -l
# The controls: each rise asked of traffic that did not take that path must
# fail with its own message, or the checks above prove nothing.
for what in "common_efa_completions rose by" "provider sends rose by 0" \
    "provider receives rose by 0"; do
    job "ob1-rings-control ($what)" fail "$what" "${ob1_rings[@]}" -- -p
done
job ob1-unexpected-control fail "unexpected messages rose by 0" "${ob1_rings[@]}" -- -u 50
job cm-provider-rings-control fail "ring frames rose by" "${cm_provider[@]}" -- -r
if [ ${#copy[@]} -gt 0 ]; then
    job single-copy-control fail "single copies rose by 0" "${onnode[@]}" \
        --mca mtl_efa_onnode_single_copy none -- -c
fi
# Two NICs per process on this host (its interface and the loopback one,
# each rank alone on a pretend node): 1 MiB each way, fetched by gets that
# btl_efa stripes over both (or own matching's reads, one of them after
# its request arrived unexpected, or the provider's matching's read
# rendezvous); the control stripes nothing.
iface=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
mapfile -t pretend < <("$(dirname "$0")/pretend-nodes.sh" "${TMPDIR:-/tmp}/efa-pvars-nodes" 1)
rails=(--bind-to none --mca pml ob1 --mca btl efa,self --mca btl_efa_provider_include "tcp;ofi_rxm"
    --mca common_efa_nic_include "${iface:-eth0},lo" "${pretend[@]}")
job ob1-rails pass "ok pvars np=2" "${rails[@]}" --mca common_efa_stripe_min 4096 -- -s
job ob1-rails-control fail "common_efa_striped rose by 0" "${rails[@]}" \
    --mca common_efa_stripe_min 0 -- -s
own_rails=("${own[@]}" --bind-to none --mca common_efa_nic_include "${iface:-eth0},lo" "${pretend[@]}")
job own-rails pass "ok pvars np=2" "${own_rails[@]}" --mca common_efa_stripe_min 4096 -- -s
cm_rails=("${cm_provider[@]}" --bind-to none --mca common_efa_nic_include "${iface:-eth0},lo"
    "${pretend[@]}")
job cm-rails pass "ok pvars np=2" "${cm_rails[@]}" --mca common_efa_stripe_min 4096 -- -s
job coalesced-control fail "no frame of 300 sent back to back was coalesced" "${own[@]}" \
    --mca mtl_efa_coalesce_max 1 -- -p -u 300 -k
job osc-native-control fail "emulated requests served rose by 0" "${osc[@]}" \
    --mca btl_efa_rma_mode native -- -w -i 50

echo "$pass passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
