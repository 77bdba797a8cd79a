#!/usr/bin/env bash
# Put the EFA components into an Open MPI 4.1 or 5.0 source tree, so that Open MPI
# builds them as its own components:
#   common/   -> opal/mca/common/efa   (libmca_common_efa, like common/ofi)
#   btl_efa/  -> opal/mca/btl/efa      (mca_btl_efa)
#   mtl_efa/  -> ompi/mca/mtl/efa      (mca_mtl_efa)
# Each directory carries its own configure.m4 and a Makefile.am that works
# in both layouts (see docs/DESIGN.md, "Building inside an Open MPI tree").
#
#   scripts/add-to-ompi-tree.sh [--symlink] OMPI_SRC
#
# By default the files are copied (only those that differ, so that a second
# run after editing here rebuilds only what changed).  --symlink links the
# three directories instead (handy while editing); Open MPI's autogen.pl
# then writes its Makefile.in into this checkout, over the out-of-tree
# build's, and an in-source Open MPI build its objects too: run
# `autoreconf -fi` here before building out of tree again.
set -euo pipefail

usage() { echo "usage: $0 [--symlink] OMPI_SRC" >&2; exit 2; }
mode=copy
if [ "${1:-}" = "--symlink" ]; then mode=symlink; shift; fi
[ $# -eq 1 ] || usage
top=$(cd "$(dirname "$0")/.." && pwd)
ompi=$(cd "$1" && pwd)

[ -f "$ompi/autogen.pl" ] && [ -d "$ompi/opal/mca/common" ] && [ -d "$ompi/ompi/mca/mtl" ] ||
    { echo "$0: $ompi is not an Open MPI source tree (no autogen.pl, opal/mca/common, ompi/mca/mtl)" >&2; exit 1; }
version=$(sed -n 's/^major=//p; s/^minor=//p' "$ompi/VERSION" | paste -sd.)
case $version in
4.1 | 5.0) ;;
*) echo "$0: warning: Open MPI $version; the components are built and tested in the 4.1 and 5.0 series" >&2 ;;
esac

# The files of one of our directories: what git tracks (plus files not yet
# committed), or, outside a git checkout, everything but build products.
list_files() {
    if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$top/$1" ls-files --cached --others --exclude-standard .
    else
        (cd "$top/$1" && find . -type f ! -name Makefile ! -name Makefile.in ! -name '*.o' \
            ! -name '*.lo' ! -name '*.la' ! -path '*/.deps/*' ! -path '*/.libs/*' | sed 's|^\./||')
    fi
}

place() {
    local src=$1 dst=$ompi/$2
    if [ "$mode" = symlink ]; then
        if [ -e "$dst" ] && [ ! -L "$dst" ]; then
            echo "$0: $dst exists and is not a symlink; remove it first" >&2; exit 1
        fi
        ln -sfn "$top/$src" "$dst"
        echo "  $2 -> $top/$src"
        return
    fi
    if [ -L "$dst" ]; then rm -f "$dst"; fi
    mkdir -p "$dst"
    local n=0 f
    while IFS= read -r f; do
        [ -f "$top/$src/$f" ] || continue
        if ! cmp -s "$top/$src/$f" "$dst/$f"; then
            mkdir -p "$(dirname "$dst/$f")"
            cp "$top/$src/$f" "$dst/$f"
            n=$((n + 1))
        fi
    done < <(list_files "$src")
    echo "  $2: $n file(s) updated"
}

echo "Adding the EFA components to $ompi ($mode):"
place common opal/mca/common/efa
place btl_efa opal/mca/btl/efa
place mtl_efa ompi/mca/mtl/efa

cat <<EOF

Now build Open MPI as usual (autogen.pl is needed once, to pick up the new
components; again after changing a configure.m4):
  cd $ompi
  ./autogen.pl
  ./configure --prefix=PREFIX --with-ofi=LIBFABRIC_DIR [other options]
  make -j N install
configure reports "MCA component common:efa", "btl:efa" and "mtl:efa"; they
need libfabric (>= 1.14), a C++20 compiler (CXX) and a DSO build (the
default).  Then \`PREFIX/bin/ompi_info | grep efa\` lists mtl efa and btl efa.
EOF
