#!/usr/bin/env bash
# Network faults between the namespace hosts of tests/netns/setup.sh, as
# nftables rules on the bridges (bridge family, root namespace; the table's
# chains see every link's bridge) and, for a link set down, as the host's
# interface itself:
#   fault.sh loss PCT   drop PCT % (0-100) of the frames between hosts, at
#                       random (numgen random), on every link; traffic to
#                       and from mpirun's side is spared, so that only the
#                       MPI job's own traffic is hit
#   fault.sh cut I      host I off the network: every frame from or to it
#                       dropped, on every link, mpirun's side included (as
#                       when a host loses its links)
#   fault.sh isolate I  host I cut off from the other hosts only, on every
#                       link: its traffic with mpirun's side (Open MPI's
#                       out-of-band) still flows, as when a separate data
#                       network (EFA) fails and the IP network stays up
#   fault.sh cut-link I K  host I's link K off: every frame from or to its
#                       ethK dropped (link 0: mpirun's side included), as
#                       when one NIC's network fails; the interface stays
#                       up, so the host does not notice
#   fault.sh link-down I K  host I's ethK set down (netns_link_set), as
#                       when one NIC loses its link: the host sees it go
#   fault.sh link-up I K    and up again
#   fault.sh drop-conns I K  every TCP connection to or from host I's ethK
#                       address ended, in every host (ss -K), as EFA's
#                       device ends a dead path's operations with an error:
#                       otherwise TCP would deliver, once the link is back,
#                       what it held for minutes (docs/RELIABILITY.md)
#   fault.sh clear      no faults: the rules removed, every link up
#   fault.sh show       the rules and their counters, then a "#" line per
#                       link that is down
# Rules add up (loss and a cut at once); "clear" removes them all.
set -eu
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
t=$NETNS_NFT_TABLE
nft list table bridge "$t" >/dev/null 2>&1 ||
    { echo "fault.sh: no table bridge $t (run tests/netns/setup.sh first)" >&2; exit 2; }
links=$(netns_links)
host_arg() { # host_arg WHAT I: I is an existing host, or the usage fails
    if ! [[ $2 =~ ^[1-9]$ ]] || ! ip netns list | grep -q "^$(netns_name "$2")\b"; then
        echo "fault.sh: $1 needs an existing host number, not '$2'" >&2
        exit 2
    fi
}
link_arg() { # link_arg WHAT K: K is one of the hosts' links
    if ! [[ $2 =~ ^[0-9]$ ]] || [ "$2" -ge "$links" ]; then
        echo "fault.sh: $1 needs a link number 0..$((links - 1)), not '$2'" >&2
        exit 2
    fi
}
# host_link WHAT I K: sets i and k to host I's link K, checked.
host_link() {
    i=$2 k=$3
    host_arg "$1" "$i"
    link_arg "$1" "$k"
}
case ${1:-} in
loss)
    pct=${2:-}
    [[ $pct =~ ^[0-9]+$ && $pct -le 100 ]] || { echo "fault.sh: loss needs a percentage 0-100, not '$pct'" >&2; exit 2; }
    # (forward: frames from one port of a bridge to another, host to host)
    nft add rule bridge "$t" forward numgen random mod 100 '<' "$pct" counter drop comment "\"loss $pct%\""
    ;;
cut)
    i=${2:-}
    host_arg cut "$i"
    for k in $(seq 0 $((links - 1))); do
        v=$(netns_veth "$i" "$k")
        for c in forward input; do nft add rule bridge "$t" $c iifname "$v" counter drop comment "\"cut $i\""; done
        for c in forward output; do nft add rule bridge "$t" $c oifname "$v" counter drop comment "\"cut $i\""; done
    done
    ;;
isolate)
    i=${2:-}
    host_arg isolate "$i"
    for k in $(seq 0 $((links - 1))); do
        v=$(netns_veth "$i" "$k")
        nft add rule bridge "$t" forward iifname "$v" counter drop comment "\"isolate $i\""
        nft add rule bridge "$t" forward oifname "$v" counter drop comment "\"isolate $i\""
    done
    ;;
cut-link)
    host_link cut-link "${2:-}" "${3:-}"
    v=$(netns_veth "$i" "$k")
    for c in forward input; do nft add rule bridge "$t" $c iifname "$v" counter drop comment "\"cut-link $i $k\""; done
    for c in forward output; do nft add rule bridge "$t" $c oifname "$v" counter drop comment "\"cut-link $i $k\""; done
    ;;
link-down | link-up)
    host_link "$1" "${2:-}" "${3:-}"
    netns_link_set "$i" "$k" "${1#link-}"
    ;;
drop-conns)
    host_link drop-conns "${2:-}" "${3:-}"
    a=$(netns_link_addr "$i" "$k")
    for h in $(netns_hosts); do
        ip netns exec "$(netns_name "$h")" ss -K -t src "$a" or dst "$a" >/dev/null ||
            { echo "fault.sh: ss -K cannot end connections here (kernel without INET_DIAG_DESTROY?)" >&2; exit 1; }
    done
    ;;
clear)
    for c in forward input output; do nft flush chain bridge "$t" $c; done
    for i in $(netns_hosts); do
        for k in $(seq 0 $((links - 1))); do netns_link_set "$i" "$k" up; done
    done
    ;;
show)
    nft list table bridge "$t"
    for i in $(netns_hosts); do
        for k in $(seq 0 $((links - 1))); do
            ip -n "$(netns_name "$i")" -o link show "$(netns_iface "$k")" | grep -q '[<,]UP[,>]' ||
                echo "# $(netns_name "$i") $(netns_iface "$k") down (link-down $i $k)"
        done
    done
    ;;
*)
    echo "usage: fault.sh loss PCT | cut HOST | isolate HOST | cut-link HOST LINK | link-down HOST LINK | link-up HOST LINK | drop-conns HOST LINK | clear | show" >&2
    exit 2
    ;;
esac
