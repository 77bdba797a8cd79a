# shellcheck shell=bash disable=SC2034 # (the variables are the sourcing scripts')
# Sourced by the scripts of tests/netns: the names and addresses of the
# namespace hosts, in one place.  Each host is a network namespace with one
# veth per link ("eth0", "eth1", ... inside), like a machine with several
# NICs; link K of every host is on bridge K of the root namespace, a /24 of
# its own.  Link 0's bridge has an address too, so that mpirun (root
# namespace) and its daemons (in the namespaces) reach each other over that
# network; the other links carry only the hosts' own traffic.
# Environment (all optional, for running beside another set):
#   NETNS_PREFIX  namespace names PREFIX1..PREFIXn (default efa-h)
#   NETNS_NET     link 0's /24 network, three octets (default 10.77.0);
#                 link K's is the next K-th /24 (10.77.K with the default)
#   NETNS_BRIDGE  link 0's bridge name (default efabr0); link K's is
#                 NETNS_BRIDGE followed by "l" and K (efabr0l1, ...)
# Another set beside this one needs another NETNS_PREFIX and NETNS_BRIDGE.
# Its networks may overlap these links' (NETNS_NET=10.77.1 beside the
# default's link 1): only link 0's bridge has an address in the root
# namespace, and the hosts' addresses live in their own namespaces.
NETNS_PREFIX=${NETNS_PREFIX:-efa-h}
NETNS_NET=${NETNS_NET:-10.77.0}
NETNS_BRIDGE=${NETNS_BRIDGE:-efabr0}
NETNS_ROOT_ADDR=$NETNS_NET.254 # the bridge's address: mpirun's side
NETNS_IFACE=eth0               # the host's interface inside each namespace (link 0)
NETNS_MAX=8
NETNS_LINKS_MAX=4
# The nft table (bridge family, root namespace) that holds the faults.
NETNS_NFT_TABLE=${NETNS_PREFIX//-/_}_faults

netns_name() { echo "$NETNS_PREFIX$1"; }          # host i -> namespace
netns_addr() { echo "$NETNS_NET.$1"; }            # host i -> its address (link 0)
netns_iface() { echo "eth${1:-0}"; }              # link K -> the interface in each namespace
# link K -> its bridge in the root namespace (suffixed rather than counted
# up from NETNS_BRIDGE, so that link 1 of the set on efabr0 and link 0 of a
# set on efabr1 beside it stay apart)
netns_bridge() {
    if [ "${1:-0}" -eq 0 ]; then echo "$NETNS_BRIDGE"; else echo "${NETNS_BRIDGE}l$1"; fi
}
netns_veth() { echo "$(netns_bridge "${2:-0}")v$1"; } # host i [link K] -> root-side veth
# link K -> its /24, three octets: NETNS_NET's third octet plus K (setup.sh
# refuses a NETNS_NET where that passes 255)
netns_link_net() { echo "${NETNS_NET%.*}.$((${NETNS_NET##*.} + ${1:-0}))"; }
netns_link_addr() { echo "$(netns_link_net "$2").$1"; } # host i, link K -> its address

# The namespace hosts that exist now, by number.
netns_hosts() {
    ip netns list 2>/dev/null | awk '{print $1}' | sed -n "s/^${NETNS_PREFIX}\([0-9]\+\)\$/\1/p" | sort -n
}

# netns_pids_named NAME: the processes called NAME in this set's namespace
# hosts only (another set, NETNS_PREFIX, may run the same programs).
netns_pids_named() {
    local i p
    for i in $(netns_hosts); do
        for p in $(ip netns pids "$(netns_name "$i")" 2>/dev/null); do
            [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$1" ] && echo "$p"
        done
    done
    return 0
}

# Every process left in this set's namespace hosts (a hung or killed job's
# daemons and ranks), killed.
netns_kill_all() {
    local i pids
    for i in $(netns_hosts); do
        pids=$(ip netns pids "$(netns_name "$i")" 2>/dev/null)
        # shellcheck disable=SC2086 # one word per process
        [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    done
    return 0
}

# netns_make_hosts ARGS...: the hosts of setup.sh ARGS (beside this file).
# 0 when made; else NETNS_VERDICT is SKIP (setup.sh exit 77: no namespaces
# here) or FAIL (it failed otherwise, partway), NETNS_WHY what a runner
# prints after each run's name, and the status is 1.
netns_make_hosts() {
    local rc=0 reason
    reason=$("$(dirname "${BASH_SOURCE[0]}")/setup.sh" "$@" 2>&1 >/dev/null) || rc=$?
    [ $rc -eq 0 ] && return 0
    NETNS_VERDICT=SKIP NETNS_WHY="no namespace hosts here: ${reason#setup.sh: }"
    [ $rc -ne 77 ] && NETNS_VERDICT=FAIL NETNS_WHY="setup.sh failed with exit $rc: ${reason#setup.sh: }"
    return 1
}

# The links per host of the hosts that exist now (setup.sh's LINKS): the
# ethK interfaces of the first host, set down or not; 0 when there is no
# host.  Read from the namespaces themselves, so never stale.
netns_links() {
    local first
    first=$(netns_hosts | head -n 1)
    [ -n "$first" ] || { echo 0; return 0; }
    ip -n "$(netns_name "$first")" -o link show 2>/dev/null |
        awk -F': ' '{sub(/@.*/, "", $2); print $2}' | grep -c '^eth[0-9]$' || true
}

# netns_link_set HOST K up|down: host HOST's interface of link K up or down,
# as when a NIC loses its link (the host's other links stay up).
netns_link_set() {
    ip -n "$(netns_name "$1")" link set "$(netns_iface "$2")" "$3"
}

# netns_unavailable: prints why namespace hosts cannot be made here and
# succeeds, or fails silently when they can.  Tries one namespace and one
# nft table for real (a container may have the tools but not the rights).
netns_unavailable() {
    local t
    [ "$(id -u)" -eq 0 ] || { echo "not root (network namespaces and nftables need root)"; return 0; }
    for t in ip nft unshare; do
        command -v "$t" >/dev/null || { echo "no '$t' command (scripts/install-deps.sh installs iproute2 and nftables)"; return 0; }
    done
    local probe=${NETNS_PREFIX}probe$$
    if ! ip netns add "$probe" 2>/dev/null; then
        echo "cannot create a network namespace (ip netns add refused: no CAP_SYS_ADMIN?)"
        return 0
    fi
    ip netns del "$probe"
    if ! nft add table bridge "${NETNS_NFT_TABLE}_probe" 2>/dev/null; then
        echo "cannot create an nftables bridge table (no nf_tables in this kernel, or no CAP_NET_ADMIN)"
        return 0
    fi
    nft delete table bridge "${NETNS_NFT_TABLE}_probe"
    return 1
}
