#!/usr/bin/env bash
# The on-node doorbell: ob1 + btl_efa on one node (tcp;ofi_rxm), messages
# larger than a ring slot (which go by the provider) sent after quiet
# spells to a receiver whose paced provider poll waits a second
# (common_efa_net_poll_interval and _max 1000000): tests/mpi/quiet_wake
# fails when one arrives more than 200 ms after its send, which only the
# sender's ring of the receiver's doorbell prevents; the same from a
# sender without a channel of its own, which the receiver polls for on
# every call.  The run's verbose report must also say that the wait
# doubles by default.
# Prints "N passed, N failed".
#   run-wake-test.sh <component-dir> <mpi-test-bin-dir>
set -u
# shellcheck source=runner-args.sh
. "$(dirname "$0")/runner-args.sh"
pass=0
fail=0

result() {
    if [ -n "$2" ]; then
        echo "FAIL wake/$1: $2"
        grep -E "FAIL|rror|quiet_wake" <<<"$3" | head -20 | sed 's/^/    /'
        fail=$((fail + 1))
    else
        echo "PASS wake/$1"
        pass=$((pass + 1))
    fi
}

ob1=(--mca mca_base_component_path "$path" --mca pml ob1 --mca btl "efa,self"
    --mca btl_efa_provider_include "tcp;ofi_rxm")

out=$(timeout 120 mpirun -np 2 "${ob1[@]}" --mca common_efa_net_poll_interval 1000000 \
    --mca common_efa_net_poll_interval_max 1000000 "$bindir/quiet_wake" -i 5 -q 30 -l 200 2>&1)
rc=$?
why=""
if [ $rc -ne 0 ] || ! grep -q "^ok quiet_wake" <<<"$out"; then
    why="the job failed (exit $rc)"
fi
result doorbell-beats-a-1s-poll "$why" "$out"

# The sender without a BTL channel of its own (btl_efa_debug_fail_inbox_rank
# 1) sends everything through the provider and rings nothing: the receiver
# holds an interest for it instead (polled on every call).
out=$(timeout 120 mpirun -np 2 "${ob1[@]}" --mca common_efa_net_poll_interval 1000000 \
    --mca common_efa_net_poll_interval_max 1000000 --mca btl_efa_debug_fail_inbox_rank 1 \
    "$bindir/quiet_wake" -i 5 -q 30 -l 200 2>&1)
rc=$?
why=""
if [ $rc -ne 0 ] || ! grep -q "^ok quiet_wake" <<<"$out"; then
    why="the job failed (exit $rc)"
fi
result sender-without-channel-polled "$why" "$out"

out=$(timeout 120 mpirun -np 2 "${ob1[@]}" --mca common_efa_verbose 1 "$bindir/quiet_wake" \
    -i 1 -q 5 2>&1)
rc=$?
why=""
if [ $rc -ne 0 ] || ! grep -q "^ok quiet_wake" <<<"$out"; then
    why="the job failed (exit $rc)"
elif ! grep -q "otherwise every 20 us (net_poll_interval), doubling while it stays quiet up to 1000 us" <<<"$out"; then
    why="the report does not state the default pacing"
fi
result default-pacing-reported "$why" "$out"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
