#!/usr/bin/env bash
# mpirun arguments that run a job on the namespace hosts of
# tests/netns/setup.sh, one per line (read them with mapfile):
#   tests/netns/mpirun-args.sh DIR SLOTS [N]
# writes DIR/hosts (the first N hosts, default all, SLOTS slots each) and
# prints the arguments: that hostfile, rsh-agent as plm_rsh_agent (each
# daemon started by mpirun itself: the agent needs root, and a tree of
# daemons starting daemons gains nothing on one machine), Open MPI's
# out-of-band and its own TCP BTL on the bridge's network (link 0), and the
# providers bound to the hosts' interface (tcp and udp would otherwise also
# offer the namespace's loopback, whose address means nothing to the other
# hosts).  Ranks go round-robin over the hosts (--map-by node), so that
# neighbours are on different hosts.
# Environment:
#   NETNS_LINKS  K, the links the job is to use (default 1: link 0 alone,
#                the providers bound to eth0 as above).  K > 1 (up to the
#                hosts' LINKS of setup.sh) leaves the providers unbound,
#                each offering one domain per interface (eth0..ethK-1 and
#                lo, named after them), and keeps the EFA components to
#                eth0..ethK-1 with their own NIC filter instead:
#                --mca common_efa_nic_include eth0,...,ethK-1.
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/common.sh"
dir=$1
slots=$2
mapfile -t hosts < <(netns_hosts)
n=${3:-${#hosts[@]}}
if [ "${#hosts[@]}" -lt "$n" ] || [ "$n" -lt 1 ]; then
    echo "mpirun-args.sh: $n hosts wanted, ${#hosts[@]} exist (tests/netns/setup.sh N)" >&2
    exit 2
fi
links=${NETNS_LINKS:-1}
if [ "$links" != 1 ]; then
    have=$(netns_links)
    if ! [[ $links =~ ^[1-9]$ ]] || [ "$links" -gt "$have" ]; then
        echo "mpirun-args.sh: NETNS_LINKS=$links links wanted, the hosts have $have (tests/netns/setup.sh N LINKS)" >&2
        exit 2
    fi
fi
mkdir -p "$dir"
for i in "${hosts[@]:0:$n}"; do echo "$(netns_addr "$i") slots=$slots"; done >"$dir/hosts"
printf '%s\n' --hostfile "$dir/hosts" --map-by node \
    --mca plm_rsh_agent "$here/rsh-agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "$NETNS_NET.0/24" --mca btl_tcp_if_include "$NETNS_NET.0/24"
if [ "$links" -eq 1 ]; then
    printf '%s\n' -x FI_TCP_IFACE="$NETNS_IFACE" -x FI_UDP_IFACE="$NETNS_IFACE"
else
    nics=$(netns_iface 0)
    for k in $(seq 1 $((links - 1))); do nics=$nics,$(netns_iface "$k"); done
    printf '%s\n' --mca common_efa_nic_include "$nics"
fi
