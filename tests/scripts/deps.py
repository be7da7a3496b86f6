#!/usr/bin/env python3
"""deps.py: the source files' dependencies run one way (no circle).

usage: deps.py --src ROOT --build BUILD --dir D... [--inc DIR...] [--nm NM] OBJECT...

The graph's nodes are the files of the --dir folders (.c, .h, .cu, .cuh). File A
depends on file B when A has `#include "B"` (resolved from A's folder, then each
--inc folder) or when A's object calls or reads a symbol B's object defines (nm:
A's undefined symbols against the others' defined ones). OBJECTs are the
compiled sources of those folders (CMake's $<TARGET_OBJECTS:...>, under BUILD).
A header is a file of its own: a header including another for its types, as
levers.h includes driver.h for PlanRequest, is an edge between the headers, not
from levers.c to driver.c; a circle is made of includes and calls.

Prints the layers (each file after everything it depends on) and exits 0, or
prints every circle, each edge with its reasons, and exits 1.
"""
import argparse
import os
import re
import subprocess
import sys

SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(root, path):
    """planner/ops.c for ROOT/planner/ops.c."""
    return os.path.relpath(path, root)


def source_of_object(root, build, obj):
    """The source CMake compiled into `obj`: BUILD/planner/CMakeFiles/T.dir/__/runtime/x.c.o is
    ROOT/planner/../runtime/x.c."""
    rel = os.path.relpath(obj, build)
    m = re.match(r"(.*?)/?CMakeFiles/[^/]+\.dir/(.*)\.o(bj)?$", rel)
    if not m:
        sys.exit(f"deps.py: {obj}: not an object under a CMake target folder of {build}")
    parts = [".." if p == "__" else p for p in m.group(2).split("/")]
    return os.path.normpath(os.path.join(root, m.group(1), *parts))


def nm_symbols(nm, obj):
    """(defined, undefined) global symbols of an object file; w: an undefined weak one."""
    out = subprocess.run([nm, "-P", "-g", obj], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        (undefined if f[1] in "Uw" else defined).add(f[0])
    return defined, undefined


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--dir", action="append", required=True, help="a source folder to check, from ROOT")
    ap.add_argument("--inc", action="append", default=[], help="an include folder, from ROOT")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("objects", nargs="*")
    a = ap.parse_args()
    root, build = os.path.realpath(a.src), os.path.realpath(a.build)

    files = []
    for d in a.dir:
        for dirpath, _, names in os.walk(os.path.join(root, d)):
            files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(SOURCE_EXT)]
    modules = {module_of(root, f) for f in files}
    edges = {}  # (a, b) -> reasons

    def edge(x, y, why):
        if x != y and y in modules:
            edges.setdefault((x, y), []).append(why)

    incdirs = [os.path.join(root, i) for i in a.inc]
    for f in files:
        with open(f, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                for d in [os.path.dirname(f)] + incdirs:
                    p = os.path.normpath(os.path.join(d, m.group(1)))
                    if os.path.exists(p):
                        edge(module_of(root, f), module_of(root, p), f'#include "{m.group(1)}" (line {n})')
                        break

    definer, needs = {}, {}
    # CTest passes $<TARGET_OBJECTS:...> as one ';'-separated argument; "": a target this build lacks (no CUDA)
    for obj in [o for arg in a.objects for o in arg.split(";") if o]:
        if not os.path.isfile(obj):
            sys.exit(f"deps.py: {obj}: no such object file (build the project first)")
        src = source_of_object(root, build, os.path.realpath(obj))
        mod = module_of(root, src)
        if mod not in modules:
            continue  # generated (runtime_files.c) or outside the checked folders
        defined, undefined = nm_symbols(a.nm, obj)
        for s in defined:
            definer[s] = mod
        needs.setdefault(mod, set()).update(undefined)
    if not definer:
        sys.exit("deps.py: no object of the checked folders was given: nothing to check calls with")
    for mod, syms in needs.items():
        for s in sorted(syms):
            if s in definer:
                edge(mod, definer[s], f"uses {s}")

    graph = {m: sorted(y for (x, y) in edges if x == m) for m in sorted(modules)}
    cycles = strongly_connected(graph)
    if cycles:
        for scc in cycles:
            cyc = one_cycle(graph, scc)
            print(f"FAIL: a circle: {' -> '.join(cyc + [cyc[0]])}")
            for x, y in zip(cyc, cyc[1:] + cyc[:1]):
                why = edges[(x, y)]
                print(f"  {x} -> {y}: {'; '.join(why[:6])}{'; ...' if len(why) > 6 else ''}")
        return 1
    layer = {}

    def depth(m):
        if m not in layer:
            layer[m] = 1 + max((depth(y) for y in graph[m]), default=-1)
        return layer[m]

    for m in graph:
        depth(m)
    print(f"ok: {len(modules)} files, {len(edges)} dependencies, no circle; layers from the bottom:")
    for k in range(max(layer.values()) + 1):
        print(f"  {k}: {' '.join(m for m in sorted(layer) if layer[m] == k)}")
    return 0


def strongly_connected(graph):
    """Tarjan's strongly connected components of more than one file (iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = n[0]
        n[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(graph[w])))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                scc = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    scc.append(w)
                    if w == v:
                        break
                if len(scc) > 1:
                    out.append(sorted(scc))
    return out


def one_cycle(graph, scc):
    """A shortest circle through the component's first file (breadth-first)."""
    inside, start = set(scc), scc[0]
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in graph[v]:
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1]
                if w in inside and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return scc


if __name__ == "__main__":
    sys.exit(main())
