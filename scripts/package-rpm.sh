#!/usr/bin/env bash
# Builds the RPM of contrib/rpm/ompi-efa.spec from this checkout against the
# Open MPI that ompi_info describes (default: the one on PATH; Debian's is
# /usr, libdir /usr/lib/x86_64-linux-gnu/openmpi/lib), and checks what it
# holds.  On a system without RPM packages of Open MPI and libfabric
# (Debian), rpmbuild runs with --nodeps: the spec's BuildRequires name the
# AWS EFA installer's packages, which such a system does not have.
#   scripts/package-rpm.sh [OUTDIR]     (default: a new folder under /tmp)
# OUTDIR gets dist-build/ (the `make dist` build) and rpmbuild/ (_topdir).
# Environment: OMPI_INFO (the ompi_info to ask), RPMBUILD_ARGS (more
# rpmbuild arguments, e.g. "--with check"), DIST_BUILD_DIR (a configured
# build folder of this checkout to run `make dist` in).
# Prints the .rpm files made; exits non-zero, saying why, on any failure.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
spec=$top/contrib/rpm/ompi-efa.spec
out=${1:-$(mktemp -d /tmp/ompi-efa-rpm.XXXXXX)}
die() { echo "package-rpm: FAIL: $*" >&2; exit 1; }

command -v rpmbuild >/dev/null || die "rpmbuild not found (Debian: apt-get install rpm)"
[ -x "$top/configure" ] || die "$top/configure is missing: run autoreconf -fi in $top"

# The release: configure.ac's AC_INIT names the tarball, the spec's Version
# must be the same (tests/package/check-spack-recipe.py checks it too).
version=$(sed -n 's/^AC_INIT(\[[^]]*\], *\[\([^]]*\)\].*/\1/p' "$top/configure.ac")
spec_version=$(sed -n 's/^Version: *//p' "$spec")
[ -n "$version" ] || die "no version in configure.ac's AC_INIT"
[ "$version" = "$spec_version" ] ||
    die "$spec has Version $spec_version, configure.ac's AC_INIT $version: make them equal"

# Where the Open MPI to build against lives, as it says itself.
ompi_info=${OMPI_INFO:-ompi_info}
command -v "$ompi_info" >/dev/null || die "$ompi_info not found (set OMPI_INFO)"
ompi_path() { "$ompi_info" --path "$1" --parsable | sed -n "s/^path:$1://p"; }
ompi_prefix=$(ompi_path prefix)
ompi_libdir=$(ompi_path libdir)
ompi_componentdir=$(ompi_path pkglibdir)
if [ -z "$ompi_prefix" ] || [ -z "$ompi_libdir" ] || [ -z "$ompi_componentdir" ]; then
    die "$ompi_info did not give prefix, libdir and pkglibdir"
fi
# libfabric as pkg-config knows it (/usr: the spec then lets configure find it).
libfabric_prefix=$(pkg-config --variable=prefix libfabric 2>/dev/null || echo /usr)
libfabric_libdir=$(pkg-config --variable=libdir libfabric 2>/dev/null || echo /usr/lib)

# The tarball, from a build folder of its own (the checkout stays clean),
# or from DIST_BUILD_DIR, a build folder of this checkout already
# configured (tests/run-all.sh passes its main build: a second configure
# costs a minute of CI).
mkdir -p "$out/dist-build" "$out/rpmbuild/SOURCES"
tarball=ompi-efa-$version.tar.gz
distdir=$out/dist-build
if [ -n "${DIST_BUILD_DIR:-}" ]; then
    [ -f "$DIST_BUILD_DIR/Makefile" ] || die "DIST_BUILD_DIR=$DIST_BUILD_DIR holds no configured build (no Makefile)"
    distdir=$DIST_BUILD_DIR
    (cd "$distdir" && rm -f "$tarball" && make dist >"$out/dist-build/dist.log" 2>&1) ||
        die "make dist in $distdir failed (log: $out/dist-build/dist.log)"
else
    (cd "$distdir" && rm -f "$tarball" &&
        "$top/configure" --prefix="$out/dist-build/_unused" >configure.log 2>&1 &&
        make dist >dist.log 2>&1) ||
        die "make dist failed (logs in $out/dist-build: configure.log, dist.log)"
fi
[ -f "$distdir/$tarball" ] || die "make dist made no $tarball"
if git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    "$top/tests/package/check-dist.sh" "$distdir/$tarball" || die "the tarball lacks files of the checkout"
fi
mv "$distdir/$tarball" "$out/rpmbuild/SOURCES/"
rm -rf "$out/rpmbuild/RPMS" "$out/rpmbuild/SRPMS" # only this run's packages below

echo "package-rpm: rpmbuild against Open MPI in $ompi_prefix (components: $ompi_componentdir)"
# shellcheck disable=SC2086 # RPMBUILD_ARGS is a list of words
rpmbuild -ba --nodeps \
    --define "_topdir $out/rpmbuild" \
    --define "ompi_prefix $ompi_prefix" \
    --define "ompi_libdir $ompi_libdir" \
    --define "ompi_componentdir $ompi_componentdir" \
    --define "libfabric_prefix $libfabric_prefix" \
    --define "libfabric_libdir $libfabric_libdir" \
    ${RPMBUILD_ARGS:-} "$spec" >"$out/rpmbuild.log" 2>&1 ||
    { tail -30 "$out/rpmbuild.log" >&2; die "rpmbuild failed (all of it in $out/rpmbuild.log)"; }

# What the binary package holds: the two components in Open MPI's
# component directory and the tool, at least.
rpms=$(find "$out/rpmbuild/RPMS" "$out/rpmbuild/SRPMS" -name '*.rpm' 2>/dev/null | sort || true)
binary=$(grep -v -e '\.src\.rpm$' -e '-debug' <<<"$rpms" | head -1 || true)
[ -n "$binary" ] || die "rpmbuild made no binary package"
listing=$(rpm -qlp "$binary" 2>/dev/null) || die "rpm -qlp $binary failed"
echo "package-rpm: $(basename "$binary") holds:"
while IFS= read -r f; do echo "    $f"; done <<<"$listing"
for want in "$ompi_componentdir/mca_mtl_efa.so" "$ompi_componentdir/mca_btl_efa.so" \
    "$ompi_prefix/bin/efa-mpi-info"; do
    grep -qxF "$want" <<<"$listing" || die "$(basename "$binary") lacks $want"
done
echo "package-rpm: PASS: the package holds mca_mtl_efa.so, mca_btl_efa.so and efa-mpi-info"
echo "$rpms"
