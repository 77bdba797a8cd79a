#!/usr/bin/env bash
# An install copied elsewhere (a relocated package, a build carried to
# another machine): its components, core library and help files copied
# under a new prefix, the job loading them from there.  Its messages must
# come from the copy's help files (<libdir>/../share/ompi-efa, found beside
# the core library), not from the folder the build was installed to; a
# marker line added to the copy's text shows which was read.  And where
# the copy lacks its help files, the installed folder still serves.
# Prints "N passed, N failed".
#   run-relocated-test.sh <component-dir> <mpi-test-bin-dir>
set -u
# shellcheck source=runner-args.sh
. "$(dirname "$0")/runner-args.sh"
pass=0
fail=0
libdir=$(cd "$compdir/.." && pwd) # (lib or lib64)
lib=$(basename "$libdir")
prefix=$(dirname "$libdir")
moved=$(mktemp -d)
trap 'rm -rf "$moved"' EXIT
mkdir -p "$moved/$lib/openmpi" "$moved/share/ompi-efa"
cp -P "$libdir"/libmca_common_efa.so* "$moved/$lib/"
cp "$compdir"/mca_*_efa.so "$moved/$lib/openmpi/"
cp "$prefix"/share/ompi-efa/help-*.txt "$moved/share/ompi-efa/"
# (LD_LIBRARY_PATH must win over the components' own path to the core:
# a RUNPATH, not an RPATH)
if readelf -d "$compdir/mca_mtl_efa.so" 2>/dev/null | grep -q "(RPATH)"; then
    echo "run-relocated-test: mca_mtl_efa.so carries an RPATH: its copy would load the installed core"
    echo "0 passed, 1 failed"
    exit 1
fi
# (the marker after the first line of the unknown NIC's text)
sed -i '/^\[unknown-nic\]/a relocated copy of the help text' "$moved/share/ompi-efa/help-common-efa.txt"
path_moved="${path%%:*}:$moved/$lib/openmpi"

result() {
    if [ -n "$2" ]; then
        echo "FAIL relocated/$1: $2"
        head -20 <<<"$3" | sed 's/^/    /'
        fail=$((fail + 1))
    else
        echo "PASS relocated/$1"
        pass=$((pass + 1))
    fi
}

# job: a NIC list naming no NIC, so that the help text is printed
job() {
    LD_LIBRARY_PATH=$moved/$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 60 mpirun -np 1 \
        -x LD_LIBRARY_PATH --mca mca_base_component_path "$path_moved" --mca pml cm \
        --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm" \
        --mca common_efa_nic_include nosuchnic "$bindir/pingpong" 2>&1
}

grep -q "^\[unknown-nic\]" "$moved/share/ompi-efa/help-common-efa.txt" ||
    { echo "run-relocated-test: no [unknown-nic] topic in help-common-efa.txt"; exit 1; }
out=$(job)
why=""
if ! grep -q "Unknown NIC: *nosuchnic" <<<"$out"; then
    why="the unknown NIC's help text was not printed"
elif ! grep -q "relocated copy of the help text" <<<"$out"; then
    why="the text came from the installed folder, not the copy's"
fi
result help-from-the-copy "$why" "$out"

rm -rf "$moved/share/ompi-efa"
out=$(job)
why=""
if ! grep -q "Unknown NIC: *nosuchnic" <<<"$out"; then
    why="without the copy's help files the installed folder's text was not printed"
elif grep -q "relocated copy" <<<"$out"; then
    why="a removed copy's text was printed"
fi
result help-from-the-install "$why" "$out"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
