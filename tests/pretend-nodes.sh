#!/usr/bin/env bash
# Pretend nodes on this machine, for runs that need Open MPI to see several
# hosts (processes on different "nodes" are not OPAL_PROC_ON_LOCAL_NODE).
#   tests/pretend-nodes.sh DIR SLOTS [slot|node|core]
# writes DIR/hosts (hosts 127.0.0.1 .. 127.0.0.8, SLOTS slots each) and
# DIR/ssh, a stand-in for ssh that runs Open MPI's daemon here with a
# session directory of its own per pretend node (daemons sharing one race to
# create it; PRRTE's daemons read PRTE_MCA_prte_tmpdir_base, ORTE's
# OMPI_MCA_orte_tmpdir_base), and prints the mpirun arguments that use them,
# one per line, with the ranks' placement: --map-by slot (the default: SLOTS
# ranks on the first node, then the next), --map-by node (round-robin), or
# core: placed as slot, each rank bound to a core of its own (rank r to core
# r mod the cores here) by a rankfile, as on hosts with CPUs of their own;
# without it the runner leaves the ranks unbound and two of them may share
# a core for part of a run (a between-node round trip on tcp;ofi_rxm then
# took 5.8 or 7.4 us from run to run).
# The placement is always named: with --oversubscribe and no --map-by,
# Open MPI 5.0's runtime (PRRTE 3.0) maps by core and puts every rank on the
# first host whatever its slots, so that "between nodes" would be one node.
# Callers give the placement here, not a second --map-by (5.0 refuses two).
set -eu
dir=$1
slots=$2
policy=${3:-slot}
case $policy in
slot | node | core) ;;
*) echo "pretend-nodes.sh: placement '$policy' is neither slot, node nor core" >&2; exit 2 ;;
esac
mkdir -p "$dir"
for i in 1 2 3 4 5 6 7 8; do echo "127.0.0.$i slots=$slots"; done >"$dir/hosts"
cat >"$dir/ssh" <<EOS
#!/bin/sh
# stand-in for ssh: drop the options and the host, run the command here
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
mkdir -p "$dir/node-\$1"
export OMPI_MCA_orte_tmpdir_base="$dir/node-\$1" PRTE_MCA_prte_tmpdir_base="$dir/node-\$1"
host=\$1
shift
# A host name of its own per pretend node (a UTS namespace, where allowed):
# Open MPI 5.0's runtime merges daemons that report one host name, and then
# marks the processes of the first pretend node as not local to each other
# (no dots in the name: Open MPI keeps only what precedes the first one).
if unshare --uts true 2>/dev/null; then
    exec unshare --uts /bin/sh -c "hostname pretend-\${host##*.} && \$*"
fi
exec /bin/sh -c "\$*"
EOS
chmod +x "$dir/ssh"
if [ "$policy" = core ]; then
    cores=$(nproc)
    for r in $(seq 0 $((8 * slots - 1))); do
        echo "rank $r=127.0.0.$((r / slots + 1)) slot=$((r % cores))"
    done >"$dir/rankfile"
    # (Open MPI 5.0's runtime names it as a mapping policy)
    if mpirun --version 2>/dev/null | grep -q "Open MPI) [5-9]"; then
        printf '%s\n' --hostfile "$dir/hosts" --map-by "rankfile:file=$dir/rankfile" \
            --mca plm_rsh_agent "$dir/ssh"
    else
        printf '%s\n' --hostfile "$dir/hosts" --rankfile "$dir/rankfile" --mca plm_rsh_agent "$dir/ssh"
    fi
else
    printf '%s\n' --hostfile "$dir/hosts" --map-by "$policy" --mca plm_rsh_agent "$dir/ssh"
fi
# Without a host name per pretend node, coll/han (Open MPI 5.0's default for
# communicators spanning nodes) sees them inconsistently: processes pick
# different collective algorithms and wait for each other for ever, whatever
# the transport.  The tests are about point-to-point and one-sided paths, so
# han is then left out.
if ! unshare --uts true 2>/dev/null; then
    printf '%s\n' --mca coll ^han
fi
