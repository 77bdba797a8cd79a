#!/usr/bin/env bash
# The threaded suites against the ThreadSanitizer build (_build-tsan, made
# by scripts/build-instrumented.sh tsan): the unit tests that start
# threads, and the MPI threads test (MPI_THREAD_MULTIPLE, tests/mpi/threads.c)
# over mtl_efa with the provider's and its own matching and over pml ob1 +
# btl_efa.  Open MPI, libfabric and hwloc stay uninstrumented: the test
# programs carry the TSan runtime, which sees every access of the
# components and the core Open MPI dlopens into them; what it reports of
# the uninstrumented libraries' own synchronization is suppressed, each
# with its reason, in tests/tsan.supp.  Every report that is left fails the
# run, whatever the program's own verdict: reports are written to files
# (log_path) and counted after each suite.  No one-sided test program
# starts threads of its own, so tests/osc is not run here.
#   tests/run-tsan-tests.sh [-b BUILD_DIR] [-i INSTALL_DIR]
# Logs: TSAN_TEST_LOG_DIR (default /tmp/efa-tsan-logs).
# Prints "N passed, N failed" (the suites' own counts plus one failure per
# process with a report).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/_build-tsan
inst=$top/_install-tsan
while getopts "b:i:h" o; do
    case $o in
    b) build=$OPTARG ;;
    i) inst=$OPTARG ;;
    *) sed -n '2,17p' "$0"; exit 2 ;;
    esac
done
logs=${TSAN_TEST_LOG_DIR:-/tmp/efa-tsan-logs}
rm -rf "$logs"
mkdir -p "$logs/reports"
pass=0 fail=0 skip=0

# Each process's reports go to reports/tsan.PID; the program's exit status
# stays its own (exitcode=0), the reports are counted here.
# report_signal_unsafe=0: Open MPI's and libfabric's signal handlers are
# theirs.
export TSAN_OPTIONS="log_path=$logs/reports/tsan:suppressions=$top/tests/tsan.supp:halt_on_error=0:exitcode=0:second_deadlock_stack=1:report_signal_unsafe=0:print_suppressions=0"

report_prefix=tsan
report_what="ThreadSanitizer report"
report_first='WARNING: ThreadSanitizer|ERROR: ThreadSanitizer|FATAL: ThreadSanitizer'
report_lines=40
# shellcheck source=sanitizer-counts.sh
. "$top/tests/sanitizer-counts.sh"

if [ ! -x "$build/tests/unit/efa_unit_threaded" ] || [ ! -f "$inst/lib/openmpi/mca_mtl_efa.so" ] ||
   [ ! -f "$inst/lib/openmpi/mca_btl_efa.so" ]; then
    echo "FAIL no ThreadSanitizer build in $build / $inst (scripts/build-instrumented.sh tsan)"
    echo "0 passed, 1 failed"
    exit 1
fi

# The unit tests that start threads (the others cannot race): the program
# of their files alone (tests/unit/Makefile.am), whole.
unit_threaded="EmulTarget.ConcurrentAddsLoseNothing EmulTarget.ARemovalWaitsForTheDeviceCopyRunning
EmulTarget.ARemovalAfterAnothersStillWaitsForItsOwnDeviceCopy
MrCacheTest.ConcurrentAcquireReleaseInvalidate Inflight.AnswersRacingTheExpiryCompleteEachOnce
ReleaseGate.DetachWaitsForAHookCallStillInTheTarget
MrCacheTest.ACacheDestroyedAfterDetachIsNeverReachedByTheHook"
echo "== unit tests that start threads"
"$build/tests/unit/efa_unit_threaded" >"$logs/unit.log" 2>&1
rc=$?
up=$(grep -oE '\[  PASSED  \] [0-9]+' "$logs/unit.log" | grep -oE '[0-9]+$')
uf=$(grep -oE '^ *[0-9]+ FAILED TESTS?' "$logs/unit.log" | grep -oE '[0-9]+')
up=${up:-0} uf=${uf:-0}
[ $rc -ne 0 ] && [ "$uf" -eq 0 ] && uf=1
# Each test that starts threads must have run (a renamed or moved one
# would pass unseen).
for t in $unit_threaded; do
    grep -qE "^\[ +(OK|FAILED) +\] $t( |$)" "$logs/unit.log" ||
        { echo "FAIL unit: $t did not run"; uf=$((uf + 1)); }
done
grep -E '^\[  FAILED  \]' "$logs/unit.log" | sort -u
echo "unit: $up passed, $uf failed"
pass=$((pass + up)) fail=$((fail + uf))
reports unit

# Without Open MPI's memory hooks (memory ^patcher): glibc gives back an
# ended thread's stack with madvise after TSan has let the thread go, the
# hook calls the components' release callback, and TSan crashes on an
# instrumented call from a thread it no longer knows.  The registration
# cache's invalidation from several threads is the unit test's
# (MrCacheTest.ConcurrentAcquireReleaseInvalidate).
#
# The PMLs' request free lists are grown to their full size at MPI_Init, in
# the main thread, before the test starts its threads.  A list grown later
# hands items that one thread allocated (malloc, a write to TSan) to another
# through its own atomics, which TSan cannot see: every field of such a
# request would read as a race with the allocation, on the request's first
# use.  Four threads and the churn thread hold a few requests each.
echo "== MPI_THREAD_MULTIPLE over mtl_efa (provider's and own matching) and pml ob1 + btl_efa, instrumented"
EFA_MCA_COMPONENT_PATH=$inst/lib/openmpi MPI_TEST_BIN_DIR=$build/tests/mpi MPI_TEST_LOG_DIR=$logs/mpi \
    MPI_TEST_EXTRA_ARGS="${MPI_TEST_EXTRA_ARGS:-} --mca memory ^patcher --mca pml_cm_free_list_num 1024 --mca pml_ob1_free_list_num 1024" \
    "$top/tests/mpi/run-mpi-tests.sh" --quick -c cm-efa-rxm,cm-efa-own-rxm,ob1-efa-rxm \
    -t threads -n 2 >"$logs/mpi.log" 2>&1
grep -E '^(PASS|FAIL|SKIP) ' "$logs/mpi.log"
count "$logs/mpi.log" mpi
reports mpi

echo "logs: $logs"
if [ $skip -gt 0 ]; then
    echo "$pass passed, $fail failed, $skip skipped"
else
    echo "$pass passed, $fail failed"
fi
[ $fail -eq 0 ]
