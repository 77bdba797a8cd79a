# Cases of run-param-tests.sh (sourced: its runner, ob1 and cm): the
# on-node channel's values, the ring geometry's bounds and a directory the
# user named that cannot be used; windows and sizes whose absurd values
# ("-1" reads as the largest size_t) would change the behaviour without a
# word.
# shellcheck shell=bash disable=SC2154
# The on-node channel: unknown value, bad ring geometry, and "shm" (not
# "auto") where the rings cannot be created.
expect_failure bad-onnode-channel "Allowed:   auto, shm, none" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_onnode_channel vader
expect_failure bad-onnode-slots "must be a power of two" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_onnode_slots 48
# (two processes: btl_efa makes the channel once it has a peer on the node)
JOB_NP=2 expect_failure onnode-channel-unavailable "could not be created" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_onnode_channel shm \
    --mca btl_efa_onnode_dir /nonexistent/dir
# mtl_efa's on-node path: the same three, and an unknown single-copy mode.
expect_failure mtl-bad-onnode-channel "Allowed:   auto, shm, none" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_channel rings
expect_failure mtl-bad-onnode-slots "must be a power of two" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_slots 0
expect_failure mtl-bad-onnode-slot-size "must be a power of two" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_slot_size 100
expect_failure mtl-bad-single-copy "Allowed:   auto, none" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_single_copy cma
expect_failure mtl-onnode-channel-unavailable "could not create its shared-memory inbox" \
    "${cm[@]}" --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_channel shm \
    --mca mtl_efa_onnode_dir /nonexistent/dir
# A ring of more slots than the inbox allows (was taken, then refused by
# the inbox's creation with EINVAL and no word of the parameter).
expect_failure onnode-slots-above-65536 "power of two from 2 to 65536" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_onnode_slots 131072
# A directory the user named that cannot be used, under "auto": said (was
# silent; only a file of someone else's or a full file system were).
JOB_NP=2 expect_output onnode-dir-named-unusable "cannot use its shared-memory inbox" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_dir /nonexistent/dir
# Processes of one node with different slot sizes (each its own value, as
# an MPMD job may give them): the process of larger slots sends what does
# not fit the other's through the provider (btl_efa, said at verbose 1)
# or cuts its frames to them (mtl_efa); a message that fit the larger
# slots alone used to wait for room in the smaller for ever.
slots_differ=(-x OMPI_MCA_common_efa_onnode_slot_size=16384 "$prog" "${prog_args[@]}" : -np 1
    -x OMPI_MCA_common_efa_onnode_slot_size=4096)
JOB_NP=1 expect_output onnode-slot-sizes-differ "longer messages to it go by the provider" \
    "${ob1[@]}" --mca btl_efa_provider_include shm --mca common_efa_verbose 1 \
    "${slots_differ[@]}"
JOB_NP=1 expect_output mtl-onnode-slot-sizes-differ "^ok pingpong" "${cm[@]}" \
    --mca mtl_efa_provider_include shm "${slots_differ[@]}"
# A frame written in a process's own ring naming another process (the
# destination itself) as its sender: dropped, said once, the job goes on
# (it was handed to ob1 as the receiver's own message).
expect_output btl-ring-forged-sender "named another process as its sender: dropped" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_debug_forge_src 5 --mca common_efa_verbose 1

# Windows and sizes: each absurd value refused with its range.
expect_failure btl-send-window-above-16-bits "0 (auto) to 65535 messages" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_send_window 70000
expect_failure btl-send-window-negative "0 (auto) to 65535 messages" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_send_window -3
expect_failure btl-rma-window-zero "1 to 1024 chunks" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_rma_window 0
expect_failure btl-rma-window-huge "1 to 1024 chunks" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_rma_window 2147483647
expect_failure btl-inplace-min-minus-one "0 (auto) to 2^30 bytes" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_inplace_min -1
expect_failure btl-rma-max-transfer-minus-one "4096 to 2^40 bytes" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_rma_max_transfer -1
expect_failure mtl-net-read-min-minus-one "0 (never read) to 2^40 bytes" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_net_read_min -1
# Queue sizes beyond the provider's (shm's are 1024): named as such, not
# as a provider without what the components need (every try failed).
expect_failure tx-size-above-provider "Its queues: 1024 sends" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_tx_size 4096
# Test hooks: a value outside what they know is refused, not a test that
# quietly tests nothing.
expect_failure debug-cma-refuse-two "0 (off) or 1" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_debug_cma_refuse 2
expect_failure debug-forge-unknown-three "0 (off), 1 or 2" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_debug_forge_unknown 3
expect_failure debug-fail-inbox-rank-below-off "-1 (off) to 1000000000" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_debug_fail_inbox_rank -5
expect_failure debug-lose-answers-five "0 (off) to 4" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_debug_lose_answers 5

# Limits the provider caps: the report says the value that applies, not
# the one asked (an MTU of 4096 under efa-direct's rules takes neither the
# 8 KiB eager default nor 4 KiB packing whole).
expect_output net-eager-capped-said "eager up to [0-9]+ bytes \(the provider's message size caps net_eager_max\).* packing up to [0-9]+ bytes \(capped by the provider's message size\)" \
    "${cm[@]}" --mca mtl_efa_provider_include tcp --mca mtl_efa_onnode_channel none \
    --mca common_efa_force_direct_mode 1 --mca common_efa_direct_mode_mtu 4096 \
    --mca common_efa_verbose 1

# btl_efa's init failing once its deadline ticks are added, while mtl_efa
# keeps the core under pml cm: the ticks and the message handler go with
# it (the MTL's progress would call them in the unloaded component), and
# the job runs on for a few seconds of ticks.
prog_args=(-s 4M -i 1500)
JOB_NP=2 expect_output btl-init-failed-mtl-runs-on "ok pingpong" --mca pml cm,ob1 --mca mtl efa \
    --mca btl efa,self --mca mtl_efa_provider_include "tcp;ofi_rxm" \
    --mca btl_efa_provider_include "tcp;ofi_rxm" --mca btl_efa_debug_fail_module_init 1
expect_failure debug-fail-module-init-two "0 (off) or 1" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_debug_fail_module_init 2
prog_args=(-s 4M -i 5)

# The loopback interface in the exclude list: excluded, not refused as an
# unknown NIC (an unnamed loopback is skipped before the lists are read).
expect_output nic-exclude-loopback "report: local rank [01]: NIC " "${cm[@]}" \
    --mca mtl_efa_provider_include "tcp;ofi_rxm" --mca common_efa_nic_exclude lo \
    --mca common_efa_verbose 1

# mtl_efa refused at MPI_Init (a bad parameter) while btl_efa carries the
# job on the same core: nothing of mtl_efa stays registered with the core
# once its library is unloaded (its lost-peer sweep did, and the job
# crashed in the core's deadline tick).
JOB_NP=2 expect_output mtl-refused-btl-carries "The EFA MTL will not be used" \
    --mca mtl efa --mca btl efa,self --mca mtl_efa_provider_include shm \
    --mca btl_efa_provider_include shm --mca mtl_efa_onnode_channel bogus

# Processes of another job (MPI_Comm_spawn): messages both ways with the
# child, checked, a disconnect, and the child's exit while the parents
# stay in MPI for three peer timeouts.  A process of another job that left
# after a disconnect is no loss (btl_efa's watch aborted the parents).
prog=$bindir/spawn
prog_args=(-s 1M -w 6)
JOB_NP=2 expect_output spawn-ob1-child-leaves "ok spawn" "${ob1[@]}" \
    --mca btl_efa_provider_include "tcp;ofi_rxm" --mca common_efa_peer_timeout 2
JOB_NP=2 expect_output spawn-cm-child-leaves "ok spawn" "${cm[@]}" \
    --mca mtl_efa_provider_include "udp;ofi_rxd" --mca common_efa_peer_timeout 2
JOB_NP=2 expect_output spawn-cm-own-child-leaves "ok spawn" "${cm[@]}" \
    --mca mtl_efa_provider_include "tcp;ofi_rxm" --mca mtl_efa_matching own \
    --mca common_efa_peer_timeout 2
prog=$bindir/pingpong
prog_args=(-s 4M -i 5)
