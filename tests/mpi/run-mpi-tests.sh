#!/usr/bin/env bash
#
# Run the MPI test programs of tests/mpi over a list of transport
# configurations and report one line per run plus a summary line.
#
# Usage: run-mpi-tests.sh [-c CONFIG[,CONFIG...]] [-t TEST[,TEST...]]
#                         [-n NP[,NP...]] [--quick] [-l|--list] [-h|--help]
#
#   -c  configurations (default: ob1-vader). "all" = every configuration,
#       "efa" = every cm-efa-* and ob1-efa-* configuration.  ob1-efa-PROV
#       runs btl_efa's one-sided operations (ob1's RDMA get of large
#       messages) in the default mode, native on every stand-in, and (all
#       ranks on this node) by single copy (CMA);
#       ob1-efa-PROV-emul forces the emulated path, ob1-efa-PROV-nocma the
#       provider's native path (btl_efa_single_copy none); neither is part
#       of "efa".
#       cm-efa-PROV runs mtl_efa with every message through the provider
#       (mtl_efa_onnode_channel none), as between nodes.  cm-efa-onnode runs
#       it on its on-node path (rings, own matching, single-copy reads of
#       large messages; the provider underneath is shm), cm-efa-onnode-stream
#       the same with large messages streamed through the rings
#       (mtl_efa_onnode_single_copy none); their pingpong runs once more to
#       check that the rings carried the messages.  cm-efa-mixed spreads the
#       ranks over pretend nodes of two slots each (tests/pretend-nodes.sh;
#       tcp;ofi_rxm between them), so that with 4 or 8 processes
#       MPI_COMM_WORLD spans nodes: peers on one node take the rings, the
#       others the provider, and ANY_SOURCE receives are posted to both; its
#       ordering runs once more with 4 processes to check that.  Every
#       configuration whose ranks span nodes (cm-efa-mixed*, cm-efa-own-*,
#       cm-efa-direct-*, *-netns) runs "span" with 4 processes after its
#       pingpong: each rank prints its node and which peers are on it, and
#       the run fails unless there are 2 nodes, Open MPI's locality agrees
#       with the host names, and every process read completions from the
#       provider (common:efa's closing line).
#       btl_efa's on-node channel (shared-memory rings) is on in every
#       ob1-efa-* configuration, and its pingpong runs once more with
#       common_efa_verbose to check that the rings carried messages
#       ("pingpong+ring"); ob1-efa-PROV-noring turns the channel off, so
#       that every message takes the provider ("ob1-efa-shm-noring" and
#       "ob1-efa-rxm-noring" are part of "efa").  ob1-efa-PROV-batch is
#       -noring with a window of 4 messages per peer (btl_efa_send_window),
#       so that sends queue and btl_efa's coalescing packs them; its
#       many_outstanding runs once more to check that batches went
#       ("many_outstanding+batch"; ob1-efa-rxm-batch is part of "efa").
#       cm-efa-rxd-netns, cm-efa-rxm-netns, ob1-efa-rxd-netns and
#       ob1-efa-rxm-netns run the ranks on two hosts that are network
#       namespaces on a bridge (tests/netns/; root, ip and nft needed),
#       round-robin, so that neighbours talk over a real network stack and
#       Open MPI's on-node paths are not taken between hosts (their
#       pingpong runs once more, "pingpong+hosts", to check that each rank
#       is alone on a node of its own name and uses the host's eth0).  The runner
#       makes the hosts if they are not there (and removes them at its end);
#       where they cannot be made, every run is a SKIP with the reason.
#       cm-efa-mixed-netns is cm-efa-mixed on namespace hosts (its ordering
#       runs once more with 4 processes and checks the mixed path, as
#       cm-efa-mixed's does).  cm-efa-rxm-rails-netns,
#       cm-efa-own-rxm-rails-netns and ob1-efa-rxm-rails-netns run on hosts
#       with two links each (made so when they are asked for), every rank
#       with both NICs and transfers striped from 4 KiB (pingpong once more
#       as "pingpong+rails", which checks that they were).  Not part of
#       "all" or "efa".
#   -t  tests (default: all). many_outstanding also selects its tiny-queue
#       variant (EFA configurations only), ssend and modes their no-inject
#       variants (cm-efa-rxm and cm-efa-rxd: ssend+noinject, modes+noinject
#       with mtl_efa_debug_no_inject, so that every message and every
#       synchronous-send acknowledgement is posted with a context of its own
#       as on a provider without inject; on rxm with a 16-entry transmit
#       queue too, so that acknowledgements wait in the core's backlog; the
#       MTL must say "inject off"); remap in the EFA configurations runs
#       with and without memory hooks in place of its plain run: remap+hooks,
#       where the components must say that they cache registrations, and
#       remap+nohooks with --mca memory ^patcher, where they must say that
#       they do not.
#       pingpong in cm-efa-own-* and cm-efa-direct-* runs once more with
#       the pair on two pretend nodes ("pingpong+read": large messages must
#       have been read by RMA, none failed) and, in cm-efa-own-*, with
#       mtl_efa_net_read_min 0 ("pingpong+stream": none read, streamed).
#       btl_sendi runs in the ob1-efa-* configurations only: it calls
#       btl_efa's sendi itself until the peer's credits or ring are used
#       up, and the descriptor sendi must then hand back is sent.
#   -n  run every selected test with these process counts instead of the
#       default matrix (netpipe, and remap's +hooks and +nohooks runs,
#       always use 2).
#   --quick  smaller sizes and fewer iterations; netpipe's integrity pass
#       only (its measuring pass runs without --quick).
#   -l  print the runs that would be made, run nothing.
#
# Environment:
#   MPI_TEST_BIN_DIR      where the test programs are (default: this script's dir)
#   MPI_TEST_LOG_DIR      where logs go (default: /tmp/efa-mpi-tests)
#   MPI_TEST_EXTRA_ARGS   extra mpirun arguments, appended to every run
#   EFA_MCA_COMPONENT_PATH  directory with our built components; added to
#                         mca_base_component_path after Open MPI's own dir
#   NETPIPE               NetPIPE binary (default: NPopenmpi, Debian's
#                         netpipe-openmpi).  A NetPIPE 3.7 NPmpi built
#                         against the Open MPI on PATH can stand in (Debian's
#                         is linked to its Open MPI 4.1 and is skipped under
#                         any other); it must take -i (integrity check), -u,
#                         -n, -p and -o.
#
# Output: "PASS test config np=N (secs)", "FAIL test config np=N (reason)" or
# "SKIP test config np=N (known provider defect: ...)" per run, then
# "N passed, N failed, N skipped". Exit status 1 if anything failed.

set -u

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN_DIR=${MPI_TEST_BIN_DIR:-$SCRIPT_DIR}
LOG_DIR=${MPI_TEST_LOG_DIR:-/tmp/efa-mpi-tests}
NETPIPE=${NETPIPE:-NPopenmpi}
# shellcheck source=../runtime-checks.sh
. "$SCRIPT_DIR/../runtime-checks.sh"
# The runner's parts, beside this script: the tests and their arguments,
# the configurations, the runs known to fail in a stand-in provider, how a
# run is judged, and how it is made.
# shellcheck source=mpi-test-args.sh
. "$SCRIPT_DIR/mpi-test-args.sh"
# shellcheck source=mpi-configs.sh
. "$SCRIPT_DIR/mpi-configs.sh"
# shellcheck source=mpi-known-defects.sh
. "$SCRIPT_DIR/mpi-known-defects.sh"
# shellcheck source=mpi-checks.sh
. "$SCRIPT_DIR/mpi-checks.sh"
# shellcheck source=mpi-run.sh
. "$SCRIPT_DIR/mpi-run.sh"

# ---- command line -----------------------------------------------------------

# The comment at the top of this file (up to its first line of code), then
# the configurations and tests.
usage() {
    awk 'NR < 3 { next } /^#/ { print; next } { exit }' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    echo "configurations: $ALL_CONFIGS"
    echo "  and ob1-efa-rxd-emul ob1-efa-rxm-emul ob1-efa-shm-emul (emulated one-sided path)"
    echo "  (cm-efa-mixed: ranks on pretend nodes of 2 slots, mtl_efa's mixed path)"
    echo "  and cm-efa-own-rxm cm-efa-own-rxd (own matching, pretend nodes of 2 slots)"
    echo "  and cm-efa-own-rxm-noring cm-efa-own-rxd-noring (own matching, rings off)"
    echo "  (cm-efa-direct-*, ob1-efa-direct-*: common_efa_force_direct_mode, the efa-direct-like mode)"
    echo "  and cm-efa-onnode-stream (mtl_efa's on-node path, large messages streamed)"
    echo "  and ob1-efa-rxd-noring (on-node channel off; rxm and shm are part of \"efa\")"
    echo "  and ob1-efa-rxd-nocma ob1-efa-rxm-nocma ob1-efa-shm-nocma (provider path, no CMA)"
    echo "  and cm-efa-rxd-netns cm-efa-rxm-netns ob1-efa-rxd-netns ob1-efa-rxm-netns cm-efa-mixed-netns"
    echo "      (namespace hosts)"
    echo "  and cm-efa-rxm-rails-netns cm-efa-own-rxm-rails-netns ob1-efa-rxm-rails-netns"
    echo "      (namespace hosts with two links each, both NICs of every rank)"
    echo "tests: $ALL_TESTS"
}

CONFIGS=ob1-vader
TESTS=$ALL_TESTS
NPS=""
QUICK=0
LIST=0
while [[ $# -gt 0 ]]; do
    case $1 in
    -c) CONFIGS=${2:?-c needs a value}; shift 2 ;;
    -t) TESTS=${2:?-t needs a value}; shift 2 ;;
    -n) NPS=${2:?-n needs a value}; shift 2 ;;
    --quick | -q) QUICK=1; shift ;;
    -l | --list) LIST=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
done

expanded=""
for c in ${CONFIGS//,/ }; do
    case $c in
    all) expanded="$expanded $ALL_CONFIGS" ;;
    efa) expanded="$expanded $EFA_CONFIGS" ;;
    *) expanded="$expanded $c" ;;
    esac
done
CONFIGS=$expanded
TESTS=${TESTS//,/ }
NPS=${NPS//,/ }
for c in $CONFIGS; do
    config_args "$c" || { echo "unknown configuration: $c" >&2; usage >&2; exit 2; }
done
for t in $TESTS; do
    [[ " $ALL_TESTS " == *" $t "* ]] || { echo "unknown test: $t" >&2; exit 2; }
done
for n in $NPS; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bad process count: $n" >&2; exit 2; }
done

if [[ $LIST == 0 ]]; then
    if ! mkdir -p "$LOG_DIR" 2>/dev/null || [[ ! -w $LOG_DIR ]]; then
        echo "cannot write the log directory $LOG_DIR (set MPI_TEST_LOG_DIR)" >&2
        exit 2
    fi
    rm -f "$LOG_DIR/pretend-nodes.ok" # decided afresh for the Open MPI of this run
fi

# Namespace hosts for the *-netns configurations: made here unless they
# exist (then removed at the end), or the reason they cannot be, for SKIP.
NETNS_DIR=$SCRIPT_DIR/../netns
NETNS_REASON=""
NETNS_PREFIX=$(bash -c ". '$NETNS_DIR/common.sh' && echo \$NETNS_PREFIX")
netns_cleanup() { "$NETNS_DIR/teardown.sh"; }
NETNS_LINKS_WANTED=1
[[ " $CONFIGS " == *-rails-netns\ * ]] && NETNS_LINKS_WANTED=2
if [[ $LIST == 0 && " $CONFIGS " == *-netns\ * ]]; then
    if [[ -z $(bash -c ". '$NETNS_DIR/common.sh' && netns_hosts") ]]; then
        setup_rc=0
        NETNS_REASON=$("$NETNS_DIR/setup.sh" 2 "$NETNS_LINKS_WANTED" 2>&1 >/dev/null) || setup_rc=$?
        if [[ $setup_rc == 0 ]]; then
            trap netns_cleanup EXIT
        else
            NETNS_REASON=${NETNS_REASON#setup.sh: }
            NETNS_REASON=${NETNS_REASON:-tests/netns/setup.sh failed}
            # (77: no namespaces here, the runs are SKIPs; any other status:
            # setup.sh itself failed, a FAIL as well, counted below)
            [[ $setup_rc != 77 ]] && NETNS_SETUP_FAILED="setup.sh exit $setup_rc: $NETNS_REASON"
        fi
    fi
    if [[ -z $NETNS_REASON ]]; then
        if out=$("$NETNS_DIR/mpirun-args.sh" "$LOG_DIR/netns" 4 2>&1); then
            mapfile -t NETNS_ARGS <<<"$out"
        else
            NETNS_REASON=$out
        fi
        if [[ $NETNS_LINKS_WANTED == 2 && -z $NETNS_REASON ]]; then
            if out=$(NETNS_LINKS=2 "$NETNS_DIR/mpirun-args.sh" "$LOG_DIR/netns-rails" 4 2>&1); then
                mapfile -t NETNS_RAILS_ARGS <<<"$out"
            else
                NETNS_REASON=$out
            fi
        fi
    fi
fi

# Open MPI's own component directory, for EFA_MCA_COMPONENT_PATH
COMMON_ARGS=(--oversubscribe --bind-to none)
if [[ -n ${EFA_MCA_COMPONENT_PATH:-} ]]; then
    pkglibdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
    pkglibdir=${pkglibdir:-/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3}
    COMMON_ARGS+=(--mca mca_base_component_path "$pkglibdir:$EFA_MCA_COMPONENT_PATH")
fi
read -r -a EXTRA_ARGS <<<"${MPI_TEST_EXTRA_ARGS:-}"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# ---- running ----------------------------------------------------------------

NPASS=0
RUN_ARGS="" # the program arguments of the run being reported
NFAIL=0
if [[ -n ${NETNS_SETUP_FAILED:-} ]]; then
    echo "FAIL netns-setup ($NETNS_SETUP_FAILED)"
    NFAIL=1
fi
NSKIP=0
# The run in progress, stopped (with its MPI job) if we are interrupted.
CHILD=""
trap on_signal INT TERM

for cfg in $CONFIGS; do
    config_args "$cfg"
    for t in $TESTS; do
        # btl_sendi calls btl_efa's sendi itself: ob1-efa-* configurations only.
        [[ $t == btl_sendi && $cfg != ob1-efa-* ]] && continue
        # device_buffers: memory of the core's fake device, which the CPU
        # cannot touch, under pml cm (pml ob1's convertor packs with the
        # CPU, which it never does for a real GPU's memory).
        if [[ $t == device_buffers ]]; then
            [[ $cfg == cm-efa-* ]] || continue
            run_test "$t" "$t" "$cfg" 2 --mca common_efa_debug_fake_device 1 --mca common_efa_verbose 1
            # (4 on 2 pretend nodes, each pair across them: device data
            # through the provider while ANY_SOURCE receives watch the rings)
            [[ $cfg == cm-efa-mixed ]] &&
                run_test "$t" "$t" "$cfg" 4 --mca common_efa_debug_fake_device 1 --mca common_efa_verbose 1
            continue
        fi
        if [[ $t == netpipe ]]; then
            run_netpipe "$cfg"
            continue
        fi
        # (remap in an EFA configuration runs as remap+hooks below: the same
        # run, with the default memory hooks, and the cache's line checked)
        if [[ $t != remap ]] || ! is_efa_config "$cfg"; then
            for np in ${NPS:-$(test_nps "$t" "$cfg")}; do
                run_test "$t" "$t" "$cfg" "$np"
            done
        fi
        if [[ $t == many_outstanding ]] && is_efa_config "$cfg"; then
            tinyq_args "$cfg"
            run_test "$t" "$t+tinyq" "$cfg" 2 "${TINYQ_ARGS[@]}"
        fi
        if [[ $t == ssend || $t == modes ]] && is_noinject_config "$cfg"; then
            noinject_args "$cfg"
            run_test "$t" "$t+noinject" "$cfg" 2 "${NOINJECT_ARGS[@]}"
        fi
        if [[ $t == ordering && $cfg == cm-efa-own-* ]]; then
            run_test "$t" "$t+swap" "$cfg" 4 --mca mtl_efa_debug_swap_net 1 --mca common_efa_verbose 1
        fi
        if [[ $t == ordering && $cfg == cm-efa-own-* && $cfg != *-netns ]]; then
            # peers on the other node spread over two endpoints (pretend
            # nodes of 2 slots: the other node's vpids are one odd, one even)
            run_test "$t" "$t+endpoints" "$cfg" 4 --mca common_efa_num_contexts 2 --mca common_efa_verbose 1
        fi
        if [[ $t == ordering && $cfg == *-efa-direct-* ]]; then
            run_test "$t" "$t+direct" "$cfg" 4 --mca common_efa_verbose 1
        fi
        if [[ $t == many_outstanding && $cfg == cm-efa-own-*-noring ]]; then
            # (with rings, many_outstanding's pairs share a pretend node)
            run_test "$t" "$t+pack" "$cfg" 2 --mca mtl_efa_net_window 2 --mca common_efa_verbose 1
        fi
        if [[ $t == ordering && $cfg == cm-efa-mixed* ]]; then
            run_test "$t" "$t+mixed" "$cfg" 4 --mca common_efa_verbose 10
        fi
        if [[ $t == remap ]] && is_efa_config "$cfg"; then
            run_test "$t" "$t+hooks" "$cfg" 2 --mca common_efa_verbose 1
            run_test "$t" "$t+nohooks" "$cfg" 2 --mca memory ^patcher --mca common_efa_verbose 1
        fi
        if [[ $t == pingpong && $cfg == *-netns ]]; then
            run_test "$t" "$t+hosts" "$cfg" 2 --mca common_efa_verbose 1
        fi
        if [[ $t == many_outstanding && $cfg == *-batch ]]; then
            run_test "$t" "$t+batch" "$cfg" 2 --mca common_efa_verbose 1
        fi
        if [[ $t == pingpong && ($cfg == cm-efa-own-* || $cfg == cm-efa-direct-*) ]]; then
            # the pair on two pretend nodes: large messages read by RMA ...
            run_test "$t" "$t+read" "$cfg" 2 --map-by node --mca common_efa_verbose 1
        fi
        if [[ $t == pingpong && $cfg == cm-efa-own-* ]]; then
            # ... or, with reads off, streamed as provider messages
            run_test "$t" "$t+stream" "$cfg" 2 --map-by node --mca mtl_efa_net_read_min 0 \
                --mca common_efa_verbose 1
        fi
        if [[ $t == pingpong ]] && spans_nodes_config "$cfg"; then
            # the ranks are on 2 nodes by Open MPI's own locality and by
            # host name, and every rank's component read completions from
            # the provider
            run_test span span "$cfg" 4 --mca common_efa_verbose 1
        fi
        if [[ $t == pingpong && ($cfg == ob1-efa-rails-* || $cfg == cm-efa-own-rails-* ||
            $cfg == cm-efa-rails-* || $cfg == *-rails-netns) ]]; then
            # ... and over several NICs, its large messages striped
            run_test "$t" "$t+rails" "$cfg" 2 --mca common_efa_verbose 1
        fi
        if [[ $t == pingpong ]] && is_ring_config "$cfg"; then
            run_test "$t" "$t+ring" "$cfg" 2 --mca common_efa_verbose 1
        fi
    done
done

[[ $LIST == 1 ]] && exit 0
echo "$NPASS passed, $NFAIL failed, $NSKIP skipped"
[[ $NFAIL -eq 0 ]]
