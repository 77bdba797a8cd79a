#!/usr/bin/env bash
# Device (GPU) buffers beyond tests/mpi/device_buffers (which every pml cm
# suite runs on the core's fake device):
#   - the control: with mtl_efa told to look away (mtl_efa_debug_device_blind),
#     the fake's memory must crash the job, on the rings and on the
#     provider path: device_buffers passing elsewhere is then the copies'
#     doing, not the fake's leniency;
#   - a window (osc/rdma over btl_efa) in device memory refused by btl_efa,
#     with its message, MPI_Win_create failing and the process going on;
#   - what is said: the fake named at verbose 1; where Open MPI has no
#     accelerator component, "not supported here" (and
#     mtl_efa_device_buffers own asked for says why it cannot be); a bad
#     setting refused.
#   run-device-tests.sh <component-dir> <mpi-test-bin-dir>
set -u
# shellcheck source=runner-args.sh
. "$(dirname "$0")/runner-args.sh"
prog=$bindir/device_buffers
pass=0 fail=0
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

# osc/rdma over btl_efa: a window in device memory is refused by btl_efa
# (said), MPI_Win_create fails, the process goes on.
run --mca pml ob1 --mca btl efa,self --mca osc rdma --mca common_efa_provider_include tcp \
    --mca common_efa_debug_fake_device 1 "$prog" -w
ok=0
[ $RC -eq 0 ] && grep -q "^ok device_buffers a window over device memory refused" <<<"$OUT" &&
    grep -q "btl_efa was offered device (GPU) memory for one-sided operations" <<<"$OUT" && ok=1
verdict window-refused $ok "exit $RC: a window in device memory was not refused with btl_efa's message"

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

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
