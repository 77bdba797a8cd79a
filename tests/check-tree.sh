#!/usr/bin/env bash
# The shape of the tree (docs/DESIGN.md, "Pieces"), checked so that it stays:
# - no source file over 600 lines (C, C++, shell, Python, Makefile.am);
# - no cycle among the project's #include "..." edges;
# - the components include only common/include/ and the OPAL glue's headers
#   from common/ (the core's and the node stack's C++ stay private to it);
# - the C seam: each function of common/include/ defined once in common/,
#   none a shim forwarding to a free C++ function;
# - no call cycle between the source files of common, mtl_efa and btl_efa
#   (tests/call_cycles.py, from the objects of the build directory BUILD,
#   default _build).
# Prints one line per check and "N passed, N failed".
#   tests/check-tree.sh [BUILD]
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$top/_build}
cd "$top" || exit 1
pass=0
fail=0
ok() { echo "PASS $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; fail=$((fail + 1)); }

sources=$(git ls-files 2>/dev/null | grep -E '\.(c|h|cpp|hpp|py|sh|am|m4)$|(^|/)(run|rsh-agent)$' |
    grep -vE '^(config/|tests/fuzz/corpus/)')
[ -n "$sources" ] || sources=$(find common mtl_efa btl_efa tests bench scripts -type f \
    \( -name '*.[ch]' -o -name '*.[ch]pp' -o -name '*.py' -o -name '*.sh' -o -name Makefile.am \) |
    grep -v '/corpus/')

long=""
for f in $sources; do
    [ -f "$f" ] || continue
    n=$(wc -l <"$f")
    [ "$n" -gt 600 ] && long="$long $f($n)"
done
if [ -z "$long" ]; then ok "no source file over 600 lines"; else bad "source files over 600 lines:$long"; fi

pyout=$(python3 - "$top" <<'PY'
import os, re, sys
top = sys.argv[1]
dirs = ["common", "mtl_efa", "btl_efa", "tests", "bench"]
files = {}
for d in dirs:
    for root, _, names in os.walk(os.path.join(top, d)):
        if "/corpus" in root or "/_build" in root:
            continue
        for n in names:
            if n.endswith((".c", ".h", ".cpp", ".hpp")):
                files.setdefault(n, []).append(os.path.join(root, n))
inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
edges = {}
for name, paths in files.items():
    for p in paths:
        with open(p, errors="replace") as fh:
            for m in inc.finditer(fh.read()):
                tgt = os.path.basename(m.group(1))
                if tgt in files:
                    edges.setdefault(p, set()).update(files[tgt])
# Cycles by depth-first search.
state, stack, cycles = {}, [], []
def visit(v):
    state[v] = 1
    stack.append(v)
    for w in sorted(edges.get(v, ())):
        if state.get(w) == 1:
            cycles.append(stack[stack.index(w):] + [w])
        elif w not in state:
            visit(w)
    stack.pop()
    state[v] = 2
sys.setrecursionlimit(10000)
for v in sorted(edges):
    if v not in state:
        visit(v)
rel = lambda p: os.path.relpath(p, top)
if cycles:
    print("FAIL include cycles: " + "; ".join(" -> ".join(map(rel, c)) for c in cycles[:5]))
else:
    print("PASS no include cycle among %d files" % sum(len(v) for v in files.values()))
# What the components may include from common/.
allowed = {os.path.basename(p) for p in os.listdir(os.path.join(top, "common", "include"))}
allowed |= {"common_efa.h", "common_efa_compat.h", "common_efa_release.h"}
private = {n for n, ps in files.items() if any("/common/" in p and "/common/include/" not in p for p in ps)} - allowed
leaks = []
for d in ("mtl_efa", "btl_efa"):
    for root, _, names in os.walk(os.path.join(top, d)):
        for n in names:
            if n.endswith((".c", ".h")):
                p = os.path.join(root, n)
                with open(p, errors="replace") as fh:
                    for m in inc.finditer(fh.read()):
                        if os.path.basename(m.group(1)) in private:
                            leaks.append("%s includes %s" % (rel(p), m.group(1)))
if leaks:
    print("FAIL components include the core's private headers: " + "; ".join(leaks))
else:
    print("PASS the components include only common/include/ and the glue's header")
# The C seam (docs/DESIGN.md, "The C seam, one rule"): every function a
# header of common/include/ declares is defined once, in common/, and no
# definition only forwards to a free C++ function of the core.
import glob
decl = re.compile(r"^(?!static|#|\s|typedef|struct|enum|union|extern|\}|/)[^;{]*?\b(efa_\w+)\s*\(", re.M)
defn = re.compile(r"^(?!\s|#|/|static\b)[^;{()]*?\b(efa_\w+)\s*\(", re.M)
# (a call of a class, efa::Name::..., is the class's seam, not a forward)
fwd = re.compile(r"\{\s*(return\s+)?efa::(?:[a-z_]\w*::)*[a-z_]\w*\s*\([^;]*\);\s*\}")
def ends_before(text, pos, first, second):
    a, b = text.find(first, pos), text.find(second, pos)
    return a != -1 and (b == -1 or a < b)
declared = {}
for h in sorted(glob.glob(os.path.join(top, "common", "include", "*.h"))):
    text = open(h, errors="replace").read()
    for m in decl.finditer(text):
        if ends_before(text, m.end(), ";", "{"):
            declared.setdefault(m.group(1), rel(h))
defined, forwards = {}, []
for f in sorted(glob.glob(os.path.join(top, "common", "**", "*.c*"), recursive=True)):
    if not f.endswith((".c", ".cpp")):
        continue
    text = open(f, errors="replace").read()
    for m in defn.finditer(text):
        if m.group(1) in declared and ends_before(text, m.end(), "{", ";"):
            defined.setdefault(m.group(1), []).append(rel(f))
            body = text[text.find("{", m.end()):]
            if fwd.match(body):
                forwards.append("%s in %s" % (m.group(1), rel(f)))
seam = ["%s (%s) is not defined in common/" % (n, h) for n, h in sorted(declared.items()) if n not in defined]
seam += ["%s is defined %d times: %s" % (n, len(v), ", ".join(v)) for n, v in sorted(defined.items()) if len(v) > 1]
seam += ["%s only forwards to a C++ function" % x for x in forwards]
if seam or not declared:
    print("FAIL the C seam: " + ("; ".join(seam) or "no declaration found"))
else:
    print("PASS the C seam: each of the %d functions of common/include/ is defined once, none a forwarding shim" % len(declared))
PY
)
[ -n "$pyout" ] && echo "$pyout"
pass=$((pass + $(grep -c '^PASS' <<<"$pyout")))
fail=$((fail + $(grep -c '^FAIL' <<<"$pyout")))
[ "$(grep -cE '^(PASS|FAIL)' <<<"$pyout")" -eq 3 ] || { echo "FAIL the include and C seam checks did not run"; fail=$((fail + 1)); }
if python3 "$top/tests/call_cycles.py" "$build"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
