#!/usr/bin/env bash
# Does the release tarball hold the checkout?  Every file of the checkout
# (tracked, or new and not ignored: what a commit would hold) must be in
# TARBALL, so that an unpacked release configures, builds, installs and
# runs its tests like the checkout does.  Left out on purpose: .gitignore
# files, .ci/ (the CI entry point of the repository, not of a release) and
# debian/ (a native package built from the checkout; Debian's tools object
# to an upstream tarball that carries one).
# Needs git (run it in the checkout); no build.
# Prints "PASS dist/complete" or one "FAIL dist/missing PATH" per missing
# file, then "N passed, M failed"; exits 1 on a failure, 2 on bad usage.
#   tests/package/check-dist.sh ompi-efa-VERSION.tar.gz
set -u
tarball=${1:?usage: check-dist.sh TARBALL}
[ -f "$tarball" ] || { echo "check-dist: $tarball: no such file" >&2; exit 2; }
top=$(cd "$(dirname "$0")/../.." && pwd)
git -C "$top" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    { echo "check-dist: $top is not a git checkout" >&2; exit 2; }

# The tarball's files without its top folder (ompi-efa-VERSION/).
in_tar=$(tar tzf "$tarball" | sed 's|^[^/]*/||' | grep -v '/$' | sort -u)
in_tree=$(cd "$top" && { git ls-files; git ls-files --others --exclude-standard; } |
    grep -vE '(^|/)\.gitignore$|^\.ci/|^debian/' | while IFS= read -r f; do
        [ -f "$f" ] && echo "$f" # a tracked file deleted in the work tree is not there
    done | sort -u)
missing=$(comm -23 <(echo "$in_tree") <(echo "$in_tar"))

if [ -z "$missing" ]; then
    echo "PASS dist/complete ($(echo "$in_tree" | wc -l) files of the checkout in $(basename "$tarball"))"
    echo "1 passed, 0 failed"
    exit 0
fi
while IFS= read -r f; do echo "FAIL dist/missing $f"; done <<<"$missing"
echo "0 passed, $(echo "$missing" | wc -l) failed"
exit 1
