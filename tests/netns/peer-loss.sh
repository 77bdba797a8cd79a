#!/usr/bin/env bash
# Peer death and lost hosts: tests/netns/peer_loss on three namespace hosts
# (one rank each; the victim, rank 2, alone on host 3), in these scenarios:
#   kill  the victim kills itself (SIGKILL) in the middle of a transfer
#         (or on a timer 3 s after the transfers began, where they stall
#         before its round: the PASS line says so)
#   cut   once the ranks are transferring, host 3 is cut off the network
#         (tests/netns/fault.sh cut 3: every frame from or to it dropped,
#         Open MPI's own out-of-band traffic to its daemon included); the
#         runs set Open MPI's out-of-band keepalive short (below), which is
#         what lets the runtime notice a silent host
#   partition  host 3 cut off from the other hosts only (fault.sh isolate
#         3): its daemon still talks to mpirun, as when EFA fails and the
#         IP network stays up.  Only the components' peer deadline bounds
#         this case (docs/RELIABILITY.md): the runs set it to
#         PARTITION_TIMEOUT (5 s) and must end within PARTITION_BOUND
#         (25 s: the deadline, a probe's half deadline, the once-a-second
#         check and the abort) or DEADLINE, whichever is shorter
#   partition-any  the same partition while the survivors only wait in
#         MPI_Recv(MPI_ANY_SOURCE) for the victim's messages (peer_loss
#         -a): such a receive fails once a member of its communicator is
#         lost (ULFM's rule): own matching's engine (cm-own-*, cm-direct-*),
#         mtl_efa's watch on the receives the provider holds (cm-rxd,
#         cm-rxm: mtl_efa_any.c; before it those runs hung) and, under pml
#         ob1, btl_efa's watch
#   kill-recovery  kill under Open MPI's --enable-recovery, so that the
#         runtime does not end the job when the victim dies, with two ranks
#         (rank 0 on host 1, the victim rank 1 on host 3: a survivor that
#         hangs on the victim cannot be freed by another survivor's end)
#         and the partitions' deadline (PARTITION_TIMEOUT, PARTITION_BOUND):
#         the survivor must end it, naming the victim.  On tcp;ofi_rxm the
#         dead process's connections fail what is in flight with a
#         connection error (FI_ENOTCONN, FI_ECONNRESET: not FI_ETIMEDOUT),
#         and the core declares the peer lost at once.  Under pml ob1
#         btl_efa must tell ob1 then (its error handler): before, only a
#         send failing with FI_ETIMEDOUT or FI_EHOSTUNREACH did, the watch
#         gave up silently on a peer already lost, and the survivor, waiting
#         on the victim (an acknowledgement, a receive), hung.  Under
#         recovery mpirun exits 0 when a rank aborts: the survivor's message
#         is what counts.  Not among the default scenarios
#   kill-recovery-node  the same with the survivor and the victim on one
#         host (host 1, two slots): the survivor waits on the victim through
#         the on-node rings, which no deadline sees, so only the watch on an
#         on-node peer's exit ends it (its pidfd, polled once a second by
#         mtl_efa's engine and btl_efa: engine_watch.cpp, btl_efa_watch.c).
#         Before it, every configuration hung.  The job counts as ended
#         once its ranks are gone: Open MPI 4.1's mpirun keeps running
#         under recovery once the last rank of its one daemon aborted (the
#         runner then ends it, and the PASS line says so).  Not among the
#         default scenarios
#   kill-recovery-node-recv  the same where the survivor only receives
#         from the victim (peer_loss -r: no window, no barrier, nothing the
#         survivor sends to it), so that it never attached to the victim's
#         inbox: both components watch the exit of a peer that attached
#         its ring in their inbox (btl_efa_watch.c; engine_watch.cpp, once
#         a receive waits on it).
#         The victim kills itself 3 s after its warm rounds (the watch is
#         taken by a once-a-second sweep), so the PASS line's time, from
#         "transferring", includes those 3 s.  Not among the default
#         scenarios
#   partition-probe, partition-probe-any  the same partition while the
#         survivors wait in MPI_Probe on the victim (or on MPI_ANY_SOURCE)
#         before each receive (peer_loss -p, -p -a): pml cm calls the MTL's
#         iprobe until a message is there, so the misses are watched
#         (mtl_efa_any.c, engine_watch.cpp; before, these hung on
#         cm-rxm and cm-own-rxm); not among the default scenarios (CI runs
#         them on cm-rxd and cm-own-rxm)
# Otherwise the survivors are in a blocking send, an MPI_Ssend, a wait or a
# window flush with the victim.  A run passes when the job ends within
# DEADLINE seconds of the kill or the cut, with a non-zero exit status and
# a message that names the lost peer.  A partition's must be a survivor's:
# its "peer_loss: rank R: OP with rank 2 failed" (an MPI error came back)
# or the components' peer-unreachable text from a survivor's host naming
# rank 2 (the victim's own deadline is set past the bound,
# VICTIM_TIMEOUT, so that its report cannot end the job first).  A kill's
# or a cut's may also be Open MPI's runtime naming rank 2 or its host
# (efa-h3 / NET.3): without recovery the runtime ends the job when the
# victim or its daemon goes, often before a survivor's deadline, so those
# runs show that nothing hangs there, not that the survivors detect the
# loss; the partitions show that.  It fails when the job is
# still running then (the survivors hang), and when the ranks never began
# transferring (the line gives where each rank was, or the job's error); a
# rank caught stopped for good inside ofi_rxd then (rxd-hang.sh) makes the
# run go again once, and its line says so.
#   tests/netns/peer-loss.sh [-c CONFIG[,CONFIG...]] [-d DEADLINE] [-a ARGS] [SCENARIO...]
#   -c  cm-rxd, cm-rxm (pml cm + mtl_efa), cm-own-rxd, cm-own-rxm (the same
#       with mtl_efa matching itself: untagged provider messages),
#       cm-direct-rxd, cm-direct-rxm (own matching in the forced
#       efa-direct-like mode, common_efa_force_direct_mode), ob1-rxd,
#       ob1-rxm (pml ob1 + btl_efa); one-sided through osc/rdma + btl_efa
#       (default: all but cm-direct-rxm)
#   -d  seconds (default 60)
#   -a  extra mpirun arguments (e.g. "--mca oob_tcp_keepalive_time 10")
#   SCENARIO  kill, cut, partition, partition-any, partition-probe,
#             partition-probe-any, kill-recovery, kill-recovery-node,
#             kill-recovery-node-recv (default: the first four)
# Environment: EFA_MCA_COMPONENT_PATH, PEER_LOSS_BIN (default
# _build/tests/netns/peer_loss), PEER_LOSS_LOG_DIR (default
# /tmp/efa-peer-loss).  Makes the hosts and removes them at the end (also
# on failure); where they cannot be made, each run is a SKIP with the
# reason.  Prints PASS/FAIL/SKIP per run and "N passed, N failed, N skipped".
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/common.sh"
# shellcheck source=configs.sh
. "$here/configs.sh"
comp=${EFA_MCA_COMPONENT_PATH:-$top/_install/lib/openmpi}
bin=${PEER_LOSS_BIN:-$top/_build/tests/netns/peer_loss}
logdir=${PEER_LOSS_LOG_DIR:-/tmp/efa-peer-loss}
configs=cm-rxd,cm-rxm,cm-own-rxd,cm-own-rxm,cm-direct-rxd,ob1-rxd,ob1-rxm deadline=60 extra=""
while getopts "c:d:a:h" o; do
    case $o in
    c) configs=$OPTARG ;;
    d) deadline=$OPTARG ;;
    a) extra=$OPTARG ;;
    *) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
scenarios=${*:-kill cut partition partition-any}
[[ $deadline =~ ^[1-9][0-9]*$ ]] || { echo "peer-loss.sh: bad deadline '$deadline'" >&2; exit 2; }
for s in $scenarios; do
    [[ $s == kill || $s == cut || $s == partition || $s == partition-any || $s == partition-probe ||
        $s == partition-probe-any || $s == kill-recovery || $s == kill-recovery-node ||
        $s == kill-recovery-node-recv ]] ||
        { echo "peer-loss.sh: unknown scenario '$s' (kill, cut, partition, partition-any," \
            "partition-probe, partition-probe-any, kill-recovery, kill-recovery-node," \
            "kill-recovery-node-recv)" >&2; exit 2; }
done

npass=0 nfail=0 nskip=0
finish() {
    echo "$npass passed, $nfail failed, $nskip skipped"
    [ $nfail -eq 0 ]
}
if ! netns_make_hosts 3; then
    for c in ${configs//,/ }; do
        for s in $scenarios; do
            echo "$NETNS_VERDICT peer_loss-$s $c ($NETNS_WHY)"
            if [ "$NETNS_VERDICT" = SKIP ]; then nskip=$((nskip + 1)); else nfail=$((nfail + 1)); fi
        done
    done
    finish
    exit
fi
trap '"$here/teardown.sh"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$logdir"
netns_args_out=$("$here/mpirun-args.sh" "$logdir" 1) ||
    { echo "$(basename "$0"): mpirun-args.sh failed: $netns_args_out" >&2; exit 1; }
mapfile -t netns_args <<<"$netns_args_out"
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
read -r -a extra_args <<<"$extra"
# Open MPI's out-of-band connections carry no traffic while a job computes;
# a host that vanishes is noticed only by TCP keepalive, 300 s idle then 9
# probes 20 s apart by default (8 minutes).  2 s, then 3 probes 1 s apart:
# about 5 s.  (Keepalive probes are answered by the peer's kernel, so a
# busy host does not miss them.)
PARTITION_TIMEOUT=5 PARTITION_BOUND=25
# The victim's own deadline in a partition (peer_loss.c victim_timeout):
# beyond the bound, so that the survivors, not the victim, end the job.
VICTIM_TIMEOUT=60
keepalive=(--mca oob_tcp_keepalive_time 2 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# Every process left in the namespaces (a hung job's daemons and ranks).
kill_leftovers() {
    netns_kill_all
    "$here/fault.sh" clear
}

# wait_for PID SECONDS: 0 when PID ended within SECONDS
wait_for() {
    local pid=$1 end=$((SECONDS + $2))
    while kill -0 "$pid" 2>/dev/null; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.5
    done
    return 0
}

# wait_for_ranks PID SECONDS: 0 when PID ended, or none of its ranks is
# left on the hosts, within SECONDS (kill-recovery-node*: Open MPI 4.1's
# mpirun, under --enable-recovery, keeps running once every rank of its
# one daemon is gone, the survivor's abort included)
wait_for_ranks() {
    local pid=$1 end=$((SECONDS + $2)) name
    name=$(basename "$bin" | cut -c1-15)
    while kill -0 "$pid" 2>/dev/null && [ -n "$(netns_pids_named "$name")" ]; do
        [ $SECONDS -ge $end ] && return 1
        sleep 0.5
    done
    return 0
}

# stacks PID: the innermost frames of PID, "f0 < f1 < f2 < f3" (gdb); a
# frame without a symbol as its library and offset ("libfabric.so.1+0xc5d10",
# the offset is the same from one run to the next, the address is not)
stacks() {
    local line name pc lib b out="" n=0
    local -A base=()
    local exe
    exe=$(readlink "/proc/$1/exe")
    while read -r range _ off _ _ lib; do
        [ "$off" = 00000000 ] && [ -n "$lib" ] && [ -z "${base[$lib]:-}" ] &&
            base[$lib]=$((16#${range%%-*}))
    done <"/proc/$1/maps" 2>/dev/null
    while IFS= read -r line; do
        [[ $line =~ ^#[0-9]+\ +((0x[0-9a-f]+)\ in\ )?([^ ]+) ]] || continue
        name=${BASH_REMATCH[3]} pc=${BASH_REMATCH[2]}
        if [ "$name" = "??" ] && [ -n "$pc" ]; then
            # (no "from LIB": the program's own code)
            lib=$exe
            # (gdb names the path the loader took, maps the file's own)
            [[ $line =~ \ from\ ([^ ]+)$ ]] && lib=$(readlink -f "${BASH_REMATCH[1]}")
            b=${base[$lib]:-}
            [ -n "$b" ] && name=$(printf '%s+0x%x' "${lib##*/}" $((pc - b)))
        fi
        out+="${out:+ < }$name"
        n=$((n + 1))
        [ $n -ge 4 ] && break
    done < <(timeout 20 gdb -p "$1" -batch -ex bt 2>/dev/null)
    printf '%s\n' "$out"
}

# launch: starts cmd (its output in $log) and waits until rank 0 says
# every rank is transferring (normally a second; 60 s at most).  Returns
# non-zero otherwise, with $why saying what happened and the job gone;
# where the ranks were still running, each of them was looked at first:
# stopped for good inside ofi_rxd (rxd-hang.sh) into $log.hang, every
# rank's innermost frames into $log.stacks.
launch() {
    local end=$((SECONDS + 60)) p ranks
    rm -f "$log.hang" "$log.stacks"
    why=""
    echo "# $(printf '%q ' "${cmd[@]}")" >"$log"
    "${cmd[@]}" </dev/null >>"$log" 2>&1 &
    pid=$!
    until grep -q '^peer_loss: transferring' "$log"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            why="the job ended, exit $?, before the ranks were transferring: $(grep -a -v '^#' "$log" |
                grep -a -E 'peer_loss|[Ee]rror|abort' | head -n 1 | cut -c1-160)"
            kill_leftovers
            return 1
        fi
        if [ $SECONDS -ge $end ]; then
            ranks=$(netns_pids_named "$(basename "$bin" | cut -c1-15)")
            for p in $ranks; do
                "$here/rxd-hang.sh" "$p" >>"$log.hang" &
            done
            wait_children_but "$pid"
            for p in $ranks; do
                echo "$p: $(stacks "$p")" >>"$log.stacks"
            done
            why="the ranks were not transferring 60 s after the start; where each was: $(paste -s -d ';' "$log.stacks" 2>/dev/null | cut -c1-400)"
            kill -KILL "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            kill_leftovers
            return 1
        fi
        sleep 0.2
    done
}

# wait_children_but PID: waits for every background job of this shell but PID
wait_children_but() {
    local j
    for j in $(jobs -p); do
        [ "$j" = "$1" ] || wait "$j" 2>/dev/null
    done
}

run_one() {
    local c=$1 s=$2 args log pid t_fault rc named
    # (Under pml ob1 the partition is caught by btl_efa's watch on the
    # peers it talked to lately, btl_efa_watch.c: before it, a survivor
    # that only waited for a message from the lost peer was never probed
    # and these runs were a printed SKIP.)
    config_mpirun_args "$c" || { echo "peer-loss.sh: unknown configuration $c" >&2; exit 2; }
    log=$logdir/peer_loss-$s-$c.log
    # The victim: the last rank (peer_loss.c), alone on host 3.
    local np=3 vr=2 hargs=("${netns_args[@]}") i
    if [[ $s == kill-recovery* ]]; then
        np=2 vr=1
        local hosts=$logdir/hosts-1-3
        printf '%s slots=1\n' "$(netns_addr 1)" "$(netns_addr 3)" >"$hosts"
        if [[ $s == kill-recovery-node* ]]; then # both ranks on host 1
            hosts=$logdir/hosts-1x2
            printf '%s slots=2\n' "$(netns_addr 1)" >"$hosts"
        fi
        for i in "${!hargs[@]}"; do
            [ "${hargs[$i]}" = --hostfile ] && hargs[i + 1]=$hosts
        done
    fi
    local cmd=(mpirun -np "$np" --bind-to none --mca mca_base_component_path "$pkglibdir:$comp"
        "${hargs[@]}" "${args[@]}" "${keepalive[@]}" "${extra_args[@]}" -x MPI_TEST_TIMEOUT=0 "$bin" -t 300)
    [[ $s == kill* ]] && cmd+=(-k)
    [[ $s == partition-any || $s == partition-probe-any ]] && cmd+=(-a)
    [[ $s == partition-probe* ]] && cmd+=(-p)
    [ "$s" = kill-recovery-node-recv ] && cmd+=(-r)
    local bound=$deadline
    if [[ $s == partition* ]]; then
        cmd=("${cmd[@]:0:3}" --mca common_efa_peer_timeout "$PARTITION_TIMEOUT"
            -x PEER_LOSS_VICTIM_TIMEOUT="$VICTIM_TIMEOUT" "${cmd[@]:3}")
        [ "$bound" -gt "$PARTITION_BOUND" ] && bound=$PARTITION_BOUND
    fi
    if [[ $s == kill-recovery* ]]; then
        cmd=("${cmd[@]:0:3}" --enable-recovery --mca common_efa_peer_timeout "$PARTITION_TIMEOUT"
            "${cmd[@]:3}")
        [ "$bound" -gt "$PARTITION_BOUND" ] && bound=$PARTITION_BOUND
    fi
    local why rerun=""
    if ! launch; then
        # Once, where a rank was caught stopped inside ofi_rxd (a defect of
        # the stand-in, DESIGN.md "Stand-in provider defects that fail a
        # run at times"), the run is made again and its result line says so.
        if [ -s "$log.hang" ]; then
            mv "$log" "$log.first"
            mv "$log.hang" "$log.first.hang"
            mv "$log.stacks" "$log.first.stacks" 2>/dev/null
            rerun="run again: in the first, $(head -n 1 "$log.first.hang") (log $log.first)"
            launch || { [ -s "$log.hang" ] && why+=" (again stopped inside ofi_rxd: $(head -n 1 "$log.hang"))"; }
        fi
        if [ -n "$why" ]; then
            echo "FAIL peer_loss-$s $c ($why${rerun:+; $rerun}; log $log)"
            nfail=$((nfail + 1))
            return
        fi
    fi
    t_fault=$(date +%s.%N)
    [ "$s" = cut ] && "$here/fault.sh" cut 3
    [[ $s == partition* ]] && "$here/fault.sh" isolate 3
    local waiter=wait_for
    [[ $s == kill-recovery-node* ]] && waiter=wait_for_ranks
    if ! $waiter "$pid" "$bound"; then
        local why="the survivors hang"
        [[ $s == kill* ]] && ! grep -q 'kills itself' "$log" && why="the victim never killed itself"
        echo "FAIL peer_loss-$s $c (the job still ran $bound s after the $s: $why; log $log)"
        nfail=$((nfail + 1))
        kill -TERM "$pid" 2>/dev/null
        wait_for "$pid" 10 || kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        kill_leftovers
        return
    fi
    local took ended=""
    took=$(awk -v a="$t_fault" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    if kill -0 "$pid" 2>/dev/null; then # (wait_for_ranks: the ranks are gone)
        ended=" (its ranks ended; mpirun still ran, ended by the runner)"
        kill -TERM "$pid" 2>/dev/null
        wait_for "$pid" 10 || kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid"
    rc=$?
    # what named the lost peer
    if [[ $s == partition* || $s == kill-recovery* ]]; then
        # Only a survivor's word counts: its MPI error (pml cm), or the
        # components' peer-unreachable text printed on a survivor's host
        # about rank 2 (pml ob1: btl_efa's error ends the job).  The
        # victim's own report, or the runtime's, shows nothing of theirs.
        named=$(grep -m1 -a -E "peer_loss: rank [01]: .* with rank $vr failed" "$log" ||
            grep -a -A1 -E "^ *Host: +($(netns_name 1)|$(netns_name 2))\s*$" "$log" |
            grep -m1 -a -E "^ *Peer: +rank $vr " ||
            grep -m1 -a -E "^\[($(netns_name 1)|$(netns_name 2)):[0-9]+\] btl_efa: peer \[(\[[0-9]+,[0-9]+\]|[^] ]+),$vr\] unreachable" "$log")
    else
        named=$(grep -m1 -a -E 'peer_loss: rank [0-9]+: .* with rank 2 failed' "$log" ||
            grep -a -v '^#' "$log" |
            grep -m1 -a -E "rank 2 .*(exited|killed)|$(netns_name 3)\b|${NETNS_NET//./\\.}\\.3\b")
    fi
    named=$(echo "$named" | sed 's/^[[:space:]]*//' | cut -c1-260)
    # Under pml cm a point-to-point call that a lost peer ended says so in
    # its class (mtl_efa: MPI_ERR_PROC_FAILED on Open MPI 5, MPI_ERR_INTERN
    # on 4.1), whatever way the loss was found.
    local wrong_class=""
    if [[ $c == cm-* && $named == *"not a lost peer's"* &&
        $named =~ :\ MPI_(Send|Ssend|Recv|Wait|Probe|Isend) ]]; then
        wrong_class=1
    fi
    # Open MPI 5.0's runtime (PRRTE 3.0.13 in 5.0.10) ends the job when it
    # loses a daemon, says so naming the host, and then exits 0 (4.1's
    # mpirun exits non-zero): the exit status is the runtime's, not the
    # survivors'.  Only that exact message makes an exit 0 acceptable.
    prte_lost=$(grep -a -A3 "PRTE has lost communication with a remote daemon" "$log" |
        grep -m1 -a -E "Remote daemon:.* on node $(netns_name 3)\b")
    if [ -n "$wrong_class" ]; then
        echo "FAIL peer_loss-$s $c (a point-to-point call ended with another class than a lost peer's: $named; log $log)"
        nfail=$((nfail + 1))
    elif [ -n "$named" ] && { [ $rc -ne 0 ] || [ -n "$prte_lost" ] || [[ $s == kill-recovery* ]]; }; then
        note=""
        [ $rc -eq 0 ] && note=" (exit 0 is Open MPI 5's runtime after it ended the job; docs/PLATFORMS.md)"
        [ $rc -eq 0 ] && [[ $s == kill-recovery* ]] && note=" (exit 0: mpirun under --enable-recovery)"
        grep -q 'kills itself (SIGKILL) on its timer' "$log" &&
            note+=" (the victim's transfers had stalled before its kill's round; its timer killed it)"
        echo "PASS peer_loss-$s $c (ended ${took} s after the $s, exit $rc: $named)$note$ended${rerun:+ ($rerun)}"
        npass=$((npass + 1))
    else
        echo "FAIL peer_loss-$s $c (ended ${took} s after the $s with exit $rc, and no message naming rank 2 or its host; log $log)"
        nfail=$((nfail + 1))
    fi
    kill_leftovers
}

for c in ${configs//,/ }; do
    for s in $scenarios; do
        run_one "$c" "$s"
    done
done
finish
