# shellcheck shell=bash disable=SC2034 # (what is set here, the runner reads)
# Sourced by run-mpi-tests.sh: its transport configurations, the one place
# that defines them.  Each name maps to the mpirun arguments that select a
# PML, transport and provider (config_args); the predicates and argument
# sets below say which extra variants of a test a configuration gets.
# Uses the runner's SCRIPT_DIR, LOG_DIR, LIST, NETNS_ARGS and NETNS_RAILS_ARGS.

EFA_CONFIGS="cm-efa-rxd cm-efa-rxm cm-efa-shm cm-efa-onnode cm-efa-mixed ob1-efa-rxd ob1-efa-rxm ob1-efa-shm"
EFA_CONFIGS+=" ob1-efa-rxm-noring ob1-efa-shm-noring ob1-efa-rxm-batch"
EFA_CONFIGS+=" cm-efa-own-rxm cm-efa-own-rxd cm-efa-own-rxm-noring"
EFA_CONFIGS+=" cm-efa-direct-rxm cm-efa-direct-rxd ob1-efa-direct-rxm ob1-efa-direct-rxd"
EFA_CONFIGS+=" ob1-efa-rails-rxm cm-efa-own-rails-rxm cm-efa-rails-rxm"
ALL_CONFIGS="ob1-vader ob1-tcp $EFA_CONFIGS"

# libfabric provider string for each of our provider short names
provider_string() {
    case $1 in
    rxd) echo 'udp;ofi_rxd' ;;
    rxm) echo 'tcp;ofi_rxm' ;;
    shm) echo 'shm' ;;
    *) return 1 ;;
    esac
}

# Sets CFG_ARGS to the mpirun arguments of configuration $1; fails if unknown.
config_args() {
    local prov
    case $1 in
    cm-efa-mixed-netns)
        # mtl_efa's mixed path between real hosts (not pretend nodes)
        CFG_ARGS=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm"
            --mca mtl_efa_onnode_channel shm --mca mtl_efa_matching provider)
        [[ $LIST == 1 || -z ${NETNS_ARGS+x} ]] || CFG_ARGS+=("${NETNS_ARGS[@]}")
        ;;
    *-rails-netns)
        # on namespace hosts with two links each (tests/netns/setup.sh 2 2),
        # both NICs of every rank (NETNS_LINKS=2), large transfers striped
        # from 4 KiB: cm-efa-PROV-rails-netns (the provider's matching: read
        # rendezvous), cm-efa-own-PROV-rails-netns, ob1-efa-PROV-rails-netns
        local base=${1%-rails-netns}
        case $base in
        cm-efa-own-*)
            prov=$(provider_string "${base#cm-efa-own-}") || return 1
            CFG_ARGS=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "$prov"
                --mca mtl_efa_matching own)
            ;;
        cm-efa-*)
            prov=$(provider_string "${base#cm-efa-}") || return 1
            CFG_ARGS=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "$prov"
                --mca mtl_efa_matching provider)
            ;;
        ob1-efa-*)
            prov=$(provider_string "${base#ob1-efa-}") || return 1
            CFG_ARGS=(--mca pml ob1 --mca btl "efa,self" --mca btl_efa_provider_include "$prov")
            ;;
        *) return 1 ;;
        esac
        CFG_ARGS+=(--mca common_efa_stripe_min 4096)
        [[ $LIST == 1 || -z ${NETNS_RAILS_ARGS+x} ]] || CFG_ARGS+=("${NETNS_RAILS_ARGS[@]}")
        ;;
    *-netns)
        # the same configuration with the ranks on namespace hosts
        config_args "${1%-netns}" || return 1
        [[ $LIST == 1 || -z ${NETNS_ARGS+x} ]] || CFG_ARGS+=("${NETNS_ARGS[@]}")
        ;;
    ob1-efa-*-noring)
        config_args "${1%-noring}" || return 1
        CFG_ARGS+=(--mca btl_efa_onnode_channel none)
        ;;
    ob1-efa-*-batch)
        # btl_efa's coalescing at work: every message through the provider,
        # and a window of 4 messages per peer, so that sends queue and go
        # packed in batches
        config_args "${1%-batch}-noring" || return 1
        CFG_ARGS+=(--mca btl_efa_send_window 4)
        ;;
    ob1-vader) CFG_ARGS=(--mca pml ob1 --mca btl "self,vader") ;;
    ob1-tcp) CFG_ARGS=(--mca pml ob1 --mca btl "self,tcp") ;;
    cm-efa-onnode)
        CFG_ARGS=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include shm
            --mca mtl_efa_onnode_channel shm)
        ;;
    cm-efa-mixed)
        local pretend
        mapfile -t pretend < <("$SCRIPT_DIR/../pretend-nodes.sh" "$LOG_DIR/pretend-nodes" 2)
        CFG_ARGS=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm"
            --mca mtl_efa_onnode_channel shm --mca mtl_efa_matching provider "${pretend[@]}")
        ;;
    cm-efa-own-rails-*)
        # own matching with two NICs per process (as ob1-efa-rails-*): its
        # rendezvous reads from 4 KiB striped over both
        local pretend iface
        prov=$(provider_string "${1#cm-efa-own-rails-}") || return 1
        iface=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
        mapfile -t pretend < <("$SCRIPT_DIR/../pretend-nodes.sh" "$LOG_DIR/pretend-nodes-1" 1)
        CFG_ARGS=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "$prov"
            --mca mtl_efa_matching own --mca common_efa_nic_include "${iface:-eth0},lo"
            --mca common_efa_stripe_min 4096 "${pretend[@]}")
        ;;
    cm-efa-rails-*)
        # the provider's matching with two NICs per process (as
        # ob1-efa-rails-*): messages from 4 KiB read by the receiver,
        # striped over both (read rendezvous)
        local pretend iface
        prov=$(provider_string "${1#cm-efa-rails-}") || return 1
        iface=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
        mapfile -t pretend < <("$SCRIPT_DIR/../pretend-nodes.sh" "$LOG_DIR/pretend-nodes-1" 1)
        CFG_ARGS=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "$prov"
            --mca mtl_efa_matching provider --mca common_efa_nic_include "${iface:-eth0},lo"
            --mca common_efa_stripe_min 4096 "${pretend[@]}")
        ;;
    cm-efa-own-*-noring)
        # own matching with the rings off: every message, on-node ones too,
        # through the provider's untagged messages
        config_args "${1%-noring}" || return 1
        CFG_ARGS+=(--mca mtl_efa_onnode_channel none)
        ;;
    cm-efa-own-*)
        # mtl_efa's own matching: ranks on pretend nodes of 2 slots, so that
        # every communicator mixes peers by the rings and by the provider's
        # untagged messages, matched by the one engine
        local pretend
        prov=$(provider_string "${1#cm-efa-own-}") || return 1
        mapfile -t pretend < <("$SCRIPT_DIR/../pretend-nodes.sh" "$LOG_DIR/pretend-nodes" 2)
        CFG_ARGS=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "$prov"
            --mca mtl_efa_matching own "${pretend[@]}")
        ;;
    cm-efa-direct-*)
        # the forced efa-direct-like mode (common_efa_force_direct_mode: no
        # tags, no order asked for, FI_MR_LOCAL, messages of at most 8 KiB,
        # arrivals swapped in pairs) under own matching on pretend nodes
        config_args "cm-efa-own-${1#cm-efa-direct-}" || return 1
        CFG_ARGS+=(--mca common_efa_force_direct_mode 1)
        ;;
    ob1-efa-direct-*)
        # the same mode under ob1 with every message through the provider
        config_args "ob1-efa-${1#ob1-efa-direct-}-noring" || return 1
        CFG_ARGS+=(--mca common_efa_force_direct_mode 1)
        ;;
    cm-efa-onnode-stream)
        config_args cm-efa-onnode
        CFG_ARGS+=(--mca mtl_efa_onnode_single_copy none)
        ;;
    cm-efa-*)
        prov=$(provider_string "${1#cm-efa-}") || return 1
        CFG_ARGS=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include "$prov"
            --mca mtl_efa_onnode_channel none --mca mtl_efa_matching provider)
        ;;
    ob1-efa-rails-*)
        # several NICs per process on one machine: its first interface and
        # the loopback one (named, so admitted) as two rails, each rank
        # alone on a pretend node so that its set holds both, and every
        # put and get from 4 KiB striped over them
        local pretend iface
        prov=$(provider_string "${1#ob1-efa-rails-}") || return 1
        iface=$(ip -o -4 addr show up 2>/dev/null | awk '$2 != "lo" {print $2; exit}')
        mapfile -t pretend < <("$SCRIPT_DIR/../pretend-nodes.sh" "$LOG_DIR/pretend-nodes-1" 1)
        CFG_ARGS=(--mca pml ob1 --mca btl "efa,self" --mca btl_efa_provider_include "$prov"
            --mca common_efa_nic_include "${iface:-eth0},lo" --mca common_efa_stripe_min 4096
            "${pretend[@]}")
        ;;
    ob1-efa-*-emul)
        local rest=${1#ob1-efa-}
        prov=$(provider_string "${rest%-emul}") || return 1
        CFG_ARGS=(--mca pml ob1 --mca btl "efa,self" --mca btl_efa_provider_include "$prov"
            --mca btl_efa_rma_mode emulated --mca btl_efa_atomic_mode emulated)
        ;;
    ob1-efa-*-nocma)
        local rest=${1#ob1-efa-}
        prov=$(provider_string "${rest%-nocma}") || return 1
        CFG_ARGS=(--mca pml ob1 --mca btl "efa,self" --mca btl_efa_provider_include "$prov"
            --mca btl_efa_single_copy none)
        ;;
    ob1-efa-*)
        prov=$(provider_string "${1#ob1-efa-}") || return 1
        CFG_ARGS=(--mca pml ob1 --mca btl "efa,self" --mca btl_efa_provider_include "$prov")
        ;;
    *) return 1 ;;
    esac
}

is_efa_config() { [[ $1 == *-efa-* ]]; }

# Do this configuration's ranks span nodes (pretend nodes, namespace hosts)?
# Its span run checks that they do, and that every rank's traffic crossed
# the provider.
spans_nodes_config() {
    [[ $1 == cm-efa-mixed* || $1 == cm-efa-own-* || $1 == cm-efa-direct-* || $1 == *-netns ||
        $1 == ob1-efa-rails-* || $1 == cm-efa-rails-* ]]
}

# Are this configuration's ranks on pretend nodes of 2 slots (2 processes
# on one node, 4 on two)?
pretend_pairs_config() {
    [[ ($1 == cm-efa-mixed || $1 == cm-efa-own-* || $1 == cm-efa-direct-*) && $1 != *-rails-* &&
        $1 != *-netns ]]
}

# Does btl_efa's on-node channel carry this configuration's messages?
# (cm-efa-onnode*: mtl_efa's own rings)
# (*-netns: pingpong's two ranks are on different hosts)
is_ring_config() {
    [[ ($1 == ob1-efa-* && $1 != *-noring && $1 != *-batch && $1 != *-netns && $1 != ob1-efa-direct-* &&
        $1 != ob1-efa-rails-*) ||
        $1 == cm-efa-onnode* ]]
}

# Extra mpirun arguments of the tiny-queue variant of many_outstanding: the
# provider's queues, or the on-node rings (two slots: almost every message
# waits in the sender's queue).
tinyq_args() {
    if [[ $1 == cm-efa-onnode* ]]; then
        TINYQ_ARGS=(--mca mtl_efa_onnode_slots 2)
    else
        TINYQ_ARGS=(--mca common_efa_tx_size 16 --mca common_efa_rx_size 16)
    fi
}

# Extra mpirun arguments of the no-inject variants of ssend and modes:
# mtl_efa acts as if the provider could not inject; on rxm (not rxd: it
# stops completing with tiny queues, see known_defect) the transmit queue
# is small enough that a burst of acknowledgements overflows it.
noinject_args() {
    NOINJECT_ARGS=(--mca mtl_efa_debug_no_inject 1 --mca common_efa_verbose 1)
    [[ $1 == cm-efa-rxm ]] && NOINJECT_ARGS+=(--mca common_efa_tx_size 16)
}

is_noinject_config() { [[ $1 == cm-efa-rxm || $1 == cm-efa-rxd ]]; }
