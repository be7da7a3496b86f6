"""remat_dag_exact.py: the exact optimum of remat_ilp.py's integer program on
any DAG of at most 64 forward values (the bench's random DAGs too), by
remat_dag_exact.c's dynamic program over the sets of values present with
dominance (docs/budgets-and-levers.md#the-exact-benchmark). This module
writes the model for it, runs it and checks what it returns: every
schedule is replayed by remat_ilp.replay() (independent of the search) at
the cost the search counted.

solve(m, budget, objective, binary, max_states, bound): the optimum; with a
bound (in the objective's unit, extra over the step's own nodes) the search
cuts every path that cannot end at or under it, and "extra" is None when no
schedule does: a proof that the optimum is above the bound.

remat_dag_exact.py BINARY KEEP_ALL_PLAN.json BUDGET [seconds|flops] [BOUND_PERCENT]
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import remat_ilp  # noqa: E402


class TooLarge(Exception):
    """The search kept more than max_states states at one step."""


def write_model(m, budget, objective, max_states, bound):
    nodes, stages = m["nodes"], m["stages"]
    key = "secs" if objective == "seconds" else "flops"
    rv, sv = remat_ilp.variables(m)
    F, T = len(nodes), len(stages)
    st = [nd["stage"] for nd in nodes]
    out = [f"{F} {T} {budget - m['persistent']} {max_states} {-1 if bound is None else repr(float(bound))}"]
    for nd in nodes:
        deps = sorted(nd["deps"])
        ip = -1 if nd["inplace_of"] is None else nd["inplace_of"]
        out.append(f"{nd['bytes']} {nd['bytes'] + nd['scratch']} {float(nd[key])!r} {ip} {nd['stage']} "
                   f"{len(deps)} {' '.join(map(str, deps))}")
    for t, s in enumerate(stages):
        reads = sorted(s["reads"])
        steps = [k for k in range(F) if st[k] == t or (t, k) in rv]
        keep = [i for i in range(F) if (t + 1, i) in sv]
        out.append(f"{s['pre']} {s['fixed']} {int(s['node'] is not None)} {len(reads)} {' '.join(map(str, reads))} "
                   f"{len(steps)} {' '.join(map(str, steps))} {len(keep)} {' '.join(map(str, keep))}")
    return "\n".join(out) + "\n"


def solve(m, budget, objective="seconds", binary=None, max_states=2_000_000, bound=None, timeout=None):
    """Returns a dict: "extra" (None where no schedule fits, or none within the bound), "R", "S", "states" (the
    most kept at a step), "secs". Raises TooLarge past max_states states or timeout seconds."""
    t0 = time.time()
    key = "secs" if objective == "seconds" else "flops"
    base = sum(nd[key] for nd in m["nodes"])
    total = None if bound is None else base + bound
    try:
        r = subprocess.run([binary], input=write_model(m, budget, objective, max_states, total),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TooLarge(f"over {timeout:g} s") from None
    if r.returncode != 0:
        raise RuntimeError(f"{binary} exited {r.returncode}: {r.stderr.strip()}")
    lines = r.stdout.split("\n")
    head = lines[0].split()
    if head[0] == "toolarge":
        raise TooLarge(f"{head[1]} states at stage {head[2]}, node {head[3]}, over {max_states}")
    if head[0] == "none":
        return {"extra": None, "R": None, "S": None, "states": int(head[1]), "secs": time.time() - t0}
    F, T = len(m["nodes"]), len(m["stages"])
    R = [[0] * F for _ in range(T)]
    S = [[0] * F for _ in range(T)]
    for t in range(T):
        start, rmask = (int(x, 16) for x in lines[1 + t].split())
        for k in range(F):
            R[t][k] = rmask >> k & 1
            S[t][k] = int(start >> k & 1 and not rmask >> k & 1)
    extra = remat_ilp.replay(m, R, S, budget, key)  # raises ReplayError where the schedule does not run
    want = float(head[1]) - base
    if abs(extra - want) > 1e-9 * max(1.0, abs(base)):
        raise remat_ilp.ReplayError(f"remat_dag_exact: the schedule replays at {extra}, the search counted {want}")
    return {"extra": extra, "R": R, "S": S, "states": int(head[2]), "secs": time.time() - t0}


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5, 6):
        sys.exit("usage: remat_dag_exact.py BINARY KEEP_ALL_PLAN.json BUDGET_BYTES [seconds|flops] [BOUND_PERCENT]")
    model = remat_ilp.load(sys.argv[2])
    obj = sys.argv[4] if len(sys.argv) > 4 else "seconds"
    unit = model["step_seconds"] if obj == "seconds" else model["step_flops"]
    bnd = float(sys.argv[5]) / 100 * unit if len(sys.argv) > 5 else None
    res = solve(model, int(sys.argv[3]), obj, sys.argv[1], bound=bnd)
    if res["extra"] is None:
        print(f"no schedule fits {sys.argv[3]} bytes" + (f" within +{sys.argv[5]}%" if bnd is not None else "")
              + f" ({res['states']} states at most, {res['secs']:.1f} s)")
    else:
        print(f"optimum: extra {res['extra']:.9g} {obj} (+{100 * res['extra'] / unit:.2f}% of the step), "
              f"{res['states']} states at most, {res['secs']:.1f} s")
        print(remat_ilp.describe(model, res["R"], res["S"]))
