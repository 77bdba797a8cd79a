#!/usr/bin/env bash
# The packages (docs/PACKAGES.md): the Spack recipe's check, then the RPM
# (scripts/package-rpm.sh: the release tarball built and checked against the
# checkout, rpmbuild, the package's contents), then the Debian package
# end to end (run-deb-tier.sh: dpkg-buildpackage, lintian, apt into a clean
# Debian 12 root, 2-rank jobs there).  Root; the RPM and Debian steps
# install rpm, debhelper, lintian and debootstrap with apt when missing, and
# the Debian step reaches the mirror apt uses.
#   tests/package/run-package-tests.sh [WORKDIR]   (default /tmp/ompi-efa-packages)
# PACKAGE_BUILD=quick (tests/run-all.sh): both packages compiled without
# optimization or debug information, in about 20 % less time; what these
# steps check is the packaging (files, lintian, a clean root), and the
# optimized compile is the main build's.  rpmbuild takes CFLAGS and
# CXXFLAGS from the environment (%set_build_flags), given to it alone;
# dpkg-buildpackage takes DEB_BUILD_OPTIONS noopt (-O0; its hardening
# flags stay), noautodbgsym (no debug package: there is nothing for it)
# and the -g stripped from its flags (DEB_*_STRIP).
# Prints "N passed, N failed".
set -u
rpm_env=()
case ${PACKAGE_BUILD:-} in
'') ;;
quick)
    rpm_env=(CFLAGS=-O0 CXXFLAGS=-O0)
    export DEB_BUILD_OPTIONS="noopt noautodbgsym${DEB_BUILD_OPTIONS:+ $DEB_BUILD_OPTIONS}"
    export DEB_CFLAGS_STRIP=-g DEB_CXXFLAGS_STRIP=-g
    ;;
*)
    echo "run-package-tests: PACKAGE_BUILD is '$PACKAGE_BUILD'; it can be quick or unset"
    echo "0 passed, 1 failed"
    exit 1
    ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
work=${1:-/tmp/ompi-efa-packages}
pass=0 fail=0 skip=0
mkdir -p "$work"
skip() { echo "SKIP package/$1: $2"; skip=$((skip + 1)); }
is_root=0
[ "$(id -u)" -eq 0 ] && is_root=1
codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")

# count LOG NAME: add a runner's "N passed, N failed[, N skipped]"
# shellcheck source=../sanitizer-counts.sh
. "$here/../sanitizer-counts.sh"

echo "== Spack recipe (contrib/spack), the spec's version"
python3 "$here/check-spack-recipe.py" 2>&1 | tee "$work/spack.log"
count "$work/spack.log" spack

echo "== RPM (contrib/rpm/ompi-efa.spec) from the release tarball"
if ! command -v rpmbuild >/dev/null && [ $is_root -eq 1 ]; then
    # (a machine whose package lists are stale gets them fresh, once)
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rpm >/dev/null ||
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends rpm >/dev/null; }
fi
rm -rf "$work/rpm"
# package-rpm.sh says FAIL and exits non-zero on any failure of its own.
if ! command -v rpmbuild >/dev/null; then
    skip rpm "no rpmbuild, and not root to install it (apt-get install rpm)"
elif env "${rpm_env[@]}" "$top/scripts/package-rpm.sh" "$work/rpm" >"$work/rpm.log" 2>&1; then
    echo "PASS package/rpm: $(grep -c '\.rpm$' "$work/rpm.log") package file(s)"
    grep -E '\.rpm$|PASS' "$work/rpm.log" | sed 's/^/    /'
    pass=$((pass + 1))
else
    echo "FAIL package/rpm (log $work/rpm.log):"
    tail -20 "$work/rpm.log" | sed 's/^/    /'
    fail=$((fail + 1))
fi

echo "== Debian package, into a clean Debian 12 root"
# The package is built against this host's Open MPI and installed into a
# bookworm root: the host must be bookworm too.
if [ $is_root -eq 0 ]; then
    skip deb "not root (debootstrap, mount and chroot need it)"
elif [ "$codename" != bookworm ]; then
    skip deb "this host is ${codename:-not Debian}, the package and its clean root are bookworm's"
else
    "$here/run-deb-tier.sh" "$work/deb" 2>&1 | tee "$work/deb.log"
    count "$work/deb.log" deb
fi

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
