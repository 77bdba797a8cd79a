#!/usr/bin/env bash
# Remove every namespace host of tests/netns/setup.sh, the bridge, and the
# fault table.  Idempotent: what is not there is skipped.  Processes still
# running inside a namespace are killed first (a namespace holding a process
# outlives "ip netns del").
#   tests/netns/teardown.sh
set -u
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
nft delete table bridge "$NETNS_NFT_TABLE" 2>/dev/null
for i in $(netns_hosts); do
    ns=$(netns_name "$i")
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
    ip link del "$(netns_veth "$i")" 2>/dev/null
done
ip link del "$NETNS_BRIDGE" 2>/dev/null
exit 0
