#!/usr/bin/env bash
# Prepares the GPU check's cargo on this machine (no GPU needed): the
# components built against the GPU kit's Open MPI 5.0.10 and libfabric 2.6
# (../shared/gpu-kit, its README), installed into .gpu/inst, the check's
# VMM program in .gpu/bin, and the kit's tarball beside them in .gpu/.  The device tool then carries .gpu/ with
# the checkout, and tests/gpu/run-gpu-check.sh runs there:
#   tests/gpu/prepare-carry.sh [KIT_TARBALL]    (default ../shared/gpu-kit/kit.tar.xz)
#   device: bash tests/gpu/run-gpu-check.sh -u .gpu/kit.tar.xz -c .gpu/inst/lib/openmpi -o $OUT
#   (carry .gpu, kind nvidia-h100-x1, timeout_s 480: the check keeps to
#   390 s of runs; what comes back is OUT's four files)
# The build stays in .gpu-build (not carried), so that preparing again
# after a change rebuilds only what changed: a session lent the GPU
# machine spends minutes here, not the whole build's time.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
kit_tar=${1:-$top/../shared/gpu-kit/kit.tar.xz}
[ -f "$kit_tar" ] || { echo "prepare-carry: no kit tarball at $kit_tar" >&2; exit 2; }
cargo=$top/.gpu
build=$top/.gpu-build
# A build against another kit (its tarball's checksum differs) starts
# over: the unpacked files keep the archive's times, older than the build.
kit_sum=$(md5sum <"$kit_tar" | cut -d' ' -f1)
[ "$(cat "$build/kit.md5" 2>/dev/null)" = "$kit_sum" ] || rm -rf "$build"
rm -rf "$cargo" && mkdir -p "$cargo" "$build"
echo "$kit_sum" >"$build/kit.md5"
cp "$kit_tar" "$cargo/kit.tar.xz"
# Unpacked where the check unpacks it on the device machine (/tmp/gpu-kit):
# the components then find the same paths there.
rm -rf /tmp/gpu-kit && tar -C /tmp -xJf "$kit_tar"
find /tmp/gpu-kit -name '*.la' -delete # (they name the kit's build directories)
# shellcheck source=/dev/null
. /tmp/gpu-kit/env.sh
cd "$build"
# Configured again only where the build is not this tree's against the
# kit into .gpu/inst (a newer configure script, or none yet).
if [ ! -f config.status ] || [ "$top/configure" -nt config.status ] ||
    ! grep -q "^S\[\"prefix\"\]=\"$cargo/inst\"\$" config.status; then
    "$top/configure" --with-ompi=/tmp/gpu-kit/ompi --with-libfabric=/tmp/gpu-kit/libfabric \
        --prefix="$cargo/inst" >configure.out 2>&1 || { tail -20 configure.out; exit 1; }
fi
make -j"$(nproc)" install >make.out 2>&1 || { grep -E "error" -A3 make.out | head -30; exit 1; }
# The check's own program of VMM and pool memory (CUDA's driver API; the
# driver's stub library here, the driver itself there).
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$cargo/bin"
mpicc -Wall -Wextra -O2 -I"$cuda/include" "$top/tests/gpu/vmm_buffers.c" \
    -o "$cargo/bin/vmm_buffers" -L"$cuda/lib64/stubs" -lcuda
# The device tool carries at most 64 MiB, the checkout's files included:
# the check needs the libraries without their debug information, and
# neither efa-mpi-info nor the headers and manual pages.
rm -rf "$cargo/inst/bin" "$cargo/inst/include" "$cargo/inst/share/man"
find "$cargo/inst" -name '*.la' -delete
find "$cargo/inst" -name '*.so*' -type f -exec strip --strip-debug {} +
# (files deleted in the work tree but still tracked are not there to count)
tree_bytes=$(git -C "$top" ls-files -z --cached --others --exclude-standard |
    (cd "$top" && du -cb --files0-from=- 2>/dev/null) | tail -n 1 | cut -f1 || true)
tree_bytes=${tree_bytes:-0}
cargo_bytes=$(du -sb "$cargo" | cut -f1)
total_mib=$(((tree_bytes + cargo_bytes) >> 20))
echo "prepare-carry: $((cargo_bytes >> 20)) MiB in .gpu, $total_mib MiB with the checkout"
if [ "$total_mib" -ge 60 ]; then
    echo "prepare-carry: over the device tool's 64 MiB (less a margin): the run would not start" >&2
    exit 1
fi
echo "prepare-carry: $cargo ready (carry .gpu; device run: kind nvidia-h100-x1, timeout_s 480)"
