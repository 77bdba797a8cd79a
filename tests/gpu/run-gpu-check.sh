#!/usr/bin/env bash
# The GPU check (issue 31): device buffers over the components on a host
# with an NVIDIA GPU, 2 processes on one node, side by side with Open MPI's
# own paths in the same run, OSU 7.4 with validation (-c) and device
# buffers on both sides (-d cuda D D).  Bounded to about 8 minutes: runs
# that would start after GPU_CHECK_BUDGET seconds (default 420) are
# skipped and said so, and the summary is written whatever happens.
#
#   tests/gpu/run-gpu-check.sh [-u KIT_TARBALL | -k KIT_DIR] -c COMPONENT_DIR [-o OUT] [-m MOCK] [-r REGEX] [-l]
#     -u  the GPU kit's tarball, unpacked into /tmp (default .gpu/kit.tar.xz)
#     -k  an unpacked kit (default /tmp/gpu-kit once unpacked)
#     -c  our components built against the kit (tests/gpu/prepare-carry.sh:
#         .gpu/inst/lib/openmpi)
#     -o  where the logs and summary.md go (default /tmp/gpu-check)
#     -m  a rehearsal without a GPU: the mock CUDA driver and runtime built
#         in MOCK (tests/gpu/mock-cuda/build.sh) stand in for NVIDIA's; every
#         path runs and checks its bytes, no figure means anything
#     -r  only the runs whose name matches REGEX (grep -E), e.g. to run
#         again those that failed
#     -l  list the runs, run nothing (no GPU needed)
#
# Runs (each its own mpirun, 60 s at most, its leftover processes killed):
#   pt2pt   osu_latency and osu_bw, 1 B to 4 MiB, over
#           - pml cm + mtl_efa: on-node path (rings), provider path on
#             tcp;ofi_rxm in both matching modes, shm provider; each with
#             Open MPI copying device buffers (mtl_efa_device_buffers
#             open-mpi, the default) and the on-node path with mtl_efa
#             copying them (own: device to device by CUDA IPC; and with
#             mtl_efa_device_ipc 0, through the host), own matching on
#             tcp;ofi_rxm with mtl_efa copying them (receives read from the
#             sender copied to the device piece by piece), and the shm provider
#             handed device buffers as they are (own: FI_HMEM; under own
#             matching, read from the sender's device registration straight
#             into the receiver's);
#           - pml ob1 + btl_efa (tcp;ofi_rxm);
#           - the anchors: pml cm + mtl/ofi on tcp;ofi_rxm, pml ob1 + sm
#             (host staging), pml ob1 + sm + smcuda (CUDA IPC).
#   vmm     tests/gpu/vmm_buffers (.gpu/bin, built by prepare-carry.sh):
#           plain, VMM (one physical allocation, and a buffer across two)
#           and stream-ordered pool memory sent both ways, every byte
#           checked, over mtl_efa on shm handed device buffers as they are
#           (common_efa_hmem_vmm auto, and off; the buffer across two
#           alone too, which must be one registration over both), the
#           on-node path with mtl_efa copying (CUDA IPC: cudaMalloc
#           memory by its legacy handle, VMM memory by the descriptors
#           of its allocations; pool memory streams), the VMM buffer
#           across two allocations alone on that path, and one across
#           ten (more than an IPC name lists by id) alone there, own matching on
#           tcp;ofi_rxm, ob1 + btl_efa, and ob1 + sm + smcuda (the
#           anchor); on shm the finalize counts must show VMM memory by
#           FI_HMEM (auto) or copied (off), on the on-node path more
#           device messages by IPC
#           than streamed (plain, vmm, vmm-span and vmm-remapped against
#           pool; the buffers across two and ten alone too), and Open MPI must not
#           complain of buffer ids.
#   osc     osu_put_latency and osu_get_bw with windows in device memory
#           (MPI_Win_create) over osc/rdma + btl_efa (puts and gets executed
#           by the window's owner with the device's copy; on shm with
#           FI_HMEM by the provider's RDMA), and over Open MPI's osc (the
#           anchors: ob1 + sm + smcuda, where Open MPI 5.0's osc/rdma
#           refuses a device window; osc/rdma + btl/ofi on shm).
# summary.md: per run its exit, validation, the latency at 1 B, 64 KiB and
# 4 MiB and the peak bandwidth.  Exit 0 when every run of ours exited 0
# and validated.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
kit_tar=$top/.gpu/kit.tar.xz kit="" comp="" out=/tmp/gpu-check list=0 mock="" only=""
while getopts "u:k:c:o:m:r:l" o; do
    case $o in
    u) kit_tar=$OPTARG ;;
    k) kit=$OPTARG ;;
    c) comp=$OPTARG ;;
    o) out=$OPTARG ;;
    m) mock=$OPTARG ;;
    r) only=$OPTARG ;;
    l) list=1 ;;
    *) sed -n '2,/^set -u/p' "$0" | sed '$d'; exit 2 ;;
    esac
done
[ -n "$comp" ] || comp=$top/.gpu/inst/lib/openmpi
if [ -z "$kit" ]; then
    kit=/tmp/gpu-kit
    if [ ! -f "$kit/env.sh" ] && [ $list = 0 ]; then
        [ -f "$kit_tar" ] || { echo "run-gpu-check: no kit at $kit nor tarball $kit_tar" >&2; exit 2; }
        tar -C /tmp -xJf "$kit_tar" && find "$kit" -name '*.la' -delete
    fi
fi
if [ $list = 0 ]; then
    # shellcheck source=/dev/null
    . "$kit/env.sh"
    if [ -n "$mock" ]; then
        [ -f "$mock/libcuda.so.1" ] || { echo "run-gpu-check: no mock driver in $mock (tests/gpu/mock-cuda/build.sh)" >&2; exit 2; }
        # (ahead of the kit's paths, which name CUDA's own runtime)
        export LD_LIBRARY_PATH=$mock:$LD_LIBRARY_PATH PATH=$mock:$PATH
    fi
    # The components' core library beside them (their RUNPATH names where
    # they were built, which need not be where the checkout lands).
    LD_LIBRARY_PATH=$(cd "$comp/.." && pwd):$LD_LIBRARY_PATH
    export LD_LIBRARY_PATH
    if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L; then
        echo "run-gpu-check: no GPU here" >&2
        exit 2
    fi
    [ -f "$comp/mca_mtl_efa.so" ] || { echo "run-gpu-check: no mca_mtl_efa.so in $comp" >&2; exit 2; }
    mkdir -p "$out"
fi
osu=${OSU_GPU:-$kit/osu/libexec/osu-micro-benchmarks/mpi}
base=(-np 2 --bind-to core --mca mca_base_component_path "$kit/ompi/lib/openmpi:$comp")
rxm=(--mca mtl_efa_provider_include "tcp;ofi_rxm" --mca btl_efa_provider_include "tcp;ofi_rxm")

# name|ours(1/0)|mpirun arguments
pt2pt_runs=(
    "mtl_efa-onnode|1|--mca pml cm --mca mtl efa ${rxm[*]}"
    "mtl_efa-onnode-own|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_device_buffers own"
    "mtl_efa-onnode-own-noipc|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_device_buffers own --mca mtl_efa_device_ipc 0"
    "mtl_efa-rxm-provider|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_onnode_channel none --mca mtl_efa_matching provider"
    "mtl_efa-rxm-own-matching|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_onnode_channel none --mca mtl_efa_matching own"
    "mtl_efa-rxm-own-matching-own|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_onnode_channel none --mca mtl_efa_matching own --mca mtl_efa_device_buffers own"
    "mtl_efa-shm|1|--mca pml cm --mca mtl efa --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_channel none"
    "mtl_efa-shm-own|1|--mca pml cm --mca mtl efa --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_channel none --mca mtl_efa_matching provider --mca mtl_efa_device_buffers own"
    "mtl_efa-shm-own-matching-own|1|--mca pml cm --mca mtl efa --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_channel none --mca mtl_efa_matching own --mca mtl_efa_device_buffers own"
    "btl_efa-rxm|1|--mca pml ob1 --mca btl efa,self ${rxm[*]}"
    "mtl_ofi-rxm|0|--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp;ofi_rxm"
    "ob1-sm|0|--mca pml ob1 --mca btl sm,self"
    "ob1-sm-smcuda|0|--mca pml ob1 --mca btl sm,smcuda,self"
)
osc_runs=(
    "osc-rdma-btl_efa|1|--mca pml ob1 --mca btl efa,self --mca osc rdma ${rxm[*]}"
    "osc-rdma-btl_efa-shm-hmem|1|--mca pml ob1 --mca btl efa,self --mca osc rdma --mca btl_efa_provider_include shm --mca common_efa_hmem on --mca btl_efa_rma_mode native"
    "osc-default|0|--mca pml ob1 --mca btl sm,smcuda,self"
    "osc-rdma-btl_ofi-shm|0|--mca pml ob1 --mca btl ofi,self --mca osc rdma --mca btl_ofi_provider_include shm"
)

shm_own=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_channel none
    --mca mtl_efa_matching provider --mca mtl_efa_device_buffers own)
vmm_runs=(
    "vmm-shm-own|1|${shm_own[*]}"
    "vmm-shm-own-vmm-off|1|${shm_own[*]} --mca common_efa_hmem_vmm off"
    "vmm-shm-own-span|1|${shm_own[*]}|-k vmm-span"
    "vmm-onnode-own|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_device_buffers own"
    "vmm-onnode-own-span|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_device_buffers own|-k vmm-span"
    "vmm-onnode-own-pieces|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_device_buffers own|-k vmm-pieces"
    "vmm-rxm-own-matching-own|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_onnode_channel none --mca mtl_efa_matching own --mca mtl_efa_device_buffers own"
    "vmm-btl_efa-rxm|1|--mca pml ob1 --mca btl efa,self ${rxm[*]}"
    "vmm-ob1-sm-smcuda|0|--mca pml ob1 --mca btl sm,smcuda,self"
)
vmm_prog=$top/.gpu/bin/vmm_buffers
# keep ARRAY: only its runs whose name matches -r's REGEX.
keep() {
    local -n runs=$1
    local kept=() r
    for r in "${runs[@]}"; do
        grep -qE -- "$only" <<<"${r%%|*}" && kept+=("$r")
    done
    runs=(${kept[@]+"${kept[@]}"})
}
if [ -n "$only" ]; then
    keep pt2pt_runs
    keep osc_runs
    keep vmm_runs
fi

fails=0 skipped=0
deadline=$((SECONDS + ${GPU_CHECK_BUDGET:-420}))
# OSU 7.4's word for a wrong byte: its Validation column says Fail, and
# the job ends with "DATA VALIDATION ERROR".
invalid() { grep -qE 'DATA VALIDATION ERROR|[[:space:]]Fail$' "$@"; }
# run NAME OURS BENCH ARGS... : one mpirun, its log in $out/NAME.BENCH.txt
run() {
    local name=$1 ours=$2 bench=$3 log rc
    shift 3
    log=$out/$name.$bench.txt
    if [ $list = 1 ]; then
        printf '%q ' timeout 60 mpirun "${base[@]}" "$@"
        echo
        return
    fi
    if [ $SECONDS -ge $deadline ]; then
        echo "skipped (the check's budget of ${GPU_CHECK_BUDGET:-420} s was spent)" >"$log"
        echo "exit skipped" >>"$log"
        skipped=$((skipped + 1))
        return
    fi
    timeout -k 5 60 mpirun "${base[@]}" "$@" >"$log" 2>&1
    rc=$?
    echo "exit $rc" >>"$log"
    # (a killed mpirun can leave its ranks: they would hold the GPU and the
    # ports of the next run)
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && pkill -KILL -f "$osu/|$vmm_prog" 2>/dev/null
    if [ "$ours" = 1 ] && { ! grep -q "^exit 0$" "$log" || invalid "$log"; }; then
        fails=$((fails + 1))
    fi
}

for r in ${pt2pt_runs[@]+"${pt2pt_runs[@]}"}; do
    IFS='|' read -r name ours args <<<"$r"
    read -r -a a <<<"$args"
    run "$name" "$ours" osu_latency "${a[@]}" --mca common_efa_verbose 1 \
        "$osu/pt2pt/osu_latency" -c -d cuda -m 1:4194304 -i 200 -x 20 D D
    run "$name" "$ours" osu_bw "${a[@]}" "$osu/pt2pt/osu_bw" -c -d cuda -m 1:4194304 -i 20 -x 4 D D
done
for r in ${osc_runs[@]+"${osc_runs[@]}"}; do
    IFS='|' read -r name ours args <<<"$r"
    read -r -a a <<<"$args"
    for b in osu_put_latency osu_get_bw; do
        run "$name" "$ours" "$b" "${a[@]}" --mca common_efa_verbose 1 "$osu/one-sided/$b" \
            -d cuda -w create -m 1:1048576 -i 500 -x 50 D D
    done
done
# vmm_check NAME WANT: the run's finalize lines against what it should
# show (an exit and validation are checked by run): "provider": VMM and
# pool memory went to shm by FI_HMEM, none copied for lack of synchronous
# copies; "span": that, and buffers over two allocations registered as
# one (a dmabuf of the whole range); "host": some was; "ipc": more device
# messages came by the device's IPC than streamed; and never Open MPI's complaint about a buffer
# id or SYNC_MEMOPS (the components no longer ask it for such memory) nor
# an allocation left without an id (the driver's id call failing).
vmm_check() {
    local log=$out/$1.vmm_buffers.txt staged hmem ipc streamed spans
    staged=$(sed -n 's/.*; \([0-9]*\) buffers without synchronous memory operations.*/\1/p' "$log" |
        awk '{n += $1} END {print n + 0}')
    hmem=$(sed -n 's/.*(FI_HMEM): \([0-9]*\) sends.*/\1/p' "$log" | awk '{n += $1} END {print n + 0}')
    spans=$(sed -n 's/.*; \([0-9]*\) registrations over several CUDA VMM allocations.*/\1/p' "$log" |
        awk '{n += $1} END {print n + 0}')
    read -r ipc streamed < <(sed -n "s/.*device messages received from this node: \([0-9]*\) by the device's IPC, \([0-9]*\) streamed.*/\1 \2/p" "$log" |
        awk '{i += $1; s += $2} END {print i + 0, s + 0}')
    [ -f "$log" ] && ! grep -q "^exit skipped" "$log" || return 0
    if grep -qE "cuPointerSetAttribute with CU_POINTER_ATTRIBUTE_SYNC_MEMOPS|cuPointerSetAttribute return value|BUFFER_ID of a GPU memory|device allocation id \(none given\)" "$log" ||
        { [ "$2" = provider ] && { [ "$staged" -ne 0 ] || [ "$hmem" -eq 0 ]; }; } ||
        { [ "$2" = span ] && { [ "$staged" -ne 0 ] || [ "$hmem" -eq 0 ] || [ "$spans" -eq 0 ]; }; } ||
        { [ "$2" = host ] && [ "$staged" -eq 0 ]; } ||
        { [ "$2" = ipc ] && [ "$ipc" -le "$streamed" ]; }; then
        echo "run-gpu-check: $1: $staged buffers copied for lack of synchronous copies, $hmem sends by FI_HMEM, $spans registrations over several allocations, $ipc device messages by IPC and $streamed streamed (want: $2)" |
            tee -a "$log" >&2
        fails=$((fails + 1))
    fi
}
for r in ${vmm_runs[@]+"${vmm_runs[@]}"}; do
    IFS='|' read -r name ours args prog_args <<<"$r"
    read -r -a a <<<"$args"
    read -r -a pa <<<"$prog_args"
    if [ -x "$vmm_prog" ] || [ $list = 1 ]; then
        run "$name" "$ours" vmm_buffers "${a[@]}" --mca common_efa_verbose 1 "$vmm_prog" -s 4194304 ${pa[@]+"${pa[@]}"}
    elif [ "$ours" = 1 ]; then
        echo "run-gpu-check: no $vmm_prog (tests/gpu/prepare-carry.sh builds it)" >&2
        fails=$((fails + 1))
    fi
done
if [ $list = 0 ] && [ -x "$vmm_prog" ]; then
    vmm_check vmm-shm-own provider
    vmm_check vmm-shm-own-span span
    vmm_check vmm-shm-own-vmm-off host
    vmm_check vmm-onnode-own ipc
    vmm_check vmm-onnode-own-span ipc
    vmm_check vmm-onnode-own-pieces ipc
fi
[ $list = 1 ] && exit 0

# The summary: latency (us) at 1 B, 64 KiB, 4 MiB; peak bandwidth (MB/s).
at() { awk -v s="$2" '$1 == s { print $2; exit }' "$1"; }
peak() { awk '$1 ~ /^[0-9]+$/ && $2 + 0 > m { m = $2 + 0 } END { print m + 0 }' "$1"; }
{
    echo "# GPU check, $(date -u +%FT%TZ), $(nvidia-smi -L | head -1)"
    echo
    echo "| run | exit | validation | 1 B us | 64 KiB us | 4 MiB us | peak MB/s |"
    echo "|---|---|---|---:|---:|---:|---:|"
    for r in ${pt2pt_runs[@]+"${pt2pt_runs[@]}"}; do
        name=${r%%|*}
        l=$out/$name.osu_latency.txt b=$out/$name.osu_bw.txt
        v=ok
        invalid "$l" "$b" && v=FAILED
        echo "| $name | $(tail -n 1 "$l" | cut -d' ' -f2)/$(tail -n 1 "$b" | cut -d' ' -f2) | $v |" \
            "$(at "$l" 1) | $(at "$l" 65536) | $(at "$l" 4194304) | $(peak "$b") |"
    done
    for r in ${osc_runs[@]+"${osc_runs[@]}"}; do
        name=${r%%|*}
        for b in osu_put_latency osu_get_bw; do
            l=$out/$name.$b.txt
            said=""
            grep -q "btl:efa: device memory registered" "$l" && said=" (a device window of btl_efa)"
            grep -q "btl:efa: device memory registered.*FI_HMEM" "$l" && said=" (a device window of btl_efa, FI_HMEM)"
            echo "| $name $b | $(tail -n 1 "$l" | cut -d' ' -f2)$said | | $(at "$l" 1) | | | $(peak "$l") |"
        done
    done
    for r in ${vmm_runs[@]+"${vmm_runs[@]}"}; do
        name=${r%%|*}
        l=$out/$name.vmm_buffers.txt
        [ -f "$l" ] || continue
        echo "| $name vmm_buffers | $(tail -n 1 "$l" | cut -d' ' -f2) |" \
            "$(grep -q '^ok vmm_buffers' "$l" && echo ok || echo FAILED) | | | | |"
    done
    echo
    # (VMM and pool memory: where the report sends it, what was copied for
    # it, and whether Open MPI's buffer-id call still complained)
    for name in vmm-shm-own vmm-shm-own-vmm-off vmm-onnode-own vmm-onnode-own-span vmm-onnode-own-pieces; do
        l=$out/$name.vmm_buffers.txt
        [ -f "$l" ] || continue
        echo "    $name:"
        grep -h "without synchronous memory operations\|(FI_HMEM)\|bufferID\|cuPointerSetAttribute\|device messages received from this node" "$l" |
            sed 's/^/      /' | sort -u
    done
    # (the own run's finalize counts: device messages by CUDA IPC, streamed;
    # these logs are absent where -r left their runs out)
    grep -h "device messages received from this node\|device buffers to processes of this node" \
        "$out/mtl_efa-onnode-own.osu_latency.txt" 2>/dev/null | sed 's/^/    /' | sort -u
    # (own matching with mtl_efa copying: device receives read from the
    # sender copied to the device piece by piece, mtl_efa_device_piece)
    grep -h "device messages read from other nodes" \
        "$out/mtl_efa-rxm-own-matching-own.osu_latency.txt" 2>/dev/null | sed 's/^/    /' | sort -u
    # (the shm own run's: device buffers handed to the provider by FI_HMEM,
    # and whether their registrations went through a dmabuf)
    grep -h "(FI_HMEM)\|device registrations:" "$out/mtl_efa-shm-own.osu_latency.txt" 2>/dev/null |
        sed 's/^/    /' | sort -u
    # (own matching on shm with FI_HMEM: device sends offered for reading
    # from their registration, device receives read straight into theirs)
    grep -h "device messages sent to other nodes\|device messages read from other nodes" \
        "$out/mtl_efa-shm-own-matching-own.osu_latency.txt" 2>/dev/null | sed 's/^/    /' | sort -u
    echo
    echo "$fails run(s) of ours failed, $skipped run(s) skipped for the budget"
} | tee "$out/summary.md"
[ $fails -eq 0 ] && [ $skipped -eq 0 ]
