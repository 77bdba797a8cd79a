#!/usr/bin/env bash
# A job of one host that meets processes of another (MPI_Comm_spawn) while
# the components' provider reaches this host alone (shm): on two namespace
# hosts of tests/netns/setup.sh, one parent rank on the first spawns one
# child, which the runtime places on the second (tests/mpi/spawn.c).
#   cm   pml cm + mtl_efa: the parent and the child refuse each other
#        (help peer-off-host), so the spawn fails and the job ends at once,
#        naming the provider.  (Between real hosts shm would accept the
#        other host's address, and every send to it would wait for ever.)
#   ob1  pml ob1 with btl efa,self,tcp: btl_efa leaves the child to another
#        BTL (said at common_efa_verbose 1), tcp carries it, and the program
#        ends "ok spawn".
# The namespace hosts share one kernel and one /dev/shm, so shm does reach
# the other namespace here: what is tested is that the runtime's word (the
# peer's host) keeps such a peer away from a provider of one host, not the
# wait that would follow between real hosts.
# usage: tests/netns/off-host.sh [cm] [ob1]   (default both)
# Environment: EFA_MCA_COMPONENT_PATH, MPI_TEST_BIN_DIR (default
# _build/tests/mpi), OFF_HOST_LOG_DIR (default /tmp/efa-off-host).  Makes
# the hosts and removes them at the end; where they cannot be made, each
# run is a SKIP with the reason.  Prints PASS/FAIL/SKIP per run and
# "N passed, N failed, N skipped".
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/../.." && pwd)
. "$here/common.sh"
comp=${EFA_MCA_COMPONENT_PATH:-$top/_install/lib/openmpi}
bin=${MPI_TEST_BIN_DIR:-$top/_build/tests/mpi}/spawn
logdir=${OFF_HOST_LOG_DIR:-/tmp/efa-off-host}
cases=${*:-cm ob1}
for c in $cases; do
    [[ $c == cm || $c == ob1 ]] || { echo "off-host.sh: unknown case '$c' (cm, ob1)" >&2; exit 2; }
done
[ -x "$bin" ] || { echo "off-host.sh: $bin is not built" >&2; exit 2; }
# A failed spawn ends within seconds; a send waiting on shm would wait for
# the peer deadline (600 s by default).
BOUND=90

npass=0 nfail=0 nskip=0
finish() {
    echo "$npass passed, $nfail failed, $nskip skipped"
    [ $nfail -eq 0 ]
}
if ! netns_make_hosts 2; then
    for c in $cases; do
        echo "$NETNS_VERDICT off_host-$c ($NETNS_WHY)"
        if [ "$NETNS_VERDICT" = SKIP ]; then nskip=$((nskip + 1)); else nfail=$((nfail + 1)); fi
    done
    finish
    exit
fi
trap '"$here/teardown.sh"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$logdir"
netns_args_out=$("$here/mpirun-args.sh" "$logdir" 1 2) ||
    { echo "off-host.sh: mpirun-args.sh failed: $netns_args_out" >&2; exit 1; }
mapfile -t netns_args <<<"$netns_args_out"
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

for c in $cases; do
    log=$logdir/off_host-$c.log
    if [ $c = cm ]; then
        args=(--mca pml cm --mca mtl efa --mca mtl_efa_provider_include shm
            --mca mtl_efa_onnode_channel none --mca mtl_efa_matching provider)
    else
        args=(--mca pml ob1 --mca btl efa,self,tcp --mca btl_efa_provider_include shm
            --mca common_efa_verbose 1)
    fi
    t0=$(date +%s)
    timeout -k 5 $BOUND mpirun -np 1 --mca mca_base_component_path "$pkglibdir:$comp" \
        "${netns_args[@]}" "${args[@]}" -x MPI_TEST_TIMEOUT=0 "$bin" -w 1 >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - t0))
    netns_kill_all
    if [ $c = cm ]; then
        # the refusal, naming the provider and the other host, and an end
        # (no crash: the program checks each call's error).  Open MPI 5
        # gives no host name of a spawned job's process (PMIx's local
        # cache holds none; its own opal_get_proc_hostname says
        # "unknown"): the message says the runtime's "another" then.
        if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && [ $rc -ne 139 ] &&
            grep -q -a "reaches only the processes of this host" "$log" &&
            grep -q -a -E "^ *Provider: +shm" "$log" &&
            grep -q -a -E "^ *Peer's host: +$(netns_name 1)|^ *Peer's host: +$(netns_name 2)|^ *Peer's host: +$NETNS_NET\.|^ *Peer's host: +\(unknown; another by the runtime\)" "$log"; then
            echo "PASS off_host-cm (the spawn refused after ${took} s, exit $rc: peer-off-host on shm)"
            npass=$((npass + 1))
        else
            echo "FAIL off_host-cm (exit $rc after ${took} s, without the refusal naming shm and the other host; log $log)"
            nfail=$((nfail + 1))
        fi
    else
        if [ $rc -eq 0 ] && grep -q -a "^ok spawn" "$log" &&
            grep -q -a "not reachable: provider shm reaches this host .* alone; another BTL carries it" "$log"; then
            echo "PASS off_host-ob1 (tcp carried the child on the other host, ${took} s)"
            npass=$((npass + 1))
        else
            echo "FAIL off_host-ob1 (exit $rc after ${took} s, without \"ok spawn\" after btl_efa left the child to tcp; log $log)"
            nfail=$((nfail + 1))
        fi
    fi
done
finish
