"""remat_ilp.py: Checkmate's exact recomputation MILP (Jain et al., MLSys
2020) over a training step that memplan planned, for bench_remat.py.

The input is a keep-everything plan.json (`memplan compile MODEL
--no-micro-batch --fused-loss off -o DIR`, no budget): its train schedule,
its buffers' bytes and live ranges and its ops' FLOPs. Nothing of the
planner's recomputation is read.

What is modelled (docs/budgets-and-levers.md#the-exact-benchmark):
- Nodes: the forward values. Ops that write a buffer in place right after
  the op that computed it (a relu into its conv's output) are one node with
  their FLOPs added: the value in between is never read again, as in the
  plan; one that writes over an older value that dies there (an add) is a
  node of its own that reuses those bytes when that value is freed there.
  A node's bytes are its buffers'; its op-local scratch (a conv's im2col)
  is held while it computes.
- Stages: the keep-all schedule's order. A forward node's stage computes it;
  every backward op that reads a forward buffer is a stage of its own, where
  that buffer must be resident (kept or recomputed in that stage); runs of
  other backward and update ops are one stage each (nothing is recomputed
  there: it would only wait in memory for the next reader).
- Memory, at every step of every stage: the forward values resident
  (Checkmate's U: kept from the previous stage, recomputed in this one, freed
  after their last reader in the stage unless kept), plus the computing
  node's scratch, plus what is fixed at that point of the keep-all plan:
  persistent buffers (parameters, optimizer state, workspace), inputs,
  gradients and backward temporaries with the live ranges the plan gives
  them (a forward buffer that a backward op overwrites in place, the logits
  becoming their gradient, counts as fixed from then on). While a backward
  stage recomputes, that op's own new outputs and scratch are not yet held.
- Objective: the FLOPs of every op run, so the optimum's extra FLOPs are
  the objective less one run of every op.
Not modelled: backward ops are never recomputed and run in the keep-all
order (as memplan's); the arena's packing (the budget is a live-bytes peak,
compared with the plan's `train_peak_bytes`); micro-batches, bf16 storage
and the fused loss (the bench holds them off in memplan too).
"""
import json

# planner/cost.c's CPU roofline, for the objective "seconds": an op takes
# max(FLOPs / peak, bytes of its buffers / bandwidth), peak 350 GFLOP/s for
# matrix products (conv2d, linear, matmul, attention), 20 GFLOP/s for the
# rest, 10 GB/s; a backward op moves twice its forward op's bytes.
GEMM = {"linear", "matmul", "conv2d", "causal_self_attention", "cross_attention", "window_attention",
        "linear_cross_entropy"}


def op_bytes(op, size):
    return sum(size[b] for b in op["inputs"] + op["outputs"] if b >= 0)


def op_seconds(op, size, fwd_bytes=None):
    """memplan's estimate of one run of op (a schedule entry): fwd_bytes, for a
    backward op, its forward op's bytes."""
    by = op_bytes(op, size) if fwd_bytes is None else 2 * fwd_bytes
    return max(op["flops"] / (350e9 if op["op"] in GEMM else 20e9), by / 10e9)


def recompute_seconds(plan):
    """The seconds of a plan's recompute ops under op_seconds."""
    size = {b["id"]: b["bytes"] for b in plan["buffers"]}
    return sum(op_seconds(op, size) for op in plan["schedule"] if op["phase"] == "recompute")


def load(plan_path):
    """The model of a keep-all plan.json: forward nodes and stages."""
    p = json.load(open(plan_path))
    if p["stages"] or p["totals"]["extra_flops"]:
        raise SystemExit(f"{plan_path}: not a keep-everything plan (compile it without --budget)")
    bufs = {b["id"]: b for b in p["buffers"] if b["schedule"] in ("train", "both")}
    sched = p["schedule"]
    n = len(sched)

    # forward nodes: one per forward value; an op that writes in place into
    # the value the previous node computed joins that node (conv + relu),
    # one that writes into an older value (an add over an input that dies
    # there) is a node that reuses its bytes when that value is freed there
    align = p["align"]
    rawsize = {b["id"]: b["bytes"] for b in p["buffers"]}
    size = {i: -(-b["bytes"] // align) * align for i, b in bufs.items()}
    node_of = {}  # buffer id -> the node whose value it holds now
    nodes = []
    for op in sched:
        if op["phase"] != "forward":
            continue
        outs = [b for b in op["outputs"] if b >= 0]
        ins = [b for b in op["inputs"] if b >= 0]
        olds = {node_of[b] for b in outs if b in node_of}
        if len(olds) > 1:
            raise SystemExit(f"{plan_path}: op {op['id']} writes into two forward values")
        deps = {node_of[b] for b in ins if b in node_of}
        if olds and olds == {len(nodes) - 1}:
            k = len(nodes) - 1
        else:
            nodes.append({"bufs": [], "flops": 0, "scratch": 0, "deps": set(), "inplace_of": None})
            k = len(nodes) - 1
            if olds:
                nodes[k]["inplace_of"] = olds.pop()
        nd = nodes[k]
        for b in outs:
            node_of[b] = k
            if b not in nd["bufs"]:
                nd["bufs"].append(b)
        nd.setdefault("layers", []).append(op["layer"])
        nd["flops"] += op["flops"]
        nd["secs"] = nd.get("secs", 0) + op_seconds(op, rawsize)
        nd["pos"] = op["id"]
        nd["name"] = op["layer"]
        if op.get("scratch") is not None:
            nd["scratch"] = max(nd["scratch"], size[op["scratch"]])
        nd["deps"] |= deps - {k}
    # a value read after the step (the loss) is held to the end: fixed bytes
    ends = {b for b in node_of if bufs[b]["live"][1] >= len(sched)}
    for nd in nodes:
        nd["bytes"] = sum(size[b] for b in nd["bufs"] if b not in ends)

    # where a non-forward op first writes a forward buffer, the value ends
    overwritten = {}
    for op in sched:
        if op["phase"] != "forward":
            for b in op["outputs"]:
                if b in node_of and b not in overwritten:
                    overwritten[b] = op["id"]

    # which forward nodes each later op reads (as the forward value)
    reads = [set() for _ in range(n)]
    for op in sched:
        if op["phase"] == "forward":
            continue
        for b in op["inputs"] + [b for b, acc in zip(op["outputs"], op.get("accumulate", [])) if acc]:
            if b in node_of and op["id"] <= overwritten.get(b, n):
                reads[op["id"]].add(node_of[b])

    # fixed bytes at each position: everything live that is not a forward value
    fixed = [0] * n
    fresh = [0] * n  # of which: begun at that position (an op's new outputs, scratch)
    node_scratch = {op["scratch"] for op in sched if op["phase"] == "forward" and op.get("scratch") is not None}
    for b in bufs.values():
        if b["schedule"] == "both" or b["id"] in node_scratch:  # a node's scratch comes with the node
            continue
        lo, hi = b["live"]
        if b["id"] in node_of and b["id"] not in ends:
            if b["id"] not in overwritten:
                continue
            lo = overwritten[b["id"]] + 1
        for q in range(lo, min(hi, n)):
            fixed[q] += size[b["id"]]
        if lo < n and b["id"] not in node_of:
            fresh[lo] += size[b["id"]]

    persistent = sum(size[i] for i, b in bufs.items() if b["schedule"] == "both")

    # stages
    stages = []
    fwd_at = {nd["pos"]: k for k, nd in enumerate(nodes)}
    q = 0
    while q < n:
        if q in fwd_at:
            k = fwd_at[q]
            stages.append({"node": k, "reads": set(), "fixed": fixed[q], "pre": fixed[q], "pos": [q]})
            q += 1
            continue
        if sched[q]["phase"] == "forward":  # an in-place writer merged into a later node's stage
            q += 1
            continue
        if reads[q]:
            stages.append({"node": None, "reads": reads[q], "fixed": fixed[q], "pre": fixed[q] - fresh[q], "pos": [q]})
            q += 1
            continue
        r = q
        while r < n and r not in fwd_at and sched[r]["phase"] != "forward" and not reads[r]:
            r += 1
        most = max(fixed[q:r])
        stages.append({"node": None, "reads": set(), "fixed": most, "pre": most, "pos": list(range(q, r))})
        q = r
    stage_of = {s["node"]: t for t, s in enumerate(stages) if s["node"] is not None}
    for k, nd in enumerate(nodes):
        nd["stage"] = stage_of[k]
        nd["users"] = sorted(j for j, m in enumerate(nodes) if k in m["deps"])
        nd["readers"] = sorted(t for t, s in enumerate(stages) if k in s["reads"])
    fwd = {op["layer"]: op_bytes(op, rawsize) for op in sched if op["phase"] == "forward"}
    step_secs = sum(op_seconds(op, rawsize, None if op["phase"] == "forward" else fwd.get(op["layer"], 0))
                    for op in sched if op["phase"] in ("forward", "backward"))
    return {"plan": p, "nodes": nodes, "stages": stages, "persistent": persistent,
            "step_flops": p["totals"]["step_flops"], "step_seconds": step_secs, "peak": p["totals"]["train_peak_bytes"]}


def keep_all_profile(m):
    """Per stage, the bytes the model holds when every value is kept until its
    last reader, and the most the plan's own live ranges hold over the
    stage's positions (aligned sizes, persistent buffers included): the two
    must be equal, stage by stage (the model counts what the planner counts)."""
    nodes, stages, p = m["nodes"], m["stages"], m["plan"]
    last = [max([nd["stage"]] + nd["readers"] + [nodes[j]["stage"] for j in nd["users"]]) for nd in nodes]
    n = len(p["schedule"])
    live = [0] * n
    for b in p["buffers"]:
        if b["schedule"] == "eval":
            continue
        size = -(-b["bytes"] // p["align"]) * p["align"]
        lo, hi = (0, n) if b["schedule"] == "both" else b["live"]
        for q in range(lo, min(hi, n)):
            live[q] += size
    out = []
    for t, s in enumerate(stages):
        held = sum(nd["bytes"] for k, nd in enumerate(nodes) if nd["stage"] <= t <= last[k])
        extra = 0
        if s["node"] is not None:
            nd = nodes[s["node"]]
            extra = nd["scratch"] - (nodes[nd["inplace_of"]]["bytes"] if nd["inplace_of"] is not None else 0)
            pos = range(nodes[s["node"] - 1]["pos"] + 1 if s["node"] else 0, nd["pos"] + 1)
        else:
            pos = s["pos"]
        out.append((m["persistent"] + s["fixed"] + held + extra, max(live[q] for q in pos)))
    return out


class ReplayError(SystemExit):
    """A schedule that does not run in the model; uncaught, it ends the bench with its message."""


def variables(m):
    """Where the MILP has variables: the (stage, node) pairs of R (a stage that
    computes, after the node's own stage, up to its last use) and of S."""
    nodes, stages = m["nodes"], m["stages"]
    F = len(nodes)
    st = [nd["stage"] for nd in nodes]
    comp = [s["node"] is not None or bool(s["reads"]) for s in stages]
    # a value is of use up to the last stage that reads it or a node that
    # reads it (nodes in reverse order: users come later): no variables after
    useful = [0] * F
    for k in reversed(range(F)):
        useful[k] = max([st[k]] + nodes[k]["readers"] + [useful[j] for j in nodes[k]["users"]])
    sv = {(t, k) for k in range(F) for t in range(st[k] + 1, useful[k] + 1)}
    return {(t, k) for t, k in sv if comp[t]}, sv


def cbc_result(log):
    """CBC 2.10's verdict from its log: (result, objective, lower bound), both of
    the variables' part of the objective (the MPS file has no constant), None
    where the log has none; where the search completed the bound is the
    objective. The bound is printed to 3 decimals: 0.001 is taken off."""
    import re

    res = re.search(r"^Result - (.*)$", log, re.M)
    obj = re.search(r"^Objective value:\s+(\S+)", log, re.M)
    lb = re.search(r"^Lower bound:\s+(\S+)", log, re.M)
    result = res.group(1).strip() if res else None
    objective = float(obj.group(1)) if obj else None
    if result == "Optimal solution found":
        return result, objective, objective
    return result, objective, float(lb.group(1)) - 1e-3 if lb else None


def formulate(m, budget, objective="flops", start=None):
    """Checkmate's MILP at a live-bytes budget, as a PuLP problem (no solver
    runs). Returns a dict: "prob", "R" and "S" (the variables by (stage,
    node); 1 where a node's own stage computes it), "key" and "scale" (the
    objective's unit), and with start=(R, S), a schedule, "start_breaks": the
    MILP's constraints it breaks with every variable at its value in the
    schedule and every A at the values' exact liveness there, computed apart
    from the A rows (so a row that claims more than liveness breaks a start
    that reaches it), by name: memory_T_K at stage T computing node K,
    memory_T_op at its backward op, read_T_K, input_T_K_D, held_T_K,
    live_T_I_K_N (the lower bounds on A, below)."""
    import pulp

    nodes, stages = m["nodes"], m["stages"]
    T, F = len(stages), len(nodes)
    st = [nd["stage"] for nd in nodes]
    cap = budget - m["persistent"]
    prob = pulp.LpProblem("checkmate", pulp.LpMinimize)
    rv, sv = variables(m)
    R, S = {}, {}
    for t in range(T):
        for k in range(F):
            if st[k] == t:
                R[t, k] = 1
            elif (t, k) in rv:  # R[t][k]: node k (re)computed in stage t
                R[t, k] = pulp.LpVariable(f"R_{t}_{k}", cat="Binary")
            if (t, k) in sv:
                S[t, k] = pulp.LpVariable(f"S_{t}_{k}", cat="Binary")

    def r(t, k):
        return R.get((t, k), 0)

    def s(t, k):
        return S.get((t, k), 0)

    key = "secs" if objective == "seconds" else "flops"
    # seconds in microseconds: CBC's absolute tolerances (1e-4 and below) and
    # its log's 3 decimals are then nothing beside a step's ~1e5 us
    scale = 1e6 if key == "secs" else 1
    prob += pulp.lpSum(r(t, k) * (nodes[k][key] * scale) for t in range(T) for k in range(F))
    for t in range(T):
        for k in range(F):
            if isinstance(r(t, k), pulp.LpVariable) or r(t, k) == 1:
                for d in nodes[k]["deps"]:
                    prob += r(t, k) <= r(t, d) + s(t, d), f"input_{t}_{k}_{d}"
            if (t + 1, k) in S:
                prob += S[t + 1, k] <= s(t, k) + r(t, k), f"held_{t + 1}_{k}"
        for k in stages[t]["reads"]:
            prob += r(t, k) + s(t, k) >= 1, f"read_{t}_{k}"
    # memory, step by step inside each stage. Checkmate's paper frees a value
    # with a binary FREE[t,i,k] per edge and step; here value i counts at
    # step k of stage t where it is present (kept into the stage, or
    # recomputed at a step before k) and needed (read at step k or after in
    # the stage, by this stage's backward op, or kept for the next). Each
    # need implies i is in the stage (the input_, held_ and read_ rows: kept
    # into it or recomputed in it), so for i computed before k (i < k) a need
    # alone makes i present: one need counts its bytes directly, several
    # through a continuous A[t,i,k] in [0,1] at least each. For i after k only
    # a kept i is present: A >= S[t,i] + need - 1 (McCormick) and
    # A >= need - R[t,i] (a need without the recompute means kept). Only
    # memory rows bound A from above, so at any integer R, S the least A is
    # exact liveness: the same integer optimum, no extra binaries, a tighter
    # relaxation than McCormick's alone and fewer rows.
    live = []
    for t in range(T):
        avail = [k for k in range(F) if st[k] <= t]
        nxt = [s(t + 1, i) if t + 1 < T else 0 for i in range(F)]
        for k in avail:
            if (t, k) not in R:
                continue  # not computed in this stage
            held = pulp.lpSum([r(t, k) * (nodes[k]["bytes"] + nodes[k]["scratch"])])
            for i in avail:
                if i >= k and not (t, i) in S:
                    continue  # not yet computed, not kept
                if i < k and (t, i) not in S and (t, i) not in R:
                    continue  # neither kept into the stage nor computed in it
                need = [r(t, j) for j in nodes[i]["users"]
                        if j >= k and (t, j) in R and not (j == k and nodes[k]["inplace_of"] == i)]
                need += [nxt[i]] if isinstance(nxt[i], pulp.LpVariable) else []
                if i in stages[t]["reads"]:
                    need = [1]
                if not need:
                    continue
                if i < k and any(not isinstance(nv, pulp.LpVariable) for nv in need):
                    held += nodes[i]["bytes"]  # read here, or k's input in k's own stage: present
                    continue
                if i < k and len(need) == 1:
                    held += need[0] * nodes[i]["bytes"]
                    continue
                a_v = pulp.LpVariable(f"A_{t}_{i}_{k}", 0, 1)
                lows = list(need) if i < k else [s(t, i) + nv - 1 for nv in need] + [nv - r(t, i) for nv in need]
                for n, lo in enumerate(lows):
                    prob += a_v >= lo, f"live_{t}_{i}_{k}_{n}"
                live.append((a_v, t, i, k))
                held += a_v * nodes[i]["bytes"]
            if not held.keys():  # a constant: k's own stage, holding only its inputs
                if held.constant > cap - stages[t]["pre"]:
                    prob += pulp.LpVariable(f"over_{t}_{k}", 0, 0) >= 1, f"memory_{t}_{k}"  # nothing fits
                continue
            prob += held <= cap - stages[t]["pre"], f"memory_{t}_{k}"
        if stages[t]["node"] is None:  # the backward op (or a run without reads)
            prob += pulp.lpSum(nodes[i]["bytes"] * (1 if i in stages[t]["reads"] else nxt[i])
                               for i in avail) <= cap - stages[t]["fixed"], f"memory_{t}_op"
    out = {"prob": prob, "R": R, "S": S, "key": key, "scale": scale, "start_breaks": None}
    if start is not None:
        SR, SS = start
        for (t, k), v in R.items():
            if isinstance(v, pulp.LpVariable):
                v.setInitialValue(SR[t][k])
        for (t, k), v in S.items():
            v.setInitialValue(SS[t][k])
        for a_v, t, i, k in live:  # exact liveness of i at step k of stage t, from the schedule alone
            nxt = SS[t + 1][i] if t + 1 < T else 0
            present = SS[t][i] or (SR[t][i] and i < k)
            needed = nxt or i in stages[t]["reads"] or any(
                SR[t][j] for j in nodes[i]["users"] if j >= k and not (j == k and nodes[k]["inplace_of"] == i))
            a_v.setInitialValue(1 if present and needed else 0)
        # the start in the MILP's own constraints (replay() runs it apart from them)
        out["start_breaks"] = [n for n, c in prob.constraints.items() if not c.valid(1e-6 * max(1, abs(c.constant)))]
    return out


def solve(m, budget, time_limit=60, threads=1, schedule=None, objective="flops", start=None):
    """Checkmate's MILP (formulate()) at a live-bytes budget, in CBC. Returns a
    dict: "extra" (FLOPs, or seconds with objective "seconds": each op's
    op_seconds() instead of its FLOPs; None when there is no solution),
    "bound" (CBC's proven lower bound on the extra, None when it gave none),
    "status" ("optimal", "time limit" (the best found), "infeasible" or "no
    solution in time"), "secs" (the solve's wall time), "start" (with
    start=(R, S), a schedule given to CBC as its MIP start: "accepted",
    "rejected" or "unused" (CBC solved the problem without it), and
    "start_breaks", formulate()'s. A solution is replayed (replay()) before it
    is returned; a list `schedule` receives its R and S matrices (describe()
    prints them)."""
    import os
    import tempfile
    import time

    import pulp

    nodes, stages = m["nodes"], m["stages"]
    T, F = len(stages), len(nodes)
    f = formulate(m, budget, objective, start)
    prob, R, S, key, scale = f["prob"], f["R"], f["S"], f["key"], f["scale"]
    out = {"extra": None, "bound": None, "start": None, "start_breaks": f["start_breaks"]}
    fd, log_path = tempfile.mkstemp(prefix="remat_ilp_", suffix=".log")
    os.close(fd)
    t0 = time.time()
    try:
        prob.solve(pulp.COIN_CMD(msg=False, timeLimit=time_limit, threads=threads, warmStart=start is not None,
                                 logPath=log_path))
        log = open(log_path).read()
    finally:
        os.unlink(log_path)
    out["secs"] = time.time() - t0
    result, cbc_obj, cbc_lb = cbc_result(log)
    const, base = prob.objective.constant, sum(nd[key] for nd in nodes)
    if cbc_lb is not None:
        out["bound"] = max(0.0, (cbc_lb + const) / scale - base)
    if start is not None:
        import re

        # CBC says which: a cost; "could not be used" (infeasible in its
        # model); nothing where it solved the problem before looking at it
        # (the cost it prints is its presolved model's, without what presolve fixed)
        ms = re.search(r"MIPStart provided solution with cost", log)
        out["start"] = "accepted" if ms else "rejected" if "could not be used" in log else "unused"
    if prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        # infeasible, or no solution found within the time limit
        out["status"] = "infeasible" if pulp.LpStatus[prob.status] == "Infeasible" else "no solution in time"
        return out
    got = pulp.value(prob.objective)
    if cbc_obj is None or abs(cbc_obj + const - got) > 1e-6 * max(1.0, abs(got)):
        raise SystemExit(f"remat_ilp: CBC's log says {result!r}, objective {cbc_obj}, its solution {got - const}: "
                         "the log was misread (a CBC other than 2.10?); no bound can be trusted")
    val = {key: round(v.value()) if isinstance(v, pulp.LpVariable) else v for key, v in R.items()}
    comp_r = [[val.get((t, k), 0) for k in range(F)] for t in range(T)]
    comp_s = [[round(S[t, k].value()) if (t, k) in S else 0 for k in range(F)] for t in range(T)]
    out["extra"] = replay(m, comp_r, comp_s, budget, key)
    if schedule is not None:
        schedule[:] = [comp_r, comp_s]
    out["status"] = "optimal" if prob.sol_status == pulp.LpSolutionOptimal else "time limit"
    return out


def replay(m, R, S, budget, key="flops", info=None):
    """Runs a solution's schedule (R[t][k]: node k computed in stage t, S[t][k]:
    held into stage t) freeing every value after its last use, independently
    of the MILP's constraints; checks every read finds its value and the peak
    is within the budget (else raises ReplayError). Returns the extra FLOPs
    (or seconds, key "secs"); a dict `info` receives the peak and its stage."""
    nodes, stages = m["nodes"], m["stages"]
    T, F = len(stages), len(nodes)
    peak, peak_at = 0, 0
    for t, st in enumerate(stages):
        nxt = S[t + 1] if t + 1 < T else [0] * F
        todo = [k for k in range(F) if R[t][k]]
        held = {i for i in range(F) if S[t][i]}
        if t and not held <= {i for i in range(F) if S[t - 1][i] or R[t - 1][i]}:
            raise ReplayError(f"replay: stage {t} holds a value the stage before neither held nor computed")

        def needed(i, after):
            return nxt[i] or i in st["reads"] or any(j > after and j in todo for j in nodes[i]["users"])

        held = {i for i in held if needed(i, -1)}
        for k in todo:
            if not nodes[k]["deps"] <= held:
                raise ReplayError(f"replay: stage {t} computes {nodes[k]['name']} without its inputs")
            mem = sum(nodes[i]["bytes"] for i in held) + nodes[k]["bytes"] + nodes[k]["scratch"]
            i = nodes[k]["inplace_of"]
            if i is not None and i in held and not needed(i, k):
                mem -= nodes[i]["bytes"]
            if m["persistent"] + st["pre"] + mem > peak:
                peak, peak_at = m["persistent"] + st["pre"] + mem, t
            held = {i for i in held | {k} if needed(i, k)}
        if not st["reads"] <= held:
            raise ReplayError(f"replay: stage {t}'s backward op reads a value not held")
        if m["persistent"] + st["fixed"] + sum(nodes[i]["bytes"] for i in held) > peak:
            peak, peak_at = m["persistent"] + st["fixed"] + sum(nodes[i]["bytes"] for i in held), t
    if info is not None:
        info.update(peak=peak, stage=peak_at)
    if peak > budget:
        op = m["plan"]["schedule"][stages[peak_at]["pos"][0]]
        raise ReplayError(f"replay: the schedule peaks at {peak} bytes in stage {peak_at} (keep-all position "
                          f"{op['id']}, {op['phase']} {op['layer']}), over its budget {budget}")
    return sum(nodes[k][key] for t in range(T) for k in range(F) if R[t][k]) - sum(nd[key] for nd in nodes)


def from_plan(m, plan):
    """A plan's recomputation (plan.json compiled with a budget, the same model
    and options as the keep-all plan m was loaded from) as the MILP's R and S:
    returns (R, S, None), or (None, None, why) where it cannot be said exactly
    in the MILP's variables. Each recompute op is its forward op rerun in the
    stage of the next op of the keep-all schedule (or the first stage after
    it that computes); a node is recomputed where all its ops are, once; a
    read takes the newest copy, held (S) from where it was computed to that
    read, as memplan's schedule does. The result is checked by replay() at
    the plan's own peak; the extra FLOPs and seconds must be the plan's."""
    nodes, stages, keep = m["nodes"], m["stages"], m["plan"]["schedule"]
    T, F = len(stages), len(nodes)
    rv, sv = variables(m)
    comp = {t for t, _ in rv} | {nd["stage"] for nd in nodes}
    node_of = {layer: k for k, nd in enumerate(nodes) for layer in nd["layers"]}
    stage_at = {q: t for t, s in enumerate(stages) for q in s["pos"]}
    R = [[1 if nd["stage"] == t else 0 for nd in nodes] for t in range(T)]
    pending, q = [], 0
    for op in plan["schedule"]:
        if op["phase"] == "recompute":
            if op["layer"] not in node_of:
                return None, None, f"it recomputes {op['layer']}, which no forward node of the model computes"
            pending.append(op["layer"])
            continue
        if q >= len(keep) or (op["op"], op["phase"], op["layer"]) != (keep[q]["op"], keep[q]["phase"],
                                                                       keep[q]["layer"]):
            return None, None, (f"its op {op['id']} ({op['phase']} {op['layer']}) is not the keep-all schedule's op "
                                f"{q} with the recompute ops taken out")
        if pending:
            t = stage_at.get(q)
            while t is not None and t < T and t not in comp:
                t += 1
            if t is None or t >= T:
                return None, None, f"it recomputes {', '.join(pending)} before op {op['id']}, where no stage computes"
            for k in sorted({node_of[layer] for layer in pending}):
                ran = sorted(x for x in pending if node_of[x] == k)
                if ran != sorted(nodes[k]["layers"]):
                    return None, None, (f"before op {op['id']} it reruns {' '.join(ran)}, where the MILP's node "
                                        f"{nodes[k]['name']} is {' '.join(nodes[k]['layers'])} once each (the keep-all "
                                        "plan writes them in place, into one value)")
                if (t, k) not in rv:
                    return None, None, f"it recomputes {nodes[k]['name']} in stage {t}, after its last use"
                R[t][k] = 1
            pending = []
        q += 1
    if q != len(keep) or pending:
        return None, None, "its schedule ends before the keep-all schedule's"
    S = [[0] * F for _ in range(T)]
    for k in range(F):
        last = nodes[k]["stage"]
        for t in range(last, T):
            last = t if R[t][k] else last
            if k in stages[t]["reads"] or any(R[t][j] and k in nodes[j]["deps"] for j in nodes[k]["users"]):
                for u in range(last + 1, t + 1):
                    S[u][k] = 1
    if any(S[t][k] and (t, k) not in sv for t in range(T) for k in range(F)):
        return None, None, "it holds a value past its last use"
    info = {}
    try:
        extra = replay(m, R, S, plan["totals"]["train_peak_bytes"], "flops", info)
    except ReplayError as e:
        return None, None, f"replayed in the MILP's model: {e}"
    if extra != plan["totals"]["extra_flops"]:
        return None, None, f"the MILP's R recomputes {extra} FLOPs, the plan {plan['totals']['extra_flops']}"
    secs, mine = replay(m, R, S, plan["totals"]["train_peak_bytes"], "secs"), recompute_seconds(plan)
    if abs(secs - mine) > 1e-9 * m["step_seconds"]:
        return None, None, f"the MILP's R recomputes {secs:.6g} s under op_seconds, the plan's recompute ops {mine:.6g}"
    return R, S, None


def describe(m, R, S):
    """A solution as text: per stage that computes a value again, its
    position in the keep-all schedule, the op there, what it recomputes, and
    the values held into it."""
    nodes, stages, sched = m["nodes"], m["stages"], m["plan"]["schedule"]
    lines = []
    for t, st in enumerate(stages):
        again = [nodes[k]["name"] for k in range(len(nodes)) if R[t][k] and nodes[k]["stage"] != t]
        held = [nodes[k]["name"] for k in range(len(nodes)) if S[t][k]]
        if again:
            op = sched[st["pos"][0]]
            lines.append(f"stage {t} (pos {st['pos'][0]}, {op['phase']} {op['layer']}): recomputes "
                         f"{' '.join(again)}; holds {' '.join(held)}")
    return "\n".join(lines)


if __name__ == "__main__":  # remat_ilp.py KEEP_ALL_PLAN.json BUDGET_BYTES [TIME_LIMIT]: the optimum's schedule
    import sys

    model = load(sys.argv[1])
    sol = []
    res = solve(model, int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 60, schedule=sol)
    print(f"extra {res['extra']} FLOPs, at least {res['bound']} ({res['status']}, {res['secs']:.1f} s)")
    if sol:
        print(describe(model, *sol))
