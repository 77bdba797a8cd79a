#!/usr/bin/env bash
# Several NICs per process ("rails"): 2 namespace hosts with 2 links each
# (tests/netns/setup.sh 2 2, unshaped), one rank per host, the EFA
# components kept to both links (NETNS_LINKS=2: common_efa_nic_include
# eth0,eth1), each link a NIC of the stand-in provider tcp;ofi_rxm.  Runs,
# each with common_efa_verbose 1:
#   ob1-pingpong  pml ob1 + btl_efa: tests/mpi/pingpong, 0 B .. 64 MiB,
#                 every message checked (ob1 moves the large ones by RDMA
#                 get, btl_efa's native get)
#   ob1-osc       the same configuration, one-sided through osc/rdma:
#                 tests/osc/osc_test putget (put and get 1 B .. 16 MiB,
#                 checked)
#     Each passes when the job succeeds and every process's finalize lines
#     show its put/get striped ("btl:efa: N put/get striped over up to R
#     rails", N > 0) and its second rail used ("common:efa: rail 1 (ethK):
#     N completions", N > 0).
#   ob1-turns     from ob1-pingpong's log: each process's one peer is on
#                 the first NIC ("btl:efa: messages over several NICs: 0
#                 peer(s) on a NIC beside the first"), yet its fragments
#                 and gets beyond the eager limit took the second NIC in
#                 turn ("1 peer(s) whose transfers beyond the eager limit
#                 take the NICs in turn, N of them sent over a NIC beside
#                 the first in turn", N > 0)
#   cm-own-turns  from cm-own-pingpong's log: the same for own matching
#                 ("own matching over several NICs: 0 peer(s) on a NIC
#                 beside the first, ...; 1 peer(s) whose streamed data and
#                 reads take the NICs in turn, N message(s) sent over a
#                 NIC beside the first in turn", N > 0, in both processes)
#   ob1-nostripe  control: ob1-pingpong with common_efa_stripe_min 0 (no
#                 striping, and so no second rail opened); passes when the
#                 job succeeds, no process stripes (no such line, or N =
#                 0) and none reads completions on a rail 1: the assertion
#                 above can fail
#   cm-pingpong   pml cm + mtl_efa (provider matching) pingpong over the
#                 same two links: its large messages go by read rendezvous,
#                 read striped over both; passes when every process's
#                 finalize lines show messages read so ("common:efa: read
#                 rendezvous: S messages sent, N read", N > 0) and its
#                 second rail used
#   cm-own-pingpong  the same under mtl_efa's own matching (its rendezvous
#                 reads striped): every process read by RMA ("own
#                 matching: ... N rendezvous read by RMA", N > 0) and used
#                 its second rail
#   cm-own-spread  own matching with 2 ranks per host (4 in all):
#                 tests/mpi/collectives, every result checked; each process
#                 has two peers on the other host, which take its two NICs
#                 in turn, so every process must say that a peer's messages
#                 went over its second NIC ("own matching over several
#                 NICs: 1 peer(s) on a NIC beside the first, M provider
#                 message(s) sent there", M > 0)
#   ob1-spread     the same with ob1 + btl_efa ("btl:efa: messages over
#                 several NICs: 1 peer(s) on a NIC beside the first, M
#                 message(s) sent there", M > 0, in every process)
#   ob1-spread-stream  ob1 + btl_efa, 4 ranks, bench_pt2pt -t fanout -v
#                 (every even rank streams windows of 64 messages of 4 KiB
#                 to 128 KiB to both odd ranks, every byte checked) within
#                 60 s: credits returned over the second NIC must come
#                 back, or the stream stops
#   tests/netns/rails.sh
# Environment: EFA_MCA_COMPONENT_PATH (default _install/lib/openmpi),
# MPI_TEST_BIN_DIR (default _build/tests/mpi), OSC_TEST_BIN_DIR (default
# _build/tests/osc), BENCH_BIN_DIR (default _build/bench), RAILS_LOG_DIR (default /tmp/efa-rails, a log per run),
# RAILS_TIMEOUT (seconds per run, default 300), NETNS_PREFIX, NETNS_NET,
# NETNS_BRIDGE (common.sh: another set of hosts).  Makes the hosts and
# removes them at the end (also on failure); where they cannot be made,
# each run is a SKIP with the reason.  Prints "PASS name", "FAIL name:
# reason" or "SKIP name (reason)" per run and "N passed, N failed, N
# skipped" (tests/run-all.sh's count); exits 1 on any failure.
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/common.sh"
# shellcheck source=configs.sh
. "$here/configs.sh"
comp=${EFA_MCA_COMPONENT_PATH:-$top/_install/lib/openmpi}
mpibin=${MPI_TEST_BIN_DIR:-$top/_build/tests/mpi}
oscbin=${OSC_TEST_BIN_DIR:-$top/_build/tests/osc}
benchbin=${BENCH_BIN_DIR:-$top/_build/bench}
logdir=${RAILS_LOG_DIR:-/tmp/efa-rails}
limit=${RAILS_TIMEOUT:-300}
runs="ob1-pingpong ob1-turns ob1-osc ob1-nostripe cm-pingpong cm-own-pingpong cm-own-turns cm-own-spread ob1-spread ob1-spread-stream"

npass=0 nfail=0 nskip=0
finish() {
    echo "$npass passed, $nfail failed, $nskip skipped"
    [ "$nfail" -eq 0 ]
}
pass() { echo "PASS $1"; npass=$((npass + 1)); }
fail() { echo "FAIL $1: $2"; nfail=$((nfail + 1)); }

if ! netns_make_hosts 2 2; then
    for r in $runs; do
        echo "$NETNS_VERDICT $r ($NETNS_WHY)"
        if [ "$NETNS_VERDICT" = SKIP ]; then nskip=$((nskip + 1)); else nfail=$((nfail + 1)); fi
    done
    finish
    exit
fi
trap '"$here/teardown.sh"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$logdir"
netns_args_out=$(NETNS_LINKS=2 "$here/mpirun-args.sh" "$logdir" 1 2) ||
    { echo "$(basename "$0"): mpirun-args.sh failed: $netns_args_out" >&2; exit 1; }
mapfile -t netns_args <<<"$netns_args_out"
mkdir -p "$logdir/two-slots"
netns_args2_out=$(NETNS_LINKS=2 "$here/mpirun-args.sh" "$logdir/two-slots" 2 2) ||
    { echo "$(basename "$0"): mpirun-args.sh failed: $netns_args2_out" >&2; exit 1; }
mapfile -t netns_args2 <<<"$netns_args2_out"
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Every process left in the namespaces (a job killed at its time limit).
kill_leftovers() { netns_kill_all; }

# job NAME CONFIG ARGS...: runs CONFIG (configs.sh) on both hosts with ARGS
# (extra mpirun arguments, then the program) into $logdir/NAME.log, one
# rank per host (NP=4: two); its exit status is the job's (124 at the time
# limit)
job() {
    local name=$1 cfg=$2 log=$logdir/$1.log rc=0 np=${NP:-2} hostargs=("${netns_args[@]}")
    shift 2
    config_mpirun_args "$cfg"
    [ "$np" -eq 2 ] || hostargs=("${netns_args2[@]}")
    local cmd=(mpirun -np "$np" --bind-to none --mca mca_base_component_path "$pkglibdir:$comp"
        "${hostargs[@]}" "${args[@]}" --mca common_efa_verbose 1 "$@")
    echo "# $(printf '%q ' "${cmd[@]}")" >"$log"
    timeout -k 10 "$limit" "${cmd[@]}" </dev/null >>"$log" 2>&1 || rc=$?
    [ "$rc" -eq 0 ] || kill_leftovers
    return "$rc"
}

# counts LOG WHAT: one "process count" line per process that printed WHAT's
# finalize line (striped: "btl:efa: N put/get striped"; rdv: "common:efa:
# read rendezvous: S messages sent, N read"; own: "own matching: ... N
# rendezvous read by RMA"; rail1: "common:efa: rail 1 (IFACE): N
# completions"), in process order
counts() {
    local re
    case $2 in
    striped) re='^\[([^]]+)\] btl:efa: ([0-9]+) put/get striped over' ;;
    rdv) re='^\[([^]]+)\] common:efa: read rendezvous: [0-9]+ messages sent, ([0-9]+) read' ;;
    own) re='^\[([^]]+)\] mtl:efa: own matching: .* ([0-9]+) rendezvous read by RMA' ;;
    rail1) re='^\[([^]]+)\] common:efa: rail 1 \([^)]*\): ([0-9]+) completions' ;;
    esac
    sed -nE "s|$re.*|\1 \2|p" "$1" | sort
}

# used LOG [KIND]: empty when each of the 2 processes striped (KIND
# striped, the default; rdv or own: read so) and read completions on rail
# 1, else what was missing
used() {
    local what n bad=""
    for what in "${2:-striped}" rail1; do
        n=$(counts "$1" "$what" | awk '$2 > 0' | wc -l)
        [ "$n" -eq 2 ] || bad="$bad${bad:+; }$what: $(list "$1" "$what")"
    done
    echo "$bad"
}

# list LOG WHAT: WHAT's figures of the processes that printed one, "a/b"
# ("none" when no process did)
list() {
    local l
    l=$(counts "$1" "$2" | awk '{print $2}' | paste -sd/ -)
    echo "${l:-none}"
}

# summary LOG [KIND]: the finalize figures, for the PASS and FAIL lines
summary() {
    echo "${2:-striped} $(list "$1" "${2:-striped}"), rail 1 completions $(list "$1" rail1)"
}

# striping_run KIND NAME CONFIG ARGS...: a run that must stripe (KIND as
# used's)
striping_run() {
    local kind=$1 name=$2 log=$logdir/$2.log rc=0 bad
    shift
    job "$@" || rc=$?
    if [ "$rc" -ne 0 ]; then fail "$name" "job exit $rc (log $log)"; return; fi
    bad=$(used "$log" "$kind")
    if [ -n "$bad" ]; then fail "$name" "not on both rails ($bad; log $log)"; return; fi
    pass "$name ($(summary "$log" "$kind"))"
}

striping_run striped ob1-pingpong ob1-rxm "$mpibin/pingpong"

# turns_check NAME LOG REGEX: both processes' finalize lines match REGEX
turns_check() {
    local turns
    turns=$(grep -cE "$3" "$2" || true)
    if [ "$turns" -eq 2 ]; then
        pass "$1 (both processes gave the second NIC turns of their one peer's transfers)"
    else
        fail "$1" "$turns of 2 processes gave the second NIC turns of a peer of the first (log $2)"
    fi
}
# one peer on the first NIC, its larger transfers over both in turn
turns_check ob1-turns "$logdir/ob1-pingpong.log" \
    'btl:efa: messages over several NICs: 0 peer\(s\) on a NIC beside the first, .*; 1 peer\(s\) whose transfers beyond the eager limit take the NICs in turn, [1-9][0-9]* of them sent over a NIC beside the first in turn'
striping_run striped ob1-osc ob1-rxm "$oscbin/osc_test" putget

# the control: the same run with striping off must fail used()'s check;
# no process opens a second rail then (nothing would use it)
rc=0
job ob1-nostripe ob1-rxm --mca common_efa_stripe_min 0 "$mpibin/pingpong" || rc=$?
log=$logdir/ob1-nostripe.log
if [ "$rc" -ne 0 ]; then
    fail ob1-nostripe "job exit $rc (log $log)"
elif [ "$(counts "$log" striped | awk '$2 > 0' | wc -l)" -ne 0 ]; then
    fail ob1-nostripe "striped with common_efa_stripe_min 0 ($(summary "$log"); log $log)"
elif [ "$(counts "$log" rail1 | awk '$2 > 0' | wc -l)" -ne 0 ]; then
    fail ob1-nostripe "rail 1 read completions without striping ($(summary "$log"); log $log)"
elif [ -z "$(used "$log")" ]; then
    fail ob1-nostripe "the rails check passed a run without striping (log $log)"
elif ! grep -q "more NIC(s) left unused (striping off: common_efa_stripe_min 0" "$log"; then
    fail ob1-nostripe "the report did not say the second NIC is left unused (log $log)"
else
    pass "ob1-nostripe (no striping: $(summary "$log"))"
fi

striping_run rdv cm-pingpong cm-rxm "$mpibin/pingpong"
striping_run own cm-own-pingpong cm-own-rxm "$mpibin/pingpong"
turns_check cm-own-turns "$logdir/cm-own-pingpong.log" \
    'own matching over several NICs: 0 peer\(s\) on a NIC beside the first, .*; 1 peer\(s\) whose streamed data and reads take the NICs in turn, [1-9][0-9]* message\(s\) sent over a NIC beside the first in turn'

# spread_run NAME CONFIG REGEX: 4 ranks, collectives checked; every
# process's finalize line (REGEX: its peers on a NIC beside the first as
# \1, the messages sent there as \2) must show both above 0
spread_run() {
    local name=$1 cfg=$2 re=$3 log=$logdir/$1.log rc=0 spread
    NP=4 job "$name" "$cfg" "$mpibin/collectives" -s 4M || rc=$?
    spread=$(sed -nE "s/.*$re.*/\1 \2/p" "$log" | awk '$1 > 0 && $2 > 0' | wc -l)
    if [ "$rc" -ne 0 ]; then
        fail "$name" "job exit $rc (log $log)"
    elif [ "$spread" -ne 4 ]; then
        fail "$name" "$spread of 4 processes sent a peer's messages over their second NIC (log $log)"
    else
        pass "$name (every process sent a peer's messages over its second NIC)"
    fi
}

# messages spread over the NICs by peer: own matching's, then btl_efa's
spread_run cm-own-spread cm-own-rxm \
    'own matching over several NICs: ([0-9]+) peer\(s\) on a NIC beside the first, ([0-9]+) provider message'
spread_run ob1-spread ob1-rxm \
    'btl:efa: messages over several NICs: ([0-9]+) peer\(s\) on a NIC beside the first, ([0-9]+) message'

# a stream one way over the second NIC: the receivers' credits go back
# there too, in credit messages of their own
rc=0
log=$logdir/ob1-spread-stream.log
limit=60 NP=4 job ob1-spread-stream ob1-rxm "$benchbin/bench_pt2pt" -t fanout -v -i 100 -x 10 \
    -m 4K -M 128K -f 2 -w 64 || rc=$?
if [ "$rc" -ne 0 ]; then
    fail ob1-spread-stream "job exit $rc (124: the stream stopped; log $log)"
elif ! grep -q "^131072 " "$log" || ! grep -q "^# verify=ok" "$log"; then
    fail ob1-spread-stream "no 128 KiB row, or the data not verified (log $log)"
else
    pass "ob1-spread-stream (every size streamed and checked)"
fi
finish
