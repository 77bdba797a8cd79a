#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, then runs
# every suite and prints one closing line "N passed, N failed".
#   tests/run-all.sh [--no-build] [--build-dir DIR] [--quick]
# Suites: unit tests (GoogleTest), parameter/bad-input checks, the on-node
# channels in a hostile or full /dev/shm, the MPI
# point-to-point suite over mtl_efa on udp;ofi_rxd, tcp;ofi_rxm and shm
# (plus the forced FI_MR_LOCAL and no-CQ-data paths), the same over pml ob1 +
# btl_efa with native and emulated one-sided paths, one-sided tests over
# btl_efa in native, emulated and mixed modes (and with FI_MR_LOCAL forced),
# the same point-to-point suites, a soak under random loss and peer-loss
# tests across hosts made of network namespaces, the benchmark programs'
# self-checks, the packages (Spack recipe, RPM, Debian package run in a
# clean root), and the sanitizer (ASan + UBSan), ThreadSanitizer and
# libFuzzer builds (tests/run-sanitizer-tests.sh, tests/run-tsan-tests.sh,
# tests/fuzz/run-fuzzers.sh).
# NETPIPE (tests/mpi/run-mpi-tests.sh), MPI4PY_PYTHON and PYTHONPATH
# (tests/mpi4py/run-mpi4py-tests.sh) pass through to the runners: programs
# built against the Open MPI on PATH, where Debian's are skipped.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/_build
do_build=1
quick=""
while [ $# -gt 0 ]; do
    case $1 in
    --no-build) do_build=0 ;;
    --build-dir) build=$2; shift ;;
    --quick) quick=--quick ;;
    *) echo "usage: $0 [--no-build] [--build-dir DIR] [--quick]"; exit 2 ;;
    esac
    shift
done

if [ $do_build -eq 1 ]; then
    "$top/scripts/install-deps.sh" || { echo "0 passed, 1 failed"; exit 1; }
    "$top/scripts/build.sh" || { echo "0 passed, 1 failed"; exit 1; }
fi
compdir=$top/_install/lib/openmpi
[ -f "$build/config.status" ] && compdir=$(sed -n 's/^S\["prefix"\]="\(.*\)"$/\1/p' "$build/config.status")/lib/openmpi
export EFA_MCA_COMPONENT_PATH=$compdir
export MPI_TEST_BIN_DIR=$build/tests/mpi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
logdir=${TEST_LOG_DIR:-/tmp/efa-test-logs}
mkdir -p "$logdir"

total_pass=0
total_fail=0
total_skip=0
# Each suite's wall time (since the previous suite's count), printed at the
# end: where CI's minutes go.
suite_start=$SECONDS
suite_times=("$(printf '%5d s  %s' $SECONDS "dependencies and build")")
bg_times=()
add_counts() { # add the "N passed, N failed[, N skipped]" of a suite's log
    local line p f k
    suite_times+=("$(printf '%5d s  %s' $((SECONDS - suite_start)) "$2")")
    suite_start=$SECONDS
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
    if [ -z "$line" ]; then
        echo "run-all: $2 printed no result line (counted as one failure)"
        total_fail=$((total_fail + 1))
        return
    fi
    p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
    k=0
    grep -qE 'skipped' <<<"$line" && k=$(sed -E 's/.*, ([0-9]+) skipped.*/\1/' <<<"$line")
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    total_skip=$((total_skip + k))
}

# Two links per host, each a NIC (rail): btl_efa's large put/get striped
# over both, with a control run that does not stripe; pml cm unharmed.
# First, before the background steps start: its ob1-spread-stream run (ob1
# + btl_efa, a fanout stream with the credits coming back over the second
# NIC) stops when other processes share the CPU, even at the idle priority
# (an open defect, docs/RELIABILITY.md "A failed NIC (rail) survived",
# its limits); on its own it passes.
echo "== several hosts: two NICs per process (btl_efa's put/get, mtl_efa's large messages in both matching modes, striped over both)"
OSC_TEST_BIN_DIR=$build/tests/osc RAILS_LOG_DIR=$logdir/rails \
    "$top/tests/netns/rails.sh" 2>&1 | tee "$logdir/rails.log"
add_counts "$logdir/rails.log" rails
# A NIC's link fails mid-stream (set down; every frame dropped), and comes
# back: the job goes on over the other, and without failover it must fail.
# Also before the background steps: its runs detect a lost rail by a
# 5 s peer timeout, and under CPU contention a run can lose the whole
# peer instead (own-link-back: 1 run of 12 with two busy loops at nice 10
# beside it, 0 of 12 without; docs/RELIABILITY.md, "A failed NIC").
echo "== several hosts: a failed NIC survived (rail failover)"
FAILOVER_LOG_DIR=$logdir/failover "$top/tests/netns/failover.sh" 2>&1 | tee "$logdir/failover.log"
add_counts "$logdir/failover.log" failover

# Work that needs no MPI suite starts now in the background, one step
# after the other, and fills the CPU time that the suites below leave idle
# (an MPI job spends much of its start and end waiting):
#  - the instrumented builds (scripts/build-instrumented.sh asan, tsan,
#    fuzz) at the idle priority (SCHED_IDLE: a suite's process that wakes
#    takes the CPU from them at once); their suites run at the end;
#  - then the packages (docs/PACKAGES.md): the Spack recipe's check, the
#    release tarball against the checkout and its RPM, and the Debian
#    package built, checked by lintian, installed into a clean Debian 12
#    root and run there; at a lower priority than the suites, not the
#    lowest, so that its 2-rank jobs keep a share of the CPU (at the
#    lowest, the chain of background steps took longer than the suites:
#    CI then waited for it).  Built without optimization or debug
#    information (PACKAGE_BUILD=quick): these steps check the packaging,
#    the optimized compile is the main build's; the release tarball is
#    made in the main build (DIST_BUILD_DIR), not configured again.  With
#    --no-build (another Open MPI's build tree) they are not this run's.
# Each step writes its exit status and seconds into STEP.rc.
# The steps run in a process group of their own, ended with run-all.
bg_pid=""
if [ $do_build -eq 1 ]; then
    rm -f "$logdir"/build-{asan,tsan,fuzz}.rc "$logdir/packages.rc"
    idle=(chrt --idle 0)
    "${idle[@]}" true 2>/dev/null || idle=(nice -n 19) # (where SCHED_IDLE is refused)
    set -m
    (
        for kind in asan tsan fuzz; do
            s=$SECONDS
            "${idle[@]}" "$top/scripts/build-instrumented.sh" $kind >"$logdir/build-$kind.log" 2>&1
            echo "$? $((SECONDS - s))" >"$logdir/build-$kind.rc"
        done
        s=$SECONDS
        PACKAGE_BUILD=quick DIST_BUILD_DIR=$build nice -n 10 \
            "$top/tests/package/run-package-tests.sh" "$logdir/packages" \
            >"$logdir/packages.log" 2>&1
        echo "$? $((SECONDS - s))" >"$logdir/packages.rc"
    ) </dev/null &
    bg_pid=$!
    set +m
    trap 'kill -TERM -- -"$bg_pid" 2>/dev/null' EXIT
    trap 'exit 130' INT TERM
fi
# bg_wait FILE: until the background step that writes FILE is done (or the
# steps ended without it).
bg_wait() {
    while [ ! -f "$1" ] && kill -0 "$bg_pid" 2>/dev/null; do
        sleep 2
    done
}

# From here on (the suites, not the builds started above) glibc's malloc
# asks for transparent huge pages for its large blocks: each tcp;ofi_rxm
# endpoint fills buffer pools of about 70 MB at once, whose 4 KiB page
# faults cost 0.2 s of every process's start on a virtual machine (a few
# hundred faults with huge pages).  Not for the builds, which are no
# faster with it (the main build took 6.2 minutes with it, 6.3 without).
# The components do not depend on it: it only shortens the suites.
export GLIBC_TUNABLES=${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1
# A job whose process fails is ended by mpirun with SIGCONT, SIGTERM and
# SIGKILL, one second apart by default (Open MPI 4.1's
# odls_base_sigkill_timeout): the first second lets the job's other
# processes end on their own and say why, the second is spent on
# processes SIGTERM already ended (nothing of the components handles it).
# The parameter cases, whose jobs are meant to fail at start and whose
# message comes from the failing process itself, end them at once: 1.9 s
# against 0.85 s for such a job, 290 s against 233 s for the cases (quiet).
# (The device and /dev/shm cases gain nothing: their jobs end otherwise.)
fail_fast=(env "OMPI_MCA_odls_base_sigkill_timeout=${OMPI_MCA_odls_base_sigkill_timeout:-0}")

# The tests of the point-to-point path (tests/mpi/mpi-test-args.sh's list
# less comms, collectives, datatypes and modes, whose work is above it):
# for the variants of a path whose every test runs in another configuration.
p2p_tests=pingpong,many_outstanding,ordering,probe,cancel,ssend,truncate,threads,send_progress,remap,netpipe,device_buffers

echo "== unit tests"
unit_log=$logdir/unit.log
"$top/tests/run-unit-shards.sh" "$build/tests/unit/efa_unit_tests" "$unit_log.shards" >"$unit_log.sum"
cat "$unit_log.shards" "$unit_log.sum" >"$unit_log"
rm -f "$unit_log.shards"
grep -v ' passed, ' "$unit_log.sum"
tail -n 1 "$unit_log.sum"
rm -f "$unit_log.sum"
add_counts "$unit_log" unit

echo "== installed libraries resolve every symbol"
"$top/tests/check-symbols.sh" "$compdir" "$(dirname "$compdir")" 2>&1 | tee "$logdir/symbols.log"
add_counts "$logdir/symbols.log" symbols

echo "== the tree's shape: files of at most 600 lines, no include or call cycle, the components see only common/include, each C function defined once"
"$top/tests/check-tree.sh" "$build" 2>&1 | tee "$logdir/tree.log"
add_counts "$logdir/tree.log" tree

echo "== layout: one on-node stack per process (no component progress hook or inbox of its own)"
"$top/tests/check-layout.sh" 2>&1 | tee "$logdir/layout.log"
add_counts "$logdir/layout.log" layout

echo "== the documents name only paths that exist (README.md, docs/*.md)"
"$top/tests/check-doc-paths.sh" 2>&1 | tee "$logdir/docpaths.log"
add_counts "$logdir/docpaths.log" docpaths

echo "== Python through python3-mpi4py (MPI_THREAD_MULTIPLE): probe, mprobe, isend/irecv, a window"
"$top/tests/mpi4py/run-mpi4py-tests.sh" "$compdir" 2>&1 | tee "$logdir/mpi4py.log"
add_counts "$logdir/mpi4py.log" mpi4py

echo "== parameters and bad input"
# One case at a time here: what a case spends waiting (a failed job's end)
# the background builds use; with 4 side by side the cases took 100 s
# less and the ASan build 7 minutes more.
[ -n "$bg_pid" ] && export PARAM_JOBS=${PARAM_JOBS:-1}
"${fail_fast[@]}" "$top/tests/run-param-tests.sh" "$compdir" "$MPI_TEST_BIN_DIR" 2>&1 |
    tee "$logdir/params.log"
add_counts "$logdir/params.log" params

echo "== efa-mpi-info: what this node offers, the components' choice, NIC sets of recorded instances"
"$top/tests/run-info-tests.sh" "${compdir%/lib/openmpi}/bin/efa-mpi-info" "$top/tests/topologies" 2>&1 |
    tee "$logdir/info.log"
add_counts "$logdir/info.log" info

echo "== MPI_T performance variables common_efa_*: found, read, moving with the traffic (and a control)"
"$top/tests/run-pvar-tests.sh" "$compdir" "$MPI_TEST_BIN_DIR" 2>&1 | tee "$logdir/pvars.log"
add_counts "$logdir/pvars.log" pvars

echo "== on-node channels in a hostile or full /dev/shm: planted files refused and left alone, no SIGBUS"
"$top/tests/run-shm-hostile-tests.sh" "$compdir" "$MPI_TEST_BIN_DIR" 2>&1 | tee "$logdir/shm-hostile.log"
add_counts "$logdir/shm-hostile.log" shm-hostile

echo "== one on-node inbox file per process with both components (cm + mtl_efa, osc rdma + btl_efa)"
"$top/tests/run-node-files-test.sh" "$compdir" "$MPI_TEST_BIN_DIR" 2>&1 | tee "$logdir/node-files.log"
add_counts "$logdir/node-files.log" node-files

echo "== an install copied elsewhere: its own help files found beside its library"
"$top/tests/run-relocated-test.sh" "$compdir" "$MPI_TEST_BIN_DIR" 2>&1 | tee "$logdir/relocated.log"
add_counts "$logdir/relocated.log" relocated

echo "== configure with a named libfabric: DIR/lib64 or DIR/lib, and one older than 1.14 refused"
"$top/tests/run-configure-tests.sh" 2>&1 | tee "$logdir/configure.log"
add_counts "$logdir/configure.log" configure

echo "== the on-node doorbell: messages by the provider after quiet spells, against a 1 s paced poll"
"$top/tests/run-wake-test.sh" "$compdir" "$MPI_TEST_BIN_DIR" 2>&1 | tee "$logdir/wake.log"
add_counts "$logdir/wake.log" wake

# (device_buffers itself runs in every pml cm suite below)
echo "== device (GPU) buffers: without mtl_efa's copies the fake device's memory crashes the job; what is said"
"$top/tests/run-device-tests.sh" "$compdir" "$MPI_TEST_BIN_DIR" 2>&1 | tee "$logdir/device.log"
add_counts "$logdir/device.log" device

echo "== MPI point-to-point over mtl_efa: provider path (every message through the provider), on-node path, and mixed (ranks on pretend nodes)"
# (the full sizes on the provider path of tcp;ofi_rxm and on the on-node
# path; the other configurations at the smaller sizes of --quick)
"$top/tests/mpi/run-mpi-tests.sh" $quick -c cm-efa-rxm,cm-efa-onnode 2>&1 | tee "$logdir/mpi-mtl.log"
add_counts "$logdir/mpi-mtl.log" mpi-mtl
"$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-rxd,cm-efa-shm,cm-efa-mixed 2>&1 |
    tee "$logdir/mpi-mtl-quick.log"
add_counts "$logdir/mpi-mtl-quick.log" mpi-mtl-quick

# MPI_COMM_WORLD spanning pretend nodes for the test whose default is 2
# processes (threads: MPI_THREAD_MULTIPLE), and with FI_MR_LOCAL forced (an
# ANY_SOURCE receive registers its buffer for the provider's half).
echo "== MPI point-to-point over mtl_efa's mixed path, 4 processes on 2 pretend nodes"
"$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-mixed -t threads -n 4 2>&1 |
    tee "$logdir/mpi-mtl-mixed.log"
add_counts "$logdir/mpi-mtl-mixed.log" mpi-mtl-mixed
MPI_TEST_EXTRA_ARGS="--mca common_efa_force_mr_local 1" \
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-mixed -t ordering,probe,cancel,ssend,truncate -n 4 2>&1 |
    tee "$logdir/mpi-mtl-mixed-mrlocal.log"
add_counts "$logdir/mpi-mtl-mixed-mrlocal.log" mpi-mtl-mixed-mrlocal

# mtl_efa's own matching: one engine matches every message, those of peers
# on another pretend node carried by the provider's untagged messages (and
# with the rings off, all of them); ordering+swap hands the provider's
# messages on in swapped pairs, many_outstanding+pack requires packed
# messages.  Then 4 processes on 2 pretend nodes for the test whose default
# is 2 (threads), and with FI_MR_LOCAL forced (the registered send buffers).
echo "== MPI point-to-point over mtl_efa's own matching (rings and provider under one engine; rings off; arrivals swapped; FI_MR_LOCAL forced)"
# (the variants with the rings off or on ofi_rxd at the smaller sizes of
# --quick: every run stays, at about half the time)
# (at the smaller sizes of --quick: the full sizes run on mpi-mtl's configurations)
"$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-own-rxm 2>&1 | tee "$logdir/mpi-mtl-own.log"
add_counts "$logdir/mpi-mtl-own.log" mpi-mtl-own
# (the tests of the point-to-point path: a communicator's, collective's or
# datatype's work above it, and the send modes, are the engine's in the
# same way as on cm-efa-own-rxm above)
"$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-own-rxd,cm-efa-own-rxm-noring -t "$p2p_tests" 2>&1 |
    tee "$logdir/mpi-mtl-own-variants.log"
add_counts "$logdir/mpi-mtl-own-variants.log" mpi-mtl-own-variants
"$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-own-rxm -t threads -n 4 2>&1 |
    tee "$logdir/mpi-mtl-own-4.log"
add_counts "$logdir/mpi-mtl-own-4.log" mpi-mtl-own-4
MPI_TEST_EXTRA_ARGS="--mca common_efa_force_mr_local 1" \
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-own-rxm-noring -t ordering,probe,ssend,truncate,pingpong 2>&1 |
    tee "$logdir/mpi-mtl-own-mrlocal.log"
add_counts "$logdir/mpi-mtl-own-mrlocal.log" mpi-mtl-own-mrlocal
# Two endpoints per NIC: own matching spreads the peers on the other node
# over both (ordering+endpoints requires it said so), in the own and the
# direct mode: the tests whose traffic fills both (cancel and ssend take
# the engine's paths, the same with one endpoint or two).
MPI_TEST_EXTRA_ARGS="--mca common_efa_num_contexts 2" \
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-own-rxm,cm-efa-direct-rxd \
    -t pingpong,many_outstanding,probe,threads,collectives -n 4 2>&1 |
    tee "$logdir/mpi-mtl-own-2ep.log"
add_counts "$logdir/mpi-mtl-own-2ep.log" mpi-mtl-own-2ep

# The forced efa-direct-like mode (common_efa_force_direct_mode): no tags
# (mtl_efa matches every message itself), no order asked of the provider,
# FI_MR_LOCAL, provider messages of at most 8 KiB, and every other arrival
# held back and handed on after the next; ordering+direct requires swapped
# arrivals to be counted.  pml ob1 + btl_efa in the same mode below.
echo "== MPI point-to-point over mtl_efa in the forced efa-direct-like mode (no tags, no order, 8 KiB messages, arrivals swapped)"
# (every test on tcp;ofi_rxm, those of the point-to-point path on udp;ofi_rxd)
"$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-direct-rxm 2>&1 | tee "$logdir/mpi-mtl-direct.log"
add_counts "$logdir/mpi-mtl-direct.log" mpi-mtl-direct
"$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-direct-rxd -t "$p2p_tests" 2>&1 |
    tee "$logdir/mpi-mtl-direct-rxd.log"
add_counts "$logdir/mpi-mtl-direct-rxd.log" mpi-mtl-direct-rxd

# Large on-node messages streamed through the rings, as where the kernel
# refuses cross-memory attach.
echo "== MPI point-to-point over mtl_efa's on-node path, large messages streamed"
"$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-onnode-stream \
    -t pingpong,many_outstanding,probe,cancel,ssend,truncate,datatypes,modes,netpipe 2>&1 |
    tee "$logdir/mpi-mtl-stream.log"
add_counts "$logdir/mpi-mtl-stream.log" mpi-mtl-stream

echo "== stand-in provider defects still present (the reason for each SKIP and for emulated atomics on ofi_rxd)"
cc -o "$logdir/shm_wildcard_unexpected" "$top/tests/provider-defects/shm_wildcard_unexpected.c" -lfabric &&
    "$logdir/shm_wildcard_unexpected" shm
cc -o "$logdir/shm_send_completion_order" "$top/tests/provider-defects/shm_send_completion_order.c" \
    -lfabric && "$logdir/shm_send_completion_order" shm
# (in the log directory: the provider's crash handler leaves files behind)
cc -o "$logdir/rxd_loopback_fetch_atomic" "$top/tests/provider-defects/rxd_loopback_fetch_atomic.c" \
    -lfabric && (cd "$logdir" && ./rxd_loopback_fetch_atomic "udp;ofi_rxd")
# (the reason for the SKIP of many_outstanding+tinyq on cm-efa-own-rxd-noring)
cc -o "$logdir/rxd_tiny_queues" "$top/tests/provider-defects/rxd_tiny_queues.c" -lfabric &&
    "$logdir/rxd_tiny_queues" "udp;ofi_rxd" 16
# libfabric 2.x only (1.17 passes it): the reason for the registration retry in core.cpp
cc -o "$logdir/rxm_local_mr_key" "$top/tests/provider-defects/rxm_local_mr_key.c" -lfabric &&
    "$logdir/rxm_local_mr_key" "tcp;ofi_rxm"
# (why a withdrawn message is received into scratch memory, not discarded: core_withdraw.cpp)
cc -o "$logdir/rxm_discard_holds_send" "$top/tests/provider-defects/rxm_discard_holds_send.c" \
    -lfabric && "$logdir/rxm_discard_holds_send" "tcp;ofi_rxm"

echo "== MPI point-to-point over mtl_efa, forced FI_MR_LOCAL and no-CQ-data tag layout"
MPI_TEST_EXTRA_ARGS="--mca common_efa_force_mr_local 1 --mca common_efa_force_no_cq_data 1" \
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-rxm -n 2 2>&1 | tee "$logdir/mpi-mtl-forced.log"
add_counts "$logdir/mpi-mtl-forced.log" mpi-mtl-forced

if [ -f "$compdir/mca_btl_efa.so" ] && [ -x "$top/tests/osc/run-osc-tests.sh" ]; then
    echo "== MPI point-to-point over pml ob1 + btl_efa (native RDMA read of large messages)"
    # (the full sizes over tcp;ofi_rxm, the others at those of --quick)
    "$top/tests/mpi/run-mpi-tests.sh" $quick -c ob1-efa-rxm 2>&1 | tee "$logdir/mpi-btl.log"
    add_counts "$logdir/mpi-btl.log" mpi-btl
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c ob1-efa-rxd,ob1-efa-shm 2>&1 |
        tee "$logdir/mpi-btl-quick.log"
    add_counts "$logdir/mpi-btl-quick.log" mpi-btl-quick
    # The emulated one-sided path carries ob1's large messages too when a
    # provider lacks FI_RMA: the tests that move large contiguous messages.
    echo "== MPI point-to-point over pml ob1 + btl_efa, emulated one-sided path"
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c ob1-efa-rxd-emul,ob1-efa-rxm-emul,ob1-efa-shm-emul \
        -t pingpong,truncate,modes,datatypes,netpipe 2>&1 | tee "$logdir/mpi-btl-emul.log"
    add_counts "$logdir/mpi-btl-emul.log" mpi-btl-emul
    # On one node the configurations above move ob1's large messages by
    # single copy (CMA); the provider's native RDMA read, as on separate
    # nodes, with it off.
    echo "== MPI point-to-point over pml ob1 + btl_efa, provider RDMA read (no single copy)"
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c ob1-efa-rxd-nocma,ob1-efa-rxm-nocma,ob1-efa-shm-nocma \
        -t pingpong,truncate,modes,datatypes,remap,netpipe 2>&1 | tee "$logdir/mpi-btl-nocma.log"
    add_counts "$logdir/mpi-btl-nocma.log" mpi-btl-nocma
    # Every message through the provider with a window of 4 messages per
    # peer: sends queue, and btl_efa's coalescing packs them.
    echo "== MPI point-to-point over pml ob1 + btl_efa, queued messages coalesced"
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c ob1-efa-rxm-batch 2>&1 |
        tee "$logdir/mpi-btl-batch.log"
    add_counts "$logdir/mpi-btl-batch.log" mpi-btl-batch
    # (two NICs per process: the whole quick suite over two namespace
    # hosts with two links each, below; the one-host configurations
    # ob1-efa-rails-rxm, cm-efa-own-rails-rxm and cm-efa-rails-rxm, which
    # take this host's interface and the loopback one, are for a machine
    # without namespaces)
    echo "== MPI point-to-point over pml ob1 + btl_efa in the forced efa-direct-like mode (every message through the provider)"
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c ob1-efa-direct-rxm,ob1-efa-direct-rxd 2>&1 |
        tee "$logdir/mpi-btl-direct.log"
    add_counts "$logdir/mpi-btl-direct.log" mpi-btl-direct
    echo "== one-sided over osc/rdma + btl_efa"
    OSC_TEST_BIN_DIR=$build/tests/osc "$top/tests/osc/run-osc-tests.sh" 2>&1 |
        tee "$logdir/osc.log"
    add_counts "$logdir/osc.log" osc
fi

# Several hosts: network namespaces on a bridge (tests/netns; root, ip and
# nft).  Each runner makes the hosts and removes them; where they cannot be
# made, each of its runs is a SKIP with the reason.
# (on udp;ofi_rxd, and mtl_efa's mixed path on tcp;ofi_rxm; the suite's
# runs on tcp;ofi_rxm across hosts are those of the two-link hosts below)
# (the tests whose traffic differs between hosts: their start, order,
# probes, cancels, synchronous sends, truncation, NetPIPE; the others, a
# communicator's or datatype's work above the point-to-point path, run
# across hosts in the two-link suite below and on one node above)
echo "== several hosts (network namespaces): MPI point-to-point across hosts over mtl_efa (provider and mixed paths) and btl_efa"
"$top/tests/mpi/run-mpi-tests.sh" --quick \
    -c cm-efa-rxd-netns,cm-efa-mixed-netns,ob1-efa-rxd-netns \
    -t pingpong,many_outstanding,ordering,probe,cancel,ssend,truncate,netpipe,device_buffers 2>&1 |
    tee "$logdir/mpi-netns.log"
add_counts "$logdir/mpi-netns.log" mpi-netns
echo "== several hosts with two links each: the quick suite over both NICs of every rank (mtl_efa in both matching modes, btl_efa), transfers striped from 4 KiB"
# (mtl_efa's default matching at the tests of the point-to-point path: the
# work above it is pml cm's, the same as in own matching's run)
"$top/tests/mpi/run-mpi-tests.sh" --quick \
    -c cm-efa-own-rxm-rails-netns,ob1-efa-rxm-rails-netns 2>&1 |
    tee "$logdir/mpi-netns-rails.log"
add_counts "$logdir/mpi-netns-rails.log" mpi-netns-rails
"$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-rxm-rails-netns -t "$p2p_tests" 2>&1 |
    tee "$logdir/mpi-netns-rails-cm.log"
add_counts "$logdir/mpi-netns-rails-cm.log" mpi-netns-rails-cm
echo "== several hosts: soak (random point-to-point and one-sided traffic, every byte checked) under 3 % random loss"
SOAK_BIN=$build/tests/soak/soak SOAK_LOG_DIR=$logdir/soak "$top/tests/soak.sh" -t 20 -l 3 \
    -c cm-rxd,cm-own-rxd,ob1-rxm 2>&1 | tee "$logdir/soak.log"
add_counts "$logdir/soak.log" soak
echo "== several hosts: a rank killed mid-transfer, a host cut off (the job must end, naming the peer)"
# (every scenario on one configuration per matching path and on btl_efa;
# the kill and the partition on the others)
PEER_LOSS_BIN=$build/tests/netns/peer_loss PEER_LOSS_LOG_DIR=$logdir/peer-loss \
    "$top/tests/netns/peer-loss.sh" -c cm-rxd,cm-own-rxm,cm-direct-rxd,ob1-rxm 2>&1 |
    tee "$logdir/peer-loss.log"
add_counts "$logdir/peer-loss.log" peer-loss
PEER_LOSS_BIN=$build/tests/netns/peer_loss PEER_LOSS_LOG_DIR=$logdir/peer-loss-more \
    "$top/tests/netns/peer-loss.sh" -c cm-rxm,cm-own-rxd,ob1-rxd kill partition 2>&1 |
    tee "$logdir/peer-loss-more.log"
add_counts "$logdir/peer-loss-more.log" peer-loss-more
# (ob1 told of a peer lost by a connection error, under --enable-recovery)
PEER_LOSS_BIN=$build/tests/netns/peer_loss PEER_LOSS_LOG_DIR=$logdir/peer-loss-recovery \
    "$top/tests/netns/peer-loss.sh" -c ob1-rxm,cm-rxm kill-recovery 2>&1 |
    tee "$logdir/peer-loss-recovery.log"
add_counts "$logdir/peer-loss-recovery.log" peer-loss-recovery
# (a process of the same node killed under --enable-recovery: only the
# watch on its exit ends the survivor's wait through the rings)
PEER_LOSS_BIN=$build/tests/netns/peer_loss PEER_LOSS_LOG_DIR=$logdir/peer-loss-recovery-node \
    "$top/tests/netns/peer-loss.sh" -c cm-rxm,cm-own-rxm,ob1-rxm kill-recovery-node 2>&1 |
    tee "$logdir/peer-loss-recovery-node.log"
add_counts "$logdir/peer-loss-recovery-node.log" peer-loss-recovery-node
# (the same where the survivor only receives from the victim: both
# components watch a process of the node that attached its ring in their
# inbox, without ever having sent to it)
PEER_LOSS_BIN=$build/tests/netns/peer_loss PEER_LOSS_LOG_DIR=$logdir/peer-loss-recovery-node-recv \
    "$top/tests/netns/peer-loss.sh" -c cm-rxm,cm-own-rxm,ob1-rxm kill-recovery-node-recv 2>&1 |
    tee "$logdir/peer-loss-recovery-node-recv.log"
add_counts "$logdir/peer-loss-recovery-node-recv.log" peer-loss-recovery-node-recv
# Blocking probes under pml cm (pml ob1's are btl_efa's watch, as its
# receives): both matching paths (mtl_efa's watch on the provider's
# probes, and own matching's engine, the same code on either provider).
echo "== several hosts: survivors in MPI_Probe on a partitioned peer (the probe must fail)"
PEER_LOSS_BIN=$build/tests/netns/peer_loss PEER_LOSS_LOG_DIR=$logdir/peer-loss-probe \
    "$top/tests/netns/peer-loss.sh" -c cm-rxd,cm-own-rxm \
    partition-probe partition-probe-any 2>&1 | tee "$logdir/peer-loss-probe.log"
add_counts "$logdir/peer-loss-probe.log" peer-loss-probe
echo "== several hosts: a job of one host on shm spawns onto another (mtl_efa refuses the peer, btl_efa leaves it to tcp)"
OFF_HOST_LOG_DIR=$logdir/off-host MPI_TEST_BIN_DIR=$build/tests/mpi \
    "$top/tests/netns/off-host.sh" 2>&1 | tee "$logdir/off-host.log"
add_counts "$logdir/off-host.log" off-host

if [ -x "$top/bench/tests/run-bench-tests.sh" ]; then
    echo "== benchmark self-checks"
    BENCH_BIN_DIR=$build/bench "$top/bench/tests/run-bench-tests.sh" 2>&1 | tee "$logdir/bench.log"
    add_counts "$logdir/bench.log" bench
fi

# Instructions per 1 B send + receive of every default configuration on one
# node, against the committed baseline (a rise over 3 % fails; load does not
# move the count: bench/callgrind-gate.sh).
echo "== callgrind gate: the defaults' instructions per 1 B send + receive against bench/callgrind-baseline.txt (Open MPI 4.1; callgrind-baseline-ompiX.Y.txt under another)"
BENCH_BIN_DIR=$build/bench "$top/bench/callgrind-gate.sh" --no-reference -o "$logdir/callgrind-gate" 2>&1 |
    tee "$logdir/callgrind-gate.log"
add_counts "$logdir/callgrind-gate.log" callgrind-gate

# Instrumented builds beside the normal one (scripts/build-instrumented.sh,
# started in the background above): ASan + UBSan over the unit tests and
# subsets of the MPI and one-sided suites, ThreadSanitizer over the
# threaded suites, then every libFuzzer harness over its corpus and for 4 s.
# Each suite starts once its build is done.  A build that fails is one
# failure, and its suite is not run: the build directory may hold the
# programs of an earlier build, which would be tested in place of this
# checkout's.
for kind in asan tsan fuzz; do
    case $kind in
    asan) title="sanitizers (ASan + UBSan): unit tests, MPI and one-sided subsets"
          runner=("$top/tests/run-sanitizer-tests.sh" -b "$top/_build-asan" -i "$top/_install-asan") ;;
    tsan) title="ThreadSanitizer: threaded unit tests, MPI_THREAD_MULTIPLE over mtl_efa and btl_efa"
          runner=("$top/tests/run-tsan-tests.sh" -b "$top/_build-tsan" -i "$top/_install-tsan") ;;
    fuzz) title="fuzzers (libFuzzer + ASan + UBSan): corpus, then 4 s per harness"
          # (one harness per core: the suites are done by then, the
          # packages' background step, at nice 10, may not be.  Two at a
          # time, those that map memory for each input, fuzz_shm_ring and
          # fuzz_engine_frame, run about half as many inputs in their 4 s.)
          runner=("$top/tests/fuzz/run-fuzzers.sh" -T 4 -j "$(nproc 2>/dev/null || echo 1)"
                  -b "$top/_build-fuzz") ;;
    esac
    echo "== $title"
    if [ $do_build -eq 1 ]; then
        bg_wait "$logdir/build-$kind.rc"
        suite_times+=("$(printf '%5d s  %s' $((SECONDS - suite_start)) "waiting for build-$kind")")
        suite_start=$SECONDS
        read -r build_rc build_secs 2>/dev/null <"$logdir/build-$kind.rc" || build_rc=1
        bg_times+=("$(printf '%5d s  %s' "${build_secs:-0}" "build-$kind (in the background)")")
        if [ "$build_rc" != 0 ]; then
            tail -20 "$logdir/build-$kind.log"
            { echo "FAIL build-$kind (log: $logdir/build-$kind.log; its suite not run)"
              echo "0 passed, 1 failed"; } | tee "$logdir/$kind.log"
            add_counts "$logdir/$kind.log" $kind
            continue
        fi
    elif [ ! -d "$top/_build-$kind" ]; then
        echo "SKIP $kind: --no-build and no _build-$kind (scripts/build-instrumented.sh $kind)" |
            tee "$logdir/$kind.log"
        echo "0 passed, 0 failed, 1 skipped" >>"$logdir/$kind.log"
        add_counts "$logdir/$kind.log" $kind
        continue
    fi
    SAN_TEST_LOG_DIR=$logdir/san TSAN_TEST_LOG_DIR=$logdir/tsan FUZZ_LOG_DIR=$logdir/fuzz \
        "${runner[@]}" 2>&1 | tee "$logdir/$kind.log"
    add_counts "$logdir/$kind.log" $kind
done

# The packages (started in the background above, after the instrumented
# builds).
if [ -n "$bg_pid" ]; then
    echo "== packages: Spack recipe, release tarball and RPM, Debian package in a clean root"
    wait "$bg_pid"
    suite_times+=("$(printf '%5d s  %s' $((SECONDS - suite_start)) "waiting for the packages")")
    suite_start=$SECONDS
    cat "$logdir/packages.log" 2>/dev/null
    read -r pkg_rc pkg_secs 2>/dev/null <"$logdir/packages.rc" || pkg_rc=1
    bg_times+=("$(printf '%5d s  %s' "${pkg_secs:-0}" "packages (in the background)")")
    add_counts "$logdir/packages.log" packages
    # (an exit status that its closing count does not explain is one
    # failure more)
    if [ "$pkg_rc" != 0 ] && grep -E '^[0-9]+ passed, [0-9]+ failed' "$logdir/packages.log" |
        tail -1 | grep -qE '^[0-9]+ passed, 0 failed'; then
        echo "run-all: the packages' runner exited $pkg_rc (counted as one failure)"
        total_fail=$((total_fail + 1))
    fi
fi

echo "logs: $logdir"
echo "time per suite (total $((SECONDS / 60)) min):"
printf '  %s\n' "${suite_times[@]}"
[ ${#bg_times[@]} -gt 0 ] && printf '  %s\n' "${bg_times[@]}"
if [ $total_skip -gt 0 ]; then
    echo "skipped (each listed above as SKIP with its reason):"
    grep -h '^SKIP ' "$logdir"/*.log | sed 's/^/  /'
fi
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ $total_fail -eq 0 ]
