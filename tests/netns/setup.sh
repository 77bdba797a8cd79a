#!/usr/bin/env bash
# Several hosts on this machine: N network namespaces (PREFIX1..PREFIXN,
# see common.sh) on a bridge, host i at NET.i on its "eth0", the root
# namespace at NET.254 on the bridge.  Anything left from an earlier run is
# removed first; a failure part-way removes what was made.
#   tests/netns/setup.sh N        (2 <= N <= 8)
# Prints the reason and exits 2 where namespaces cannot be made here.
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/common.sh"
n=${1:?usage: setup.sh N}
case $n in [2-8]) ;; *) echo "setup.sh: N must be 2..$NETNS_MAX, not '$n'" >&2; exit 2 ;; esac
if reason=$(netns_unavailable); then
    echo "setup.sh: $reason" >&2
    exit 2
fi
"$here/teardown.sh"
trap '"$here/teardown.sh"; echo "setup.sh: failed, nothing left behind" >&2' ERR
ip link add "$NETNS_BRIDGE" type bridge
ip addr add "$NETNS_ROOT_ADDR/24" dev "$NETNS_BRIDGE"
ip link set "$NETNS_BRIDGE" up
for i in $(seq 1 "$n"); do
    ns=$(netns_name "$i")
    veth=$(netns_veth "$i")
    ip netns add "$ns"
    ip link add "$veth" type veth peer name "${veth}p"
    ip link set "${veth}p" netns "$ns"
    ip -n "$ns" link set "${veth}p" name "$NETNS_IFACE"
    ip -n "$ns" addr add "$(netns_addr "$i")/24" dev "$NETNS_IFACE"
    ip -n "$ns" link set "$NETNS_IFACE" up
    ip -n "$ns" link set lo up
    ip link set "$veth" master "$NETNS_BRIDGE"
    ip link set "$veth" up
done
# The fault table, empty: tests/netns/fault.sh fills its chains.
nft -f - <<NFT
table bridge $NETNS_NFT_TABLE {
    chain forward { type filter hook forward priority 0; }
    chain input { type filter hook input priority 0; }
    chain output { type filter hook output priority 0; }
}
NFT
# Both ends of every veth up (no ping here: the MPI runs themselves show
# that the hosts reach each other, and say so when they do not).
for i in $(seq 1 "$n"); do
    ip -n "$(netns_name "$i")" link show "$NETNS_IFACE" | grep -q 'state UP' ||
        { echo "setup.sh: host $i: $NETNS_IFACE is not up" >&2; false; }
done
trap - ERR
echo "setup.sh: $n hosts $(netns_name 1)..$(netns_name "$n") at $NETNS_NET.1-$n, mpirun's side $NETNS_ROOT_ADDR"
