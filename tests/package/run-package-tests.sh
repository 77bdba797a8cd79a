#!/usr/bin/env bash
# The packages (docs/PACKAGES.md): the Spack recipe's check, then the RPM
# (scripts/package-rpm.sh: the release tarball built and checked against the
# checkout, rpmbuild, the package's contents), then the Debian package
# end to end (run-deb-tier.sh: dpkg-buildpackage, lintian, apt into a clean
# Debian 12 root, 2-rank jobs there).  Root; the RPM and Debian steps
# install rpm, debhelper, lintian and debootstrap with apt when missing, and
# the Debian step reaches the mirror apt uses.
#   tests/package/run-package-tests.sh [WORKDIR]   (default /tmp/ompi-efa-packages)
# Prints "N passed, N failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
work=${1:-/tmp/ompi-efa-packages}
pass=0 fail=0
mkdir -p "$work"

count() { # add a runner's "N passed, N failed" from its log
    local line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -1)
    if [ -z "$line" ]; then
        echo "FAIL package/$2: no result line (log $1)"
        fail=$((fail + 1))
        return
    fi
    pass=$((pass + $(cut -d' ' -f1 <<<"$line")))
    fail=$((fail + $(cut -d' ' -f3 <<<"$line" | tr -d ,)))
}

echo "== Spack recipe (contrib/spack), the spec's version"
python3 "$here/check-spack-recipe.py" 2>&1 | tee "$work/spack.log"
count "$work/spack.log" spack

echo "== RPM (contrib/rpm/ompi-efa.spec) from the release tarball"
if ! command -v rpmbuild >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rpm >/dev/null
fi
rm -rf "$work/rpm"
# package-rpm.sh says FAIL and exits non-zero on any failure of its own.
if "$top/scripts/package-rpm.sh" "$work/rpm" >"$work/rpm.log" 2>&1; then
    echo "PASS package/rpm: $(grep -c '\.rpm$' "$work/rpm.log") package file(s)"
    grep -E '\.rpm$|PASS' "$work/rpm.log" | sed 's/^/    /'
    pass=$((pass + 1))
else
    echo "FAIL package/rpm (log $work/rpm.log):"
    tail -20 "$work/rpm.log" | sed 's/^/    /'
    fail=$((fail + 1))
fi

echo "== Debian package, into a clean Debian 12 root"
"$here/run-deb-tier.sh" "$work/deb" 2>&1 | tee "$work/deb.log"
count "$work/deb.log" deb

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
