#!/usr/bin/env bash
# mpirun arguments that run a job on the namespace hosts of
# tests/netns/setup.sh, one per line (read them with mapfile):
#   tests/netns/mpirun-args.sh DIR SLOTS [N]
# writes DIR/hosts (the first N hosts, default all, SLOTS slots each) and
# prints the arguments: that hostfile, rsh-agent as plm_rsh_agent (each
# daemon started by mpirun itself: the agent needs root, and a tree of
# daemons starting daemons gains nothing on one machine), Open MPI's
# out-of-band and its own TCP BTL on the bridge's network, and the
# providers bound to the hosts' interface (tcp and udp would otherwise also
# offer the namespace's loopback, whose address means nothing to the other
# hosts).  Ranks go round-robin over the hosts (--map-by node), so that
# neighbours are on different hosts.
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
mkdir -p "$dir"
for i in "${hosts[@]:0:$n}"; do echo "$(netns_addr "$i") slots=$slots"; done >"$dir/hosts"
printf '%s\n' --hostfile "$dir/hosts" --map-by node \
    --mca plm_rsh_agent "$here/rsh-agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "$NETNS_NET.0/24" --mca btl_tcp_if_include "$NETNS_NET.0/24" \
    -x FI_TCP_IFACE="$NETNS_IFACE" -x FI_UDP_IFACE="$NETNS_IFACE"
