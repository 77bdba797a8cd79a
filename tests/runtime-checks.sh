# Sourced by the test runners.  Third-party MPI programs from Debian
# (NetPIPE, python3-mpi4py) are linked against Debian's Open MPI; under
# another Open MPI's mpirun (5.0, built by hand) they cannot start, which is
# no defect of the components.  The runners skip them there, with this
# reason; on Debian's own Open MPI (CI) they always run.
#   same_libmpi FILE  -> 0 when FILE uses the libmpi of the ompi_info on PATH;
#                        else 1, printing why
same_libmpi() {
    local theirs ours
    theirs=$(ldd "$1" 2>/dev/null | awk '/libmpi\.so/ { print $3 }')
    [ -n "$theirs" ] || return 0
    theirs=$(readlink -f "$theirs")
    ours=$(readlink -f "$(ompi_info --path libdir --parsable | sed -n 's/^path:libdir://p')/libmpi.so")
    [ "$theirs" = "$ours" ] && return 0
    echo "$(basename "$1") is linked against $theirs, this Open MPI's library is $ours"
    return 1
}

# pretend_nodes_ok BINDIR CACHE_FILE -> 0 when two processes on two pretend
# nodes (tests/pretend-nodes.sh) finish a small ping-pong over Open MPI's own
# ob1 + tcp; else 1, printing why.  With Open MPI 5.0's runtime (PRRTE
# 3.0.13) they start but never exchange a message, whatever the transport
# (ob1 + tcp and mtl/ofi as well): the pretend nodes are then no test of
# ours.  The answer is cached in CACHE_FILE (runners call this per run).
pretend_nodes_ok() {
    local bindir=$1 cache=$2 dir out
    if [ ! -x "$bindir/pingpong" ]; then
        echo "no $bindir/pingpong to check the pretend nodes with"
        return 1
    fi
    if [ ! -f "$cache" ]; then
        dir=$(mktemp -d /tmp/pretend-check.XXXXXX)
        if out=$(timeout -k 5 30 mpirun -np 2 --bind-to none \
            $("$(dirname "${BASH_SOURCE[0]}")/pretend-nodes.sh" "$dir" 1 node | tr '\n' ' ') \
            --mca pml ob1 --mca btl tcp,self -x MPI_TEST_TIMEOUT=20 \
            "$bindir/pingpong" -s 64 -i 2 2>&1) && grep -q "^ok pingpong" <<<"$out"; then
            echo ok >"$cache"
        else
            echo "pretend nodes do not work with this Open MPI's runtime: Open MPI's own ob1 + tcp" \
                "does not finish a ping-pong across two of them" >"$cache"
        fi
        rm -rf "$dir"
    fi
    [ "$(cat "$cache")" = ok ] && return 0
    cat "$cache"
    return 1
}
