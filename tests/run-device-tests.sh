#!/usr/bin/env bash
# Device (GPU) buffers beyond tests/mpi/device_buffers (which every pml cm
# suite runs on the core's fake device):
#   - the control: with mtl_efa told to look away (mtl_efa_debug_device_blind),
#     the fake's memory must crash the job, on the rings and on the
#     provider path: device_buffers passing elsewhere is then the copies'
#     doing, not the fake's leniency;
#   - a window (osc/rdma over btl_efa) in device memory: puts and gets of
#     it through its owner's device copy, an atomic refused by btl_efa
#     (osc/rdma does it by get and put), on every path of btl_efa; an
#     atomic outside its handle refused at the origin;
#   - a device receive read from another node, or streamed as DATA frames
#     (there or through the rings), copied on piece by piece
#     (mtl_efa_device_piece), and the bench that times it;
#   - what is said: the fake named at verbose 1; where Open MPI has no
#     accelerator component, "not supported here" (and
#     mtl_efa_device_buffers own asked for says why it cannot be); a bad
#     setting refused;
#   - a provider that refuses posts of device memory it registered: the
#     buffers go through the host instead.
#   run-device-tests.sh <component-dir> <mpi-test-bin-dir>
set -u
# shellcheck source=runner-args.sh
. "$(dirname "$0")/runner-args.sh"
prog=$bindir/device_buffers
pass=0 fail=0 skipped=0
cm=(--mca pml cm --mca mtl efa --mca btl self --mca common_efa_provider_include tcp)

run() { # mpirun-args... (sets OUT, RC)
    OUT=$(timeout 60 mpirun -np 2 --oversubscribe --bind-to none \
        --mca mca_base_component_path "$path" "$@" 2>&1)
    RC=$?
}
verdict() { # name ok why
    if [ "$2" = 1 ]; then
        echo "PASS device/$1"
        pass=$((pass + 1))
    else
        echo "FAIL device/$1: $3"
        head -20 <<<"$OUT" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}

for path_args in "rings:" "provider:--mca mtl_efa_onnode_channel none --mca mtl_efa_matching provider" \
    "own:--mca mtl_efa_onnode_channel none --mca mtl_efa_matching own"; do
    name=${path_args%%:*}
    read -r -a extra <<<"${path_args#*:}"
    run "${cm[@]}" "${extra[@]}" --mca common_efa_debug_fake_device 1 \
        --mca mtl_efa_debug_device_blind 1 --mca common_efa_verbose 1 "$prog" -s 64K
    ok=0
    # (a segmentation fault, or a path that reads with the kernel: EFAULT)
    [ $RC -ne 0 ] && [ $RC -ne 124 ] && grep -q "handed on uncopied" <<<"$OUT" &&
        grep -qiE "segmentation fault|signal 11|bad address|EFAULT" <<<"$OUT" && ok=1
    verdict "blind-$name-crashes" $ok "exit $RC: the fake's memory was touched by no path, or the job hung"
done

run "${cm[@]}" --mca common_efa_debug_fake_device 1 --mca common_efa_verbose 1 "$prog" -s 64K
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" &&
    grep -q "device buffers: copied through the host by mtl_efa (the core's fake device)" <<<"$OUT" &&
    grep -q "device memory: the fake device's" <<<"$OUT" && ok=1
verdict fake-said $ok "exit $RC, or the fake device not named at verbose 1"

# Device messages between processes of this node go by the fake's IPC
# (the receiver imports the sender's allocation and copies device to
# device), under both matching modes; where the fake refuses imports they
# stream through the host, and with mtl_efa_device_ipc off they are copied
# through the host at the entry.  device_buffers checks every byte.
stream_counts() { # the finalize lines' device messages streamed and copied on piece by piece, and their pieces, summed
    sed -n "s/.*device messages streamed as DATA frames: \([0-9]*\) copied to the device piece by piece as they came in (\([0-9]*\) pieces).*/\1 \2/p" <<<"$OUT" |
        awk '{m += $1; p += $2} END {print m + 0, p + 0}'
}
staged_counts() { # the finalize lines' device sends copied to the host piece by piece, and their pieces, summed
    sed -n "s/.*device messages sent to this node as DATA frames: \([0-9]*\) copied to the host piece by piece as their frames went (\([0-9]*\) pieces).*/\1 \2/p" <<<"$OUT" |
        awk '{m += $1; p += $2} END {print m + 0, p + 0}'
}
self_count() { # the same line's messages from the process itself, summed
    sed -n "s/.*device messages received from this node: .*, \([0-9]*\) from this process itself.*/\1/p" <<<"$OUT" |
        awk '{n += $1} END {print n + 0}'
}
ipc_count() { # the verbose-1 finalize line's "N by the device's IPC", summed over ranks
    sed -n "s/.*device messages received from this node: \([0-9]*\) by the device's IPC, \([0-9]*\) streamed.*/\1 \2/p" <<<"$OUT" |
        awk '{ipc += $1; streamed += $2} END {print ipc + 0, streamed + 0}'
}
# Memory described as CUDA VMM memory (ipc-rings-vmm-*: the fake so) goes
# by IPC too, each message's export holding a descriptor the receiver
# takes out of the sender (pidfd_getfd), as CUDA VMM memory's exports do.
vmm_like=(--mca common_efa_debug_fake_device_hmem 1 --mca common_efa_debug_fake_device_vmm 1)
for m in provider own; do
    for kind in plain vmm; do
        extra=()
        name=ipc-rings-$m
        if [ $kind = vmm ]; then
            extra=("${vmm_like[@]}")
            name=ipc-rings-vmm-$m
        fi
        run "${cm[@]}" --mca mtl_efa_matching $m --mca common_efa_debug_fake_device 1 \
            "${extra[@]}" --mca common_efa_verbose 1 "$prog"
        read -r ipc streamed < <(ipc_count)
        ok=0
        [ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$ipc" -gt 0 ] &&
            [ "$streamed" -eq 0 ] &&
            grep -q "device buffers to processes of this node: device to device by the device's IPC" <<<"$OUT" &&
            { [ $kind = plain ] || grep -q "described as memory without synchronous memory operations (as CUDA VMM memory)" <<<"$OUT"; } && ok=1
        verdict "$name" $ok "exit $RC, $ipc by IPC, $streamed streamed: $kind device messages did not go by IPC"
    done
    run "${cm[@]}" --mca mtl_efa_matching $m --mca common_efa_debug_fake_device 1 \
        --mca common_efa_debug_fake_device_no_ipc 1 --mca common_efa_verbose 1 "$prog"
    read -r ipc streamed < <(ipc_count)
    read -r slanded spieces < <(stream_counts)
    ok=0
    [ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$ipc" -eq 0 ] &&
        [ "$streamed" -gt 0 ] && ok=1
    verdict "ipc-refused-$m" $ok "exit $RC, $ipc by IPC, $streamed streamed: a refused import did not fall back to the host"
    # (a message to the process itself needs no IPC: one device copy still)
    self=$(self_count)
    ok=0
    [ $RC -eq 0 ] && [ "$self" -gt 0 ] && ok=1
    verdict "ipc-refused-self-$m" $ok "exit $RC: $self device messages to the process itself by one device copy"
    # (the rings' DATA frames go on to the device a piece at a time)
    ok=0
    [ $RC -eq 0 ] && [ "$slanded" -gt 0 ] && [ "$spieces" -ge "$slanded" ] && ok=1
    verdict "ipc-refused-streamed-on-$m" $ok "exit $RC: $slanded streamed device messages copied on piece by piece ($spieces pieces)"
    # (and the senders copied theirs to the host a piece at a time as the
    # frames went: more pieces than messages, as some are several pieces)
    read -r staged tpieces < <(staged_counts)
    ok=0
    [ $RC -eq 0 ] && [ "$staged" -gt 0 ] && [ "$tpieces" -gt "$staged" ] && ok=1
    verdict "ipc-refused-staged-$m" $ok "exit $RC: $staged streamed device sends copied to the host piece by piece ($tpieces pieces)"
done
run "${cm[@]}" --mca common_efa_debug_fake_device 1 --mca mtl_efa_device_ipc 0 \
    --mca common_efa_verbose 1 "$prog" -s 64K
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" &&
    grep -q "device buffers to processes of this node: through the host (mtl_efa_device_ipc false)" <<<"$OUT" &&
    ! grep -q "device messages received from this node" <<<"$OUT" && ok=1
verdict ipc-off $ok "exit $RC, or device messages went by IPC with mtl_efa_device_ipc 0"

# Through a provider with FI_HMEM (shm; the fake's memory made visible to
# it as FI_HMEM_SYSTEM memory), device buffers to and from peers reached
# through the provider go to it as they are, registered whole with their
# interface; an allocation freed and handed out again at the same address
# is registered anew (its old registration replaced).  With
# common_efa_hmem off, or a provider without FI_HMEM (tcp), they are
# copied through the host.  device_buffers checks every byte.
hmem_counts() { # the finalize line's sends, receives and replaced registrations, summed
    sed -n "s/.*(FI_HMEM): \([0-9]*\) sends, \([0-9]*\) receives; \([0-9]*\) registrations.*/\1 \2 \3/p" <<<"$OUT" |
        awk '{s += $1; r += $2; st += $3} END {print s + 0, r + 0, st + 0}'
}
hmem=(--mca pml cm --mca mtl efa --mca btl self --mca mtl_efa_onnode_channel none
    --mca mtl_efa_matching provider --mca common_efa_debug_fake_device 1
    --mca common_efa_debug_fake_device_hmem 1 --mca common_efa_verbose 1)
run "${hmem[@]}" --mca common_efa_provider_include shm "$prog" -P
read -r hs hr hst < <(hmem_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$hs" -gt 0 ] && [ "$hr" -gt 0 ] &&
    [ "$hst" -gt 0 ] && grep -q "device buffers to processes reached through the provider: handed to it as they are (FI_HMEM)" <<<"$OUT" &&
    grep -q "report: device buffers: the provider moves them itself (FI_HMEM)" <<<"$OUT" && ok=1
verdict hmem-shm $ok "exit $RC, $hs sends, $hr receives by FI_HMEM, $hst registrations replaced"
# Those registrations go through the fake's dmabuf (its memfd) where
# libfabric is 1.20 or later (FI_MR_DMABUF), by device address below it
# (Debian's 1.17) and with common_efa_dmabuf false; the bytes are checked
# either way.
dmabuf_count() { # the finalize lines' registrations through a dmabuf, summed
    sed -n 's/.*; \([0-9]*\) registrations through a dmabuf.*/\1/p' <<<"$OUT" |
        awk '{s += $1} END {print s + 0}'
}
api=$(fi_info --version 2>/dev/null | sed -n 's/^libfabric api: //p')
ok=0
if [ "$(printf '%s\n' "$api" 1.20 | sort -V | head -1)" = 1.20 ]; then
    grep -q "report: device registrations: through the allocation's dmabuf first" <<<"$OUT" &&
        [ "$(dmabuf_count)" -gt 0 ] && ok=1
else
    grep -q "report: device registrations: by device address (dmabuf needs libfabric 1.20" <<<"$OUT" &&
        [ "$(dmabuf_count)" -eq 0 ] && ok=1
fi
verdict hmem-shm-dmabuf $ok "libfabric api '$api': $(dmabuf_count) registrations through a dmabuf, or the report says otherwise"
run "${hmem[@]}" --mca common_efa_provider_include shm --mca common_efa_dmabuf 0 "$prog" -P -s 64K
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$(dmabuf_count)" -eq 0 ] &&
    grep -q "report: device registrations: by device address (common_efa_dmabuf false)" <<<"$OUT" && ok=1
verdict hmem-shm-dmabuf-off $ok "exit $RC, $(dmabuf_count) registrations through a dmabuf with common_efa_dmabuf false"

# Under own matching (no on-node channel: the provider path another node
# takes), a device send from mtl_efa_net_read_min is read by the receiver
# from its registration (shm's RMA of the fake's memory): the sender
# copies nothing through the host; and a device receive of a message read
# so is read straight into its own registration, not into a host buffer
# copied on after.  With common_efa_hmem off both go through the host as
# before.  device_buffers checks every byte.
direct_reads() { # the finalize lines' device receives read straight into their registration, summed
    sed -n "s/.*device messages read from other nodes: \([0-9]*\) read straight into the device buffer's registration.*/\1/p" <<<"$OUT" |
        awk '{n += $1} END {print n + 0}'
}
read_offers() { # the finalize lines' device sends offered for reading, summed
    sed -n "s/.*device messages sent to other nodes: \([0-9]*\) offered for reading from their registration.*/\1/p" <<<"$OUT" |
        awk '{n += $1} END {print n + 0}'
}
own_hmem=(--mca pml cm --mca mtl efa --mca btl self --mca mtl_efa_onnode_channel none
    --mca mtl_efa_matching own --mca common_efa_debug_fake_device 1
    --mca common_efa_debug_fake_device_hmem 1 --mca common_efa_verbose 1
    --mca common_efa_provider_include shm)
run "${own_hmem[@]}" "$prog" -P -s 1M
offers=$(read_offers)
direct=$(direct_reads)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$offers" -gt 0 ] &&
    grep -q "device sends to other nodes (own matching): from 65536 bytes read by the receiver from their registration" <<<"$OUT" &&
    grep -qE " [1-9][0-9]* rendezvous read by RMA" <<<"$OUT" && ok=1
verdict own-read-from-device $ok "exit $RC: $offers device sends offered for reading from their registration"
ok=0
[ $RC -eq 0 ] && [ "$direct" -gt 0 ] &&
    grep -q "device receives from other nodes (own matching): read straight into their registration" <<<"$OUT" && ok=1
verdict own-read-into-device $ok "exit $RC: $direct device receives read straight into their registration"
run "${own_hmem[@]}" --mca common_efa_hmem off "$prog" -P -s 1M
offers=$(read_offers)
direct=$(direct_reads)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$offers" -eq 0 ] && [ "$direct" -eq 0 ] &&
    ! grep -q "device sends to other nodes (own matching)" <<<"$OUT" && ok=1
verdict own-read-from-device-off $ok "exit $RC: $offers device sends offered for reading, $direct receives read into the device, with common_efa_hmem off"
run "${hmem[@]}" --mca common_efa_provider_include shm --mca common_efa_hmem off "$prog" -P -s 64K
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" &&
    grep -q "FI_HMEM not asked for (common_efa_hmem off): copied through the host" <<<"$OUT" &&
    ! grep -q "handed to the provider as they are" <<<"$OUT" && ok=1
verdict hmem-off $ok "exit $RC, or device buffers went to the provider with common_efa_hmem off"
# Memory without synchronous memory operations (CUDA VMM, pool memory;
# the fake described so): with common_efa_hmem_vmm off it is copied
# through the host on every path that would hand it to the provider (the
# provider's messages, the own matching's reads, btl_efa's window), and
# counted; by default (auto, shm not being libfabric's efa fabric) it goes
# to the provider like other device memory.  device_buffers checks every
# byte.
vmm_staged() { # the finalize lines' buffers without synchronous memory operations staged, summed
    sed -n "s/.*; \([0-9]*\) buffers without synchronous memory operations.*/\1/p" <<<"$OUT" |
        awk '{n += $1} END {print n + 0}'
}
vmm=(--mca common_efa_debug_fake_device_vmm 1)
run "${hmem[@]}" "${vmm[@]}" --mca common_efa_provider_include shm "$prog" -P -s 64K
read -r hs hr hst < <(hmem_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$hs" -gt 0 ] && [ "$hr" -gt 0 ] &&
    [ "$(vmm_staged)" -eq 0 ] &&
    grep -q "device memory without synchronous memory operations (CUDA VMM, pool memory): handed to the provider too (common_efa_hmem_vmm auto: not libfabric's efa fabric" <<<"$OUT" && ok=1
verdict hmem-shm-vmm-auto $ok "exit $RC, $hs sends and $hr receives by FI_HMEM, $(vmm_staged) staged, of memory without synchronous copies under common_efa_hmem_vmm auto"
# VMM memory grown a piece at a time (PyTorch's expandable segments): the
# fake's allocations above 16 KiB are pieces of 16 KiB side by side, each
# an allocation with its own id, so the larger messages run over several;
# each such buffer is one registration over its pieces, handed to the
# provider as it is, none copied through the host.
spans() { # the finalize lines' registrations over several allocations, summed
    sed -n 's/.*; \([0-9]*\) registrations over several CUDA VMM allocations.*/\1/p' <<<"$OUT" |
        awk '{s += $1} END {print s + 0}'
}
run "${hmem[@]}" "${vmm[@]}" --mca common_efa_debug_fake_device_piece 16384 \
    --mca common_efa_provider_include shm "$prog" -P -s 64K
read -r hs hr hst < <(hmem_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$hs" -gt 0 ] && [ "$hr" -gt 0 ] &&
    [ "$(spans)" -gt 0 ] && [ "$(vmm_staged)" -eq 0 ] &&
    grep -q "its allocations above 16384 bytes are pieces of that size side by side" <<<"$OUT" && ok=1
verdict hmem-shm-vmm-pieces $ok "exit $RC, $hs sends and $hr receives by FI_HMEM, $(spans) registrations over several allocations, $(vmm_staged) staged"
run "${hmem[@]}" "${vmm[@]}" --mca common_efa_provider_include shm --mca common_efa_hmem_vmm off \
    "$prog" -P -s 64K
read -r hs hr hst < <(hmem_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$hs" -eq 0 ] && [ "$hr" -eq 0 ] &&
    [ "$(vmm_staged)" -gt 0 ] &&
    grep -q "report: device memory without synchronous memory operations (CUDA VMM, pool memory): copied through the host (common_efa_hmem_vmm off)" <<<"$OUT" &&
    grep -q "without synchronous memory operations (CUDA VMM or pool memory) met: copied through the host" <<<"$OUT" && ok=1
verdict hmem-shm-vmm-off $ok "exit $RC, $hs sends and $hr receives by FI_HMEM, $(vmm_staged) staged, with common_efa_hmem_vmm off"
run "${own_hmem[@]}" "${vmm[@]}" --mca common_efa_hmem_vmm off "$prog" -P -s 1M
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$(read_offers)" -eq 0 ] &&
    [ "$(direct_reads)" -eq 0 ] && [ "$(vmm_staged)" -gt 0 ] && ok=1
verdict own-read-vmm-off $ok "exit $RC: $(read_offers) offered for reading, $(direct_reads) read into the device, $(vmm_staged) staged, with common_efa_hmem_vmm off"
# There the host buffers of 64 KiB and more that carry the device bytes
# are kept from one message to the next (their pages faulted in and
# registered once): most are reused.
# Each is pinned once for the device's copies (the fake's stand-in for
# cuMemHostRegister), never once per message.
stage_counts() { # the finalize lines' host buffers, those kept, those pinned, summed
    sed -n "s/.*host buffers of 64 KiB or more for device bytes: \([0-9]*\), \([0-9]*\) of them kept.*; \([0-9]*\) pinned.*/\1 \2 \3/p" <<<"$OUT" |
        awk '{n += $1; k += $2; p += $3} END {print n + 0, k + 0, p + 0}'
}
run "${hmem[@]}" --mca common_efa_provider_include tcp "$prog" -s 256K
read -r staged kept pinned < <(stage_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" &&
    grep -q "FI_HMEM asked for, not granted by the provider: copied through the host" <<<"$OUT" &&
    ! grep -q "handed to the provider as they are" <<<"$OUT" && ok=1
verdict hmem-not-granted $ok "exit $RC, or a provider without FI_HMEM was handed device buffers"
ok=0
[ $RC -eq 0 ] && [ "$staged" -gt 0 ] && [ $((2 * kept)) -gt "$staged" ] && [ "$pinned" -gt 0 ] &&
    [ "$pinned" -eq $((staged - kept)) ] && ok=1
verdict staged-buffers-kept $ok "exit $RC: $staged host buffers of 64 KiB or more for device bytes, $kept kept from an earlier message, $pinned pinned (want one pin per buffer mapped: $((staged - kept)))"

# Own matching with the provider's RMA read (tcp;ofi_rxm, no on-node
# channel): a device receive of a message read from the sender is read in
# pieces of mtl_efa_device_piece (256 KiB by default), each copied on to the
# device as it comes in, so that no whole-message copy is left after the
# read.  With mtl_efa_device_piece 0 it is read whole and copied after.
piece_counts() { # the finalize lines' messages and pieces, summed
    sed -n "s/.*device messages read from other nodes: [0-9]* read straight into the device buffer's registration, \([0-9]*\) copied to the device piece by piece as they came in (\([0-9]*\) pieces).*/\1 \2/p" <<<"$OUT" |
        awk '{m += $1; p += $2} END {print m + 0, p + 0}'
}
own_net=("${cm[@]}" --mca mtl_efa_onnode_channel none --mca mtl_efa_matching own
    --mca common_efa_debug_fake_device 1 --mca common_efa_verbose 1)
run "${own_net[@]}" "$prog" -s 4M
read -r landed pieces < <(piece_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$landed" -gt 0 ] &&
    [ "$pieces" -gt "$landed" ] && ok=1
verdict read-piece-by-piece $ok "exit $RC: $landed device messages copied on piece by piece, in $pieces pieces (none in several)"
run "${own_net[@]}" --mca mtl_efa_device_piece 0 "$prog" -s 4M
read -r landed pieces < <(piece_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$landed" -eq 0 ] &&
    grep -qE " [1-9][0-9]* rendezvous read by RMA" <<<"$OUT" && ok=1
verdict read-whole-copied-after $ok "exit $RC: $landed device messages copied on piece by piece with mtl_efa_device_piece 0"
# Reads off (mtl_efa_net_read_min 0): the message streams as DATA frames,
# and each piece they complete is copied on to the device as they come in;
# with mtl_efa_device_piece 0 the whole message is copied after.
run "${own_net[@]}" --mca mtl_efa_net_read_min 0 "$prog" -s 4M
read -r landed pieces < <(stream_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$landed" -gt 0 ] &&
    [ "$pieces" -gt "$landed" ] && [ "$(piece_counts)" = "0 0" ] && ok=1
verdict stream-piece-by-piece $ok "exit $RC: $landed streamed device messages copied on piece by piece, in $pieces pieces (none in several, or reads)"
run "${own_net[@]}" --mca mtl_efa_net_read_min 0 --mca mtl_efa_device_piece 0 "$prog" -s 4M
read -r landed pieces < <(stream_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$landed" -eq 0 ] && ok=1
verdict stream-whole-copied-after $ok "exit $RC: $landed streamed device messages copied on piece by piece with mtl_efa_device_piece 0"
# bench/bench_fake_device, the ping-pong that measures this path
# (docs/PERFORMANCE.md), times device buffers, and refuses without the fake.
bench=${BENCH_BIN_DIR:-$bindir/../../bench}/bench_fake_device
run "${own_net[@]}" "$bench" -s 1M -i 20
ok=0
[ $RC -eq 0 ] && grep -q "^# bench=fake_device buffers=device" <<<"$OUT" &&
    grep -qE "^1048576 [0-9]+\.[0-9]$" <<<"$OUT" && [ "$(piece_counts)" != "0 0" ] && ok=1
verdict bench-fake-device $ok "exit $RC: $bench timed no device ping-pong, or no piece was copied on"
run "${cm[@]}" "$bench" -s 1M -i 20
ok=0
[ $RC -ne 0 ] && grep -q "the core's device is not the fake" <<<"$OUT" && ok=1
verdict bench-fake-device-needs-fake $ok "exit $RC: bench_fake_device ran without the fake device"

# btl_efa: a window in device memory registered with its device where shm
# granted FI_HMEM, and every put and get with device memory on either side
# by the provider's RDMA; without FI_HMEM (the window tests below) all of
# them go as requests.
hmem_rma_counts() { # native and request counts of the finalize line, summed
    sed -n "s/.*puts and gets with device memory: \([0-9]*\) by the provider's RDMA (FI_HMEM), \([0-9]*\) as requests.*/\1 \2/p" <<<"$OUT" |
        awk '{n += $1; r += $2} END {print n + 0, r + 0}'
}
run --mca pml ob1 --mca btl efa,self --mca osc rdma --mca common_efa_provider_include shm \
    --mca btl_efa_rma_mode native --mca common_efa_debug_fake_device 1 \
    --mca common_efa_debug_fake_device_hmem 1 --mca common_efa_verbose 1 "$prog" -w
read -r native requests < <(hmem_rma_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers a window over device memory" <<<"$OUT" &&
    grep -q "btl:efa: device memory registered .* the provider's RDMA (FI_HMEM)" <<<"$OUT" &&
    [ "$native" -gt 0 ] && [ "$requests" -eq 0 ] && ok=1
verdict window-shm-hmem $ok "exit $RC, $native by the provider's RDMA, $requests as requests"
# (memory without synchronous memory operations, common_efa_hmem_vmm off:
# as requests)
run --mca pml ob1 --mca btl efa,self --mca osc rdma --mca common_efa_provider_include shm \
    --mca btl_efa_rma_mode native --mca common_efa_debug_fake_device 1 \
    --mca common_efa_debug_fake_device_hmem 1 "${vmm[@]}" --mca common_efa_hmem_vmm off \
    --mca common_efa_verbose 1 "$prog" -w
read -r native requests < <(hmem_rma_counts)
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers a window over device memory" <<<"$OUT" &&
    [ "$native" -eq 0 ] && [ "$requests" -gt 0 ] && ok=1
verdict window-shm-vmm-off $ok "exit $RC, $native by the provider's RDMA, $requests as requests, with common_efa_hmem_vmm off"

# A provider that refuses a post of device memory it registered (the
# fake stands in: common_efa_debug_fake_device_refuse_post, 1 at the
# post, 2 from the backlog): the buffer goes through the host instead (as
# requests for btl_efa, streamed for own matching's reads), the job goes
# on with every byte right, the refusal is said once with its call, and
# from then on memory of its kind goes through the host.
refused_posts() { # the finalize lines' refused posts (mtl_efa and btl_efa), summed
    sed -n "s/.*; \([0-9]*\) posts\( of device memory\)\{0,1\} refused by the provider.*/\1/p" <<<"$OUT" |
        awk '{n += $1} END {print n + 0}'
}
refuse=(--mca common_efa_debug_fake_device_refuse_post)
failed_reads() { # own matching's reads failed and streamed, summed over the processes
    sed -n "s/.* rendezvous read by RMA (\([0-9]*\) reads failed and streamed instead).*/\1/p" <<<"$OUT" |
        awk '{n += $1} END {print n + 0}'
}
for mode in 1 2; do
    name=$([ $mode = 1 ] && echo at-post || echo from-backlog)
    run "${hmem[@]}" --mca common_efa_provider_include shm "${refuse[@]}" $mode "$prog" -P -s 64K
    read -r hs hr hst < <(hmem_counts)
    ok=0
    [ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$(refused_posts)" -gt 0 ] &&
        [ "$hs" -eq 0 ] && [ "$hr" -eq 0 ] &&
        grep -qE "Call: +mtl_efa fi_t(send|recv)" <<<"$OUT" &&
        grep -qE "From now: +all device memory" <<<"$OUT" &&
        ! grep -q "deferred post failed" <<<"$OUT" && ok=1
    verdict "hmem-shm-post-refused-$name" $ok "exit $RC, $(refused_posts) refused posts, $hs sends and $hr receives left by FI_HMEM (and no failed deferred post said for a refusal the owner took)"
    run --mca pml ob1 --mca btl efa,self --mca osc rdma --mca common_efa_provider_include shm \
        --mca btl_efa_rma_mode native --mca common_efa_debug_fake_device 1 \
        --mca common_efa_debug_fake_device_hmem 1 --mca common_efa_verbose 1 "${refuse[@]}" $mode \
        "$prog" -w
    read -r native requests < <(hmem_rma_counts)
    # The same operations either way: one refused from the backlog was
    # taken at its post, and is counted as requests all the same.
    [ $mode = 1 ] && counts_at_post="$native $requests"
    ok=0
    [ $RC -eq 0 ] && grep -q "^ok device_buffers a window over device memory" <<<"$OUT" &&
        [ "$(refused_posts)" -gt 0 ] && [ "$requests" -gt 0 ] &&
        [ "$native $requests" = "$counts_at_post" ] &&
        grep -qE "Call: +btl_efa fi_(write|read)" <<<"$OUT" &&
        ! grep -q "deferred post failed" <<<"$OUT" && ok=1
    verdict "window-shm-post-refused-$name" $ok "exit $RC, $(refused_posts) refused posts, $native by the provider's RDMA, $requests as requests (refused at the post: $counts_at_post)"
    # (an operation in pieces: each piece refused goes as requests)
    run --mca pml ob1 --mca btl efa,self --mca osc rdma --mca common_efa_provider_include shm \
        --mca btl_efa_rma_mode native --mca btl_efa_rma_max_transfer 16384 \
        --mca common_efa_debug_fake_device 1 --mca common_efa_debug_fake_device_hmem 1 \
        --mca common_efa_verbose 1 "${refuse[@]}" $mode "$prog" -w -m 64K
    ok=0
    [ $RC -eq 0 ] && grep -q "^ok device_buffers a window over device memory" <<<"$OUT" &&
        [ "$(refused_posts)" -ge 4 ] && ok=1
    verdict "window-shm-post-refused-pieces-$name" $ok "exit $RC, $(refused_posts) refused posts of an operation in 4 pieces"
    # (own matching's reads: refused at the post, read into the host buffer;
    # refused from the backlog, streamed; the kind said either way, so
    # that the later reads go into the host buffer)
    run "${own_hmem[@]}" "${refuse[@]}" $mode "$prog" -P -s 1M
    seen=no
    [ $mode = 1 ] && grep -qE "Call: +mtl_efa fi_readmsg \(a read into a device buffer\)" <<<"$OUT" &&
        seen=yes
    [ $mode = 2 ] && [ "$(failed_reads)" -ge 1 ] && [ "$(failed_reads)" -le 6 ] &&
        grep -qE "Call: +common:efa fi_read \(a read into a device buffer, from the backlog\)" <<<"$OUT" &&
        ! grep -q "deferred post failed" <<<"$OUT" && seen=yes
    ok=0
    [ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$(direct_reads)" -eq 0 ] &&
        [ $seen = yes ] && ok=1
    verdict "own-read-post-refused-$name" $ok "exit $RC: $(direct_reads) read into the device, $(failed_reads) reads failed and streamed; the refusal said (from the backlog: only the reads out when the first was refused failed, at most 6 where every device read would fail otherwise, and no failed deferred post said): $seen"
done
# Memory without synchronous memory operations refused: only such memory
# goes through the host from then on.
run "${hmem[@]}" "${vmm[@]}" --mca common_efa_provider_include shm --mca common_efa_hmem_vmm on \
    "${refuse[@]}" 1 "$prog" -P -s 64K
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers" <<<"$OUT" && [ "$(refused_posts)" -gt 0 ] &&
    [ "$(vmm_staged)" -gt 0 ] &&
    grep -qE "From now: +device memory without synchronous memory operations" <<<"$OUT" &&
    grep -q "copied through the host (the provider refused a post of such memory)" <<<"$OUT" && ok=1
verdict hmem-shm-vmm-post-refused $ok "exit $RC, $(refused_posts) refused posts, $(vmm_staged) staged"

# osc/rdma over btl_efa: a window in device memory carries puts and gets
# from and into host and device buffers (the owner copies with the
# device's copy), and an atomic on it is refused by btl_efa and done by
# osc/rdma with a get and a put: on the on-node paths (rings, single copy
# where allowed), over the provider (no on-node channel), with native
# provider RMA and atomics asked for, and on ofi_rxd and shm.
for v in "tcp:" "tcp-provider:--mca btl_efa_onnode_channel none" \
    "tcp-native:--mca btl_efa_rma_mode native --mca btl_efa_atomic_mode native" \
    "udp:" "shm:"; do
    name=${v%%:*}
    read -r -a extra <<<"${v#*:}"
    run --mca pml ob1 --mca btl efa,self --mca osc rdma --mca common_efa_provider_include "${name%%-*}" \
        --mca common_efa_debug_fake_device 1 --mca common_efa_verbose 1 "${extra[@]}" "$prog" -w
    read -r native requests < <(hmem_rma_counts)
    ok=0
    [ $RC -eq 0 ] && grep -q "^ok device_buffers a window over device memory" <<<"$OUT" &&
        grep -q "btl:efa: device memory registered" <<<"$OUT" &&
        grep -q "btl:efa: an atomic on device memory .* refused" <<<"$OUT" &&
        [ "$native" -eq 0 ] && [ "$requests" -gt 0 ] && ok=1
    verdict "window-$name" $ok "exit $RC: a window in device memory was not carried, or not said"
done

# A rank's operations on its own device window: osc/rdma hands them to
# btl_efa only in a job over several nodes (4 ranks on 2 pretend nodes),
# whose own-rank path must use the device's copy; the fake faults on any
# CPU touch.
pn=$(mktemp -d)
mapfile -t apart < <(bash "$(dirname "$0")/pretend-nodes.sh" "$pn" 2)
OUT=$(timeout 90 mpirun -np 4 --oversubscribe --bind-to none "${apart[@]}" \
    --mca mca_base_component_path "$path" --mca pml ob1 --mca btl efa,self --mca osc rdma \
    --mca common_efa_provider_include tcp --mca common_efa_debug_fake_device 1 \
    --mca common_efa_verbose 1 "$prog" -w -o 2>&1)
RC=$?
rm -rf "$pn"
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers a window over device memory.*; its own window over device memory" <<<"$OUT" &&
    grep -q "btl:efa: an atomic on device memory .* refused" <<<"$OUT" && ok=1
verdict window-own-rank-nodes $ok "exit $RC: a rank's operations on its own device window were not carried"

# An atomic outside the handle it came with (btl_efa_debug_corrupt_offset;
# a dynamic window's neighbouring handle in real jobs), to a process whose
# device memory the initiator has met: refused by btl_efa at the origin,
# since the target's refusal through the callback is not looked at by
# osc/rdma for an atomic; osc/rdma's get and put then reach the target,
# which refuses the put (device_hostile.c checks no byte was written).
# To a process whose device memory it has not met, the atomic still goes
# to the target (osc/rdma's get and put would not be atomic against other
# processes' atomics there), which refuses it.
one_sided=(--mca pml ob1 --mca btl efa,self --mca osc rdma --mca common_efa_provider_include tcp
    --mca common_efa_debug_fake_device 1 --mca common_efa_verbose 1
    --mca btl_efa_debug_corrupt_offset 4096)
run "${one_sided[@]}" "$bindir/device_hostile"
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_hostile" <<<"$OUT" &&
    grep -q "btl:efa: an atomic at .* outside the handle it came with refused" <<<"$OUT" &&
    grep -q "refused a one-sided put request" <<<"$OUT" &&
    ! grep -q "refused a one-sided atomic request" <<<"$OUT" && ok=1
verdict window-uncovered-atomic-refused $ok "exit $RC: an atomic outside its handle reached the target, or was not said"
osc_bin=${OSC_TEST_BIN_DIR:-$bindir/../osc}
run "${one_sided[@]}" "$osc_bin/osc_hostile"
ok=0
[ $RC -eq 0 ] && grep -q "^OK hostile" <<<"$OUT" &&
    grep -q "refused a one-sided atomic request" <<<"$OUT" &&
    ! grep -q "outside the handle it came with refused" <<<"$OUT" && ok=1
verdict host-window-uncovered-atomic-to-target $ok "exit $RC: an atomic outside its handle on a host window was refused at the origin, or not by the target"

# (whichever this node has: Open MPI's accelerator taken, or why not)
run "${cm[@]}" --mca common_efa_verbose 1 --mca mtl_efa_device_buffers own "$bindir/pingpong" -s 4K -i 2
ok=0
[ $RC -eq 0 ] && grep -qE "device buffers: (not supported here \(.*own needs one\)|copied through the host by mtl_efa with Open MPI's [a-z]+ accelerator|copied through the host by Open MPI's convertor \(its CUDA support\); mtl_efa_device_buffers own needs Open MPI 5)" <<<"$OUT" && ok=1
verdict own-without-accelerator-said $ok "exit $RC, or the build's device support not said"

run "${cm[@]}" --mca mtl_efa_device_buffers gpu "$bindir/pingpong" -s 4K -i 2
ok=0
[ $RC -ne 0 ] && [ $RC -ne 124 ] && grep -q "Allowed:   auto, open-mpi, own" <<<"$OUT" &&
    ! grep -qiE "segmentation fault|signal 11" <<<"$OUT" && ok=1
verdict bad-setting-refused $ok "exit $RC: a bad mtl_efa_device_buffers was not refused clearly"

# The GPU check's own program (tests/gpu/vmm_buffers.c, run on a GPU host
# only) compiles against this Open MPI and CUDA's headers, so that it does
# not rot between GPU runs.
cuda=${CUDA_HOME:-/usr/local/cuda}
top=$(cd "$(dirname "$0")/.." && pwd)
if [ -f "$cuda/include/cuda.h" ]; then
    OUT=$(mpicc -Wall -Wextra -Werror -fsyntax-only -I"$cuda/include" "$top/tests/gpu/vmm_buffers.c" 2>&1)
    RC=$?
    ok=0
    [ $RC -eq 0 ] && ok=1
    verdict gpu-vmm-program-compiles $ok "tests/gpu/vmm_buffers.c does not compile"
else
    echo "SKIP device/gpu-vmm-program-compiles: no CUDA headers at $cuda/include"
    skipped=$((skipped + 1))
fi

# The mock CUDA driver the GPU check rehearses on (tests/gpu/mock-cuda:
# run-gpu-check.sh -m) builds warning-free and still does what the
# rehearsal relies on (device memory the CPU cannot touch, IPC, VMM).
if [ -f "$cuda/include/cuda.h" ]; then
    mock=$(mktemp -d)
    OUT=$(bash "$top/tests/gpu/mock-cuda/build.sh" "$mock" 2>&1 && "$mock/mock_check" 2>&1)
    RC=$?
    ok=0
    [ $RC -eq 0 ] && grep -q "^ok mock_check" <<<"$OUT" && ok=1
    verdict gpu-mock-driver $ok "exit $RC: $(tail -n 3 <<<"$OUT")"
    rm -rf "$mock"
else
    echo "SKIP device/gpu-mock-driver: no CUDA headers at $cuda/include"
    skipped=$((skipped + 1))
fi

echo "$pass passed, $fail failed, $skipped skipped"
[ $fail -eq 0 ]
