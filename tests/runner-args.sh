# Sourced by the runners called as RUNNER <component-dir> <mpi-test-bin-dir>
# (tests/run-param-tests.sh, run-shm-hostile-tests.sh,
# run-node-files-test.sh), with their arguments: sets compdir and bindir
# from them and path, the mca_base_component_path of their jobs (Open
# MPI's own components, then ours), and lets mpirun run as root.
# shellcheck disable=SC2034 # bindir and path are the caller's
compdir=$1
bindir=$2
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
path="$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p'):$compdir"
