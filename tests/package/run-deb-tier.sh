#!/usr/bin/env bash
# The Debian package, end to end: build it from this checkout with
# dpkg-buildpackage, check it with lintian, install it with apt into a clean
# Debian 12 root (debootstrap) that has nothing else, and run 2-rank jobs
# there: Open MPI must load the components from its own directory with no
# parameter, a job without EFA must run as before, and a job on a stand-in
# provider must go through mtl_efa and through btl_efa.
#   tests/package/run-deb-tier.sh [WORKDIR]   (root; needs the Debian mirror)
# WORKDIR (default /tmp/ompi-efa-deb) keeps the clean root between runs
# (base-root/); each run installs into a fresh copy of it.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/tmp/ompi-efa-deb}
pass=0 fail=0

check() { # name what-failed status
    if [ "$3" -eq 0 ]; then
        echo "PASS deb/$1"
        pass=$((pass + 1))
    else
        echo "FAIL deb/$1: $2"
        [ -n "${OUT:-}" ] && head -30 <<<"$OUT" | sed 's/^/    /'
        fail=$((fail + 1))
    fi
}
finish() {
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
}

if [ "$(id -u)" -ne 0 ]; then
    echo "FAIL deb: run as root (debootstrap and chroot)"
    fail=1
    finish
fi
for tool in dpkg-buildpackage lintian debootstrap; do
    command -v "$tool" >/dev/null || missing="${missing:-} $tool"
done
if [ -n "${missing:-}" ]; then
    echo "deb: installing${missing} (apt)"
    # (a machine whose package lists are stale gets them fresh, once)
    pkgs=(debhelper lintian debootstrap fakeroot)
    apt_install() { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
    apt_install "${pkgs[@]}" || { apt-get update -qq && apt_install "${pkgs[@]}"; }
fi

release=$(sed -n 's/^AC_INIT(\[ompi-efa\], \[\([0-9.]*\)\].*/\1/p' "$top/configure.ac")
mkdir -p "$work"
# A run killed before its cleanup leaves the host's /proc, /sys and /dev
# mounted in the old root: unmount them first, and never let rm cross into
# another file system (it would delete the host's device nodes).
unmount_under() { # every mount point below $1, deepest first
    awk -v p="$1/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r |
        while IFS= read -r m; do umount -l "$m"; done
}
root=$work/root
unmount_under "$root"
rm -rf --one-file-system "$work/src" "$root"
if [ -e "$root" ]; then
    echo "FAIL deb/clean: $work/root could not be removed (something still mounted there?)"
    fail=$((fail + 1))
    finish
fi
src=$work/src/ompi-efa-$release
mkdir -p "$src"

# 1. Build from the checkout's files (tracked and new, not the ignored
#    build trees), as a user would from a clone.
(cd "$top" && git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -c) |
    tar -x -C "$src"
OUT=$(cd "$src" && dpkg-buildpackage -b -us -uc -j"$(nproc)" 2>&1)
check build "dpkg-buildpackage failed" $?
deb=$(ls "$work"/src/openmpi-efa_"${release}"_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || finish
OUT=$(dpkg-deb -c "$deb")
grep -q '/openmpi3/mca_mtl_efa.so$' <<<"$OUT" && grep -q '/openmpi3/mca_btl_efa.so$' <<<"$OUT" &&
    grep -q '/usr/bin/efa-mpi-info$' <<<"$OUT" && grep -q 'help-common-efa.txt$' <<<"$OUT" &&
    grep -q '/ompi-efa/libmca_common_efa\.so\.0 -> ' <<<"$OUT"
check contents "the package lacks a component, the core, the command or the help" $?

# 2. lintian: no error and no warning.
OUT=$(lintian --fail-on error,warning "$work"/src/ompi-efa_"${release}"_*.changes 2>&1)
check lintian "lintian reports errors or warnings" $?

# 3. A clean Debian 12 root, from the mirror apt uses here.
mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
    head -1)
mirror=${mirror:-http://deb.debian.org/debian}
if [ ! -x "$work/base-root/usr/bin/apt-get" ]; then
    rm -rf "$work/base-root"
    OUT=$(debootstrap --variant=minbase bookworm "$work/base-root" "$mirror" 2>&1)
    check debootstrap "debootstrap bookworm from $mirror failed" $?
    [ -x "$work/base-root/usr/bin/apt-get" ] || finish
fi
cp -a "$work/base-root" "$root"
trap 'unmount_under "$root"' EXIT
trap 'exit 1' INT TERM
for m in proc sys dev dev/pts; do
    if [ "$m" = proc ]; then mount -t proc proc "$root/proc"; else mount --bind "/$m" "$root/$m"; fi
done
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null

# The test program, built here against the same Debian Open MPI (the root
# gets no compiler: the package must stand alone).
mkdir -p "$root/opt/test"
cp "$deb" "$root/opt/test/"
OUT=$(mpicc -O2 -I"$top/tests/mpi" "$top/tests/mpi/pingpong.c" -o "$root/opt/test/pingpong" 2>&1)
check test-program "mpicc of tests/mpi/pingpong.c failed" $?

in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$@"; }

OUT=$(in_root sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq /opt/test/$(basename "$deb")" 2>&1)
check install "apt-get install of the package into the clean root failed" $?
in_root dpkg-query -W openmpi-efa >/dev/null 2>&1 || finish

# 4. What a user of the root sees.
OUT=$(in_root ompi_info 2>&1)
grep -qE "MCA mtl: efa \(.*Component v$release\)" <<<"$OUT" &&
    grep -qE "MCA btl: efa \(.*Component v$release\)" <<<"$OUT"
check ompi_info "ompi_info does not list both components at release $release" $?

OUT=$(in_root efa-mpi-info --provider "tcp;ofi_rxm" 2>&1)
check efa-mpi-info "efa-mpi-info on the stand-in did not exit 0" $?

# Started at the idle priority (SCHED_IDLE, tests/run-all.sh's background
# steps), the jobs run at an ordinary one, if low: at the idle one each of
# their ranks would wait for every busy process on the machine.
prio=()
if chrt -p $$ 2>/dev/null | grep -q SCHED_IDLE && chrt --other 0 true 2>/dev/null; then
    prio=(chrt --other 0 nice -n 10)
fi
job() { OUT=$("${prio[@]}" chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout 120 mpirun -np 2 --oversubscribe "$@" /opt/test/pingpong -s 1M -i 3 2>&1); }
# No EFA device here: with nothing set, the components step aside silently.
job
rc=$?
[ $rc -eq 0 ] && ! grep -qiE "efa|error|warning" <<<"$OUT"
check default-job "a job with no parameter failed or spoke of efa (exit $rc)" $?

job --mca pml cm --mca mtl efa --mca mtl_efa_provider_include "tcp;ofi_rxm" \
    --mca common_efa_verbose 1
rc=$?
[ $rc -eq 0 ] && grep -q "provider tcp;ofi_rxm" <<<"$OUT"
check mtl-job "pml cm + mtl_efa on tcp;ofi_rxm failed (exit $rc)" $?

job --mca pml ob1 --mca btl efa,self --mca btl_efa_provider_include "tcp;ofi_rxm" \
    --mca common_efa_verbose 1
rc=$?
[ $rc -eq 0 ] && grep -q "provider tcp;ofi_rxm" <<<"$OUT"
check btl-job "pml ob1 + btl_efa on tcp;ofi_rxm failed (exit $rc)" $?

finish
