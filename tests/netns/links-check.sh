#!/usr/bin/env bash
# Self-check of the several-links bed of tests/netns/setup.sh: 2 hosts x 2
# links shaped to 200mbit, then the 1-link default.
#   - each host has eth0 and eth1, on different /24s (netns_link_addr)
#   - host 1 reaches host 2 over each link (an ICMP echo: ping -c1 -W1, or
#     python3's raw socket where there is no ping)
#   - libfabric's tcp provider offers a domain per link (fi_info -p tcp in
#     a namespace, where fi_info is installed: the domains are printed)
#   - 20 MiB over link 1 (python3 sockets, host 1 to host 2) arrive at
#     0.5..1.2 times the rate: tbf shapes the links
#   - mpirun-args.sh: unchanged by default, the NIC filter with NETNS_LINKS=2
#   - fault.sh cut-link 2 1, then link-down 2 1: link 1 to host 2 fails while
#     link 0 still works; fault.sh clear brings link 1 back
#   - teardown.sh leaves no namespace, bridge or veth; setup.sh 2 (1 link)
#     makes no eth1, no tbf, and mpirun-args.sh prints what it always did
#   tests/netns/links-check.sh
# Runs on a set of its own (NETNS_PREFIX efa-lk, NETNS_NET 10.78.0,
# NETNS_BRIDGE efalk0, unless set), so that it can run beside a test on the
# default set; removes it at the end, also on failure.  Prints a PASS or
# FAIL line per check and exits 1 on any FAIL; prints the reason and exits
# 2 where namespaces cannot be made here.  Needs root and python3.
# shellcheck disable=SC2317 # (the functions run through check)
set -eu
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export NETNS_PREFIX=${NETNS_PREFIX:-efa-lk} NETNS_NET=${NETNS_NET:-10.78.0} NETNS_BRIDGE=${NETNS_BRIDGE:-efalk0}
. "$here/common.sh"
rate=200mbit
rate_bits=200000000
tmp=$(mktemp -d)
failed=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failed=1; }
check() { # check WHAT COMMAND...: a PASS or FAIL line for COMMAND
    local what=$1
    shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
h1=$(netns_name 1)
h2=$(netns_name 2)

# reach NS ADDR: one ICMP echo from namespace NS to ADDR answered within 1 s
reach() {
    if command -v ping >/dev/null; then
        ip netns exec "$1" ping -c1 -W1 "$2" >/dev/null 2>&1
        return
    fi
    ip netns exec "$1" python3 - "$2" <<'PY'
import os, socket, struct, sys, time
dst = sys.argv[1]
ident = os.getpid() & 0xFFFF
def checksum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    return ~(s + (s >> 16)) & 0xFFFF
body = struct.pack("!BBHHH", 8, 0, 0, ident, 1) + b"links-check!"
pkt = body[:2] + struct.pack("!H", checksum(body)) + body[4:]
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
s.sendto(pkt, (dst, 0))
end = time.monotonic() + 1
while (left := end - time.monotonic()) > 0:
    s.settimeout(left)
    try:
        data, addr = s.recvfrom(2048)
    except socket.timeout:
        break
    icmp = data[(data[0] & 15) * 4:]
    if addr[0] == dst and icmp[0] == 0 and struct.unpack("!H", icmp[4:6])[0] == ident:
        sys.exit(0)
sys.exit(1)
PY
}
unreachable() { ! reach "$@"; }
quiet() { "$@" >/dev/null; }

# throughput FROM_NS TO_NS SRC DST: prints the payload rate in bit/s of
# 20 MiB sent from SRC (in FROM_NS) to DST (in TO_NS) over TCP, timed at
# the receiver from the first byte to the end
throughput() {
    timeout 20 ip netns exec "$2" python3 - "$4" >"$tmp/rate" <<'PY' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5201))
s.listen(1)
s.settimeout(10)
c, _ = s.accept()
c.settimeout(10)
n, t0 = 0, None
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    if t0 is None:
        t0 = time.monotonic()
    n += len(b)
print(int(n * 8 / (time.monotonic() - t0)))
PY
    local rx=$!
    timeout 20 ip netns exec "$1" python3 - "$3" "$4" <<'PY' || true
import socket, sys, time
end = time.monotonic() + 5
while True:  # until the receiver listens
    try:
        s = socket.create_connection((sys.argv[2], 5201), timeout=2, source_address=(sys.argv[1], 0))
        break
    except OSError:
        if time.monotonic() > end:
            raise
        time.sleep(0.05)
buf = bytes(1 << 20)
for _ in range(20):
    s.sendall(buf)
s.close()
PY
    wait "$rx" || true
    cat "$tmp/rate"
}

no_leftovers() { # nothing of the set left: namespaces, bridges, veths
    [ -z "$(netns_hosts)" ] &&
        ! ip -o link show | awk -F': ' '{print $2}' | grep -q "^$NETNS_BRIDGE"
}

if reason=$(netns_unavailable); then
    echo "links-check.sh: $reason" >&2
    exit 2
fi
command -v python3 >/dev/null || { echo "links-check.sh: no python3" >&2; exit 2; }
trap '"$here/teardown.sh"; rm -rf "$tmp"' EXIT

# --- 2 hosts x 2 links at $rate -------------------------------------------
check "setup.sh 2 2 $rate" quiet "$here/setup.sh" 2 2 "$rate"
[ "$failed" -eq 0 ] || exit 1
check "netns_links says 2" [ "$(netns_links)" = 2 ]
check "links on different /24s ($(netns_link_net 0), $(netns_link_net 1))" [ "$(netns_link_net 0)" != "$(netns_link_net 1)" ]
for i in 1 2; do
    for k in 0 1; do
        got=$(ip -n "$(netns_name "$i")" -4 -o addr show dev "$(netns_iface "$k")" 2>/dev/null | awk '{print $4}')
        check "host $i $(netns_iface "$k") at $(netns_link_addr "$i" "$k")/24 (has '$got')" [ "$got" = "$(netns_link_addr "$i" "$k")/24" ]
        check "host $i $(netns_iface "$k") and its root-side veth shaped to $rate" \
            eval "tc -n $(netns_name "$i") qdisc show dev $(netns_iface "$k") | grep -q 'tbf .*rate 200Mbit' &&
                  tc qdisc show dev $(netns_veth "$i" "$k") | grep -q 'tbf .*rate 200Mbit'"
    done
done
for k in 0 1; do
    check "host 1 reaches host 2 over link $k ($(netns_link_addr 2 "$k"))" reach "$h1" "$(netns_link_addr 2 "$k")"
done
if command -v fi_info >/dev/null; then
    domains=$(ip netns exec "$h1" fi_info -p tcp 2>/dev/null | sed -n 's/^ *domain: *//p' | sort -u | tr '\n' ' ')
    echo "fi_info -p tcp in $h1: domains $domains"
    check "tcp provider offers eth0 and eth1" eval "[[ ' $domains' == *' eth0 '* && ' $domains' == *' eth1 '* ]]"
else
    echo "SKIP: fi_info -p tcp (no fi_info here)"
fi
bps=$(throughput "$h1" "$h2" "$(netns_link_addr 1 1)" "$(netns_link_addr 2 1)")
echo "link 1, host 1 to host 2: ${bps:-?} bit/s payload for $rate"
check "link 1 throughput within 0.5..1.2 x $rate" \
    eval "[ -n '$bps' ] && [ $((${bps:-0} * 10)) -ge $((rate_bits * 5)) ] && [ $((${bps:-0} * 10)) -le $((rate_bits * 12)) ]"

want_default=$(printf '%s\n' --hostfile "$tmp/x/hosts" --map-by node \
    --mca plm_rsh_agent "$here/rsh-agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "$NETNS_NET.0/24" --mca btl_tcp_if_include "$NETNS_NET.0/24" \
    -x FI_TCP_IFACE=eth0 -x FI_UDP_IFACE=eth0)
want_links=$(printf '%s\n' --hostfile "$tmp/x/hosts" --map-by node \
    --mca plm_rsh_agent "$here/rsh-agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "$NETNS_NET.0/24" --mca btl_tcp_if_include "$NETNS_NET.0/24" \
    --mca common_efa_nic_include eth0,eth1)
check "mpirun-args.sh on 2 links, NETNS_LINKS unset: eth0 alone, as before" \
    [ "$(env -u NETNS_LINKS "$here/mpirun-args.sh" "$tmp/x" 1)" = "$want_default" ]
check "mpirun-args.sh NETNS_LINKS=2: common_efa_nic_include eth0,eth1" \
    [ "$(NETNS_LINKS=2 "$here/mpirun-args.sh" "$tmp/x" 1)" = "$want_links" ]
check "mpirun-args.sh NETNS_LINKS=3 on 2 links refused" \
    eval "! NETNS_LINKS=3 '$here/mpirun-args.sh' '$tmp/x' 1 >/dev/null 2>&1"

"$here/fault.sh" cut-link 2 1
check "fault.sh cut-link 2 1: link 1 to host 2 fails" unreachable "$h1" "$(netns_link_addr 2 1)"
check "fault.sh cut-link 2 1: link 0 to host 2 still works" reach "$h1" "$(netns_link_addr 2 0)"
"$here/fault.sh" clear
check "fault.sh clear: link 1 to host 2 works again" reach "$h1" "$(netns_link_addr 2 1)"
"$here/fault.sh" link-down 2 1
check "fault.sh link-down 2 1: fault.sh show says so" eval "'$here/fault.sh' show | grep -q '^# $h2 eth1 down'"
check "host 2 eth1 down: link 1 to host 2 fails" unreachable "$h1" "$(netns_link_addr 2 1)"
check "host 2 eth1 down: link 0 to host 2 still works" reach "$h1" "$(netns_link_addr 2 0)"
"$here/fault.sh" clear
check "fault.sh clear: eth1 of host 2 up, link 1 works again" reach "$h1" "$(netns_link_addr 2 1)"

"$here/teardown.sh"
check "teardown.sh: nothing left" no_leftovers

# --- the 1-link default ----------------------------------------------------
check "setup.sh 2" quiet "$here/setup.sh" 2
check "1 link: no eth1, no bridge of link 1, no tbf" \
    eval "! ip -n $h1 link show eth1 >/dev/null 2>&1 && ! ip link show $(netns_bridge 1) >/dev/null 2>&1 &&
          ! tc -n $h1 qdisc show dev eth0 | grep -q tbf"
check "1 link: host 1 reaches host 2 and mpirun's side" \
    eval "reach $h1 $(netns_addr 2) && reach $h1 $NETNS_ROOT_ADDR"
check "mpirun-args.sh DIR 1: unchanged" [ "$("$here/mpirun-args.sh" "$tmp/x" 1)" = "$want_default" ]
check "mpirun-args.sh DIR 1: hosts file unchanged" \
    [ "$(cat "$tmp/x/hosts")" = "$(printf '%s slots=1\n' "$(netns_addr 1)" "$(netns_addr 2)")" ]
"$here/teardown.sh"
check "teardown.sh: nothing left" no_leftovers
exit "$failed"
