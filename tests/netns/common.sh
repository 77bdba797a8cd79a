# Sourced by the scripts of tests/netns: the names and addresses of the
# namespace hosts, in one place.  Each host is a network namespace with one
# veth ("eth0" inside) on a bridge of the root namespace; the bridge has an
# address too, so that mpirun (root namespace) and its daemons (in the
# namespaces) reach each other over that network.
# Environment (all optional, for running beside another set):
#   NETNS_PREFIX  namespace names PREFIX1..PREFIXn (default efa-h)
#   NETNS_NET     the /24 network, three octets (default 10.77.0)
#   NETNS_BRIDGE  bridge name (default efabr0)
NETNS_PREFIX=${NETNS_PREFIX:-efa-h}
NETNS_NET=${NETNS_NET:-10.77.0}
NETNS_BRIDGE=${NETNS_BRIDGE:-efabr0}
NETNS_ROOT_ADDR=$NETNS_NET.254 # the bridge's address: mpirun's side
NETNS_IFACE=eth0               # the host's interface inside each namespace
NETNS_MAX=8
# The nft table (bridge family, root namespace) that holds the faults.
NETNS_NFT_TABLE=${NETNS_PREFIX//-/_}_faults

netns_name() { echo "$NETNS_PREFIX$1"; }          # host i -> namespace
netns_addr() { echo "$NETNS_NET.$1"; }            # host i -> its address
netns_veth() { echo "${NETNS_BRIDGE}v$1"; }       # host i -> root-side veth

# The namespace hosts that exist now, by number.
netns_hosts() {
    ip netns list 2>/dev/null | awk '{print $1}' | sed -n "s/^${NETNS_PREFIX}\([0-9]\+\)\$/\1/p" | sort -n
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
