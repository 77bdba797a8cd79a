#!/usr/bin/env bash
# Remove every namespace host of tests/netns/setup.sh, the bridges of all
# its links, their veths, and the fault table.  Idempotent: what is not
# there is skipped.  Processes still running inside a namespace are killed
# first (a namespace holding a process outlives "ip netns del").  The veths
# and bridges go by name, whatever the number of hosts and links, so that a
# setup that failed part-way leaves nothing behind either.
#   tests/netns/teardown.sh
set -u
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
nft delete table bridge "$NETNS_NFT_TABLE" 2>/dev/null
for i in $(netns_hosts); do
    ns=$(netns_name "$i")
    pids=$(ip netns pids "$ns" 2>/dev/null)
    # shellcheck disable=SC2086 # one word per process
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
done
# (deleting a namespace deletes its veths; a veth not yet moved into one is
# still here)
mapfile -t names < <(ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}')
for k in $(seq 0 $((NETNS_LINKS_MAX - 1))); do
    bridge=$(netns_bridge "$k")
    for name in "${names[@]}"; do
        case $name in "${bridge}v"[0-9] | "${bridge}v"[0-9][0-9]) ip link del "$name" 2>/dev/null ;; esac
    done
    ip link del "$bridge" 2>/dev/null
done
exit 0
