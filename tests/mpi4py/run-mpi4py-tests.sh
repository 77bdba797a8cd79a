#!/usr/bin/env bash
# tests/mpi4py/smoke.py through Debian's python3-mpi4py (MPI_THREAD_MULTIPLE
# by default, as every Python user gets it) over the components.
#   tests/mpi4py/run-mpi4py-tests.sh <component-dir>
# Environment:
#   MPI4PY_PYTHON  the interpreter (default /usr/bin/python3, the one
#                  python3-mpi4py installs into)
#   PYTHONPATH     honoured as usual, and passed to the ranks (mpirun -x)
#                  when set: point it at an mpi4py built against the Open MPI
#                  on PATH (e.g. for Open MPI 5.0, where Debian's, linked to
#                  its Open MPI 4.1, is skipped)
set -u
compdir=$1
here=$(cd "$(dirname "$0")" && pwd)
python=${MPI4PY_PYTHON:-/usr/bin/python3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
path="$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p'):$compdir"
pass=0
fail=0
xenv=()
[ -n "${PYTHONPATH:-}" ] && xenv=(-x PYTHONPATH)
if ! "$python" -c "import mpi4py" 2>/dev/null; then
    echo "FAIL mpi4py: no mpi4py for $python${PYTHONPATH:+ (PYTHONPATH=$PYTHONPATH)} (install python3-mpi4py)"
    echo "0 passed, 1 failed"
    exit 1
fi
# shellcheck source=../runtime-checks.sh
. "$here/../runtime-checks.sh"
mod=$("$python" -c "import glob, os, mpi4py; print(glob.glob(os.path.join(os.path.dirname(mpi4py.__file__), 'MPI*.so'))[0])")
if ! why=$(same_libmpi "$mod"); then
    for t in cm-efa-rxm cm-efa-onnode ob1-efa-rxm; do
        for np in 2 3; do
            echo "SKIP mpi4py $t np=$np (not this Open MPI's program: $why; see MPI4PY_PYTHON, PYTHONPATH)"
        done
    done
    echo "0 passed, 0 failed, 6 skipped"
    exit 0
fi

run() { # name np mpirun-args...
    local name=$1 np=$2 out rc
    shift 2
    out=$(timeout -k 10 120 mpirun -np "$np" --oversubscribe --mca mca_base_component_path "$path" \
        "${xenv[@]}" "$@" "$python" "$here/smoke.py" 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && grep -q "^ok mpi4py np=$np" <<<"$out"; then
        echo "PASS mpi4py $name np=$np"
        pass=$((pass + 1))
    else
        echo "FAIL mpi4py $name np=$np (exit $rc)"
        grep -v "^\s*$" <<<"$out" | head -12 | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}
for np in 2 3; do
    run cm-efa-rxm "$np" --mca pml cm --mca mtl efa --mca btl efa,self --mca osc rdma \
        --mca common_efa_provider_include "tcp;ofi_rxm" --mca mtl_efa_onnode_channel none
    run cm-efa-onnode "$np" --mca pml cm --mca mtl efa --mca btl efa,self --mca osc rdma \
        --mca common_efa_provider_include shm
    run ob1-efa-rxm "$np" --mca pml ob1 --mca btl efa,self --mca osc rdma \
        --mca common_efa_provider_include "tcp;ofi_rxm"
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
