#!/usr/bin/env bash
# Several hosts on this machine: N network namespaces (PREFIX1..PREFIXN,
# see common.sh), each with LINKS links like as many NICs.  Link 0 is the
# host's "eth0" at NET.i on the bridge where the root namespace (mpirun's
# side, Open MPI's out-of-band) is at NET.254; link K is its "ethK" at
# NET_K.i (netns_link_addr) on a bridge of its own with no root address.
# Anything left from an earlier run is removed first; a failure part-way
# removes what was made.
#   tests/netns/setup.sh N [LINKS [RATE]]
#   N      hosts, 2..8
#   LINKS  links per host, 1..4 (default 1)
#   RATE   every link of every host shaped to RATE (tc units: bit, kbit,
#          mbit, gbit, tbit, 1000-based; e.g. 200mbit, 1gbit) in both
#          directions, with a tbf on each end of each veth: the host's
#          ethK shapes what it sends, the root-side veth what the bridge
#          delivers to it (so that several hosts sending to one meet that
#          one's rate, as at a real NIC).  Default: unshaped.
# tbf's bucket (burst) is 10 ms at RATE, at least 128 KiB: tbf needs a
# bucket of at least RATE times its timer's granularity to keep up, and one
# at least a GSO packet (64 KiB of payload plus a header per segment, what
# a veth carries) to pass such a packet whole rather than cut it up.  A
# 10 ms burst is 1.25 % of a one-second transfer.  Its queue (latency)
# holds 50 ms at RATE beyond that.
# Prints the reason and exits 77 where namespaces cannot be made here
# (the runners' SKIP); 2 on a wrong argument, and another non-zero status
# where making them failed partway (the runners' FAIL).
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/common.sh"
n=${1:?usage: setup.sh N [LINKS [RATE]]}
links=${2:-1}
rate=${3:-}
case $n in [2-8]) ;; *) echo "setup.sh: N must be 2..$NETNS_MAX, not '$n'" >&2; exit 2 ;; esac
case $links in [1-4]) ;; *) echo "setup.sh: LINKS must be 1..$NETNS_LINKS_MAX, not '$links'" >&2; exit 2 ;; esac
if [ "$(( ${NETNS_NET##*.} + links - 1 ))" -gt 255 ]; then
    echo "setup.sh: NETNS_NET=$NETNS_NET leaves no room for $links links (third octet + LINKS-1 > 255)" >&2
    exit 2
fi
longest=$(netns_veth "$NETNS_MAX" "$((links - 1))")p
if [ "${#longest}" -gt 15 ]; then
    echo "setup.sh: NETNS_BRIDGE=$NETNS_BRIDGE is too long: interface names such as $longest pass 15 characters" >&2
    exit 2
fi
burst=
if [ -n "$rate" ]; then
    [[ $rate =~ ^([0-9]+)(bit|kbit|mbit|gbit|tbit)?$ ]] ||
        { echo "setup.sh: RATE must be a number with bit, kbit, mbit, gbit or tbit, not '$rate'" >&2; exit 2; }
    case ${BASH_REMATCH[2]} in
    kbit) mult=1000 ;; mbit) mult=1000000 ;; gbit) mult=1000000000 ;; tbit) mult=1000000000000 ;; *) mult=1 ;;
    esac
    bits=$((BASH_REMATCH[1] * mult))
    [ "$bits" -gt 0 ] || { echo "setup.sh: RATE must be above 0" >&2; exit 2; }
    burst=$((bits / 8 / 100))
    [ "$burst" -ge 131072 ] || burst=131072
    command -v tc >/dev/null || { echo "setup.sh: no 'tc' command (iproute2) to shape the links" >&2; exit 77; }
fi
if reason=$(netns_unavailable); then
    echo "setup.sh: $reason" >&2
    exit 77
fi
"$here/teardown.sh"
trap '"$here/teardown.sh"; echo "setup.sh: failed, nothing left behind" >&2' ERR
for k in $(seq 0 $((links - 1))); do
    ip link add "$(netns_bridge "$k")" type bridge
    if [ "$k" -eq 0 ]; then ip addr add "$NETNS_ROOT_ADDR/24" dev "$NETNS_BRIDGE"; fi
    ip link set "$(netns_bridge "$k")" up
done
for i in $(seq 1 "$n"); do
    ns=$(netns_name "$i")
    ip netns add "$ns"
    for k in $(seq 0 $((links - 1))); do
        veth=$(netns_veth "$i" "$k")
        iface=$(netns_iface "$k")
        ip link add "$veth" type veth peer name "${veth}p"
        ip link set "${veth}p" netns "$ns"
        ip -n "$ns" link set "${veth}p" name "$iface"
        ip -n "$ns" addr add "$(netns_link_addr "$i" "$k")/24" dev "$iface"
        ip -n "$ns" link set "$iface" up
        ip link set "$veth" master "$(netns_bridge "$k")"
        ip link set "$veth" up
        if [ -n "$rate" ]; then
            tc -n "$ns" qdisc add dev "$iface" root tbf rate "$rate" burst "$burst" latency 50ms
            tc qdisc add dev "$veth" root tbf rate "$rate" burst "$burst" latency 50ms
        fi
    done
    ip -n "$ns" link set lo up
done
# The fault table, empty: tests/netns/fault.sh fills its chains.  Its
# chains see the frames of every bridge (every link).
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
    for k in $(seq 0 $((links - 1))); do
        ip -n "$(netns_name "$i")" link show "$(netns_iface "$k")" | grep -q 'state UP' ||
            { echo "setup.sh: host $i: $(netns_iface "$k") is not up" >&2; false; }
    done
done
trap - ERR
echo "setup.sh: $n hosts $(netns_name 1)..$(netns_name "$n") at $NETNS_NET.1-$n, mpirun's side $NETNS_ROOT_ADDR"
if [ "$links" -gt 1 ]; then
    for k in $(seq 1 $((links - 1))); do
        echo "setup.sh: link $k: $(netns_iface "$k") at $(netns_link_net "$k").1-$n on $(netns_bridge "$k")"
    done
fi
if [ -n "$rate" ]; then echo "setup.sh: every link shaped to $rate each way (tbf, burst $burst bytes)"; fi
