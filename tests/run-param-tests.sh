#!/usr/bin/env bash
# Bad input to the components: each case must end quickly with the clear
# message from help-common-efa.txt, a non-zero exit, and no crash.  And the
# default on a machine without EFA: the MTL steps aside silently.
#   run-param-tests.sh <component-dir> <mpi-test-bin-dir>
set -u
# shellcheck source=runner-args.sh
. "$(dirname "$0")/runner-args.sh"
prog=$bindir/pingpong
# Sizes up to 4 MiB: these cases are about parameters and what is said; the
# default 64 MiB over the target-executed path took more than the minute
# below on a loaded machine.
prog_args=(-s 4M -i 5)
pass=0
fail=0

# run_job mpirun-args...: sets OUT and RC of a run of the program, with
# JOB_NP processes (default 2).
run_job() {
    local t0=$SECONDS
    OUT=$(timeout 60 mpirun -np "${JOB_NP:-2}" --oversubscribe --mca mca_base_component_path "$path" \
        "$@" "$prog" "${prog_args[@]}" 2>&1)
    RC=$?
    JOB_SECS=$((SECONDS - t0))
}

# expect_failure NAME "expected text" mpirun-args...: one process, unless
# JOB_NP says otherwise: every process checks its parameters at MPI_Init,
# and a second one would only double the cost of the refusal.
expect_failure_now() {
    local name=$1 want=$2
    shift 2
    JOB_NP=${JOB_NP:-1} run_job "$@"
    if [ $RC -eq 0 ]; then
        echo "FAIL params/$name: the job succeeded but should have been refused"
        fail=$((fail + 1))
    elif [ $RC -eq 124 ]; then
        echo "FAIL params/$name: hung (timeout)"
        fail=$((fail + 1))
    elif grep -qiE "segmentation fault|bus error|floating point exception|illegal instruction|core dumped|signal (4|6|7|8|11)([^0-9]|$)" <<<"$OUT"; then
        echo "FAIL params/$name: crashed"
        fail=$((fail + 1))
    elif ! grep -qF -- "$want" <<<"$OUT"; then
        echo "FAIL params/$name: message \"$want\" not printed; got:"
        head -20 <<<"$OUT" | sed 's/^/    /'
        fail=$((fail + 1))
    else
        echo "PASS params/$name (${JOB_SECS}s)"
        pass=$((pass + 1))
    fi
}

# expect_output NAME "regex" mpirun-args...: the job must succeed and print
# a line matching the (extended) regex.
expect_output_now() {
    local name=$1 want=$2
    shift 2
    run_job "$@"
    if [ $RC -ne 0 ]; then
        echo "FAIL params/$name: exit $RC"
        head -20 <<<"$OUT" | sed 's/^/    /'
        fail=$((fail + 1))
    elif ! grep -qE -- "$want" <<<"$OUT"; then
        echo "FAIL params/$name: no line matches \"$want\"; got:"
        grep "efa" <<<"$OUT" | head -20 | sed 's/^/    /'
        fail=$((fail + 1))
    else
        echo "PASS params/$name (${JOB_SECS}s)"
        pass=$((pass + 1))
    fi
}

# The cases run in the background, several at a time: a refusal is a
# process that fails in MPI_Init and a runtime that takes 1.8 s to end the
# job, almost all of it waiting, so up to PARAM_JOBS (default 4) of them
# run at once; a case whose job must run (expect_output, JOB_NP=2 cases)
# starts beside at most one other, as jobs that move data contend for the
# cores (udp;ofi_rxd stalls past the minute under that load).  Each case's
# lines go to a file of its own and are printed in the cases' order
# (show_done), and counted there.
PARAM_JOBS=${PARAM_JOBS:-4}
[[ $PARAM_JOBS =~ ^[1-9][0-9]*$ ]] || { echo "run-param-tests: bad PARAM_JOBS '$PARAM_JOBS'"; exit 2; }
casedir=$(mktemp -d /tmp/param-tests.XXXXXX)
trap 'rm -rf "$casedir"' EXIT
ncase=0 nshown=0
# show_done: the lines of the cases finished so far, in order, stopping at
# the first one still running
show_done() {
    local f
    while [ $nshown -lt $ncase ] && [ -f "$casedir/$((nshown + 1)).done" ]; do
        nshown=$((nshown + 1))
        f=$casedir/$nshown
        cat "$f"
        pass=$((pass + $(grep -c '^PASS params/' "$f")))
        fail=$((fail + $(grep -c '^FAIL params/' "$f")))
    done
}
# param_wait: every case finished and shown
param_wait() {
    wait
    show_done
}
in_background() { # MAX-BESIDE FUNCTION ARGS...: FUNCTION once fewer than MAX-BESIDE cases run
    local beside=$1 n
    shift
    while [ "$(jobs -rp | wc -l)" -ge "$beside" ]; do
        wait -n
        show_done
    done
    ncase=$((ncase + 1))
    n=$ncase
    ( "$@" >"$casedir/$n" 2>&1; : >"$casedir/$n.done" ) &
    show_done
}
# (a job that must run: beside at most one other case, never more than
# PARAM_JOBS in all)
two=$((PARAM_JOBS < 2 ? PARAM_JOBS : 2))
expect_failure() {
    local beside=$PARAM_JOBS
    [ "${JOB_NP:-1}" -gt 1 ] && beside=$two
    in_background "$beside" expect_failure_now "$@"
}
expect_output() { in_background "$two" expect_output_now "$@"; }

cm=(--mca pml cm --mca mtl efa)
expect_failure unknown-provider "does not know" "${cm[@]}" --mca mtl_efa_provider_include "tpc;ofi_rxm"
expect_failure conflicting-lists "only one of them" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_provider_exclude tcp
expect_failure empty-list-item "empty item" "${cm[@]}" --mca mtl_efa_provider_include "shm,,tcp"
# A mistyped exclusion would let in the provider it meant to keep out.
expect_failure unknown-excluded-provider "asked to exclude a libfabric provider" "${cm[@]}" \
    --mca mtl_efa_provider_exclude "tpc;ofi_rxm"
# The progress loop reads at most 64 completions per CQ read: more is refused, not cut silently.
expect_failure progress-batch-above-64 "outside its range" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_progress_batch 65
# (a test setting too: 0 to 2)
expect_failure fake-refuse-post-above-2 "outside its range" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_debug_fake_device_refuse_post 3
expect_failure fake-piece-below-a-page "outside its range" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_debug_fake_device_piece 100
expect_failure contexts-zero "outside its range" "${cm[@]}" --mca mtl_efa_provider_include shm \
    --mca mtl_efa_num_contexts 0
expect_failure contexts-huge "outside its range" "${cm[@]}" --mca mtl_efa_provider_include shm \
    --mca common_efa_num_contexts 100000
expect_failure nics-per-proc-negative "outside its range" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_nics_per_proc -1
expect_failure negative-queue "outside its range" "${cm[@]}" --mca mtl_efa_provider_include shm \
    --mca common_efa_tx_size -4
# The efa provider's switches: bad values are refused like the others.
expect_failure bad-provider-shm "auto, on, off or provider" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_provider_shm yes
expect_failure bad-hmem "auto, on or off" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_hmem yes
expect_failure bad-hmem-vmm "auto, on or off" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_hmem_vmm always
expect_failure bad-provider-cuda-calls "auto, on or off" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_provider_cuda_calls never
expect_failure rnr-retry-huge "outside its range" "${cm[@]}" --mca mtl_efa_provider_include shm \
    --mca common_efa_rnr_retry 8
# shellcheck source=param-cases-nics.sh
. "$(dirname "$0")/param-cases-nics.sh"
# Own matching: an unknown choice and numbers out of their ranges.
expect_failure bad-matching "Allowed:   auto, provider, own" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_matching tagged
expect_failure net-window-zero "Parameter: mtl_efa_net_window" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_matching own --mca mtl_efa_net_window 0
expect_failure net-small-window-zero "Parameter: mtl_efa_net_small_window" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_matching own --mca mtl_efa_net_small_window 0
expect_failure tiny-mtl-coalesce-bytes "0, or 64 to 60000" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_matching own --mca mtl_efa_coalesce_bytes 7
expect_failure tiny-device-piece "0, or 4096 to 1073741824" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_device_piece 100
expect_failure huge-net-eager "Parameter: mtl_efa_net_eager_max" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_net_eager_max 1000000
expect_failure debug-lose-negative "Parameter: mtl_efa_debug_lose_net" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_debug_lose_net -1
# A provider message lost between nodes (as ofi_rxd loses them under load;
# the test setting takes the 5th arrival as a failed receive): the job ends
# at once with the reason, no hang (before: the receiver's stream waited
# for ever for the lost message).  (Two processes: a message must travel.)
JOB_NP=2 expect_failure own-message-lost "A message of this job that travelled between nodes" "${cm[@]}" \
    --mca mtl_efa_provider_include "tcp;ofi_rxm" --mca mtl_efa_matching own \
    --mca mtl_efa_onnode_channel none --mca mtl_efa_debug_lose_net 5
expect_output own-matching-said "mtl:efa: matching: own" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_matching own --mca common_efa_verbose 1
# The default (auto): own matching where it was measured to pay and on
# nodes that offer several rails (efa_core_auto_matching, unit-tested with
# efa's cases), the provider's elsewhere; the choice and its reason said at
# verbose 1.
expect_output matching-auto-own-on-rxm "mtl:efa: matching: own \\(auto: on tcp;ofi_rxm" "${cm[@]}" \
    --mca mtl_efa_provider_include "tcp;ofi_rxm" --mca common_efa_verbose 1
expect_output matching-auto-provider-on-shm "mtl:efa: matching: provider \\(auto: one rail, and own matching is not measured on shm" \
    "${cm[@]}" --mca mtl_efa_provider_include shm --mca common_efa_verbose 1
# Processes that match differently cannot talk (a tagged message against
# an untagged frame): refused at MPI_Init with a message, not a job that
# waits for ever.  Rank 0 own, rank 1 the provider's.
JOB_NP=2 expect_failure matching-differs "Two processes of this job match MPI messages differently" \
    "${cm[@]}" --mca mtl_efa_provider_include "tcp;ofi_rxm" bash -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then m=own; else m=provider; fi
     OMPI_MCA_mtl_efa_matching=$m exec "$0" "$@"'
expect_output matching-provider-said "mtl:efa: matching: provider \\(mtl_efa_matching provider" \
    "${cm[@]}" --mca mtl_efa_provider_include "udp;ofi_rxd" --mca mtl_efa_matching provider \
    --mca common_efa_verbose 1
# The forced efa-direct-like mode: the MTU's bounds; no tags, so the MTL
# matches itself even when left at (or told) provider matching; prog_args'
# 4 MiB messages travel in pieces of at most the MTU.
expect_failure direct-mtu-tiny "Parameter: common_efa_direct_mode_mtu" "${cm[@]}" \
    --mca mtl_efa_provider_include tcp --mca common_efa_force_direct_mode 1 \
    --mca common_efa_direct_mode_mtu 512
expect_failure direct-mtu-huge "Parameter: common_efa_direct_mode_mtu" "${cm[@]}" \
    --mca mtl_efa_provider_include tcp --mca common_efa_direct_mode_mtu 65537
expect_output direct-mode-matches-itself "mtl:efa: matching: own, as the provider has no tags" \
    "${cm[@]}" --mca mtl_efa_provider_include tcp --mca mtl_efa_onnode_channel none \
    --mca common_efa_force_direct_mode 1 --mca common_efa_direct_mode_mtu 1024 \
    --mca common_efa_verbose 1
expect_output direct-mode-told-provider "asks for the provider's tag matching, but the provider" \
    "${cm[@]}" --mca mtl_efa_provider_include tcp --mca mtl_efa_onnode_channel none \
    --mca common_efa_force_direct_mode 1 --mca mtl_efa_matching provider
# An MTU that is not a multiple of 8 (any value from 1024 is valid): every
# size around the eager limit, synchronous and standard, and the timed
# steps' 100 KiB streamed in pieces.  At 1025, a 969-byte MPI_Issend took a
# frame whose padding made the message 1032 bytes: refused, and the peer
# was declared unreachable.
prog=$bindir/ssend
prog_args=(-d 150 -f 900 -n 200 -s 100K)
for mtu in 1025 1031; do
    expect_output "direct-mode-odd-mtu-$mtu-cm" "in-order=200" "${cm[@]}" \
        --mca mtl_efa_provider_include "tcp;ofi_rxm" --mca mtl_efa_onnode_channel none \
        --mca common_efa_force_direct_mode 1 --mca common_efa_direct_mode_mtu "$mtu"
    expect_output "direct-mode-odd-mtu-$mtu-ob1" "in-order=200" --mca pml ob1 \
        --mca btl self,efa --mca btl_efa_provider_include "tcp;ofi_rxm" \
        --mca btl_efa_onnode_channel none --mca common_efa_force_direct_mode 1 \
        --mca common_efa_direct_mode_mtu "$mtu"
done
prog=$bindir/pingpong
prog_args=(-s 4M -i 5)
expect_failure bad-force-emulated "read, write, atomics" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_force_emulated reads
# The peer deadline: negative would never be met, beyond a day is a typo.
expect_failure peer-timeout-negative "outside its range" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_peer_timeout -5
expect_failure peer-timeout-huge "outside its range" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_peer_timeout 86401
# The process's GPU: a word that is no setting is refused on any node
# (whether the node has that GPU is said where it has several NICs).
expect_failure gpu-not-a-setting "auto, none, an accelerator's index" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_gpu cuda0
# A lost rail's retry: seconds, 0 (never) to an hour.
expect_failure rail-retry-negative "outside its range" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_rail_retry -1
# The provider poll's pacing: microseconds, 0 (every call) to a second.
expect_failure net-poll-negative "outside its range" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_net_poll_interval -1
expect_failure net-poll-huge "outside its range" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca mtl_efa_net_poll_interval 1000001
expect_failure net-poll-max-negative "outside its range" "${cm[@]}" \
    --mca mtl_efa_provider_include shm --mca common_efa_net_poll_interval_max -1
if ! fi_info -p efa >/dev/null 2>&1; then
    expect_failure no-efa-device "found no EFA device" "${cm[@]}"
fi
# btl_efa's one-sided modes: unknown values, and native where the provider
# cannot (ofi_rxd's atomics have a loopback defect, see efa_rma.h).
ob1=(--mca pml ob1 --mca btl efa,self)
expect_failure bad-rma-mode "btl_efa_rma_mode" "${ob1[@]}" --mca btl_efa_provider_include shm \
    --mca btl_efa_rma_mode fast
expect_failure bad-atomic-mode "Allowed:   auto, native, emulated" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_atomic_mode Native
# An empty value of a mode (or of provider_shm) means its default, auto.
expect_output empty-modes-are-auto "btl:efa: put native \\(provider RMA\\)" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_rma_mode "" --mca btl_efa_atomic_mode "" \
    --mca btl_efa_single_copy "" --mca common_efa_provider_shm "" --mca common_efa_hmem "" \
    --mca common_efa_hmem_vmm "" --mca common_efa_verbose 1
expect_failure native-atomics-unavailable "cannot do" "${ob1[@]}" \
    --mca btl_efa_provider_include "udp;ofi_rxd" --mca btl_efa_atomic_mode native
# A native transfer limit of one byte would cut a large put into as many
# operations (and once counted them in 32 bits): refused with its range.
expect_failure tiny-rma-max-transfer "Parameter: btl_efa_rma_max_transfer" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_rma_max_transfer 1
# One-sided requests must fail after a bounded time, never wait for ever.
expect_failure zero-rma-timeout "Allowed:   1 to 86400 seconds" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_rma_timeout 0
# Small put/get through the rings: a limit past what a slot could ever
# hold, and a wait of zero (every request taken back at once) are refused.
expect_failure huge-onnode-rma-max "0 (off) to 1048576 bytes" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_onnode_rma_max 2000000000
expect_failure zero-onnode-rma-wait "1 to 1000000 microseconds" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_onnode_rma_wait 0
# Coalescing: a batch too small to hold two messages, or of one message.
expect_failure tiny-coalesce-bytes "0 (off) or 64 to 1048576 bytes" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_coalesce_bytes 5
expect_failure one-message-batches "Parameter: btl_efa_coalesce_max" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_coalesce_max 1
# A message of btl_efa's lost by the provider (as ofi_rxd loses them under
# loss; the test setting takes the 5th arrival as a failed receive): the
# job ends at once with the reason, no hang (before: the receive error was
# dropped at verbose 1 and ob1 waited for ever for the lost fragment).
expect_failure debug-lose-recv-negative "Parameter: btl_efa_debug_lose_recv" "${ob1[@]}" \
    --mca btl_efa_provider_include shm --mca btl_efa_debug_lose_recv -1
JOB_NP=2 expect_failure btl-message-lost "A message of this job that arrived through the provider was lost" \
    "${ob1[@]}" --mca btl_efa_provider_include "tcp;ofi_rxm" --mca btl_efa_onnode_channel none \
    --mca btl_efa_debug_lose_recv 5
# Who sent it: the forged-sender cases (a file of their own, sharing
# this one's runner).
# shellcheck source=param-cases-senders.sh
. "$(dirname "$0")/param-cases-senders.sh"
# The on-node channel's and the windows' and sizes' ranges (cases in a file
# of their own, sharing this one's runner).
# shellcheck source=param-cases-ranges.sh
. "$(dirname "$0")/param-cases-ranges.sh"

# The verbose-1 report: libfabric and API version, provider, MR mode and
# device RDMA from local rank 0, and each rank's NIC.
rxm=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm" --mca common_efa_verbose 1)
expect_output report-versions "report: libfabric [0-9]+\.[0-9]+ \(API [0-9]+\.[0-9]+ asked\), provider tcp;ofi_rxm" "${rxm[@]}"
expect_output report-rdma-and-shm "report: MR mode .*; RDMA read .*provider shm" "${rxm[@]}"
expect_output report-nic-per-rank "report: local rank 1: NIC " "${rxm[@]}"
expect_output report-onnode "report: mtl_efa: on-node channel" "${rxm[@]}"
# The switches forced onto a stand-in (the efa provider needs a device): each
# is tried, refused by tcp;ofi_rxm (or absent from this libfabric), said,
# and the job runs on the provider's defaults.
forced=("${rxm[@]}" --mca common_efa_force_efa_options 1 --mca common_efa_rnr_retry 3
    --mca common_efa_provider_shm off --mca common_efa_provider_cuda_calls off)
expect_output forced-rnr-retry "efa switch: (FI_OPT_EFA_RNR_RETRY: 3 refused|RNR retry not set: this libfabric has no)" "${forced[@]}"
expect_output forced-provider-shm "efa switch: (FI_OPT_SHARED_MEMORY_PERMITTED: shm off refused|provider shm off not set: this libfabric has no FI_OPT_SHARED_MEMORY_PERMITTED)" "${forced[@]}"
expect_output forced-provider-cuda-calls "efa switch: (FI_OPT_CUDA_API_PERMITTED: provider CUDA calls off refused|provider CUDA calls off not set: this libfabric has no FI_OPT_CUDA_API_PERMITTED)" "${forced[@]}"
expect_output forced-device-rdma "efa switch: (RDMA read: the provider does not say|device RDMA unknown: this libfabric has no FI_OPT_EFA_EMULATED_)" "${forced[@]}"
# provider_shm auto: off while our on-node paths carry node-local traffic,
# on when one of them is off.  (Where this libfabric lacks the option or the
# provider refuses it, the line says that instead; either way it names the decision.)
auto_shm=("${rxm[@]}" --mca common_efa_force_efa_options 1)
expect_output provider-shm-auto-off "provider shm off|shm off refused" "${auto_shm[@]}"
expect_output provider-shm-auto-on "provider shm on|shm on refused" "${auto_shm[@]}" --mca mtl_efa_onnode_channel none
# Device RDMA decides btl_efa's auto modes: with reads by the device and
# writes and atomics emulated (forced), get is native, put and atomics are
# btl_efa's own.
ob1rxm=(--mca pml ob1 --mca btl efa,self --mca btl_efa_provider_include "tcp;ofi_rxm"
    --mca common_efa_verbose 1 --mca btl_efa_single_copy none)
expect_output device-rdma-decides "btl:efa: put executed by the target \(the provider would emulate it: no device RDMA\), get native \(provider RMA\).*atomics emulated .*the provider emulates atomics" \
    "${ob1rxm[@]}" --mca common_efa_force_emulated write,atomics
expect_output device-rdma-all-emulated "btl:efa: put executed by the target \(the provider would emulate it: no device RDMA\), get executed by the target \(the provider would emulate it" \
    "${ob1rxm[@]}" --mca common_efa_force_emulated read,write,atomics
expect_output device-rdma-unknown-keeps-native "btl:efa: put native \(provider RMA\), get native \(provider RMA\)" "${ob1rxm[@]}"
# btl_efa_flags asking device puts/gets (no backend here), async device copies: dropped, said
expect_output flags-device-dropped "btl:efa: btl_efa_flags: 0x3c00 dropped \(device memory: no device backend here\)" \
    "${ob1rxm[@]}" --mca btl_efa_flags 0x3c0f
# btl_efa's eager limit: 16 KiB on one node and on tcp;ofi_rxm; between
# nodes on udp;ofi_rxd every fragment up to max_send_size goes eager
# (docs/PERFORMANCE.md, "ob1 + btl_efa at 16 KiB"), unless the user set the limit.
pn=$(mktemp -d)
mapfile -t apart < <(bash "$(dirname "$0")/pretend-nodes.sh" "$pn" 1)
# (the limit is said at startup: a short pingpong, since 4 MiB over
# ofi_rxd between pretend nodes takes 20 s)
long_args=("${prog_args[@]}")
prog_args=(-s 64K -i 5)
ob1rxd=(--mca pml ob1 --mca btl efa,self --mca btl_efa_provider_include "udp;ofi_rxd"
    --mca common_efa_verbose 1)
expect_output eager-rxd-one-node "btl:efa: provider udp;ofi_rxd; eager 16384 \(default\)" "${ob1rxd[@]}"
expect_output eager-rxd-between-nodes "btl:efa: provider udp;ofi_rxd; eager 61440 \(max send size: udp;ofi_rxd and the job spans nodes\)" \
    "${ob1rxd[@]}" "${apart[@]}"
expect_output eager-rxd-user-wins "btl:efa: provider udp;ofi_rxd; eager 32768 \(set by the user\)" \
    "${ob1rxd[@]}" "${apart[@]}" --mca btl_efa_eager_limit 32768
expect_output eager-above-max-send-said "eager 61440 \(set by the user: 1000000 capped at the max send size\)" \
    "${ob1rxd[@]}" --mca btl_efa_eager_limit 1000000
expect_output eager-rxm-between-nodes "btl:efa: provider tcp;ofi_rxm; eager 16384 \(default\)" \
    "${ob1rxm[@]}" "${apart[@]}"
# How long an answer of a target-executed request is awaited: the peer
# deadline's unless the user set it (a busy target is no lost one).
expect_output rma-timeout-follows-peer-deadline "emulated rma chunk [0-9]+, answers awaited 45 s" \
    "${ob1rxd[@]}" --mca common_efa_peer_timeout 45
expect_output rma-timeout-deadline-off "answers awaited 86400 s" \
    "${ob1rxd[@]}" --mca common_efa_peer_timeout 0
expect_output rma-timeout-user-wins "answers awaited 7 s" \
    "${ob1rxd[@]}" --mca common_efa_peer_timeout 45 --mca btl_efa_rma_timeout 7
prog_args=("${long_args[@]}")
# Own matching over two NICs (this host's interface and lo, processes on
# pretend nodes): the peer's messages on the second NIC, whose third
# completed send is taken as failed although it arrived: it goes again
# over the first NIC, and the receiver drops the copy (pingpong checks
# every byte and MPI's order).
iface=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
ownturns=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm"
    --mca mtl_efa_matching own --mca common_efa_nic_include "${iface:-eth0},lo"
    --mca common_efa_verbose 1 "${apart[@]}")
ownrails=("${ownturns[@]}" --mca mtl_efa_debug_net_first_rail 1)
expect_output own-rail-send-sent-again "own matching over several NICs: 1 peer\(s\) on a NIC beside the first, [1-9][0-9]* provider message\(s\) sent there, 1 sent again over another NIC" \
    "${ownrails[@]}" --mca mtl_efa_debug_fail_rail_send 3
expect_output own-rail-send-copy-dropped "own matching over several NICs: .*; [1-9][0-9]* copies of messages that had come dropped" \
    "${ownrails[@]}" --mca mtl_efa_debug_fail_rail_send 3
# The peer on the first NIC, its streamed data over both in turn: the
# third send completed on the second NIC is taken as failed; it goes again
# over the first, and the peer's turns go on.
expect_output own-turn-send-sent-again "own matching over several NICs: 0 peer\(s\) on a NIC beside the first, [1-9][0-9]* provider message\(s\) sent there, 1 sent again over another NIC.*; 1 peer\(s\) whose streamed data and reads take the NICs in turn, [1-9][0-9]* message" \
    "${ownturns[@]}" --mca mtl_efa_debug_fail_rail_send 3
expect_failure debug-fail-rail-send-negative "Parameter: mtl_efa_debug_fail_rail_send" "${ownrails[@]}" \
    --mca mtl_efa_debug_fail_rail_send -1
# The same for btl_efa's messages under ob1.
ob1rails=("${ob1rxm[@]}" --mca common_efa_nic_include "${iface:-eth0},lo"
    --mca btl_efa_debug_first_rail 1 "${apart[@]}")
expect_output ob1-rail-send-sent-again "btl:efa: messages over several NICs: 1 peer\(s\) on a NIC beside the first, [1-9][0-9]* message\(s\) sent there, 1 sent again over another NIC" \
    "${ob1rails[@]}" --mca btl_efa_debug_fail_rail_send 3
expect_output ob1-rail-send-copy-dropped "btl:efa: messages over several NICs: .*; [1-9][0-9]* copies dropped" \
    "${ob1rails[@]}" --mca btl_efa_debug_fail_rail_send 3
# The peer on the first NIC, reached over both: its messages there are
# numbered too, and the third completed there is taken as failed.  The
# peer's messages leave the first NIC, that one goes again over the
# second, and the receiver drops the copy (pingpong checks every byte and
# MPI's order).  Before the first NIC's messages were numbered, its
# failure was the peer's.
ob1first=("${ob1rxm[@]}" --mca common_efa_nic_include "${iface:-eth0},lo" "${apart[@]}")
expect_output ob1-first-send-moved "btl:efa: a peer's messages leave NIC 0 of the set" \
    "${ob1first[@]}" --mca btl_efa_debug_fail_first_send 3
expect_output ob1-first-send-sent-again "btl:efa: messages over several NICs: 0 peer\(s\) on a NIC beside the first, [1-9][0-9]* message\(s\) sent there, 1 sent again over another NIC.*; [1-9][0-9]* copies dropped.*; [1-9][0-9]* message\(s\) numbered over the first NIC, 1 time\(s\) a peer's messages left it" \
    "${ob1first[@]}" --mca btl_efa_debug_fail_first_send 3
# A piece of a get (ob1's rendezvous reads) that fails on the first NIC
# with the peer unreachable there goes again over the second at once, before
# the core, which hears of the error after the piece's owner, takes the
# first NIC out (else it fails: ob1 falls back to sending, and the count
# stays 0).
expect_output ob1-first-rma-moved "btl:efa: 1 striped part\(s\) sent again over another rail after their rail failed" \
    "${ob1first[@]}" --mca btl_efa_debug_fail_first_rma 2
# A receive that fails on the first NIC carrying nothing, as a NIC flushing
# its queue fails its posted buffers: with several NICs every process of
# the job numbers its messages there (to peers of its node too), so the
# failure is the NIC's, survived (pingpong checks every byte).  With rail
# failover off, or one NIC, such a failure could hide a message nobody
# would find: the job ends, naming it.
flushed="a receive failed on NIC ${iface:-eth0}, the first of the set \(Input/output error\): taken as that NIC flushing its queue"
expect_output ob1-first-recv-flushed "btl:efa: .*: $flushed" \
    "${ob1first[@]}" --mca btl_efa_debug_flush_first 3
expect_output ob1-first-recv-flushed-counted "btl:efa: messages over several NICs: .*; 1 receive\(s\) failed on a NIC and taken as its flush \(1 on the first\)" \
    "${ob1first[@]}" --mca btl_efa_debug_flush_first 3
onnode_nics=("${ob1rxm[@]}" --mca common_efa_nic_include "${iface:-eth0},lo")
expect_output ob1-first-recv-flushed-on-node "btl:efa: messages over several NICs: .*\(1 on the first\).*; [1-9][0-9]* message\(s\) numbered over the first NIC" \
    "${onnode_nics[@]}" --mca btl_efa_debug_flush_first 2
JOB_NP=2 expect_failure ob1-first-recv-flushed-no-failover "a message through the provider was lost" \
    "${ob1first[@]}" --mca common_efa_rail_failover 0 --mca btl_efa_debug_flush_first 3
JOB_NP=2 expect_failure ob1-first-recv-flushed-one-nic "a message through the provider was lost" \
    "${ob1rxm[@]}" "${apart[@]}" --mca btl_efa_debug_flush_first 3
# The flushed receive held a message (btl_efa_debug_flush_lost): pingpong
# then waits for it, and no later message from its sender would come to
# show the gap.  After the flush the watch asks every numbered peer for one
# more numbered message; its number shows the gap, and the job ends naming
# the peer after two peer deadlines (without the ask: a hang).  Between
# nodes, and on one node (the answer through the provider).
JOB_NP=2 expect_failure ob1-first-flush-lost-found "never arrived, while later ones from the same peer did" \
    "${ob1first[@]}" --mca btl_efa_debug_flush_first 3 --mca btl_efa_debug_flush_lost 1 \
    --mca common_efa_peer_timeout 5
JOB_NP=2 expect_failure ob1-first-flush-lost-found-on-node "never arrived, while later ones from the same peer did" \
    "${onnode_nics[@]}" --mca btl_efa_debug_flush_first 2 --mca btl_efa_debug_flush_lost 1 \
    --mca common_efa_peer_timeout 5
# The same with a window of one message: the lost one took the sender's
# only credit, and the answer to the ask takes none (it waited for one).
JOB_NP=2 expect_failure ob1-first-flush-lost-found-window-one "never arrived, while later ones from the same peer did" \
    "${ob1first[@]}" --mca btl_efa_debug_flush_first 3 --mca btl_efa_debug_flush_lost 1 \
    --mca common_efa_peer_timeout 5 --mca btl_efa_send_window 1
expect_output ob1-numbered-every-peer "btl:efa: one-sided mode of the job .*; messages numbered to every peer" \
    "${ob1first[@]}"
# Rank 1 with one NIC: not every process numbers, so none numbers to every
# peer (the job's agreement), and rank 0's failed receive on its first NIC
# ends the job.
JOB_NP=2 expect_failure ob1-first-recv-flushed-one-process-one-nic "not every process of the job has several NICs" \
    "${ob1rxm[@]}" "${apart[@]}" --mca btl_efa_debug_flush_first 3 bash -c \
    'if [ "$OMPI_COMM_WORLD_RANK" = 0 ]; then n="'"${iface:-eth0}"',lo"; else n='"${iface:-eth0}"'; fi
     OMPI_MCA_common_efa_nic_include=$n exec "$0" "$@"'
expect_output own-first-recv-flushed "mtl:efa: .*: $flushed" \
    "${ownturns[@]}" --mca mtl_efa_debug_flush_first 3
# Own matching, the flushed receive holding a message (the peer's send
# completed): no later message of that stream would show the gap, and
# pingpong would wait for ever.  The receiver asks every peer for one more
# numbered message; its number shows the gap, and the job ends naming the
# peer after two peer deadlines.
JOB_NP=2 expect_failure own-first-flush-lost-found "of its stream to this process never came" \
    "${ownturns[@]}" --mca mtl_efa_debug_flush_first 3 --mca mtl_efa_debug_flush_lost 1 \
    --mca common_efa_peer_timeout 5
JOB_NP=2 expect_failure own-first-recv-flushed-one-nic "a receive of a message from another node failed: Input/output error" \
    --mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm" \
    --mca mtl_efa_matching own "${apart[@]}" --mca mtl_efa_debug_flush_first 3
# Under provider matching the first NIC carries the tagged messages, which
# no other NIC can take: said at verbose 1, since its loss is the peer's.
expect_output matching-provider-pins-first-nic "NIC ${iface:-eth0}, the first of the set, carries mtl_efa's tagged messages \(provider matching\), which no other NIC can take over" \
    --mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm" \
    --mca mtl_efa_matching provider --mca common_efa_nic_include "${iface:-eth0},lo" \
    --mca common_efa_verbose 1 "${apart[@]}"
expect_failure debug-btl-fail-rail-send-negative "Parameter: btl_efa_debug_fail_rail_send" \
    "${ob1rails[@]}" --mca btl_efa_debug_fail_rail_send -1
# A message over the second NIC naming its destination as the sender:
# checked against the named process's addresses on that NIC, dropped.
expect_output ob1-rail-forged-sender "btl:efa: a message over NIC 1 of the set did not come from an address of the process it names" \
    "${ob1rails[@]}" --mca btl_efa_debug_forge_src 3
# A message lost on the second NIC (its receive fails there: not a loss
# by itself, its sender's send completed) while later ones come: the
# watch finds the gap after two peer deadlines and ends the job naming
# the peer, where ob1 would wait for ever.
prog=$bindir/many_outstanding
prog_args=(-n 2000 -s 4096)
JOB_NP=2 expect_failure ob1-rail-gap-found "never arrived, while later ones from the same peer did" \
    "${ob1rails[@]}" --mca btl_efa_debug_lose_recv 100 --mca common_efa_peer_timeout 5
# Emulated gets of several chunks between a process of two NICs and one
# of one: both agree on the chunk (a get of the other's was refused, and
# osc_test read a wrong byte).
prog=$bindir/../osc/osc_test prog_args=(putget)
JOB_NP=2 expect_output ob1-emul-get-two-nics-and-one "^OK putget" "${ob1rxm[@]}" "${apart[@]}" \
    --mca osc rdma --mca common_efa_force_emulated read,write -x OSC_PUTGET_MAX=4194304 bash -c \
    'n='"${iface:-eth0}"'; [ "$OMPI_COMM_WORLD_RANK" = 0 ] && n=$n,lo
     OMPI_MCA_common_efa_nic_include=$n exec "$0" "$@"'
prog=$bindir/pingpong
prog_args=(-s 4M -i 5)
param_wait # (the cases above use the pretend nodes' files)
rm -rf "$pn"

# Not asked for, no EFA: the MTL must step aside without a word, and the
# job runs on whatever else Open MPI has.
if ! fi_info -p efa >/dev/null 2>&1; then
    out=$(timeout 60 mpirun -np 2 --oversubscribe --mca mca_base_component_path "$path" \
        "$prog" "${prog_args[@]}" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && ! grep -qi "efa" <<<"$out"; then
        echo "PASS params/default-steps-aside"
        pass=$((pass + 1))
    else
        echo "FAIL params/default-steps-aside (exit $rc)"
        head -20 <<<"$out" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
fi

# ompi_info --param FRAMEWORK efa --level 9 lists every parameter named
# (ompi_info reads the component path only from the environment).
check_listed() { # test-name framework parameter...
    local name=$1 fw=$2 listing missing="" p
    shift 2
    listing=$(OMPI_MCA_mca_base_component_path="$path" ompi_info --param "$fw" efa --level 9 2>&1)
    for p in "$@"; do
        grep -q "\"${fw}_efa_$p\"" <<<"$listing" || missing="$missing $p"
    done
    if [ -z "$missing" ]; then
        echo "PASS params/$name"
        pass=$((pass + 1))
    else
        echo "FAIL params/$name: missing$missing"
        fail=$((fail + 1))
    fi
}
check_listed ompi_info-lists-parameters mtl provider_include provider_exclude nic_include \
    nic_exclude nics_per_proc num_contexts \
    tx_size rx_size mr_cache_size progress_batch force_mr_local force_no_cq_data verbose priority \
    provider_shm provider_cuda_calls rnr_retry force_efa_options force_emulated debug_no_inject peer_timeout \
    rail_retry gpu net_poll_interval net_poll_interval_max onnode_channel onnode_single_copy onnode_dir onnode_slots onnode_slot_size \
    force_direct_mode direct_mode_mtu debug_swap_messages
check_listed ompi_info-lists-btl-parameters btl rma_mode atomic_mode rma_window send_window \
    onnode_channel onnode_dir onnode_slots onnode_slot_size single_copy inplace_min \
    onnode_rma_max onnode_rma_wait

# Test-only parameters (docs/RELIABILITY.md, "Test-only parameters"): every
# debug_* and force_* hook but force_direct_mode is level 9 and says
# "Testing only:" first in its help.
listing=$(OMPI_MCA_mca_base_component_path="$path" ompi_info --param all efa --level 9 \
    --parsable 2>&1)
unmarked=$(grep -oE '^mca:(mtl|btl):efa:param:[a-z]+_efa_(debug|force)_[a-z_]+' <<<"$listing" |
    sed 's/.*:param://' | sort -u | grep -v '_force_direct_mode$' | while read -r p; do
        if ! grep -qF ":param:$p:help:Testing only" <<<"$listing" ||
            ! grep -qF ":param:$p:level:9" <<<"$listing"; then
            echo "$p"
        fi
    done | tr '\n' ' ')
if [ -z "$unmarked" ]; then
    echo "PASS params/test-only-marked"
    pass=$((pass + 1))
else
    echo "FAIL params/test-only-marked: $unmarked"
    fail=$((fail + 1))
fi

# ompi_info shows the components' own release, configure's AC_INIT, as
# their "Component v" (not Open MPI's).
release=$(sed -n 's/^AC_INIT(\[ompi-efa\], \[\([0-9.]*\)\].*/\1/p' "$(dirname "$0")/../configure.ac")
versions=$(OMPI_MCA_mca_base_component_path="$path" ompi_info --parsable 2>&1 |
    grep -cE "^mca:(mtl|btl):efa:version:\"component:$release\"$")
if [ -n "$release" ] && [ "$versions" -eq 2 ]; then
    echo "PASS params/ompi_info-release"
    pass=$((pass + 1))
else
    echo "FAIL params/ompi_info-release: ompi_info does not show release '$release' for both components"
    fail=$((fail + 1))
fi

param_wait
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
