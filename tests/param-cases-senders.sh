# Cases of run-param-tests.sh (sourced: its runner and ob1): messages
# whose header names another process than the one that sent them.
# shellcheck shell=bash disable=SC2154
# Who sent it: a fragment whose header names another process than the one
# the provider reports as its source is dropped, said once, and the job
# goes on (the test setting sends the 5th injected fragment a second time,
# naming the receiver itself as the sender; before the check, the copy was
# handed to ob1 as the receiver's own message).
expect_failure debug-forge-src-negative "Parameter: btl_efa_debug_forge_src" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_debug_forge_src -1
expect_output btl-forged-sender "Came from: +rank|Came from: +AV entry" "${ob1[@]}" \
    --mca btl_efa_provider_include "tcp;ofi_rxm" --mca btl_efa_onnode_channel none \
    --mca btl_efa_debug_forge_src 5
# The same copy naming a rank beyond the job's: no endpoint can be made
# for it, and it is dropped (it was handed to ob1, which matched it).
expect_output btl-forged-unknown-sender "btl:efa: a message naming no process of this job" \
    "${ob1[@]}" --mca btl_efa_provider_include "tcp;ofi_rxm" --mca btl_efa_onnode_channel none \
    --mca btl_efa_debug_forge_src 5 --mca btl_efa_debug_forge_unknown 1 --mca common_efa_verbose 1
# The same naming a process of a job the runtime does not know: its
# lookup, in the progress call, waits a bounded time (a runtime may defer
# such a question until that job appears), and the copy is dropped (Open
# MPI 5 maps the unknown job id onto this job's namespace: the lookup
# finds this job's rank, and the sender check drops it).
expect_output btl-forged-foreign-sender "btl:efa: a message naming no process of this job|from another process than the one it" \
    "${ob1[@]}" --mca btl_efa_provider_include "tcp;ofi_rxm" --mca btl_efa_onnode_channel none \
    --mca btl_efa_debug_forge_src 5 --mca btl_efa_debug_forge_unknown 2 --mca common_efa_verbose 1
