#!/usr/bin/env bash
# One on-node inbox per process with both components on one node: pml cm +
# mtl_efa and osc rdma + btl_efa (both on-node channels on, provider
# tcp;ofi_rxm), 3 processes, the inbox directory private to the job
# (common_efa_onnode_dir).  tests/mpi/node_files checks, while the job
# runs, that the directory holds exactly one inbox file per process; this
# script then checks that the job left the directory empty.  The second
# case does the same with btl_efa_debug_fail_inbox_rank 1 (rank 1's BTL
# channel off, its inbox still made for mtl_efa's engine).  The third
# removes every inbox file right after MPI_Init (node_files ... removed):
# both channels must still carry the job, through the owners' descriptors,
# and say so.
# Prints "N passed, N failed".
#   run-node-files-test.sh <component-dir> <mpi-test-bin-dir>
set -u
# shellcheck source=runner-args.sh
. "$(dirname "$0")/runner-args.sh"
pass=0
fail=0

# case NAME [extra mpirun args...]
case_run() {
    local name=$1
    shift
    local dir out rc why=""
    dir=$(mktemp -d /tmp/efa-node-files.XXXXXX)
    out=$(timeout 120 mpirun -np 3 --oversubscribe --mca mca_base_component_path "$path" \
        --mca pml cm --mca mtl efa --mca osc rdma --mca btl efa,self \
        --mca common_efa_provider_include "tcp;ofi_rxm" \
        --mca mtl_efa_onnode_channel shm --mca common_efa_onnode_dir "$dir" \
        --mca common_efa_verbose 1 "$@" "$bindir/node_files" "$dir" ${NODE_FILES_ARG:-} 2>&1)
    rc=$?
    if [ $rc -ne 0 ] || ! grep -q "^ok node_files" <<<"$out"; then
        why="the job failed (exit $rc)"
    elif ! grep -q "mtl:efa: on-node channel: inbox $dir/efa_node\." <<<"$out"; then
        why="mtl_efa did not say its channel is in $dir"
    elif [ "$name" != btl-fails-on-rank-1 ] &&
        ! grep -qE "btl:efa: on-node channel: [1-9][0-9]* frames sent" <<<"$out"; then
        why="btl_efa's channel carried nothing (the test would not see its file)"
    elif [ -n "${NODE_FILES_ARG:-}" ] &&
        ! grep -q "reached it through the peer's own descriptor" <<<"$out"; then
        why="no process said it reached a removed inbox through its owner's descriptor"
    elif [ -n "$(ls -A "$dir")" ]; then
        why="files left in $dir after the job: $(ls -A "$dir" | tr '\n' ' ')"
    fi
    rm -rf "$dir"
    if [ -n "$why" ]; then
        echo "FAIL node-files/$name: $why"
        grep -E "FAIL|rror|node_files|on-node" <<<"$out" | head -20 | sed 's/^/    /'
        fail=$((fail + 1))
    else
        echo "PASS node-files/$name"
        pass=$((pass + 1))
    fi
}

case_run both-channels --mca btl_efa_onnode_channel shm
case_run btl-fails-on-rank-1 --mca btl_efa_debug_fail_inbox_rank 1
NODE_FILES_ARG=removed case_run files-removed-after-init --mca btl_efa_onnode_channel shm

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
