# shellcheck shell=bash
# Sourced by run-mpi-tests.sh: its test programs, and for each the default
# process counts, the timeout, and the program arguments in a configuration
# (smaller sizes under --quick, the runner's QUICK).  test_nps calls
# mpi-configs.sh's pretend_pairs_config (sourced after this file, before
# any call).

ALL_TESTS="pingpong many_outstanding ordering probe cancel ssend truncate comms threads"
ALL_TESTS+=" collectives datatypes modes send_progress remap btl_sendi netpipe device_buffers"
DEFAULT_TIMEOUT=120

# Default process counts of test $1 in configuration $2.  Full runs: 2 and
# 4, and 8 for the tests that load many peers (8 processes on 2 cores take
# 3 to 5 s each, mostly starting up).  --quick keeps the counts that reach
# a path of their own:
#  - namespace hosts: 4 (pairs on one host and across: every pair of 2
#    processes, one per host, is among them), but for cm-efa-rxd-netns and
#    cm-efa-rxm-netns, whose on-node pairs take the provider as well
#    (below);
#  - pretend nodes of 2 slots (own matching, mixed, direct mode): 4 only,
#    as 2 processes share one node; the main own-matching configuration
#    (cm-efa-own-rxm) keeps 2 as well, for own matching over the rings;
#  - every other configuration takes one path between any two ranks (one
#    node, or one rank per pretend node): 2, and 4 for the tests that load
#    several peers at once (ordering, many_outstanding, collectives, probe).
test_nps() {
    local t=$1 cfg=${2:-}
    case $t in
    threads | netpipe | remap | btl_sendi | device_buffers) echo "2"; return ;;
    esac
    if [[ $QUICK != 1 ]]; then
        case $t in
        ordering | many_outstanding | collectives) echo "2 4 8" ;;
        *) echo "2 4" ;;
        esac
    elif [[ $cfg == cm-efa-own-rxm ]]; then
        echo "2 4"
    elif [[ ($cfg == *-netns && $cfg != cm-efa-rx[dm]-netns) ]] || pretend_pairs_config "$cfg"; then
        echo "4"
    else
        case $t in
        ordering | many_outstanding | collectives | probe) echo "2 4" ;;
        *) echo "2" ;;
        esac
    fi
}

# per-test timeout overrides (seconds); --quick halves them (at least 60 s)
test_timeout() {
    local t
    case $1 in
    pingpong) t=300 ;;
    # threads: 4 processes of 5 threads on 2 cores take 11-12 s (--quick),
    # more than twice that when the VM is slow
    many_outstanding | collectives | threads) t=240 ;;
    *) t=$DEFAULT_TIMEOUT ;;
    esac
    if [[ $QUICK == 1 ]]; then
        t=$((t / 2 > 60 ? t / 2 : 60))
    fi
    echo "$t"
}

# program arguments of test $1 in configuration $2 with $3 processes
# ("quick" or "full" in $QUICK)
test_args() {
    local t=$1 cfg=$2 np=$3 q=$QUICK
    case $t in
    pingpong) [[ $q == 1 ]] && echo "-s 1M -i 3" ;;
    span) echo "-n 2" ;;
    device_buffers)
        # (ofi_rxd's FI_CLAIM and shm's FI_PEEK defects:
        # tests/mpi/mpi-known-defects.sh)
        local a=""
        [[ ${cfg%-netns} == cm-efa-rxd || $cfg == cm-efa-shm ]] && a="-P"
        [[ $np == 4 ]] && a="$a -X" # (pairs across the 2 pretend nodes)
        [[ $q == 1 ]] && a="$a -s 1M"
        echo "$a"
        ;;
    many_outstanding)
        # ofi_rxd stops completing tagged operations with more than about
        # 1000 in flight (a provider defect, see known_defect): below that.
        [[ $q == 1 || ${cfg%-netns} == cm-efa-rxd ]] && echo "-n 1000" ;;
    ordering) [[ $q == 1 ]] && echo "-n 200" ;;
    probe) [[ $q == 1 ]] && echo "-s 256K" ;;
    cancel)
        # Cancelled sends nobody matches must complete: mtl_efa's on-node
        # rings and own matching complete small and large ones (-X:
        # cm-efa-mixed pairs its ranks on one pretend node), and so does its
        # provider path, where the receiver withdraws a large one the
        # provider holds; where nothing can be withdrawn (the forced
        # no-CQ-data or FI_MR_LOCAL run), large ones complete once the
        # receive is posted (-X -P, docs/RELIABILITY.md, "Cancelling
        # sends"); pml ob1 cancels no send.
        local a=""
        [[ $cfg == cm-efa-* ]] && a="-X"
        [[ ${MPI_TEST_EXTRA_ARGS:-} == *force_no_cq_data\ 1* ||
            ${MPI_TEST_EXTRA_ARGS:-} == *force_mr_local\ 1* ]] && a="-X -P"
        # Where the engine matches the pair's messages (its rings, its own
        # matching), any send still unmatched is withdrawn, a standard-mode
        # one complete before MPI_Cancel included: -U checks that.
        [[ $cfg == cm-efa-onnode* || $cfg == cm-efa-mixed || $cfg == cm-efa-own-* ||
            $cfg == cm-efa-direct-* ]] && a="-X -U"
        [[ $q == 1 ]] && a="$a -n 50 -s 256K"
        echo "$a"
        ;;
    # (the receiver sleeps DELAY ms 7 times a run while the sender waits:
    # 150, the least ssend.c takes, under --quick)
    ssend) [[ $q == 1 ]] && echo "-n 50 -s 256K -d 150" ;;
    truncate)
        # Open MPI 4.1's ob1 writes the whole message past the end of the
        # receive buffer when truncating a rendezvous message: tolerate (and
        # report) that under ob1, fail on it elsewhere.
        local a=""
        [[ $cfg == ob1-* ]] && a="-g"
        [[ $q == 1 ]] && a="$a -s 256K"
        echo "$a"
        ;;
    comms) [[ $q == 1 ]] && echo "-n 10 -s 64K" ;;
    threads)
        # MPI_ANY_SOURCE in the own-comm exchange (cm-efa-shm does not run
        # threads: see known_defect); communicators created meanwhile,
        # under --quick 130 of them, enough to grow mtl_efa's table of
        # communicator paths twice where its engine keeps one (not on the
        # provider path, cm-efa-rxm and cm-efa-rxd; the churn's collectives
        # take most of the run: 300 took 18 of 22 s with 4 processes on 2
        # cores).
        local a="-a -c"
        [[ $q == 1 ]] && a="-a -C 130 -i 5 -s 256K"
        echo "$a"
        ;;
    send_progress)
        # shm never matches a synchronous message that is already waiting unexpected (the
        # wildcard defect: every receive ignores the sync bit).
        local a=""
        [[ $cfg == cm-efa-shm ]] && a="-y"
        [[ $q == 1 ]] && a="$a -i 5 -s 256K"
        echo "$a"
        ;;
    collectives)
        # ofi_rxd over loopback UDP, 8 processes on 2 cores: a 16 MiB
        # alltoall overflows the sockets, rxd loses its own receive buffers
        # ("failed to repost") and then hangs or declares live peers dead
        # (FI_ECONNREFUSED). Its 8-process run moves 2 MiB per rank.
        if [[ $q == 1 ]]; then
            echo "-s 1M"
        elif [[ $cfg == *-rxd* && $np -ge 8 ]]; then
            echo "-s 2M"
        fi
        ;;
    datatypes) [[ $q == 1 ]] && echo "-s 512K" ;;
    modes) [[ $q == 1 ]] && echo "-s 256K -i 10" ;;
    remap) [[ $q == 1 ]] && echo "-i 3" ;;
    esac
    return 0
}
