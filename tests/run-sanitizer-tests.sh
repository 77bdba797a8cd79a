#!/usr/bin/env bash
# The unit tests and a subset of the MPI and one-sided suites against the
# AddressSanitizer + UndefinedBehaviorSanitizer build (_build-asan, made by
# scripts/build-instrumented.sh asan).  Open MPI stays uninstrumented: the
# test programs carry the sanitizer runtime, so the components Open MPI
# dlopens into them are checked.  Every sanitizer report fails the run,
# whatever the program's own verdict: reports are written to files
# (log_path) and counted after each suite.
#   tests/run-sanitizer-tests.sh [-b BUILD_DIR] [-i INSTALL_DIR]
# Logs: SAN_TEST_LOG_DIR (default /tmp/efa-san-logs).
# Prints "N passed, N failed" (the suites' own counts plus one failure per
# process with a sanitizer report).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/_build-asan
inst=$top/_install-asan
while getopts "b:i:h" o; do
    case $o in
    b) build=$OPTARG ;;
    i) inst=$OPTARG ;;
    *) sed -n '2,13p' "$0"; exit 2 ;;
    esac
done
logs=${SAN_TEST_LOG_DIR:-/tmp/efa-san-logs}
rm -rf "$logs"
mkdir -p "$logs/reports"
pass=0 fail=0 skip=0

# Each process's reports go to reports/asan.PID (ASan, UBSan alike).
# Leaks: checked in the unit tests; not under MPI (Open MPI's own
# allocations outlive MPI_Finalize by design).
san_common="log_path=$logs/reports/san:print_stacktrace=1"
export UBSAN_OPTIONS="$san_common:halt_on_error=1"

report_prefix=san
report_what="sanitizer report"
report_first='ERROR: [A-Za-z]+Sanitizer|runtime error'
report_lines=30
# shellcheck source=sanitizer-counts.sh
. "$top/tests/sanitizer-counts.sh"

if [ ! -x "$build/tests/unit/efa_unit_tests" ] || [ ! -f "$inst/lib/openmpi/mca_btl_efa.so" ]; then
    echo "FAIL no sanitizer build in $build / $inst (scripts/build-instrumented.sh asan)"
    echo "0 passed, 1 failed"
    exit 1
fi

echo "== unit tests (ASan with leak checks, UBSan)"
sum=$(ASAN_OPTIONS="$san_common:detect_leaks=1" \
    "$top/tests/run-unit-shards.sh" "$build/tests/unit/efa_unit_tests" "$logs/unit.log")
grep -v ' passed, ' <<<"$sum"
line=$(tail -n 1 <<<"$sum")
up=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed(, [0-9]+ skipped)?$/\1/p' <<<"$line")
uf=$(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed(, [0-9]+ skipped)?$/\2/p' <<<"$line")
us=$(sed -nE 's/^[0-9]+ passed, [0-9]+ failed, ([0-9]+) skipped$/\1/p' <<<"$line")
up=${up:-0} uf=${uf:-1} us=${us:-0}
echo "unit: $up passed, $uf failed, $us skipped"
pass=$((pass + up)) fail=$((fail + uf)) skip=$((skip + us))
reports unit

export ASAN_OPTIONS="$san_common:detect_leaks=0"
export EFA_MCA_COMPONENT_PATH=$inst/lib/openmpi

echo "== MPI point-to-point (mtl_efa provider and on-node paths, ob1 + btl_efa), instrumented"
MPI_TEST_BIN_DIR=$build/tests/mpi MPI_TEST_LOG_DIR=$logs/mpi \
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-rxm,cm-efa-onnode,ob1-efa-shm \
    -t pingpong,probe,cancel,ssend,truncate,datatypes,device_buffers -n 2 >"$logs/mpi.log" 2>&1
grep -E '^(PASS|FAIL|SKIP) ' "$logs/mpi.log"
count "$logs/mpi.log" mpi
reports mpi

echo "== one-sided over osc/rdma + btl_efa (native, emulated), instrumented"
OSC_TEST_BIN_DIR=$build/tests/osc "$top/tests/osc/run-osc-tests.sh" -c ob1-rxm -c ob1-shm-emul \
    -n 2 -t putget -t atomics -t accumulate -t hostile -t lost >"$logs/osc.log" 2>&1
grep -E '^(PASS|FAIL|SKIP) ' "$logs/osc.log"
count "$logs/osc.log" osc
reports osc
# btl_efa finalized with a native get posted (its slab must stay alive).
# A log of its own: count() takes a log's last result line, so a second
# run appended to osc.log hid the first run's failures.
OSC_TEST_BIN_DIR=$build/tests/osc "$top/tests/osc/run-osc-tests.sh" -c cm-rxm -n 2 \
    -t inflight >"$logs/osc-inflight.log" 2>&1
grep -E '^(PASS|FAIL|SKIP) ' "$logs/osc-inflight.log"
count "$logs/osc-inflight.log" osc-inflight
reports osc-inflight

# Windows in device memory (the fake device: device_buffers -w), their
# puts and gets executed by the owner with the device's copy (tcp), and by
# the provider's RDMA where shm granted FI_HMEM (the fake made visible).
for v in "device-window:tcp" \
    "device-window-hmem:shm --mca btl_efa_rma_mode native --mca common_efa_debug_fake_device_hmem 1 --mca common_efa_verbose 1"; do
    name=${v%%:*}
    read -r -a extra <<<"${v#*:}"
    echo "== $name over osc/rdma + btl_efa on the fake device, instrumented"
    timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca mca_base_component_path \
        "$(ompi_info --path pkglibdir --parsable | cut -d: -f3):$inst/lib/openmpi" \
        --mca pml ob1 --mca btl efa,self --mca osc rdma --mca common_efa_provider_include "${extra[@]}" \
        --mca common_efa_debug_fake_device 1 "$build/tests/mpi/device_buffers" -w \
        >"$logs/$name.log" 2>&1
    rc=$?
    # (with FI_HMEM: by the provider's RDMA, not one as a request)
    if [ $rc -eq 0 ] && grep -q "^ok device_buffers a window over device memory" "$logs/$name.log" &&
        { [ "$name" = device-window ] ||
            grep -qE "puts and gets with device memory: [1-9][0-9]* by the provider's RDMA \(FI_HMEM\), 0 as requests" "$logs/$name.log"; }; then
        echo "PASS $name"
        pass=$((pass + 1))
    else
        echo "FAIL $name (see $logs/$name.log)"
        fail=$((fail + 1))
    fi
    reports "$name"
done

echo "logs: $logs"
if [ $skip -gt 0 ]; then
    echo "$pass passed, $fail failed, $skip skipped"
else
    echo "$pass passed, $fail failed"
fi
[ $fail -eq 0 ]
