#!/usr/bin/env bash
# Every repository path that README.md and docs/*.md name must exist in the
# checkout (a tracked file, or a directory holding tracked files; without
# git, any file or directory under the top).
# What counts as a path:
#  - in a code span: a word containing "/" or ending in a known extension
#    (.sh .py .c .cpp .hpp .h .md .txt .ini .am .ac .m4 .in .png .supp);
#  - in a markdown link: the target, relative to the document's folder;
#  - in plain text and indented code: a word containing "/" and ending in a
#    known extension.
# Left out: URLs, absolute paths (/tmp, /usr, /dev/shm), $VARS, ../shared
# and other paths above a document, globs (* or {}), placeholders (<...>,
# a DIR or NAME component), build outputs (_build*/, _install*/,
# bench/results/, what .gitignore ignores, a program built from a tracked
# NAME.c or NAME.cpp). A path whose first part is not a top-level entry of
# the repository is another project's (ompi/..., rdma/fi_ext.h: the list
# below), a component's name (mtl/ofi: no extension) or the tail of a
# tracked path (core/msg_flow.cpp for common/core/msg_flow.cpp); a bare file
# name must be some tracked file's name unless it is another project's.
# Needs bash 4, perl, awk and realpath; no build.
# Prints "PASS docpaths FILE" or "FAIL docpaths FILE: PATH does not exist"
# (one line per missing path), then "N passed, N failed", one count per
# document; exits 1 on a failure.
#   tests/check-doc-paths.sh
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2

exts='sh|py|c|cpp|hpp|h|md|txt|ini|am|ac|m4|in|png|supp'
# Files of Open MPI and libfabric that the documents name by their bare name.
external_names=" btl.h mpi.h opal_config.h opal_config_bottom.h osc_rdma_dynamic.c "
# Generated files the documents name (.gitignore ignores them; used without git).
generated_names=" Makefile Makefile.in configure efa_build_config.h "
# First parts of other projects' paths (Open MPI's tree, libfabric's and the
# system's headers): mtl/ofi or osc/rdma name components, not paths.
external_dirs=" ompi opal orte oshmem prrte 3rd-party config rdma sys "

tracked=$(mktemp)
trap 'rm -f "$tracked"' EXIT
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    have_git=1
    # every tracked file and every folder above one
    git ls-files | awk '{ print; n = split($0, p, "/"); d = p[1]
                          for (i = 2; i <= n; i++) { print d; d = d "/" p[i] } }' |
        sort -u >"$tracked"
else
    have_git=0
    find . -path ./.git -prune -o -print | sed 's|^\./||' | sort -u >"$tracked"
fi
declare -A exists=() basename_of=() toplevel=()
while IFS= read -r p; do
    exists[$p]=1
    basename_of[${p##*/}]=1
    [[ $p == */* ]] || toplevel[$p]=1
done <"$tracked"

is_tail() { # is_tail PATH: PATH is the tail of a tracked path
    awk -v s="/$1" '{ t = "/" $0; if (length(t) >= length(s) &&
                      substr(t, length(t) - length(s) + 1) == s) { f = 1; exit } }
                    END { exit !f }' "$tracked"
}

build_output() { # build_output PATH
    case $1 in
    _build/* | _build | _build-* | _install/* | _install | _install-* | bench/results/* | bench/results) return 0 ;;
    esac
    if [ "$have_git" -eq 1 ]; then
        git check-ignore -q --no-index -- "$1" 2>/dev/null && return 0
    else # what .gitignore ignores by its bare name
        [[ $generated_names == *" ${1##*/} "* ]] && return 0
    fi
    [[ $1 == */*.* || $1 == *.* ]] && return 1
    [ -n "${exists[$1.c]:-}" ] || [ -n "${exists[$1.cpp]:-}" ]
}

candidates() { # candidates DOC: "KIND<TAB>WORD" per word of a code span, link target or word of text
    perl -00 -ne '
        s/\n/ /g;
        while (/`([^`]+)`/g) { print "code\t$_\n" for split " ", $1 }
        my $t = $_;
        while ($t =~ /\]\(([^)\s]+)\)/g) { print "link\t$1\n" }
        $t =~ s/`[^`]*`/ /g;
        $t =~ s/\]\([^)]*\)/]/g;
        print "text\t$_\n" for split " ", $t;
    ' "$1"
}

present() { # present PATH: a tracked file or a folder holding one (without git: any file)
    [ -n "${exists[${1%/}]:-}" ]
}

check_word() { # check_word DOC KIND WORD: prints the path the word names, if it is missing
    local doc=$1 kind=$2 w=$3 piece p docdir
    case $w in *://*) return ;; esac
    if [ "$kind" = link ]; then
        w=${w%%#*}
        [ -n "$w" ] || return
        docdir=$(dirname "$doc")
        [ "$docdir" = . ] || w=$docdir/$w
        w=$(realpath -m --relative-to="$top" "$top/$w")
        case $w in ../* | /*) return ;; esac
        build_output "$w" || present "$w" || echo "$w"
        return
    fi
    # "commit:path", "VAR=path", "file.c:123": each piece on its own
    for piece in ${w//[=:]/ }; do
        p=$piece
        while [[ $p == [\(\"\'\<]* || $p == "\$("* ]]; do
            case $p in "\$("*) p=${p#??} ;; *) p=${p#?} ;; esac
        done
        while [[ $p == *[\),.\;\"\'\>] ]]; do p=${p%?}; done
        p=${p#./}
        [ -n "$p" ] || continue
        case $p in /* | ~* | ../* | *'$'* | *'*'* | *'{'* | *'}'* | *'<'* | *'>'*) continue ;; esac
        if [ "$kind" = text ]; then
            [[ $p == */* && $p =~ \.($exts)$ ]] || continue
        else
            [[ $p == */* || $p =~ \.($exts)$ ]] || continue
        fi
        [[ /$p/ =~ /[A-Z][A-Z0-9_]*/ ]] && continue # a placeholder: DIR, NAME
        build_output "${p%/}" && continue
        if [[ $p != */* ]]; then
            [ -n "${basename_of[$p]:-}" ] || [[ $external_names == *" $p "* ]] || echo "$p"
        elif [ -n "${toplevel[${p%%/*}]:-}" ]; then
            present "$p" || echo "$p"
        elif [[ $p =~ \.($exts)$ ]] && [[ $external_dirs != *" ${p%%/*} "* ]]; then
            is_tail "$p" || echo "$p" # core/msg_flow.cpp: common/core/msg_flow.cpp
        fi
    done
}

pass=0
fail=0
for doc in README.md docs/*.md; do
    [ -f "$doc" ] || continue
    missing=$(candidates "$doc" | while IFS=$'\t' read -r kind word; do
        check_word "$doc" "$kind" "$word"
    done | awk '!seen[$0]++')
    if [ -z "$missing" ]; then
        echo "PASS docpaths $doc"
        pass=$((pass + 1))
    else
        while IFS= read -r p; do
            echo "FAIL docpaths $doc: $p does not exist"
        done <<<"$missing"
        fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
