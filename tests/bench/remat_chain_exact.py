"""remat_chain_exact.py: the exact optimum of remat_ilp.py's integer program
(Checkmate's MILP, the same nodes, stages, memory rows and objective) by
dynamic programming, for graphs small and chain-like enough that the sets
of values held at once can be enumerated (the bench's conv chain, where
CBC's LP bound stays far below the optimum; docs/budgets-and-levers.md#the-exact-benchmark).

What it searches: every integer R, S of the MILP in a normal form that
loses no optimum, stage by stage; within a stage, step by step in the
nodes' order, as formulate() writes its rows.
- A value held into a stage (S) is needed there (read by the stage's
  backward op, an input of a node computed there, or held into the next
  stage): a held value that is not can be dropped, which keeps every row
  and the objective (it frees bytes at the stage before).
- A value is not both held into a stage and recomputed in it, and a
  recomputed value is needed in its stage: dropping the recompute lowers
  the objective and no row rises.
- When a value becomes present (held in, or computed at its step) it gets
  its fate: the step of the last node in the stage that reads it, or the
  stage's end (read by the backward op, or held into the next stage). A
  row at step k counts every present value whose fate is k or later (k's
  own input written in place over excepted, as formulate() does) plus k's
  bytes and scratch where k is computed: with every fate the value's real
  last use this is the least A of formulate()'s rows at those R and S
  (liveness); other fates only count more, and a fate at a step that
  computes nothing is cut. Every row of formulate() is checked (those at
  steps that compute nothing too), and the backward op's row at the end.
So the least cost over these paths is the MILP's optimum; states are kept
per (stage, step, present values and fates) at their least cost. Every
schedule returned is checked by remat_ilp.replay() (independent of the
rows) at its cost; the bench and the unit test also check it against every
row of formulate() (PuLP, no solver).

remat_chain_exact.py KEEP_ALL_PLAN.json BUDGET [seconds|flops]: the optimum and its schedule.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import remat_ilp  # noqa: E402


class TooLarge(Exception):
    """The state space passed max_states: the graph is not small or chain-like enough."""


def solve(m, budget, objective="seconds", max_states=3_000_000):
    """The MILP's optimum at a live-bytes budget, exactly. Returns a dict:
    "extra" (the least extra FLOPs, or seconds with objective "seconds", as
    remat_ilp.solve's; None where no schedule fits), "R" and "S" (its
    schedule, remat_ilp.replay's form), "states" (how many were kept),
    "secs". Raises TooLarge past max_states states in one step."""
    t0 = time.time()
    nodes, stages = m["nodes"], m["stages"]
    T, F = len(stages), len(nodes)
    key = "secs" if objective == "seconds" else "flops"
    st = [nd["stage"] for nd in nodes]
    cap = budget - m["persistent"]
    rv, sv = remat_ilp.variables(m)
    b = [nd["bytes"] for nd in nodes]
    work = [nd["bytes"] + nd["scratch"] for nd in nodes]
    cost = [nd[key] for nd in nodes]
    deps = [sorted(nd["deps"]) for nd in nodes]
    inplace = [nd["inplace_of"] for nd in nodes]
    INF = (float("inf"),)
    bits = [1 << k for k in range(F)]

    def size(mask):
        return sum(b[i] for i in range(F) if mask >> i & 1)

    layer = {0: 0}  # the values held into stage t (a bit mask) -> least cost
    back = []  # per stage: held into t+1 -> (held into t, the nodes computed in t)
    most = 0
    for t in range(T):
        s = stages[t]
        reads = sum(bits[i] for i in s["reads"])
        room = cap - s["pre"]  # formulate()'s memory_T_K rows
        steps = [k for k in range(F) if st[k] == t or (t, k) in rv]
        # state: the values present and still needed (a bit mask) -> (least cost, their bytes, held into t, computed)
        cur = {h: (c, size(h), h, 0) for h, c in layer.items()}
        for k in steps:
            nxt = {}
            own = st[k] == t
            dk = sum(bits[d] for d in deps[k])
            drops = [sum(bits[d] for j, d in enumerate(deps[k]) if x >> j & 1) for x in range(1 << len(deps[k]))]
            drops = [(x, size(x)) for x in drops if not x & reads]  # a value the backward op reads stays to the end
            for p, (c, by, held, rmask) in cur.items():
                if not own and by <= room and nxt.get(p, INF)[0] > c:  # k not computed: its row still holds
                    nxt[p] = (c, by, held, rmask)
                if p & bits[k] or p & dk != dk:
                    continue  # held already (no recompute), or an input missing
                c2 = c + cost[k]
                for x, bx in drops:  # the inputs whose last use is k
                    row = by + work[k] - (b[inplace[k]] if inplace[k] is not None and x >> inplace[k] & 1 else 0)
                    if row > room:
                        continue
                    q = p & ~x
                    for keep in (True, False) if own else (True,):  # the stage's own node may be needed later only
                        q2 = q | bits[k] if keep else q
                        if nxt.get(q2, INF)[0] > c2:
                            nxt[q2] = (c2, by - bx + (b[k] if keep else 0), held, rmask | bits[k])
            cur = nxt
            most = max(most, len(cur))
            if len(cur) > max_states:
                raise TooLarge(f"{len(cur)} states at stage {t}, step {k}, over {max_states}")
        # the stage's end: every read present; what else is present is held into the next stage where it can
        # be (else it was needed up to here); a read value held on or not; the backward op's row
        layer, bk = {}, {}
        keepable = sum(bits[i] for i in range(F) if (t + 1, i) in sv)
        for p, (c, by, held, rmask) in cur.items():
            if p & reads != reads:
                continue
            if s["node"] is None and by > cap - s["fixed"]:
                continue
            for nh in {p & keepable & ~reads, p & keepable}:
                if layer.get(nh, float("inf")) > c:
                    layer[nh], bk[nh] = c, (held, rmask)
        back.append(bk)
        if not layer:
            return {"extra": None, "R": None, "S": None, "states": most, "secs": time.time() - t0}
    best = layer[0]
    R = [[0] * F for _ in range(T)]
    S = [[0] * F for _ in range(T)]
    h = 0
    for t in reversed(range(T)):
        held, rmask = back[t][h]
        for k in range(F):
            R[t][k] = rmask >> k & 1
            S[t][k] = held >> k & 1
        h = held
    extra = remat_ilp.replay(m, R, S, budget, key)  # raises ReplayError where the schedule does not run
    want = best - sum(cost)
    if abs(extra - want) > 1e-9 * max(1.0, abs(sum(cost))):
        raise remat_ilp.ReplayError(f"remat_chain_exact: the schedule replays at {extra}, the DP counted {want}")
    return {"extra": extra, "R": R, "S": S, "states": most, "secs": time.time() - t0}


def row_breaks(m, budget, R, S, objective="seconds"):
    """The rows of remat_ilp.formulate() that schedule breaks (PuLP, no solver)."""
    return remat_ilp.formulate(m, budget, objective, start=(R, S))["start_breaks"]


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: remat_chain_exact.py KEEP_ALL_PLAN.json BUDGET_BYTES [seconds|flops]")
    model = remat_ilp.load(sys.argv[1])
    obj = sys.argv[3] if len(sys.argv) > 3 else "seconds"
    res = solve(model, int(sys.argv[2]), obj)
    if res["extra"] is None:
        print(f"no schedule fits {sys.argv[2]} bytes ({res['secs']:.1f} s)")
    else:
        unit = model["step_seconds"] if obj == "seconds" else model["step_flops"]
        print(f"optimum: extra {res['extra']:.9g} {obj} (+{100 * res['extra'] / unit:.2f}% of the step), "
              f"{res['states']} states at most, {res['secs']:.1f} s")
        print(remat_ilp.describe(model, res["R"], res["S"]))
