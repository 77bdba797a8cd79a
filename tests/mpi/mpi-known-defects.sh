# shellcheck shell=bash
# Sourced by run-mpi-tests.sh: the defects of the stand-in providers
# (Debian's libfabric 1.17), and the runs they rule out.  These runs hang or
# fail inside the provider, not in our components; the evidence is in
# docs/DESIGN.md ("Stand-in provider defects").  They are not run (a hang
# costs its whole timeout), but each is printed as SKIP with its reason and
# counted in the closing line, never as a pass.  Uses the runner's BIN_DIR,
# LOG_DIR and NETNS_REASON, and pretend_nodes_ok (tests/runtime-checks.sh).

# known_defect LABEL CONFIG NP: prints the reason and succeeds if listed.
known_defect() {
    local label=$1 cfg=$2 np=$3
    if [[ $cfg == cm-efa-mixed || $cfg == cm-efa-own-* || $cfg == cm-efa-direct-* ]] && ! pretend_nodes_ok "$BIN_DIR" "$LOG_DIR/pretend-nodes.ok"; then
        return 0 # (the reason is printed)
    fi
    if [[ $cfg == *-netns && -n $NETNS_REASON ]]; then
        echo "no namespace hosts here: $NETNS_REASON"
        return 0
    fi
    # (the provider's defects are the same between namespace hosts)
    case "${cfg%-netns}:$label:$np" in
    cm-efa-shm:ordering:* | cm-efa-shm:truncate:* | cm-efa-shm:comms:* | cm-efa-shm:ssend:*)
        echo "shm never matches a wildcard-tag receive against a message already waiting" \
            "(tests/provider-defects/shm_wildcard_unexpected.c)" ;;
    cm-efa-shm:send_progress:* | cm-efa-shm:threads:*)
        echo "shm completes a send only once every earlier send has been received" \
            "(tests/provider-defects/shm_send_completion_order.c); under threads that deadlocks" \
            "at times (2 CI runs of 6 on 2026-11-23, both ranks stopped)" ;;
    cm-efa-shm:probe:* | cm-efa-shm:cancel:*)
        echo "shm never completes an FI_PEEK that finds no message" ;;
    cm-efa-rxd:probe:*)
        echo "ofi_rxd claims (FI_CLAIM) a message other than the one FI_PEEK reported" ;;
    cm-efa-rxd:threads:* | ob1-efa-rxd*:threads:* | ob1-efa-direct-rxd:threads:*)
        echo "ofi_rxd corrupts or stalls data under concurrent threads (FI_THREAD_SAFE)" ;;
    cm-efa-rxd:collectives:*)
        echo "ofi_rxd stalls collectives over mtl_efa's provider path at times (3 of 6 runs at np 4" \
            "under load, the same before and after mtl_efa's on-node path: 3 of 6)" ;;
    cm-efa-rxd:many_outstanding:*)
        echo "ofi_rxd truncates or stalls tagged messages with hundreds in flight on a loaded" \
            "machine (2 of 12 runs at 1000, 2 of 10 at 500; the build before mtl_efa's on-node path: 2 of 12)" ;;
    *-efa-rxd*:many_outstanding+tinyq:* | ob1-efa-direct-rxd:many_outstanding+tinyq:*)
        echo "ofi_rxd stops completing operations when its queues are made tiny" ;;
    cm-efa-own-rxd-noring:many_outstanding+tinyq:* | cm-efa-own-rails-rxd:many_outstanding+tinyq:*)
        # (cm-efa-own-rxd passes: with rings its pair shares a pretend node;
        # the rails configuration puts each process on a node of its own)
        echo "ofi_rxd with queues of 16 to 64 stops completing untagged messages, fails a receive" \
            "(FI_ETRUNC on a 64 KiB buffer) or loops or crashes inside fi_recv on its unexpected" \
            "messages (tests/provider-defects/rxd_tiny_queues.c, without Open MPI; 128 and the" \
            "default pass, and tcp;ofi_rxm at 16)" ;;
    *) return 1 ;;
    esac
}

# (a machine without namespace hosts is no defect)
skip_kind() { [[ $1 == "no namespace hosts"* ]] || echo "known defect: "; }
