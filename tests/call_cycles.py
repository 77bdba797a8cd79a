#!/usr/bin/env python3
"""No call cycle between the project's source files, read from the built
objects (nm: which file defines a function, which files call it).  A cycle
means a lower file calls back into one that calls it, which docs/DESIGN.md
rules out: lower layers report up through a completion callback or a
handler pointer.  The files of one class split by job (the matching engine's
engine*.cpp) count as one.

usage: call_cycles.py BUILD_DIR   (prints PASS or FAIL and the edges)"""
import collections
import os
import re
import subprocess
import sys

# Files that are one unit: the parts of one class.
UNITS = [(re.compile(r"^engine(_\w+)?$"), "engine*")]


def unit(obj):
    name = re.sub(r"^.*_la-", "", os.path.basename(obj)[:-2])
    for pat, u in UNITS:
        if pat.match(name):
            return u
    return name


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TW":
            defined.add(f[2])
        elif len(f) == 2 and f[0] == "U":
            used.add(f[1])
    return defined, used


def cycles(objs):
    defs, uses = collections.defaultdict(set), collections.defaultdict(set)
    for o in objs:
        d, u = symbols(o)
        defs[unit(o)] |= d
        uses[unit(o)] |= u
    owner = {s: n for n, d in defs.items() for s in d}
    graph = {n: {owner[s] for s in u if s in owner and owner[s] != n} for n, u in uses.items()}
    # Tarjan's strongly connected components.
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def objects(d):
    """The objects the Makefile links now (a tree built before a file moved
    keeps the old object too)."""
    rule = "efa-print-objects:\n\t@echo $(foreach v,$(filter %_la_OBJECTS,$(.VARIABLES)),$($(v)))\n"
    out = subprocess.run(["make", "-s", "--no-print-directory", "-C", d, "-f", "Makefile", "-f", "-",
                          "efa-print-objects"], input=rule, capture_output=True, text=True).stdout
    objs = []
    for lo in sorted(set(out.split())):
        o = os.path.join(d, os.path.dirname(lo), ".libs", os.path.basename(lo)[:-3] + ".o")
        if os.path.exists(o):
            objs.append(o)
    return objs


def main():
    build = sys.argv[1]
    bad = []
    total = 0
    for lib in ("common", "mtl_efa", "btl_efa"):
        objs = objects(os.path.join(build, lib))
        total += len(objs)
        for comp in cycles(objs):
            bad.append("%s: %s" % (lib, " <-> ".join(comp)))
    if total == 0:
        print("FAIL no call cycle between files: no objects under %s (build first)" % build)
        return 1
    if bad:
        print("FAIL call cycles between files: " + "; ".join(bad))
        return 1
    print("PASS no call cycle between the files of common, mtl_efa and btl_efa (%d objects)" % total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
