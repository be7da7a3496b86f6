"""bench_remat.py --memplan MEMPLAN --workdir DIR [--time-limit S] [--seeds N]
[--graphs NAME,...] [--objective flops|seconds] [--json FILE] [--check]: memplan's recomputation against the exact
integer program (issue 29; docs/budgets-and-levers.md#the-exact-benchmark).

For each generated graph (remat_graphs.py: the U-Net, the DenseNet block,
a conv chain, random layered DAGs), at each budget `memplan sweep` reports
and at 90%..50% of the keep-all peak, it compiles with `--budget B
--no-micro-batch --fused-loss off` and every precision lever at fp32
(recomputation alone) and solves Checkmate's MILP
(remat_ilp.py, PuLP + CBC, at most S seconds a solve) at memplan's own
live-bytes peak, or at B where memplan does not fit. It prints both extra
FLOPs, their ratio (memplan's step FLOPs over the optimum's) and a last line
"within X% of the exact optimum at every budget". --json FILE also writes
every row (bytes and FLOPs, the solver's status and seconds; with
--objective seconds, "ilp_extra_flops" and "memplan_extra" are seconds).

--objective seconds: the MILP minimizes memplan's own cost model instead
(planner/cost.c's CPU roofline, remat_ilp.op_seconds: a concat's copy costs
its bytes, where its FLOPs are none), and both extras are seconds of it, in
percent of the step's; memplan's are its plan's recompute ops' seconds.

--check (the unit test remat_graphs): only generate the graphs, compile and
verify each keep-all plan, and check the MILP's memory model counts the
plan's live bytes at every stage (no solver needed).

Without PuLP or CBC it prints how to install them and exits 0, skipped.
"""
import argparse
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import remat_graphs  # noqa: E402
import remat_ilp  # noqa: E402

MIB = 2.0**20


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
    ap.add_argument("--objective", choices=("flops", "seconds"), default="flops")
    a = ap.parse_args()
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
    paths = remat_graphs.write_all(os.path.join(a.workdir, "models"), a.seeds)
    if a.graphs:
        names = [os.path.basename(p)[:-5] for p in paths]
        unknown = [g for g in a.graphs.split(",") if g not in names]
        if unknown:
            sys.exit(f"bench_remat: --graphs: no graph {', '.join(unknown)} (the graphs: {', '.join(names)})")
        paths = [p for p in paths if os.path.basename(p)[:-5] in a.graphs.split(",")]
    worst, worst_at, only_ilp, unproven, rows, table = 0.0, "", [], 0, 0, []
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
              f"step {model['step_flops'] / 1e9:.2f} GFLOP")
        if a.check:
            continue
        peak = model["peak"]
        grid = [int(peak * f / 10) for f in range(9, 4, -1)]
        budgets = sorted(set(sweep_budgets(a.memplan, path) + grid), reverse=True)
        print(f"  {'budget MiB':>10} {'memplan peak':>12} {'memplan extra':>13} {'ILP extra':>10} {'ratio':>7}  ILP")
        secs_obj = a.objective == "seconds"
        S = model["step_seconds"] if secs_obj else model["step_flops"]
        for b in budgets:
            plan, smallest = compile_plan(a.memplan, path, os.path.join(a.workdir, name, str(b)), "--budget", str(b))
            at = plan["totals"]["train_peak_bytes"] if plan else b
            extra, status, secs = remat_ilp.solve(model, at, a.time_limit, objective=a.objective)
            ilp = f"{100 * extra / S:9.2f}%" if extra is not None else f"{'-':>10}"
            how = f"{status}, {secs:.1f} s"
            table.append({"graph": name, "budget_bytes": b, "step_flops": S, "memplan_fits": plan is not None,
                          "memplan_peak_bytes": at if plan else None,
                          "memplan_extra_flops": plan["totals"]["extra_flops"] if plan else None,
                          "ilp_extra_flops": extra, "ilp_status": status, "ilp_seconds": round(secs, 1),
                          "objective": a.objective, "memplan_extra": (remat_ilp.recompute_seconds(plan) if secs_obj
                                                                       else plan["totals"]["extra_flops"]) if plan else None})
            if status in ("time limit", "no solution in time"):
                unproven += 1
            if plan:
                e = remat_ilp.recompute_seconds(plan) if secs_obj else plan["totals"]["extra_flops"]
                mine = f"{100 * e / S:12.2f}%"
                if status == "infeasible":
                    sys.exit(f"{name} at {b}: memplan's plan fits {at} live bytes and the MILP has no solution "
                             "there: its model counts more than the planner does")
                if extra is None:
                    print(f"  {b / MIB:10.2f} {at / MIB:12.2f} {mine} {ilp} {'':>7}  {how}")
                    continue
                ratio = (S + e) / (S + extra)
                rows += 1
                if ratio - 1 > worst:
                    worst, worst_at = ratio - 1, f"{name} at {b / MIB:.2f} MiB"
                print(f"  {b / MIB:10.2f} {at / MIB:12.2f} {mine} {ilp} {ratio:7.3f}  {how}")
            else:
                if extra is not None:
                    only_ilp.append(f"{name} {b / MIB:.2f} MiB (+{100 * extra / S:.1f}%)")
                print(f"  {b / MIB:10.2f} {'no fit':>12} {'-':>13} {ilp} {'':>7}  {how}; "
                      f"memplan's smallest {smallest / MIB:.2f} MiB")
    if a.check:
        print("remat_graphs: every graph compiles and verifies, and the MILP's model counts "
              "the plan's live bytes at every stage")
        return 0
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump({"time_limit_s": a.time_limit, "rows": table}, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    print(f"ILP: Checkmate's MILP in CBC, at most {a.time_limit:g} s a solve; {unproven} of the solves hit it "
          "(their ratio is to the best found, the optimum's may be larger)")
    if only_ilp:
        print(f"budgets the ILP fits and memplan does not ({len(only_ilp)}): {', '.join(only_ilp)}")
    print(f"memplan is within {100 * worst:.1f}% of the exact optimum at every budget it plans "
          f"({rows} budgets{'; worst: ' + worst_at if worst_at else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
