#!/usr/bin/env bash
# The GPU check (issue 31): device buffers over the components on a host
# with an NVIDIA GPU, 2 processes on one node, side by side with Open MPI's
# own paths in the same run, OSU 7.4 with validation (-c) and device
# buffers on both sides (-d cuda D D).  Bounded: no run starts that could
# end after GPU_CHECK_BUDGET seconds (default 390; each run 60 s at most),
# those skipped are said so, and the check fails.  The runs go in order
# of what they decide: every latency run (ours beside its anchor), the
# VMM runs, the bandwidth runs, then the one-sided ones.
#
# What comes back from a device machine is a few files: OUT holds only
# env.txt (the machine: kernel, driver, CUDA libraries, the shm
# provider's FI_HMEM), progress.txt (a line per run as it ends),
# logs.tar.gz (every run's log, packed again after each run) and
# summary.md (the table, the issue's goals against the anchors; written
# at the end, or when the script is stopped by a signal).  The logs
# themselves are in GPU_CHECK_LOGS (default /tmp/gpu-check-logs).
#
#   tests/gpu/run-gpu-check.sh [-u KIT_TARBALL | -k KIT_DIR] -c COMPONENT_DIR [-o OUT] [-m MOCK] [-r REGEX] [-l]
#     -u  the GPU kit's tarball, unpacked into /tmp (default .gpu/kit.tar.xz)
#     -k  an unpacked kit (default /tmp/gpu-kit once unpacked)
#     -c  our components built against the kit (tests/gpu/prepare-carry.sh:
#         .gpu/inst/lib/openmpi)
#     -o  where env.txt, progress.txt, logs.tar.gz and summary.md go
#         (default /tmp/gpu-check)
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
#           refuses a device window; osc/rdma with btl/ofi on shm beside sm,
#           without which ob1 crashes in MPI_Win_create).  OSU's one-sided
#           programs have no validation (-c).
# summary.md: per run its exit, validation, the latency at 1 B, 64 KiB and
# 4 MiB and the peak bandwidth; then the issue's goals, each against its
# anchor in this run.  Exit 0 when every run of ours exited 0 and
# validated and none was skipped.
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
logs=${GPU_CHECK_LOGS:-/tmp/gpu-check-logs}
budget=${GPU_CHECK_BUDGET:-390}
# stop WHY: the check cannot run; said on stderr and in OUT's summary.md
stop() {
    echo "run-gpu-check: $1" >&2
    [ $list = 1 ] || echo "run-gpu-check: $1" >>"$out/summary.md"
    exit 2
}
if [ $list = 0 ]; then
    if ! mkdir -p "$out" || ! rm -f "$out/summary.md" "$out/progress.txt" "$out/env.txt" "$out/logs.tar.gz"; then
        echo "run-gpu-check: cannot write to $out" >&2
        exit 2
    fi
    rm -rf "$logs"
    mkdir -p "$logs" || stop "cannot make the log folder $logs"
fi
if [ -z "$kit" ]; then
    kit=/tmp/gpu-kit
    if [ ! -f "$kit/env.sh" ] && [ $list = 0 ]; then
        [ -f "$kit_tar" ] || stop "no kit at $kit nor tarball $kit_tar"
        tar -C /tmp -xJf "$kit_tar" || stop "cannot unpack $kit_tar into /tmp"
        find "$kit" -name '*.la' -delete
    fi
fi
if [ $list = 0 ]; then
    [ -f "$kit/env.sh" ] || stop "no $kit/env.sh"
    # shellcheck source=/dev/null
    . "$kit/env.sh" || stop "$kit/env.sh failed"
    if [ -n "$mock" ]; then
        [ -f "$mock/libcuda.so.1" ] || stop "no mock driver in $mock (tests/gpu/mock-cuda/build.sh)"
        # (ahead of the kit's paths, which name CUDA's own runtime)
        export LD_LIBRARY_PATH=$mock:$LD_LIBRARY_PATH PATH=$mock:$PATH
    fi
    # The components' core library beside them (their RUNPATH names where
    # they were built, which need not be where the checkout lands).
    LD_LIBRARY_PATH=$(cd "$comp/.." && pwd):$LD_LIBRARY_PATH
    export LD_LIBRARY_PATH
    [ -f "$comp/mca_mtl_efa.so" ] || stop "no mca_mtl_efa.so in $comp"
    # The machine, for reading the figures (and the causes of a failure
    # that is the machine's: no CUDA runtime for libfabric, no FI_HMEM).
    {
        echo "kernel: $(uname -r)"
        timeout 20 nvidia-smi --query-gpu=name,driver_version,compute_mode,memory.total --format=csv
        echo "CUDA runtimes:" /usr/local/cuda*/lib64/libcudart.so* /usr/lib/x86_64-linux-gnu/libcudart.so*
        echo "ldconfig: $(ldconfig -p 2>/dev/null | grep -oE 'lib(cuda|cudart|nvidia-ml)\.so[.0-9]*' | sort -u | tr '\n' ' ')"
        echo "shm provider: $(timeout 20 fi_info -p shm -v 2>/dev/null | grep -m1 -oE 'FI_HMEM' || echo 'no FI_HMEM')"
        echo "ulimit -l: $(ulimit -l); cores: $(nproc)"
    } >"$out/env.txt" 2>&1
    if ! command -v nvidia-smi >/dev/null || ! timeout 20 nvidia-smi -L >>"$out/env.txt" 2>&1; then
        stop "no GPU here (nvidia-smi -L failed)"
    fi
fi
osu=${OSU_GPU:-$kit/osu/libexec/osu-micro-benchmarks/mpi}
base=(-np 2 --bind-to core --mca mca_base_component_path "$kit/ompi/lib/openmpi:$comp")
rxm=(--mca mtl_efa_provider_include "tcp;ofi_rxm" --mca btl_efa_provider_include "tcp;ofi_rxm")

# name|ours(1/0)|mpirun arguments
pt2pt_runs=(
# (in order of what they decide: ours on one node, its anchors, ours
# through the provider, its anchor, then the rest)
    "mtl_efa-onnode|1|--mca pml cm --mca mtl efa ${rxm[*]}"
    "mtl_efa-onnode-own|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_device_buffers own"
    "ob1-sm-smcuda|0|--mca pml ob1 --mca btl sm,smcuda,self"
    "ob1-sm|0|--mca pml ob1 --mca btl sm,self"
    "mtl_efa-rxm-provider|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_onnode_channel none --mca mtl_efa_matching provider"
    "mtl_efa-rxm-own-matching|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_onnode_channel none --mca mtl_efa_matching own"
    "mtl_efa-rxm-own-matching-own|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_onnode_channel none --mca mtl_efa_matching own --mca mtl_efa_device_buffers own"
    "mtl_ofi-rxm|0|--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include tcp;ofi_rxm"
    "btl_efa-rxm|1|--mca pml ob1 --mca btl efa,self ${rxm[*]}"
    "mtl_efa-onnode-own-noipc|1|--mca pml cm --mca mtl efa ${rxm[*]} --mca mtl_efa_device_buffers own --mca mtl_efa_device_ipc 0"
    "mtl_efa-shm|1|--mca pml cm --mca mtl efa --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_channel none"
    "mtl_efa-shm-own|1|--mca pml cm --mca mtl efa --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_channel none --mca mtl_efa_matching provider --mca mtl_efa_device_buffers own"
    "mtl_efa-shm-own-matching-own|1|--mca pml cm --mca mtl efa --mca mtl_efa_provider_include shm --mca mtl_efa_onnode_channel none --mca mtl_efa_matching own --mca mtl_efa_device_buffers own"
)
osc_runs=(
    "osc-rdma-btl_efa|1|--mca pml ob1 --mca btl efa,self --mca osc rdma ${rxm[*]}"
    "osc-rdma-btl_efa-shm-hmem|1|--mca pml ob1 --mca btl efa,self --mca osc rdma --mca btl_efa_provider_include shm --mca common_efa_hmem on --mca btl_efa_rma_mode native"
    "osc-default|0|--mca pml ob1 --mca btl sm,smcuda,self"
    "osc-rdma-btl_ofi-shm|0|--mca pml ob1 --mca btl ofi,sm,self --mca osc rdma --mca btl_ofi_provider_include shm"
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

fails=0 skipped=0 ran=0 running=""
deadline=$((SECONDS + budget))
# OSU 7.4's word for a wrong byte: its Validation column says Fail, and
# the job ends with "DATA VALIDATION ERROR".
invalid() { grep -qE 'DATA VALIDATION ERROR|[[:space:]]Fail$' "$@" 2>/dev/null; }
# run NAME OURS BENCH ARGS... : one mpirun, its log in $logs/NAME.BENCH.txt
run() {
    local name=$1 ours=$2 bench=$3 log rc start
    shift 3
    log=$logs/$name.$bench.txt
    if [ $list = 1 ]; then
        printf '%q ' timeout 60 mpirun "${base[@]}" "$@"
        echo
        return
    fi
    # (a run starts only where its 60 s limit and the kill after it end
    # within the budget)
    if [ $((SECONDS + 66)) -gt $deadline ]; then
        echo "skipped (the check's budget of $budget s was spent)" >"$log"
        echo "exit skipped" >>"$log"
        skipped=$((skipped + 1))
        echo "$name $bench skipped" >>"$out/progress.txt"
        return
    fi
    start=$SECONDS
    # (in the background: a signal's trap runs at once, not after the run)
    timeout -k 5 60 mpirun "${base[@]}" "$@" >"$log" 2>&1 &
    running=$!
    wait "$running"
    rc=$?
    running=""
    [ "$(stat -c %s "$log")" -le 4000000 ] || truncate -s 4000000 "$log"
    echo "exit $rc" >>"$log"
    ran=$((ran + 1))
    # (a killed mpirun can leave its ranks: they would hold the GPU and the
    # ports of the next run)
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        pkill -KILL -f "$osu/|$vmm_prog" 2>/dev/null
    fi
    if [ "$ours" = 1 ] && { ! grep -q "^exit 0$" "$log" || invalid "$log"; }; then
        fails=$((fails + 1))
    fi
    echo "$name $bench exit $rc $((SECONDS - start)) s$(invalid "$log" && echo ' VALIDATION FAILED')" \
        >>"$out/progress.txt"
    tar -C "$logs" -czf "$out/logs.tar.gz" . 2>/dev/null
}
# (the runs' arguments: a fourth field, the program's own)
args_of() {
    IFS='|' read -r name ours args prog_args <<<"$1"
    read -r -a a <<<"$args"
    read -r -a pa <<<"${prog_args:-}"
}
latency() {
    run "$name" "$ours" osu_latency "${a[@]}" --mca common_efa_verbose 1 \
        "$osu/pt2pt/osu_latency" -c -d cuda -m 1:4194304 -i 200 -x 20 D D
}
bandwidth() {
    run "$name" "$ours" osu_bw "${a[@]}" "$osu/pt2pt/osu_bw" -c -d cuda -m 1:4194304 -i 10 -x 2 D D
}
one_sided() {
    run "$name" "$ours" osu_put_latency "${a[@]}" --mca common_efa_verbose 1 \
        "$osu/one-sided/osu_put_latency" -d cuda -w create -m 1:1048576 -i 200 -x 20 D D
    run "$name" "$ours" osu_get_bw "${a[@]}" --mca common_efa_verbose 1 \
        "$osu/one-sided/osu_get_bw" -d cuda -w create -m 1:1048576 -i 20 -x 2 D D
}
vmm() {
    if [ -x "$vmm_prog" ] || [ $list = 1 ]; then
        run "$name" "$ours" vmm_buffers "${a[@]}" --mca common_efa_verbose 1 "$vmm_prog" \
            -s 4194304 ${pa[@]+"${pa[@]}"}
    elif [ "$ours" = 1 ]; then
        echo "run-gpu-check: no $vmm_prog (tests/gpu/prepare-carry.sh builds it)" >&2
        fails=$((fails + 1))
    fi
}
# vmm_check NAME WANT: the run's finalize lines against what it should
# show (an exit and validation are checked by run): "provider": VMM and
# pool memory went to shm by FI_HMEM, none copied for lack of synchronous
# copies; "span": that, and buffers over two allocations registered as
# one (a dmabuf of the whole range); "host": some was; "ipc": more device
# messages came by the device's IPC than streamed; and never Open MPI's complaint about a buffer
# id or SYNC_MEMOPS (the components no longer ask it for such memory) nor
# an allocation left without an id (the driver's id call failing).
vmm_check() {
    local log=$logs/$1.vmm_buffers.txt staged hmem ipc streamed spans
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

# The summary: latency (us) at 1 B, 64 KiB, 4 MiB; peak bandwidth (MB/s);
# then the issue's goals, ours against the anchors of this same run.
at() { awk -v s="$2" '$1 == s { print $2; exit }' "$1" 2>/dev/null; }
peak() { awk '$1 ~ /^[0-9]+$/ && $2 + 0 > m { m = $2 + 0 } END { print m + 0 }' "$1" 2>/dev/null; }
# the slowest latency from 1 B to 4 KiB (empty where the log lacks one)
small() {
    awk '$1 ~ /^[0-9]+$/ && $1 <= 4096 { n++; if ($2 + 0 > m) m = $2 + 0 } END { if (n) print m }' \
        "$logs/$1.osu_latency.txt" 2>/dev/null
}
# goal WHAT OURS ANCHOR OP LIMIT [CAP]: ours against the anchor, the
# ratio held to LIMIT (OP le or ge), and ours to CAP where given
goal() {
    awk -v what="$1" -v o="$2" -v a="$3" -v op="$4" -v lim="$5" -v cap="${6:-}" 'BEGIN {
        if (o == "" || a == "" || a + 0 == 0) { printf "| %s | %s | %s | | not measured |\n", what, o, a; exit }
        r = o / a
        met = (op == "le") ? r <= lim : r >= lim
        if (cap != "") met = met && o <= cap
        printf "| %s | %s | %s | %.2fx | %s (%s %.2fx%s) |\n", what, o, a, r, met ? "met" : "NOT met",
            op == "le" ? "<=" : ">=", lim, cap != "" ? ", <= " cap " us" : ""
    }'
}
# best NAME... : the lowest small() of those runs, "value (name)" parts
best_small() {
    local n v best="" who=""
    for n in "$@"; do
        v=$(small "$n")
        [ -n "$v" ] || continue
        if [ -z "$best" ] || awk -v x="$v" -v y="$best" 'BEGIN { exit !(x < y) }'; then
            best=$v who=$n
        fi
    done
    echo "$best $who"
}
summarize() {
    local name l b v said o a ow aw
    [ $list = 1 ] && return
    {
        echo "# GPU check, $(date -u +%FT%TZ), $(timeout 20 nvidia-smi -L 2>/dev/null | head -1)"
        echo
        sed 's/^/    /' "$out/env.txt"
        echo
        echo "| run | exit | validation | 1 B us | 64 KiB us | 4 MiB us | peak MB/s |"
        echo "|---|---|---|---:|---:|---:|---:|"
        for r in ${pt2pt_runs[@]+"${pt2pt_runs[@]}"}; do
            name=${r%%|*}
            l=$logs/$name.osu_latency.txt b=$logs/$name.osu_bw.txt
            v=ok
            invalid "$l" "$b" && v=FAILED
            echo "| $name | $(tail -n 1 "$l" 2>/dev/null | cut -d' ' -f2)/$(tail -n 1 "$b" 2>/dev/null | cut -d' ' -f2) | $v |" \
                "$(at "$l" 1) | $(at "$l" 65536) | $(at "$l" 4194304) | $(peak "$b") |"
        done
        for r in ${osc_runs[@]+"${osc_runs[@]}"}; do
            name=${r%%|*}
            for b in osu_put_latency osu_get_bw; do
                l=$logs/$name.$b.txt
                said=""
                grep -q "btl:efa: device memory registered" "$l" 2>/dev/null && said=" (a device window of btl_efa)"
                grep -q "btl:efa: device memory registered.*FI_HMEM" "$l" 2>/dev/null && said=" (a device window of btl_efa, FI_HMEM)"
                if [ $b = osu_put_latency ]; then
                    echo "| $name $b | $(tail -n 1 "$l" 2>/dev/null | cut -d' ' -f2)$said | | $(at "$l" 1) | | | |"
                else
                    echo "| $name $b | $(tail -n 1 "$l" 2>/dev/null | cut -d' ' -f2)$said | | | | | $(peak "$l") |"
                fi
            done
        done
        for r in ${vmm_runs[@]+"${vmm_runs[@]}"}; do
            name=${r%%|*}
            l=$logs/$name.vmm_buffers.txt
            [ -f "$l" ] || continue
            echo "| $name vmm_buffers | $(tail -n 1 "$l" | cut -d' ' -f2) |" \
                "$(grep -q '^ok vmm_buffers' "$l" && echo ok || echo FAILED) | | | | |"
        done
        echo
        echo "Goals (issue 31), this run: ours against Open MPI's best here (small: the slowest"
        echo "latency from 1 B to 4 KiB, us; 4 MiB: osu_bw, MB/s)"
        echo
        echo "| goal | ours | Open MPI | ratio | |"
        echo "|---|---:|---:|---:|---|"
        read -r a aw < <(best_small ob1-sm ob1-sm-smcuda mtl_ofi-rxm)
        for n in mtl_efa-onnode mtl_efa-onnode-own; do
            goal "small on one node, $n vs ${aw:-none}" "$(small $n)" "${a:-}" le 0.25 40
        done
        read -r o ow < <(best_small mtl_efa-rxm-provider mtl_efa-rxm-own-matching mtl_efa-rxm-own-matching-own)
        goal "small through tcp;ofi_rxm, ${ow:-none} vs mtl_ofi-rxm" "${o:-}" "$(small mtl_ofi-rxm)" le 0.5
        for n in mtl_efa-onnode-own mtl_efa-onnode; do
            goal "4 MiB on one node, $n vs ob1-sm-smcuda" "$(at "$logs/$n.osu_bw.txt" 4194304)" \
                "$(at "$logs/ob1-sm-smcuda.osu_bw.txt" 4194304)" ge 0.9
        done
        echo
        # (VMM and pool memory: where the report sends it, what was copied for
        # it, and whether Open MPI's buffer-id call still complained)
        for name in vmm-shm-own vmm-shm-own-vmm-off vmm-onnode-own vmm-onnode-own-span vmm-onnode-own-pieces; do
            l=$logs/$name.vmm_buffers.txt
            [ -f "$l" ] || continue
            echo "    $name:"
            grep -h "without synchronous memory operations\|(FI_HMEM)\|bufferID\|cuPointerSetAttribute\|device messages received from this node" "$l" |
                sed 's/^/      /' | sort -u
        done
        # (the own run's finalize counts: device messages by CUDA IPC, streamed;
        # these logs are absent where -r left their runs out)
        grep -h "device messages received from this node\|device buffers to processes of this node" \
            "$logs/mtl_efa-onnode-own.osu_latency.txt" 2>/dev/null | sed 's/^/    /' | sort -u
        # (own matching with mtl_efa copying: device receives read from the
        # sender copied to the device piece by piece, mtl_efa_device_piece)
        grep -h "device messages read from other nodes" \
            "$logs/mtl_efa-rxm-own-matching-own.osu_latency.txt" 2>/dev/null | sed 's/^/    /' | sort -u
        # (the shm own run's: device buffers handed to the provider by FI_HMEM,
        # and whether their registrations went through a dmabuf)
        grep -h "(FI_HMEM)\|device registrations:" "$logs/mtl_efa-shm-own.osu_latency.txt" 2>/dev/null |
            sed 's/^/    /' | sort -u
        # (own matching on shm with FI_HMEM: device sends offered for reading
        # from their registration, device receives read straight into theirs)
        grep -h "device messages sent to other nodes\|device messages read from other nodes" \
            "$logs/mtl_efa-shm-own-matching-own.osu_latency.txt" 2>/dev/null | sed 's/^/    /' | sort -u
        echo
        echo "$ran run(s), $fails run(s) of ours failed, $skipped run(s) skipped for the budget" \
            "($SECONDS s; logs in logs.tar.gz)"
    } | tee "$out/summary.md"
}
# (stopped by a signal: what ran is summed up all the same)
[ $list = 1 ] || trap 'trap - TERM INT; [ -z "$running" ] || kill "$running" 2>/dev/null; summarize >/dev/null; exit 3' TERM INT

for r in ${pt2pt_runs[@]+"${pt2pt_runs[@]}"}; do
    args_of "$r"
    latency
done
for r in ${vmm_runs[@]+"${vmm_runs[@]}"}; do
    args_of "$r"
    vmm
done
if [ $list = 0 ] && [ -x "$vmm_prog" ]; then
    vmm_check vmm-shm-own provider
    vmm_check vmm-shm-own-span span
    vmm_check vmm-shm-own-vmm-off host
    vmm_check vmm-onnode-own ipc
    vmm_check vmm-onnode-own-span ipc
    vmm_check vmm-onnode-own-pieces ipc
fi
for r in ${pt2pt_runs[@]+"${pt2pt_runs[@]}"}; do
    args_of "$r"
    bandwidth
done
for r in ${osc_runs[@]+"${osc_runs[@]}"}; do
    args_of "$r"
    one_sided
done
[ $list = 1 ] && exit 0
summarize
[ $fails -eq 0 ] && [ $skipped -eq 0 ]
