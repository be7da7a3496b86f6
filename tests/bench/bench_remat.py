"""bench_remat.py --memplan MEMPLAN --workdir DIR [--time-limit S] [--seeds N]
[--graphs NAME,...] [--budgets BYTES,...] [--objective both|seconds|flops] [--exact auto|off|only]
[--exact-states N] [--exact-time S] [--dag-exact BINARY] [--prove RATIO] [--prove-time S] [--prove-states N]
[--json FILE] [--check]: memplan's
recomputation against the exact integer program (issue 29; docs/budgets-and-levers.md#the-exact-benchmark).

For each generated graph (remat_graphs.py: the U-Net, the DenseNet block,
a conv chain, random layered DAGs), at each budget `memplan sweep` reports
and at 90%..50% of the keep-all peak, it compiles with `--budget B
--no-micro-batch --fused-loss off` and every precision lever at fp32
(recomputation alone) and solves Checkmate's MILP
(remat_ilp.py, PuLP + CBC, at most S seconds a solve) at memplan's own
live-bytes peak, or at B where memplan does not fit, once per objective:
"seconds", memplan's own (planner/cost.c's CPU roofline,
remat_ilp.op_seconds: a concat's copy costs its bytes, where its FLOPs are
none; memplan's extra is its plan's recompute ops' seconds), and "flops"
(plan.json's "extra FLOPs"); `--objective both`, the default, solves both.
`--budgets` keeps only the given budgets (in bytes, as the rows' MiB come
from: the sweep's and the grid's), to re-run the unproven ones.

memplan's plan is CBC's MIP start (remat_ilp.from_plan: its recompute ops as
the MILP's R and S, replayed in the MILP's model at the plan's peak; where
the plan cannot be said exactly in the MILP's variables the row says why
and CBC starts cold), so CBC's best is never worse than memplan's and its
time goes to the lower bound. Each row prints both extras in percent of the
step, CBC's proven lower bound, the ratio of the steps against the best
found, (S + memplan's) / (S + best), and against the bound, the ratio
proven at most; the last line names the worst of each, per objective.
The exact DP runs beside CBC at each budget (`--exact auto`, the default):
remat_dag_exact (--dag-exact BINARY, by default beside --memplan; the
MILP's optimum on any DAG by a search over the sets of values present,
tests/bench/remat_dag_exact.c) cut at memplan's own extra, so the optimum,
at most that, is never cut (at most --exact-time s, 120, and --exact-states
states a step); without the binary, remat_chain_exact.py (the chain, the
U-Net, the DenseNet). Its optimum must be at most CBC's best found and at
least CBC's bound (equal where CBC proves it), its schedule must satisfy
every row of the MILP, and it is the row's best found and lower bound
("exact DP" in the row), so the proven ratio is exact; where the search
under memplan's extra finds nothing, memplan's plan is optimal in the
MILP's model. `--exact only` skips CBC where the DP applies; `--exact off`
runs CBC alone. Where neither proves memplan within --prove (1.05) in its
own objective (seconds), remat_dag_exact searches for a schedule at most
(step + memplan's) / 1.05 - step (at most --prove-time s, 600, and
--prove-states states a step): none proves the ratio ("proven within
1.05x" in the row, the bound that threshold); one found is a better
schedule, the row's best found.
--json FILE also writes every row (one per budget and objective; bytes,
the extras in the objective's unit, the bound, both ratios, the solver's
status and seconds, the warm start's fate).

--check (the unit test remat_graphs): only generate the graphs, compile and
verify each keep-all plan, check the MILP's memory model counts the plan's
live bytes at every stage, convert each graph's plan at 60% of keep-all (or
its least) into the MILP's start and replay it (the U-Net's and DenseNet's
must convert), check the start satisfies every row of the MILP (with PuLP;
no solver runs), and read CBC's log ends.

Without PuLP or CBC it prints how to install them and exits 0, skipped.
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import remat_chain_exact  # noqa: E402
import remat_dag_exact  # noqa: E402
import remat_graphs  # noqa: E402
import remat_ilp  # noqa: E402

MIB = 2.0**20
# the end of CBC 2.10.8's log, where the search completed and where it stopped
# on its time limit (with a lower bound): what remat_ilp.cbc_result must read
CBC_LOGS = [("Result - Optimal solution found\n\nObjective value:                2.86290221\n"
             "Enumerated nodes:               0\n", ("Optimal solution found", 2.86290221, 2.86290221)),
            ("Result - Stopped on time limit\n\nObjective value:                26938397094.00000000\n"
             "Lower bound:                    24878424571.430\nGap:                            0.08\n",
             ("Stopped on time limit", 26938397094.0, 24878424571.429))]


def check_exact(where, at, o, model, ex, res, step):
    """The exact DP's optimum (remat_dag_exact.solve, or remat_chain_exact.solve) beside CBC's solve at the same
    live-bytes budget (not run: its values None): the DP's schedule must satisfy every row of the MILP, be no
    worse than any schedule CBC found and no better than CBC's proven bound (CBC's float noise is far below 1e-6
    of the step), else the bench stops. Returns the row's best found, lower bound and status: the DP's optimum,
    proven."""
    tol = 1e-6 * step
    if ex["extra"] is None:
        if res["extra"] is not None:
            sys.exit(f"{where}: the exact DP finds no schedule within {at} live bytes where CBC found one, "
                     f"{res['extra']}, that replays: the DP cuts feasible schedules (tests/bench/remat_dag_exact.c, "
                     "remat_chain_exact.py)")
        return None, None, "infeasible"
    breaks = remat_chain_exact.row_breaks(model, at, ex["R"], ex["S"], o)
    if breaks:
        sys.exit(f"{where}: the exact DP's schedule breaks the MILP's rows {', '.join(breaks[:5])}: its memory "
                 "model is not formulate()'s (tests/bench/remat_dag_exact.c, remat_chain_exact.py)")
    if res["extra"] is not None and ex["extra"] > res["extra"] + tol:
        sys.exit(f"{where}: the exact DP's optimum, {ex['extra']}, is above a schedule CBC found, {res['extra']}: "
                 "the DP misses feasible schedules (tests/bench/remat_dag_exact.c, remat_chain_exact.py)")
    if res["bound"] is not None and res["bound"] > ex["extra"] + tol or res["status"] == "infeasible":
        sys.exit(f"{where}: CBC's lower bound, {res['bound']} ({res['status']}), is above the exact DP's schedule, "
                 f"{ex['extra']}, which replays and satisfies every row of the MILP: the bound is wrong")
    return ex["extra"], ex["extra"], "optimal"

# CBC's proven optima of the MILP (remat_ilp.solve, CBC 2.10.8, "optimal"; 2026-12-03): the chain at 8.75 MiB
# (19-24 s) and 5.75 MiB (1 s), the U-Net at 50% of keep-all (25 s, where the nodes' scratch binds): (graph, live
# bytes, objective, extra seconds or FLOPs). --check requires the exact DP's to be the same: both are replay()'s
# sums of the same nodes' costs, so equal schedules give equal floats and equal-cost ones differ by rounding, far
# below 1e-9 of the step. A planner change that alters a keep-all plan (its bytes or stages) changes them:
# re-solve with remat_ilp.py KEEP_ALL_PLAN BYTES.
EXACT_OPTIMA = [("chain", 9172224, "seconds", 0.004919319405714289), ("chain", 9172224, "flops", 1209794560),
                ("chain", 6026496, "seconds", 0.04000766829714286), ("chain", 6026496, "flops", 9980084224),
                ("unet", 99224448, "seconds", 0.14399644818285703),
                ("random-1", 21468928, "seconds", 0.0019931264000000014)]


def check_exact_optima(name, model, pulp_ok, dag_bin):
    """--check: the exact DPs where CBC proved the optimum (EXACT_OPTIMA): remat_chain_exact's (chain, U-Net) and
    remat_dag_exact's (every graph; uncut where that is fast, cut just above the optimum) give the same optimum and
    a schedule that satisfies every row of the MILP (with PuLP); remat_dag_exact cut just under it finds none."""
    for _, at, o, want in [x for x in EXACT_OPTIMA if x[0] == name]:
        step = model["step_seconds"] if o == "seconds" else model["step_flops"]
        small = not name.startswith("random")  # the random DAGs' uncut searches take minutes
        runs = [("remat_chain_exact", lambda: remat_chain_exact.solve(model, at, o), want)] if small else []
        if dag_bin:
            for cut, expect in ([(None, want)] if small else []) + [(want + 1e-7 * step, want),
                                                                    (want - 1e-7 * step, None)]:
                runs.append(("remat_dag_exact" + (f" cut at +{100 * cut / step:.5f}%" if cut else ""),
                             lambda cut=cut: remat_dag_exact.solve(model, at, o, dag_bin, bound=cut, timeout=120),
                             expect))
        for what, run, expect in runs:
            ex = run()
            if expect is None:
                if ex["extra"] is not None:
                    sys.exit(f"{name} at {at} bytes ({o}): {what} finds a schedule at {ex['extra']}, under CBC's "
                             f"proven optimum {want} (bench_remat.EXACT_OPTIMA)")
                print(f"  {what} at {at / MIB:.2f} MiB ({o}): no schedule, in {ex['secs']:.1f} s")
                continue
            if ex["extra"] is None or abs(ex["extra"] - want) > 1e-9 * step:
                sys.exit(f"{name} at {at} bytes ({o}): {what}'s optimum is {ex['extra']}, CBC proved {want} "
                         "(bench_remat.EXACT_OPTIMA)")
            breaks = remat_chain_exact.row_breaks(model, at, ex["R"], ex["S"], o) if pulp_ok else []
            if breaks:
                sys.exit(f"{name} at {at} bytes ({o}): {what}'s schedule breaks the MILP's rows "
                         f"{', '.join(breaks[:5])}")
            print(f"  {what} at {at / MIB:.2f} MiB ({o}): +{100 * want / step:.2f}% of the step, CBC's proven "
                  f"optimum, in {ex['secs']:.1f} s" + (", every row of the MILP holds" if pulp_ok else ""))


def prove(model, at, o, step, e, extra, bound, dag_bin, a, where):
    """Where no exact optimum is known: remat_dag_exact's search for a schedule at most (step + e) / a.prove - step,
    e memplan's extra. None found proves the optimum above it: the row's lower bound, memplan within a.prove. One
    found is replayed (remat_dag_exact.solve) and must be above CBC's bound. Returns extra, bound and the row's note."""
    thr = (step + e) / a.prove - step
    try:
        pr = remat_dag_exact.solve(model, at, o, dag_bin, a.prove_states, bound=thr, timeout=a.prove_time)
    except remat_dag_exact.TooLarge as err:
        return extra, bound, f"; no proof within {a.prove:g}x by the DP: {err}"
    if pr["extra"] is None:
        note = (f"; DP: no schedule under +{100 * thr / step:.2f}%, proven within {a.prove:g}x "
                f"({pr['states']} states a step at most, {pr['secs']:.1f} s)")
        return extra, thr if bound is None or thr > bound else bound, note
    if bound is not None and pr["extra"] < bound - 1e-6 * step:
        sys.exit(f"{where}: the DP's schedule, {pr['extra']}, replays under CBC's lower bound, {bound}: the DP or "
                 "the MILP is wrong (tests/bench/remat_dag_exact.c)")
    note = f"; DP found +{100 * pr['extra'] / step:.2f}% ({pr['secs']:.1f} s)"
    return pr["extra"] if extra is None or pr["extra"] < extra else extra, bound, note


def compile_plan(memplan, model, out, *opts):
    r = subprocess.run([memplan, "compile", model, "--no-micro-batch", "--fused-loss", "off", "--precision", "fp32",
                        "--param-precision", "fp32", "--opt-state", "fp32", "-o", out, *opts],
                       capture_output=True, text=True)
    if r.returncode == 0:
        if "plan verified" not in r.stdout:
            sys.exit(f"{model}: compiled without 'plan verified':\n{r.stdout}")
        return json.load(open(os.path.join(out, "plan.json"))), None
    m = re.search(r"Smallest budget that fits: --budget (\d+)", r.stderr)
    if r.returncode != 1 or not m:
        sys.exit(f"{model} {' '.join(opts)}: memplan exited {r.returncode}:\n{r.stderr}")
    return None, int(m.group(1))


def sweep_budgets(memplan, model):
    r = subprocess.run([memplan, "sweep", model], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{model}: memplan sweep exited {r.returncode}:\n{r.stderr}")
    return [int(line.split()[0]) for line in r.stdout.splitlines() if re.match(r"^\d+ ", line)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--time-limit", type=float, default=60)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--graphs", default="")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--json", help="also write every row to this file")
    ap.add_argument("--objective", choices=("both", "seconds", "flops"), default="both")
    ap.add_argument("--budgets", default="", help="only these budgets, in bytes, comma-separated")
    ap.add_argument("--exact", choices=("auto", "off", "only"), default="auto")
    ap.add_argument("--exact-states", type=int, default=150000)
    ap.add_argument("--dag-exact", default="", help="remat_dag_exact's binary (default: beside --memplan)")
    ap.add_argument("--prove", type=float, default=1.05,
                    help="where no exact optimum: prove memplan within this ratio (0: off)")
    ap.add_argument("--prove-states", type=int, default=2000000)
    ap.add_argument("--prove-time", type=float, default=600)
    ap.add_argument("--exact-time", type=float, default=120)
    a = ap.parse_args()
    dag_bin = a.dag_exact or os.path.join(os.path.dirname(os.path.abspath(a.memplan)), "remat_dag_exact")
    if not os.access(dag_bin, os.X_OK):
        if a.dag_exact:
            sys.exit(f"bench_remat: --dag-exact {a.dag_exact}: not an executable")
        dag_bin = None
    if not a.check:
        try:
            import pulp

            ok = pulp.COIN_CMD(msg=False).available()
        except ImportError:
            ok = False
        if not ok:
            print("bench_remat: skipped: the exact solver needs PuLP and CBC; on Debian "
                  "`apt-get install python3-pulp coinor-cbc`, then run this with /usr/bin/python3")
            return 0
    if a.check and dag_bin:  # a model naming a value out of range (a shift past 64 bits) is refused, exit 2
        r = subprocess.run([dag_bin], input="2 1 100 10 -1\n1 1 1.0 -1 0 0\n1 1 1.0 -1 0 1 0\n0 0 1 1 7 0 0\n",
                           capture_output=True, text=True)
        if r.returncode != 2 or "malformed" not in r.stderr:
            sys.exit(f"remat_dag_exact: a read of value 7 of 2 gave exit {r.returncode}: {r.stdout}{r.stderr}")
    if a.check:
        for log, want in CBC_LOGS:
            got = remat_ilp.cbc_result(log)
            if got[0] != want[0] or any(abs(x - y) > 1e-6 * abs(y) for x, y in zip(got[1:], want[1:])):
                sys.exit(f"remat_ilp.cbc_result reads {got} from CBC's log ending\n{log}\nwhere it says {want}")
    try:
        import pulp  # noqa: F401

        pulp_ok = True
    except ImportError:
        pulp_ok = False
        if a.check:
            print("remat_graphs: PuLP is missing (`apt-get install python3-pulp`, run with /usr/bin/python3): the "
                  "plans are not checked against the MILP's rows")
    paths = remat_graphs.write_all(os.path.join(a.workdir, "models"), a.seeds)
    if a.graphs:
        names = [os.path.basename(p)[:-5] for p in paths]
        unknown = [g for g in a.graphs.split(",") if g not in names]
        if unknown:
            sys.exit(f"bench_remat: --graphs: no graph {', '.join(unknown)} (the graphs: {', '.join(names)})")
        paths = [p for p in paths if os.path.basename(p)[:-5] in a.graphs.split(",")]
    objectives = ("seconds", "flops") if a.objective == "both" else (a.objective,)
    worst = {o: {"found": (0.0, ""), "proven": (0.0, "")} for o in objectives}
    unbounded = {o: 0 for o in objectives}
    only_ilp, unproven, solves, rows, table, starts, exact_rows = [], 0, 0, 0, [], [0, 0], 0
    for path in paths:
        name = os.path.basename(path)[:-5]
        compile_plan(a.memplan, path, os.path.join(a.workdir, name, "keep"))
        model = remat_ilp.load(os.path.join(a.workdir, name, "keep", "plan.json"))
        for t, (got, want) in enumerate(remat_ilp.keep_all_profile(model)):
            if got != want:
                sys.exit(f"{name}: keeping everything, the MILP's memory model counts {got} bytes at stage {t} "
                         f"(schedule positions {model['stages'][t]['pos']}), the plan's live ranges {want}: "
                         "they must count the same")
        layers = remat_graphs.layer_count(open(path).read())
        print(f"{name}: {layers} layers, {len(model['nodes'])} forward values, {len(model['stages'])} stages; "
              f"keep-all peak {model['peak'] / MIB:.2f} MiB (the model's: the same), "
              f"step {model['step_flops'] / 1e9:.2f} GFLOP, est. {model['step_seconds'] * 1e3:.1f} ms")
        peak = model["peak"]
        if a.check:
            check_exact_optima(name, model, pulp_ok, dag_bin)
        if a.check:
            # the warm start's conversion, without a solver: the plan at 60% of
            # keep-all (or memplan's smallest budget) as the MILP's R and S,
            # replayed at the plan's peak, its extra FLOPs the plan's
            b = int(peak * 0.6)
            plan, smallest = compile_plan(a.memplan, path, os.path.join(a.workdir, name, "60"), "--budget", str(b))
            if not plan:
                plan, _ = compile_plan(a.memplan, path, os.path.join(a.workdir, name, "least"), "--budget",
                                       str(smallest))
            R, S, why = remat_ilp.from_plan(model, plan)
            if why:
                print(f"  plan at {plan['totals']['train_peak_bytes'] / MIB:.2f} MiB: no MILP start: {why}")
                if name in ("unet", "densenet"):  # whole-graph plans (remat.c) convert: the test's anchors
                    sys.exit(f"{name}: memplan's plan at {plan['budget_bytes']} bytes as the MILP's schedule: {why}")
                continue
            n = sum(map(sum, R)) - len(model["nodes"])
            print(f"  plan at {plan['totals']['train_peak_bytes'] / MIB:.2f} MiB: {n} recomputed nodes, replayed in "
                  f"the MILP's model within its peak, {100 * plan['totals']['extra_flops'] / model['step_flops']:.2f}% "
                  "extra FLOPs as the plan's")
            if pulp_ok:  # every row of the MILP (its tightenings too) holds at this feasible schedule
                breaks = remat_ilp.formulate(model, plan["totals"]["train_peak_bytes"], start=(R, S))["start_breaks"]
                if breaks:
                    sys.exit(f"{name}: memplan's plan at {plan['budget_bytes']} bytes replays within its peak, but "
                             f"breaks the MILP's constraints {', '.join(breaks[:5])}: a row cuts a feasible "
                             "schedule (tests/bench/remat_ilp.py formulate())")
                print("  and satisfies every constraint of the MILP there")
            continue
        grid = [int(peak * f / 10) for f in range(9, 4, -1)]
        budgets = sorted(set(sweep_budgets(a.memplan, path) + grid), reverse=True)
        if a.budgets:
            every, want = budgets, {int(x) for x in a.budgets.split(",")}
            budgets = [b for b in budgets if b in want]
            if not budgets:
                print(f"  --budgets: none of its budgets (they are {','.join(map(str, every))}); skipped")
        too_large = None  # the least budget where the exact DP had too many states: so has every one above
        print(f"  {'budget MiB':>10} {'memplan peak':>12} {'objective':>9} {'memplan extra':>13} {'ILP extra':>10} "
              f"{'ILP bound':>10} {'ratio':>6} {'proven':>7}  ILP")
        for b in budgets:
            plan, smallest = compile_plan(a.memplan, path, os.path.join(a.workdir, name, str(b)), "--budget", str(b))
            at = plan["totals"]["train_peak_bytes"] if plan else b
            start, why = None, "memplan does not fit"
            if plan:
                R, S, why = remat_ilp.from_plan(model, plan)
                start = (R, S) if R else None
            starts[start is not None] += plan is not None
            lead = f"  {b / MIB:10.2f} {at / MIB if plan else 0:12.2f}" if plan else f"  {b / MIB:10.2f} {'no fit':>12}"
            dp, dp_why = {}, None
            above = {}  # objective -> the DP's search under memplan's extra found nothing: its plan is optimal
            if a.exact != "off" and dag_bin:  # any DAG, the search cut at memplan's extra (the optimum is below)
                for o in objectives:
                    mine = (remat_ilp.recompute_seconds(plan) if o == "seconds" else plan["totals"]["extra_flops"]) \
                        if plan else None
                    try:
                        r = remat_dag_exact.solve(model, at, o, dag_bin, a.exact_states, timeout=a.exact_time,
                                                  bound=None if mine is None else mine * (1 + 1e-9))
                    except remat_dag_exact.TooLarge as e:
                        dp_why = str(e)
                        continue
                    if r["extra"] is None and plan:
                        above[o] = r
                    else:
                        dp[o] = r
            elif a.exact != "off" and (too_large is None or at < too_large):
                try:
                    dp = {o: remat_chain_exact.solve(model, at, o, a.exact_states) for o in objectives}
                except remat_chain_exact.TooLarge as e:
                    too_large, dp_why = at, str(e)
            for o in objectives:
                secs_obj = o == "seconds"
                S_ = model["step_seconds"] if secs_obj else model["step_flops"]
                ex = dp.get(o)
                if ex and a.exact == "only":
                    res = {"extra": None, "bound": None, "status": "not run", "secs": 0.0, "start": None}
                else:
                    res = remat_ilp.solve(model, at, a.time_limit, objective=o, start=start)
                    solves += 1
                extra, bound, status = res["extra"], res["bound"], res["status"]
                cbc = {"extra": extra, "bound": bound, "status": status}
                pct = (lambda x, w=10, S_=S_: f"{100 * x / S_:{w - 1}.2f}%" if x is not None else f"{'-':>{w}}")
                rat = (lambda x, w: f"{x:{w}.3f}" if x is not None else f"{'':>{w}}")
                if ex:
                    exact_rows += o == objectives[0]
                    extra, bound, status = check_exact(f"{name} at {b} ({o})", at, o, model, ex, res, S_)
                else:
                    unproven += status in ("time limit", "no solution in time")
                if extra is not None and bound is not None:
                    # a bound above a schedule that replay() ran within the budget cuts feasible schedules (a
                    # tightening that is not valid) or is misread; CBC's float noise is far below 1e-6 of the step
                    if bound > extra + 1e-6 * S_:
                        sys.exit(f"{name} at {b}: CBC's lower bound, {bound}, is above its best found, {extra}, a "
                                 "schedule that replays within the budget: the MILP or the bound is wrong")
                    bound = min(bound, extra)  # float noise: a bound is never above the best found
                e = (remat_ilp.recompute_seconds(plan) if secs_obj else plan["totals"]["extra_flops"]) if plan else None
                proof = ""
                if o in above:
                    if extra is not None and extra < e - 1e-9 * S_:  # the search kept everything up to e
                        sys.exit(f"{name} at {b}: remat_dag_exact finds no schedule under memplan's {e}, CBC found "
                                 f"{extra}, that replays: the DP cuts feasible schedules "
                                 "(tests/bench/remat_dag_exact.c)")
                    bound = e if bound is None or e > bound else bound
                    proof = f"; DP: no schedule under memplan's ({above[o]['secs']:.1f} s)"
                elif (plan and not ex and secs_obj and dag_bin and a.prove > 1
                        and (bound is None or (S_ + e) / (S_ + bound) > a.prove + 1e-9)):
                    extra, bound, proof = prove(model, at, o, S_, e, extra, bound, dag_bin, a, f"{name} at {b}")
                how = f"{status}, {res['secs']:.1f} s"
                if ex:
                    how = (f"exact DP, {ex['secs']:.1f} s, {ex['states']} states a step at most; CBC "
                           + ("not run" if a.exact == "only" else f"{cbc['status']}: {pct(cbc['extra']).strip()} "
                              f"(bound {pct(cbc['bound']).strip()}), {res['secs']:.1f} s"))
                if start is not None:  # (no CBC run: no start's fate)
                    how += {None: "", "accepted": ", from memplan's", "rejected": ", memplan's start rejected by CBC",
                            "unused": ", memplan's start unused (solved first)"}[res["start"]]
                elif plan:
                    how += f", no start: {why}"
                if dp_why and o == objectives[0]:
                    how += f"; no exact DP: {dp_why}"
                how += proof
                ratio = proven = None
                if res.get("start_breaks"):  # replay() ran it within the peak: the MILP and replay() disagree
                    how += f"; memplan's start breaks the MILP's constraints {', '.join(res['start_breaks'][:3])}"
                if plan and status == "infeasible":
                    sys.exit(f"{name} at {b}: memplan's plan fits {at} live bytes and the MILP has no solution "
                             "there: its model counts more than the planner does")
                if plan and extra is not None:
                    ratio = (S_ + e) / (S_ + extra)
                    if res["start"] == "accepted" and ratio < 1 - 1e-9:
                        sys.exit(f"{name} at {b}: CBC's best, {extra}, is worse than memplan's schedule it was "
                                 f"given as its start, {e}: the start or the MILP is wrong")
                if plan and bound is None:
                    unbounded[o] += 1
                if plan and bound is not None:
                    proven = (S_ + e) / (S_ + bound)
                    if proven < 1 - 1e-9:
                        how += "; memplan below the proven bound: the MILP's model and the plan disagree"
                for k, v in (("found", ratio), ("proven", proven)):
                    if v is not None and round(v - 1, 9) > worst[o][k][0]:
                        worst[o][k] = (v - 1, f"{name} at {b / MIB:.2f} MiB")
                rows += plan is not None and o == objectives[0]
                if not plan and extra is not None:
                    only_ilp.append(f"{name} {b / MIB:.2f} MiB ({o}: +{100 * extra / S_:.1f}%)")
                print(f"{lead} {'seconds' if secs_obj else 'FLOPs':>9} {pct(e, 13)} {pct(extra)} {pct(bound)} "
                      f"{rat(ratio, 6)} {rat(proven, 7)}  {how}"
                      + (f"; memplan's smallest {smallest / MIB:.2f} MiB" if not plan else ""))
                lead = " " * len(lead)
                table.append({"graph": name, "budget_bytes": b, "objective": o, "step": S_,
                              "step_flops": model["step_flops"], "step_seconds": model["step_seconds"],
                              "memplan_fits": plan is not None, "memplan_peak_bytes": at if plan else None,
                              "memplan_extra_flops": plan["totals"]["extra_flops"] if plan else None,
                              "memplan_extra": e, "ilp_extra": extra, "ilp_extra_bound": bound,
                              "ilp_extra_flops": extra, "ilp_status": status, "ilp_seconds": round(res["secs"], 1),
                              "ratio": ratio, "ratio_proven": proven, "warm_start": res["start"],
                              "warm_start_breaks": res.get("start_breaks"), "exact_dp": bool(ex),
                              "exact_dp_seconds": round(ex["secs"], 1) if ex else None,
                              "cbc_extra": cbc["extra"], "cbc_bound": cbc["bound"], "cbc_status": cbc["status"],
                              "no_warm_start_why": None if start is not None or not plan else why})
    if a.check:
        print("remat_graphs: every graph compiles and verifies, the MILP's model counts the plan's live bytes at "
              "every stage, and a plan with recomputation replays in it as the MILP's start")
        return 0
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump({"time_limit_s": a.time_limit, "objectives": list(objectives), "rows": table}, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    print(f"ILP: Checkmate's MILP in CBC, at most {a.time_limit:g} s a solve; {unproven} of the {solves} solves "
          "stopped before proving optimality where the exact DP did not run (their proven ratio is against CBC's "
          f"lower bound); the exact DP's optimum at {exact_rows} of the {len(table) // len(objectives)} budgets; "
          f"memplan's plan was CBC's start at {starts[1]} of the {starts[0] + starts[1]} budgets memplan fits")
    if only_ilp:
        print(f"budgets the ILP fits and memplan does not ({len(only_ilp)}): {', '.join(only_ilp)}")
    names = {"seconds": "in memplan's objective (estimated seconds)", "flops": "in FLOPs"}
    parts = [f"{names[o]} within {100 * worst[o]['found'][0]:.1f}% of the best found, proven <= "
             f"{100 * worst[o]['proven'][0]:.1f}%" + (f" (worst: {worst[o]['proven'][1]})" if worst[o]["proven"][1]
                                                      else "")
             + (f", {unbounded[o]} budgets without a bound from CBC" if unbounded[o] else "") for o in objectives]
    print(f"memplan at every budget it plans ({rows}): {'; '.join(parts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
