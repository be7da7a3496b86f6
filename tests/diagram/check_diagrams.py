"""check_diagrams.py: compile a model with `memplan compile -o`, then check
the diagrams against the plan it wrote (plan.json), never against numbers
copied from an earlier run:

  plan.dot      parses with Graphviz's parser (dot_stats); one op node per
                forward/backward/recompute op of every open block and outside
                blocks, one node per phase of every collapsed block, one update
                node per backward node whose gradients feed updates, a cluster
                per repeat block, the batch inputs, a legend; one edge per
                pair of nodes a buffer flows between (derived here from the
                schedule's reads and writes), labelled and saved-for-backward
                edges;
  plan.svg      well-formed SVG whose nodes, clusters and edges are those of
                plan.dot;
  timeline.svg  well-formed SVG with one rect per buffer, in id order, whose
                hover title names the buffer, its dtype, exact bytes and live
                range; the arena, lower-bound (and budget) lines; a live-bytes
                curve per schedule whose highest point is the lower bound.

Then `memplan show plan.json` (with the same --expand/--block) must draw
the same files byte for byte from the plan alone: the graph as SVG and as
DOT, and the timeline; and a PNG of the graph.

usage: check_diagrams.py MEMPLAN DOT_STATS MODEL.yaml OUTDIR [compile flags...]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def block_of(op):
    layer = op["layer"].rpartition(".")[0] if op["phase"] == "update" else op["layer"]
    head, dot, _ = layer.partition(".")
    return head if dot and head and head[-1].isdigit() else None


def expected_graph(plan, expand, block):
    """Nodes the plan graph must have, by the rules in codegen/dot.c."""
    sched = plan["schedule"]
    deep = sum(o["phase"] != "update" for o in sched) > 40
    is_open = lambda b: b is None or expand or not deep or b == block
    ops, blk, upd_keys, inputs, last_writer = set(), set(), set(), set(), {}
    roles = {b["id"]: b["role"] for b in plan["buffers"]}
    node_of = {}
    for i, o in enumerate(sched):
        b = block_of(o)
        if o["phase"] == "update":
            if not is_open(b):
                blk.add((b, "update"))
                node_of[i] = ("blk", b, "update")
            else:
                w = last_writer.get(o["inputs"][0])
                key = ("upd", node_of[w]) if w is not None else ("upd", i)
                upd_keys.add(key)
                node_of[i] = key
        elif is_open(b):
            ops.add(i)
            node_of[i] = ("op", i)
        else:
            blk.add((b, o["phase"]))
            node_of[i] = ("blk", b, o["phase"])
        for x in o["inputs"]:
            if x >= 0 and roles[x] == "input" and x not in last_writer:
                inputs.add(x)
        for x in o["outputs"]:
            if x >= 0:
                last_writer[x] = i
    blocks = {block_of(o) for o in sched} - {None}
    return ops, blk, len(upd_keys), len(inputs), len(blocks), expected_edges(plan, node_of, roles)


def expected_edges(plan, node_of, roles):
    """Drawn edges: one per pair of distinct nodes that a buffer flows between
    (its last writer, or the batch input, to each reader; an accumulating
    output reads its buffer too), however many buffers share the pair."""
    last, pairs = {}, set()
    for j, o in enumerate(plan["schedule"]):
        v = node_of[j]
        for b in o["inputs"]:
            if b >= 0 and (b in last or roles[b] == "input"):
                pairs.add((node_of[last[b]] if b in last else ("in", b), v))
        for b, acc in zip(o["outputs"], o["accumulate"]):
            if b < 0:
                continue
            if acc and b in last:
                pairs.add((node_of[last[b]], v))
            last[b] = j
    return len({(u, v) for u, v in pairs if u != v})


def check_dot(dot_stats, path, plan, expand, block):
    # the graph's name is the plain ID plan: cgraph once read a header in
    # front of a non-interned name and now and then wrote it as HTML, <plan>
    with open(path) as f:
        first = f.readline().rstrip("\n")
    check(first == "digraph plan {", f"{path} starts with {first!r}, not 'digraph plan {{'")
    r = subprocess.run([dot_stats, path], capture_output=True, text=True)
    check(r.returncode == 0, f"{path} does not parse as DOT: {r.stderr.strip()}")
    if r.returncode:
        return {}
    stats, op_ids, blk_ids = {}, set(), set()
    for line in r.stdout.splitlines():
        k, v = line.split(" ", 1)
        if k == "op_node":
            op_ids.add(int(v))
        elif k == "blk_node":
            blk_ids.add(tuple(v.split(":")))
        else:
            stats[k] = int(v)
    ops, blk, nupd, ninputs, nblocks, nedges = expected_graph(plan, expand, block)
    check(op_ids == ops, f"op nodes: {len(op_ids)} drawn, {len(ops)} expected; differ at {sorted(op_ids ^ ops)[:8]}")
    check(blk_ids == blk, f"collapsed block nodes: {sorted(blk_ids)} expected {sorted(blk)}")
    check(stats["upd"] == nupd, f"update nodes: {stats['upd']} drawn, {nupd} expected")
    check(stats["in"] == ninputs, f"batch input nodes: {stats['in']} drawn, {ninputs} expected")
    check(stats["clusters"] == nblocks, f"clusters: {stats['clusters']} drawn, {nblocks} repeat blocks")
    check(stats["legend"] == 1, "no legend node")
    check(stats["edges"] == nedges, f"edges: {stats['edges']} drawn, {nedges} expected from the plan's data flow")
    check(stats["labelled"] > 0 and stats["saved"] > 0, f"edges: {stats}")
    stats["nodes"] = len(op_ids) + len(blk_ids) + stats["upd"] + stats["in"] + stats["legend"]
    return stats


def check_plan_svg(path, stats):
    root = ET.parse(path).getroot()  # raises on malformed XML
    check(root.tag == SVG + "svg", f"{path}: root is {root.tag}")
    groups = {c: [g for g in root.iter(SVG + "g") if g.get("class") == c] for c in ("node", "cluster", "edge")}
    titles = [g.find(SVG + "title").text for g in groups["node"]]
    check("legend" in titles, f"{path}: no legend")
    if stats:
        check(len(titles) == stats["nodes"], f"{path}: {len(titles)} nodes, the DOT has {stats['nodes']}")
        check(len(groups["cluster"]) == stats["clusters"], f"{path}: {len(groups['cluster'])} clusters")
        check(len(groups["edge"]) == stats["edges"], f"{path}: {len(groups['edge'])} edges, the DOT has {stats['edges']}")


def fmt_bytes(b):
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    v, u = float(b), 0
    while v >= 1024 and u < 4:
        v, u = v / 1024, u + 1
    return f"{b} B" if u == 0 else f"{v:.2f} {units[u]}"


def check_timeline(path, plan, budget):
    root = ET.parse(path).getroot()
    check(root.tag == SVG + "svg", f"{path}: root is {root.tag}")
    byid = {g.get("id"): g for g in root.iter(SVG + "g") if g.get("id")}
    bufs = plan["buffers"]
    rects = list(byid["buffers"]) if "buffers" in byid else []
    check(len(rects) == len(bufs) and all(r.tag == SVG + "rect" for r in rects),
          f"{path}: {len(rects)} elements in <g id=buffers>, {len(bufs)} buffers")
    for r, b in zip(rects, bufs):
        title = r.find(SVG + "title").text or ""
        lines = title.split("\n")
        want_live = "the whole step" if b["schedule"] == "both" else f"[{b['live'][0]}, {b['live'][1]})"
        ok = (lines[0] == b["name"] and f", {b['dtype']}, (" in lines[1] and f"({b['bytes']} bytes)" in title
              and want_live in title and b["role"] in r.get("class", "") and float(r.get("height")) > 0)
        check(ok, f"{path}: buffer {b['id']} ({b['name']}): rect class {r.get('class')} title {title!r}")
    for line_id, v in (("arena", "arena_bytes"), ("lower-bound", "lower_bound_bytes")):
        g = byid.get(line_id)
        label = "".join(g.itertext()) if g is not None else ""
        check(fmt_bytes(plan["totals"][v]) in label, f"{path}: line {line_id} labelled {label!r}")
    if budget:
        check(any(e.get("id") == "budget" for e in root.iter()), f"{path}: no budget line")
    curves = [p for p in root.iter(SVG + "polyline") if p.get("class") == "live-bytes"]
    check(len(curves) == 2, f"{path}: {len(curves)} live-bytes curves")
    lb_line = byid.get("lower-bound")
    if curves and lb_line is not None:
        lb_y = float(lb_line.find(SVG + "line").get("y1"))
        top = min(float(pt.split(",")[1]) for c in curves for pt in c.get("points").split())
        check(abs(top - lb_y) < 0.2, f"{path}: live-bytes peaks at y={top}, the lower-bound line is at y={lb_y}")
        npts = len(curves[0].get("points").split())
        check(npts == 2 * len(plan["schedule"]), f"{path}: training curve has {npts} points")


def check_show(memplan, out, flags):
    view = [f for i, f in enumerate(flags) if f == "--expand" or f == "--block" or (i and flags[i - 1] == "--block")]
    plan = os.path.join(out, "plan.json")
    for args, same_as in (([], "plan.svg"), (["--format", "dot"], "plan.dot"), (["--timeline"], "timeline.svg")):
        r = subprocess.run([memplan, "show", plan, *view, *args], capture_output=True)
        check(r.returncode == 0, f"memplan show {args} exited {r.returncode}: {r.stderr.decode()}")
        with open(os.path.join(out, same_as), "rb") as f:
            check(r.stdout == f.read(), f"memplan show {' '.join(args)} differs from compile's {same_as}")
    png = os.path.join(out, "show.png")
    r = subprocess.run([memplan, "show", plan, "-f", "png", "-o", png, *view], capture_output=True)
    check(r.returncode == 0 and open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", f"memplan show -f png: {r.stderr.decode()}")


def main():
    memplan, dot_stats, model, out, *flags = sys.argv[1:]
    expand = "--expand" in flags
    block = flags[flags.index("--block") + 1] if "--block" in flags else None
    budget = "--budget" in flags
    shutil.rmtree(out, ignore_errors=True)
    r = subprocess.run([memplan, "compile", model, "-o", out, *flags], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"memplan exited {r.returncode}: {r.stderr}")
    for f in ("plan.json", "plan.dot", "plan.svg", "timeline.svg"):
        if not os.path.isfile(os.path.join(out, f)):
            sys.exit(f"{out}/{f} was not written (is `memplan compile -o` writing the diagrams?)")
    with open(os.path.join(out, "plan.json")) as f:
        plan = json.load(f)
    stats = check_dot(dot_stats, os.path.join(out, "plan.dot"), plan, expand, block)
    check_plan_svg(os.path.join(out, "plan.svg"), stats)
    check_timeline(os.path.join(out, "timeline.svg"), plan, budget)
    check(not [f for f in os.listdir(out) if re.search(r"\.tmp\.", f)], "temporary files left")
    check_show(memplan, out, flags)
    if failures:
        sys.exit("\n".join(failures))
    print(f"ok: {stats.get('nodes')} nodes, {stats.get('clusters')} clusters, {len(plan['buffers'])} buffer rects")


main()
