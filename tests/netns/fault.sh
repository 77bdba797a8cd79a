#!/usr/bin/env bash
# Network faults between the namespace hosts of tests/netns/setup.sh, as
# nftables rules on the bridge (bridge family, root namespace):
#   fault.sh loss PCT   drop PCT % (0-100) of the frames between hosts, at
#                       random (numgen random); traffic to and from mpirun's
#                       side is spared, so that only the MPI job's own
#                       traffic is hit
#   fault.sh cut I      host I off the network: every frame from or to it
#                       dropped, mpirun's side included (as when a host
#                       loses its link)
#   fault.sh isolate I  host I cut off from the other hosts only: its
#                       traffic with mpirun's side (Open MPI's out-of-band)
#                       still flows, as when a separate data network (EFA)
#                       fails and the IP network stays up
#   fault.sh clear      no faults
#   fault.sh show       the rules and their counters
# Rules add up (loss and a cut at once); "clear" removes them all.
set -eu
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
t=$NETNS_NFT_TABLE
nft list table bridge "$t" >/dev/null 2>&1 ||
    { echo "fault.sh: no table bridge $t (run tests/netns/setup.sh first)" >&2; exit 2; }
case ${1:-} in
loss)
    pct=${2:-}
    [[ $pct =~ ^[0-9]+$ && $pct -le 100 ]] || { echo "fault.sh: loss needs a percentage 0-100, not '$pct'" >&2; exit 2; }
    # (forward: frames from one port of the bridge to another, host to host)
    nft add rule bridge "$t" forward numgen random mod 100 '<' "$pct" counter drop comment "\"loss $pct%\""
    ;;
cut)
    i=${2:-}
    [[ $i =~ ^[1-9]$ ]] && ip netns list | grep -q "^$(netns_name "$i")\b" ||
        { echo "fault.sh: cut needs an existing host number, not '$i'" >&2; exit 2; }
    v=$(netns_veth "$i")
    for c in forward input; do nft add rule bridge "$t" $c iifname "$v" counter drop comment "\"cut $i\""; done
    for c in forward output; do nft add rule bridge "$t" $c oifname "$v" counter drop comment "\"cut $i\""; done
    ;;
isolate)
    i=${2:-}
    [[ $i =~ ^[1-9]$ ]] && ip netns list | grep -q "^$(netns_name "$i")\b" ||
        { echo "fault.sh: isolate needs an existing host number, not '$i'" >&2; exit 2; }
    v=$(netns_veth "$i")
    nft add rule bridge "$t" forward iifname "$v" counter drop comment "\"isolate $i\""
    nft add rule bridge "$t" forward oifname "$v" counter drop comment "\"isolate $i\""
    ;;
clear)
    for c in forward input output; do nft flush chain bridge "$t" $c; done
    ;;
show)
    nft list table bridge "$t"
    ;;
*)
    echo "usage: fault.sh loss PCT | cut HOST | isolate HOST | clear | show" >&2
    exit 2
    ;;
esac
