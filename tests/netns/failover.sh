#!/usr/bin/env bash
# A failed rail survived: 2 namespace hosts with 3 links each (link 0
# carries Open MPI's own traffic; links 1 and 2, shaped at 1 Gbit/s, are
# the EFA components' two NICs: common_efa_nic_include eth1,eth2), one rank
# per host, pml ob1 + btl_efa over tcp;ofi_rxm, tests/mpi/pingpong -t 11
# (every message checked, its large ones by RDMA get striped over both
# rails), common_efa_peer_timeout 5.  Three seconds into the stream the
# second rail's link of host 2 fails:
#   link-down  the interface is set down (tests/netns/fault.sh link-down)
#   cut-link   every frame on it is dropped (fault.sh cut-link: nftables)
#     Each passes when the job succeeds, a process says which NIC it took
#     out ("NIC: ethK" of help topic rail-lost) and a process sent a part
#     again over the first rail (btl:efa: N striped part(s) sent again, N
#     > 0).
#   own-link-down  link-down under pml cm + mtl_efa with own matching
#     (udp;ofi_rxd, below: its streamed data takes both NICs in turn, and
#     over tcp;ofi_rxm a message completed into the dying link's socket
#     could be lost with nothing left to fail), whose rendezvous reads are
#     striped: the job succeeds, names the NIC, and every read completed
#     by the rails (none fell back to streaming).
#   own-first-link-down  link-down of the FIRST rail's link under pml cm +
#     mtl_efa with own matching (udp;ofi_rxd, btl self only, so nothing
#     pins the peers to the first NIC): the job succeeds, names the NIC,
#     and both processes took it out ("NICs taken out for a peer: N
#     here", N > 0) with no peer lost.  Before the first rail could fail
#     over, its loss was the peer's and this job failed.
#   own-msgs-link-down  own-link-down on udp;ofi_rxd (below) with
#     mtl_efa_debug_net_first_rail 1:
#     the peer's messages go over the second NIC, the one that fails; the
#     job succeeds, names the NIC, and both processes had their peer's
#     messages there ("own matching over several NICs: 1 peer(s) on a NIC
#     beside the first, M provider message(s) sent there", M > 0) and then
#     over the first (the same process's messages injected: N injected,
#     N > 0, which only the first NIC does)
#   ob1-msgs-link-down  the same under ob1 + btl_efa (udp;ofi_rxd) with
#     btl_efa_debug_first_rail 1: the job succeeds, names the NIC, both
#     processes had their peer's messages on the second NIC ("btl:efa:
#     messages over several NICs: 1 peer(s) on a NIC beside the first, M
#     message(s) sent there", M > 0), and both moved the peer's messages
#     to the first NIC ("a peer's messages leave NIC 1 of the set")
#   ob1-first-link-down  link-down of the FIRST rail's link under ob1 +
#     btl_efa (udp;ofi_rxd): the peer's messages there are numbered (it
#     is reached over both NICs), so they leave the first NIC and go on
#     over the second; the job succeeds, names the NIC, both processes
#     moved the peer's messages ("N time(s) a peer's messages left it", N >
#     0) and no peer was lost.  Before they were numbered, the first
#     NIC's loss was the peer's and this job failed.
#   rdv-link-down  link-down under pml cm + mtl_efa with the provider's
#     matching, whose large messages are read by the receiver striped over
#     both rails (read rendezvous): the job succeeds, names the NIC, and
#     both processes read such messages with none failed.
#   link-back  link-down under ob1 + btl_efa with common_efa_rail_retry 2,
#     the link set up again six seconds later, its TCP connections ended
#     first (fault.sh drop-conns: as EFA's device ends a dead path's
#     operations, where TCP would deliver old bytes): a process pings the peer
#     over the lost NIC, the answer puts it back ("NIC ethK reaches ...
#     again", help-less verbose-1 line with the NIC's bytes so far), and
#     that NIC carries more puts and gets after it ("rail 1 (ethK): ...
#     N bytes of puts and gets" at the end above the bytes said then);
#     the process that took the NIC out told its peer, which dropped its
#     registrations too ("NICs taken out for a peer: N here, M by a peer
#     that told this process", M > 0, in a process), and every message's
#     bytes were right after the link came back.
#   own-link-back  the same under pml cm + mtl_efa with own matching
#     (udp;ofi_rxd), messages up to 32 KiB (none read by RMA: below): the
#     NIC put back, own matching's messages take it again ("N NIC(s)
#     taken again once back, M message(s) sent over them since", N, M > 0
#     in a process).
#   own-first-link-back  the same with the FIRST rail's link
#     (own-first-link-down's setting): the first NIC, taken out, is put
#     back ("NIC ethK reaches ... again") and its messages take it again.
#   ob1-first-link-back  the same under ob1 + btl_efa (udp;ofi_rxd): the
#     first NIC put back, btl_efa's messages take it again (its verbose-1
#     line: "N NIC(s) taken again once back, M message(s) sent over them
#     since", N, M > 0 in a process).  Run once more, said on its result
#     line, where a process was caught stopped for good inside ofi_rxd
#     (rxd-hang.sh; DESIGN.md, "Stand-in provider defects that fail a run
#     at times").
#   no-failover  control: link-down with common_efa_rail_failover 0, where
#     a rail's failure is the peer's loss; passes when the job fails
#     (non-zero exit, the peer named unreachable) within the time limit:
#     the checks above can fail.
#   tests/netns/failover.sh
# Environment: EFA_MCA_COMPONENT_PATH, MPI_TEST_BIN_DIR, FAILOVER_LOG_DIR
# (default /tmp/efa-failover), FAILOVER_RUNS (the runs to do, by name,
# separated by spaces: default all of them), NETNS_PREFIX, NETNS_NET, NETNS_BRIDGE
# (common.sh).  Makes the hosts and removes them at the end; where they
# cannot be made, each run is a SKIP with the reason.  Prints PASS, FAIL or
# SKIP per run and "N passed, N failed, N skipped"; exits 1 on a failure.
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/common.sh"
comp=${EFA_MCA_COMPONENT_PATH:-$top/_install/lib/openmpi}
mpibin=${MPI_TEST_BIN_DIR:-$top/_build/tests/mpi}
logdir=${FAILOVER_LOG_DIR:-/tmp/efa-failover}
all_runs="link-down cut-link own-link-down own-first-link-down own-msgs-link-down ob1-msgs-link-down ob1-first-link-down rdv-link-down link-back own-link-back own-first-link-back ob1-first-link-back no-failover"
runs=${FAILOVER_RUNS:-$all_runs}
for r in $runs; do
    case " $all_runs " in
    *" $r "*) ;;
    *)
        echo "failover.sh: no run named '$r' (runs: $all_runs)" >&2
        exit 2
        ;;
    esac
done
# want NAME: NAME is one of the runs asked for.
want() { case " $runs " in *" $1 "*) return 0 ;; esac; return 1; }
npass=0 nfail=0 nskip=0
finish() {
    echo "$npass passed, $nfail failed, $nskip skipped"
    [ "$nfail" -eq 0 ]
}
pass() { echo "PASS failover/$1"; npass=$((npass + 1)); }
# fail NAME WHY: a FAIL line, then what the run's log (the path that ends
# WHY, in parentheses) says of the failure: its errors, the reasons its
# help texts give, and its last lines, so that a CI log shows the cause.
fail() {
    echo "FAIL failover/$1: $2"
    nfail=$((nfail + 1))
    local log=${2##*(}
    log=${log%)}
    [ -r "$log" ] || return 0
    {
        grep -E "Why:|lost|gap|never|[Ff]ailed|[Ee]rror|abort|ABORT|signal|stopped answering|timed out" "$log" |
            grep -v "^ok " | head -n 15
        echo "..."
        tail -n 6 "$log"
    } | cut -c1-240 | sed 's/^/    | /'
}

if ! netns_make_hosts 2 3 1gbit; then
    for r in $runs; do
        echo "$NETNS_VERDICT failover/$r ($NETNS_WHY)"
        if [ "$NETNS_VERDICT" = SKIP ]; then nskip=$((nskip + 1)); else nfail=$((nfail + 1)); fi
    done
    finish
    exit $?
fi
trap '"$here/teardown.sh" >/dev/null 2>&1 || true' EXIT
# Open MPI's own components (pml ob1, btl self), wherever this Open MPI keeps them
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
mkdir -p "$logdir"
args_out=$(NETNS_LINKS=3 "$here/mpirun-args.sh" "$logdir/hosts" 1) ||
    { echo "$(basename "$0"): mpirun-args.sh failed: $args_out" >&2; exit 1; }
mapfile -t args <<<"$args_out"
args=("${args[@]/eth0,eth1,eth2/eth1,eth2}") # link 0 stays Open MPI's
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# shellcheck disable=SC2054 # "efa,self" is one argument
ob1=(--mca pml ob1 --mca btl efa,self --mca btl_efa_provider_include 'tcp;ofi_rxm')
cm=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include 'tcp;ofi_rxm'
    --mca mtl_efa_matching provider)
# Messages on the failing NIC (own matching's streamed data takes both in
# turn): over udp;ofi_rxd, whose sends complete once
# the peer acknowledged them, as EFA's do.  tcp;ofi_rxm completes a send
# once a local socket has it, so a message sent just before the link went
# down could be lost with nothing left to fail (DESIGN.md, "btl_efa's
# messages by peer"), and the stream would wait for it.
# shellcheck disable=SC2054 # "efa,self" is one argument
ob1_rxd=(--mca pml ob1 --mca btl efa,self --mca btl_efa_provider_include 'udp;ofi_rxd')
own_rxd=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include 'udp;ofi_rxd'
    --mca mtl_efa_matching own)

# watch_rxd_hang LOG JOB: once a NIC is lost again after the fault was
# cleared (one more help text naming a NIC) or a peer stopped answering,
# each process of the job is looked at (rxd-hang.sh); what is found is
# appended to LOG.hang.
watch_rxd_hang() {
    local n0 p
    n0=$(grep -c "NIC: " "$1" || true)
    while kill -0 "$2" 2>/dev/null; do
        if [ "$(grep -c "NIC: " "$1" || true)" -gt "$n0" ] || grep -q "stopped answering" "$1"; then
            for p in $(netns_pids_named pingpong); do
                "$here/rxd-hang.sh" "$p" >>"$1.hang" &
            done
            wait
            return
        fi
        sleep 0.3
    done
}

# run NAME FAULT mpirun-args...: the stream (STREAM_S seconds, default
# 11) with FAULT on the second rail's link of host 2 (the first's where
# FAIL_RAIL is 0) three seconds in, and
# where BACK_S is set every fault cleared that many seconds later (or once
# a process has named the NIC lost, up to 10 s more); messages
# up to STREAM_MAX bytes (default 64M); leaves
# the log in $logdir/NAME.log and the job's exit status in $rc.
run() {
    local fault=$2 log=$logdir/$1.log rail1 _
    shift 2
    "$here/fault.sh" clear >/dev/null 2>&1 || true
    timeout -k 10 150 mpirun -np 2 --bind-to none "${args[@]}" \
        --mca mca_base_component_path "$pkglibdir:$comp" \
        --mca common_efa_verbose 1 --mca common_efa_peer_timeout 5 "$@" \
        "$mpibin/pingpong" -s "${STREAM_MAX:-64M}" -t "${STREAM_S:-11}" >"$log" 2>&1 &
    local job=$!
    # The second rail is the second NIC of the report line "N rails: A, B".
    for _ in $(seq 1 60); do
        rail1=$(grep -o -m1 "rails: eth[0-9], eth[0-9]" "$log" 2>/dev/null |
            awk -v f="${FAIL_RAIL:-1}" '{print $(2 + f)}' | tr -d ,) || true
        [ -n "$rail1" ] && break
        sleep 0.5
    done
    sleep 3
    [ -n "$rail1" ] && "$here/fault.sh" "$fault" 2 "${rail1#eth}" >/dev/null
    if [ -n "${BACK_S:-}" ]; then
        sleep "$BACK_S"
        # Not back before the loss was declared: on udp;ofi_rxd only the
        # deadline (5 s, checked once a second, later on a loaded machine)
        # declares it, and a link back first would leave nothing to test.
        # Up to 10 s more for the NIC's name in the log.
        for _ in $(seq 1 50); do
            [ -z "$rail1" ] || grep -q "NIC: *${rail1}\$" "$log" 2>/dev/null && break
            sleep 0.2
        done
        # The link's connections end first, as EFA's device ends a dead
        # path's operations: TCP would deliver, once the link is back, a
        # read's answer the core gave up on seconds ago, into memory the
        # application has reused (docs/RELIABILITY.md, "A failed NIC").
        if [ -n "$rail1" ] && ! "$here/fault.sh" drop-conns 2 "${rail1#eth}" >/dev/null; then
            echo "failover.sh: $1: the link's connections were not ended (fault.sh drop-conns)" >&2
        fi
        "$here/fault.sh" clear >/dev/null 2>&1 || true
    fi
    rm -f "$log.hang"
    [ -n "${RXD_HANG_WATCH:-}" ] && watch_rxd_hang "$log" "$job" &
    rc=0
    wait "$job" || rc=$?
    wait # the watch ends with the job
    "$here/fault.sh" clear >/dev/null 2>&1 || true
    [ -n "$rail1" ] || { rc=-1; echo "no rails report in $log"; }
    again=$(grep -o "[0-9]* striped part(s) sent again" "$log" | awk '$1 > 0' | wc -l)
    named=$(grep -c "NIC: *${rail1:-none}\$" "$log" || true)
    lost_nic=${rail1:-none}
}

for fault in link-down cut-link; do
    want "$fault" || continue
    run "$fault" "$fault" "${ob1[@]}"
    if [ "$rc" -eq 0 ] && grep -q "^ok pingpong" "$logdir/$fault.log" && [ "$again" -gt 0 ] &&
        [ "$named" -gt 0 ]; then
        pass "$fault (parts sent again in $again process(es), the NIC named)"
    else
        fail "$fault" "exit $rc, parts sent again in $again process(es), NIC named $named time(s) ($logdir/$fault.log)"
    fi
done
# pml cm + mtl_efa under own matching: its rendezvous reads striped, a
# failed rail's pieces read again by the first (no read falls back to
# streaming: both processes say "0 reads failed").
if want own-link-down; then
    run own-link-down link-down "${own_rxd[@]}"
    if [ "$rc" -eq 0 ] && grep -q "^ok pingpong" "$logdir/own-link-down.log" && [ "$named" -gt 0 ] &&
        [ "$(grep -c "rendezvous read by RMA (0 reads failed" "$logdir/own-link-down.log")" -eq 2 ]; then
        pass "own-link-down (own matching's reads went on, the NIC named)"
    else
        fail "own-link-down" "exit $rc, NIC named $named time(s) ($logdir/own-link-down.log)"
    fi
fi
# Own matching's first NIC fails (FAIL_RAIL 0): nothing else pins the
# peers to it (ob1 and btl_efa are not in the job), so each process takes
# it out for its peer alone (both say so), the peer's messages go on over
# the second NIC (what the first carried is sent again there, or refused
# there at once and moved), and the job completes with every byte
# checked.  Before the first rail could fail over, its loss was the
# peer's and this job failed.
if want own-first-link-down; then
    log=$logdir/own-first-link-down.log
    FAIL_RAIL=0 run own-first-link-down link-down "${own_rxd[@]}" --mca btl self
    out=$(grep -cE "NICs taken out for a peer: [1-9][0-9]* here" "$log" || true)
    moved=$(grep -cE "own matching over several NICs: .* [1-9][0-9]* sent again over another NIC" "$log" || true)
    if [ "$rc" -eq 0 ] && grep -q "^ok pingpong" "$log" && [ "$named" -gt 0 ] && [ "$out" -eq 2 ] &&
        ! grep -q "stopped answering" "$log"; then
        pass "own-first-link-down (the first NIC taken out in both processes and named; $moved process(es) sent messages in flight again)"
    else
        fail "own-first-link-down" "exit $rc, NIC named $named time(s), taken out in $out process(es) ($log)"
    fi
fi
# msgs_moved NAME ON MOVED HOW mpirun-args...: the run NAME (link-down),
# passed when both processes had their peer's messages on the second NIC
# (a line matching ON, an extended regex) and both then sent them over the
# first (a line matching MOVED; HOW names that in the failure message).
msgs_moved() {
    local name=$1 on=$2 moved=$3 how=$4 log=$logdir/$1.log n_on n_moved
    shift 4
    run "$name" link-down "$@"
    n_on=$(grep -cE "$on" "$log" || true)
    n_moved=$(grep -cE "$moved" "$log" || true)
    if [ "$rc" -eq 0 ] && grep -q "^ok pingpong" "$log" && [ "$named" -gt 0 ] &&
        [ "$n_on" -eq 2 ] && [ "$n_moved" -eq 2 ]; then
        pass "$name (messages over the failed NIC, then the first; the NIC named)"
    else
        fail "$name" "exit $rc, NIC named $named time(s), $n_on process(es) with messages on the second NIC, $n_moved $how ($log)"
    fi
}
# Own matching's messages on the NIC that fails: they go on over the first
# (the same process's messages injected, which only the first NIC does).
if want own-msgs-link-down; then
    msgs_moved own-msgs-link-down \
        "own matching over several NICs: 1 peer\(s\) on a NIC beside the first, [1-9][0-9]* provider" \
        "own matching: [0-9]+ provider messages sent \([0-9]+ packing several, [1-9][0-9]* injected" \
        "injecting on the first" "${own_rxd[@]}" --mca mtl_efa_debug_net_first_rail 1
fi
# btl_efa's messages on the NIC that fails: sent again over the first.
if want ob1-msgs-link-down; then
    msgs_moved ob1-msgs-link-down \
        "btl:efa: messages over several NICs: 1 peer\(s\) on a NIC beside the first, [1-9][0-9]* message" \
        "btl:efa: a peer's messages leave NIC 1 of the set" \
        "moving them to the first" "${ob1_rxd[@]}" --mca btl_efa_debug_first_rail 1
fi
# btl_efa's first NIC fails: its messages there were numbered, so they
# move to the second (a send that failed goes again there, the receiver
# drops a copy that came both ways), and its puts and gets follow.
if want ob1-first-link-down; then
    log=$logdir/ob1-first-link-down.log
    FAIL_RAIL=0 run ob1-first-link-down link-down "${ob1_rxd[@]}"
    left=$(grep -cE "btl:efa: messages over several NICs: .*; [0-9]+ message\(s\) numbered over the first NIC, [1-9][0-9]* time\(s\) a peer's messages left it" "$log" || true)
    if [ "$rc" -eq 0 ] && grep -q "^ok pingpong" "$log" && [ "$named" -gt 0 ] && [ "$left" -gt 0 ] &&
        ! grep -q "stopped answering" "$log"; then
        pass "ob1-first-link-down (the first NIC named, the peer's messages moved off it in $left process(es))"
    else
        fail "ob1-first-link-down" "exit $rc, NIC named $named time(s), messages moved off it in $left process(es) ($log)"
    fi
fi
# pml cm + mtl_efa under the provider's matching: large messages read by
# the receiver over both rails; a failed rail's pieces read again by the
# first ("0 failed" in both processes).
if want rdv-link-down; then
    run rdv-link-down link-down "${cm[@]}"
    rdv_read=$(grep -cE "read rendezvous: [0-9]+ messages sent, [1-9][0-9]* read \([0-9]+ bytes\), 0 failed" \
        "$logdir/rdv-link-down.log" || true)
    if [ "$rc" -eq 0 ] && grep -q "^ok pingpong" "$logdir/rdv-link-down.log" && [ "$named" -gt 0 ] &&
        [ "$rdv_read" -eq 2 ]; then
        pass "rdv-link-down (read rendezvous went on in both processes, the NIC named)"
    else
        fail "rdv-link-down" "exit $rc, NIC named $named time(s), $rdv_read process(es) read with none failed ($logdir/rdv-link-down.log)"
    fi
fi
# The link comes back: a process puts the NIC back for its peer, and the
# NIC's bytes of puts and gets at the end exceed those it said then.
if want link-back; then
    STREAM_S=24 BACK_S=6 run link-back link-down "${ob1[@]}" --mca common_efa_rail_retry 2
    back_line=$(grep -m1 "NIC $lost_nic reaches .* again" "$logdir/link-back.log" || true)
    grew=0
    if [ -n "$back_line" ]; then
        who=${back_line%%]*}]
        then_bytes=$(sed -n 's/.* (\([0-9]*\) bytes on it so far.*/\1/p' <<<"$back_line")
        end_bytes=$(grep -F "$who" "$logdir/link-back.log" |
            sed -n "s/.*rail [0-9] ($lost_nic): [0-9]* completions, \([0-9]*\) bytes of puts and gets.*/\1/p" | tail -1)
        [ -n "$then_bytes" ] && [ -n "$end_bytes" ] && [ "$end_bytes" -gt "$then_bytes" ] && grew=1
    fi
    told=$(grep -cE "NICs taken out for a peer: [0-9]+ here, [1-9][0-9]* by a peer" \
        "$logdir/link-back.log" || true)
    if [ "$rc" -eq 0 ] && grep -q "^ok pingpong" "$logdir/link-back.log" && [ "$named" -gt 0 ] &&
        [ "$grew" -eq 1 ] && [ "$told" -gt 0 ]; then
        pass "link-back (the NIC lost, its peer told, put back, and carrying bytes again: ${then_bytes} -> ${end_bytes})"
    else
        fail "link-back" "exit $rc, NIC named $named time(s), $told process(es) told by the peer, back: '${back_line:-none}', bytes then ${then_bytes:-?}, at the end ${end_bytes:-?} ($logdir/link-back.log)"
    fi
fi
# The same under pml cm + mtl_efa with own matching (udp;ofi_rxd): once
# the core puts the NIC back, its messages take it again ("N NIC(s) taken
# again once back, M message(s) sent over them since", N and M > 0 in a
# process), and every message's bytes were right.  Messages up to 32 KiB:
# streamed by own matching's messages (those between its eager limit and
# its reads take the NICs in turn), never read by RMA.  ofi_rxd
# retransmits a held read without end, so a read given up on while the
# link was down would land its answer in a buffer reused since once the
# link is back; EFA's device ends such a read, and the link-back run
# above ends TCP's connections, but UDP has none to end (RELIABILITY.md,
# "A failed NIC").  A late copy of a message is dropped by its number.
if want own-link-back; then
    log=$logdir/own-link-back.log
    STREAM_MAX=32K STREAM_S=24 BACK_S=6 run own-link-back link-down "${own_rxd[@]}" \
        --mca btl self --mca common_efa_rail_retry 2
    back=$(grep -c "NIC $lost_nic reaches .* again" "$log" || true)
    retaken=$(grep -cE "[1-9][0-9]* NIC\(s\) taken again once back, [1-9][0-9]* message\(s\) sent over them since" "$log" || true)
    if [ "$rc" -eq 0 ] && grep -q "^ok pingpong" "$log" && [ "$named" -gt 0 ] && [ "$back" -gt 0 ] &&
        [ "$retaken" -gt 0 ]; then
        pass "own-link-back (the NIC lost, put back in $back process(es), its messages over it again in $retaken)"
    else
        fail "own-link-back" "exit $rc, NIC named $named time(s), put back in $back process(es), messages over it again in $retaken ($log)"
    fi
fi
# The first NIC's link down and up again under own matching: the first
# NIC, taken out where nothing pinned it, is asked again like any, put
# back, and its messages take it again (messages up to 32 KiB, as above).
if want own-first-link-back; then
    log=$logdir/own-first-link-back.log
    FAIL_RAIL=0 STREAM_MAX=32K STREAM_S=24 BACK_S=6 run own-first-link-back link-down "${own_rxd[@]}" \
        --mca btl self --mca common_efa_rail_retry 2
    back=$(grep -c "NIC $lost_nic reaches .* again" "$log" || true)
    retaken=$(grep -cE "[1-9][0-9]* NIC\(s\) taken again once back, [1-9][0-9]* message\(s\) sent over them since" "$log" || true)
    if [ "$rc" -eq 0 ] && grep -q "^ok pingpong" "$log" && [ "$named" -gt 0 ] && [ "$back" -gt 0 ] &&
        [ "$retaken" -gt 0 ] && ! grep -q "stopped answering" "$log"; then
        pass "own-first-link-back (the first NIC lost, put back in $back process(es), its messages over it again in $retaken)"
    else
        fail "own-first-link-back" "exit $rc, NIC named $named time(s), put back in $back process(es), messages over it again in $retaken ($log)"
    fi
fi
# The same under ob1 + btl_efa: its messages, numbered, left the first
# NIC for the second, and take the first again once the core put it back.
# A run where a process was caught stopped for good inside ofi_rxd
# (rxd-hang.sh; DESIGN.md, "Stand-in provider defects that fail
# a run at times") is run once more, and the result line says so.
if want ob1-first-link-back; then
    log=$logdir/ob1-first-link-back.log
    first_link_back() {
        FAIL_RAIL=0 STREAM_MAX=32K STREAM_S=24 BACK_S=6 RXD_HANG_WATCH=1 run ob1-first-link-back \
            link-down "${ob1_rxd[@]}" --mca common_efa_rail_retry 2
        back=$(grep -c "NIC $lost_nic reaches .* again" "$log" || true)
        retaken=$(grep -cE "btl:efa: messages over several NICs: .* [1-9][0-9]* NIC\(s\) taken again once back, [1-9][0-9]* message\(s\) sent over them since" "$log" || true)
        [ "$rc" -eq 0 ] && grep -q "^ok pingpong" "$log" && [ "$named" -gt 0 ] && [ "$back" -gt 0 ] &&
            [ "$retaken" -gt 0 ] && ! grep -q "stopped answering" "$log"
    }
    ok=0 rerun=
    first_link_back && ok=1
    if [ "$ok" -eq 0 ] && [ -s "$log.hang" ]; then
        mv "$log" "$log.first"
        mv "$log.hang" "$log.first.hang"
        rerun="run again: in the first, $(head -n 1 "$log.first.hang") (log $log.first)"
        first_link_back && ok=1
    fi
    if [ "$ok" -eq 1 ]; then
        pass "ob1-first-link-back (the first NIC lost, put back in $back process(es), btl_efa's messages over it again in $retaken${rerun:+; $rerun})"
    else
        fail "ob1-first-link-back" "exit $rc, NIC named $named time(s), put back in $back process(es), messages over it again in $retaken${rerun:+; $rerun} ($log)"
    fi
fi
if want no-failover; then
    run no-failover link-down "${ob1[@]}" --mca common_efa_rail_failover 0
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] &&
        grep -q "stopped answering" "$logdir/no-failover.log"; then
        pass "no-failover (the job failed with the peer lost, exit $rc)"
    else
        fail "no-failover" "exit $rc, expected a failure naming the peer ($logdir/no-failover.log)"
    fi
fi
finish
