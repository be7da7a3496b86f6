#!/usr/bin/env python3
"""Compile time and plan of every bench_remat compile, one memplan against another.

bench_remat.py compiles each of its graphs (tests/bench/remat_graphs.py) at
every budget `memplan sweep` reports and at 90%, 80%, ... 50% of the keep-all
peak, recomputation alone. This runs the same compiles, no solver, with each
memplan given (`--memplan NAME=PATH`, the first the reference) and prints, per
graph and budget, each one's recompute seconds in percent of the step
(remat_ilp.recompute_seconds over the keep-all step's seconds, as
bench_remat's "memplan extra" in seconds) and its CPU seconds (user + sys of
the compile, the least of --repeat runs). The last lines say the most CPU
seconds of each memplan and every budget where a later one's plan recomputes
more seconds than the first's, or fits where it does not or the reverse (the
exit status is 1 then). The budgets are the first memplan's.

  /usr/bin/python3 tests/bench/bench_remat_compile.py --workdir /tmp/rc \\
      --memplan main=/tmp/main/memplan --memplan branch=build/bin/memplan
"""

import argparse
import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_remat  # noqa: E402
import remat_graphs  # noqa: E402
import remat_ilp  # noqa: E402

MIB = 2.0**20
FLAGS = ["--no-micro-batch", "--fused-loss", "off", "--precision", "fp32", "--param-precision", "fp32", "--opt-state",
         "fp32"]


def compile_once(memplan, model, budget, out):
    """(plan or None, CPU seconds of the compile)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([memplan, "compile", model, "--budget", str(budget), *FLAGS, "-o", out], capture_output=True,
                       text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode == 0:
        return json.load(open(os.path.join(out, "plan.json"))), cpu
    if r.returncode != 1 or "Smallest budget that fits" not in r.stderr:
        sys.exit(f"{memplan} {model} --budget {budget}: exited {r.returncode}:\n{r.stderr}")
    return None, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memplan", action="append", required=True, help="NAME=PATH; the first is the reference")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--graphs", default="", help="comma-separated (default: all six)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per compile; the least CPU time counts")
    ap.add_argument("--json", help="also write every row to this file")
    a = ap.parse_args()
    bins = [m.split("=", 1) for m in a.memplan]
    paths = remat_graphs.write_all(os.path.join(a.workdir, "models"), 3)
    if a.graphs:
        paths = [p for p in paths if os.path.basename(p)[:-5] in a.graphs.split(",")]
    worst = {n: (0.0, "") for n, _ in bins}
    worse, rows = [], []
    for path in paths:
        name = os.path.basename(path)[:-5]
        ref = bins[0][1]
        keep, _ = bench_remat.compile_plan(ref, path, os.path.join(a.workdir, name, "keep"))
        model = remat_ilp.load(os.path.join(a.workdir, name, "keep", "plan.json"))
        step = model["step_seconds"]
        grid = [int(model["peak"] * f / 10) for f in range(9, 4, -1)]
        budgets = sorted(set(bench_remat.sweep_budgets(ref, path) + grid), reverse=True)
        print(f"{name}: {len(budgets)} budgets; per memplan: recompute seconds, % of the step / CPU s")
        print(f"  {'budget':>10} {'MiB':>7}" + "".join(f" {n + ' extra':>14} {n + ' CPU':>11}" for n, _ in bins))
        for b in budgets:
            line, got = f"  {b:10d} {b / MIB:7.2f}", []
            for n, exe in bins:
                out = os.path.join(a.workdir, name, n, str(b))
                runs = [compile_once(exe, path, b, out) for _ in range(a.repeat)]
                plan, cpu = runs[0][0], min(r[1] for r in runs)
                rec = remat_ilp.recompute_seconds(plan) if plan else None
                got.append((n, rec, cpu))
                if cpu > worst[n][0]:
                    worst[n] = (cpu, f"{name} at {b}")
                line += f" {'no fit' if rec is None else f'{100 * rec / step:.2f}%':>14} {cpu:11.2f}"
                rows.append({"graph": name, "budget": b, "memplan": n, "recompute_seconds": rec,
                             "extra_percent": None if rec is None else 100 * rec / step, "cpu_seconds": cpu})
            print(line, flush=True)
            r0 = got[0][1]
            for n, rec, _ in got[1:]:
                if r0 is not None and (rec is None or rec > r0 * (1 + 1e-12)):
                    worse.append(f"{name} at {b}: {n} {rec}, {got[0][0]} {r0}")
    for n, _ in bins:
        print(f"{n}: at most {worst[n][0]:.2f} CPU s ({worst[n][1]})")
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1)
    if worse:
        print("plans worse than the first memplan's:\n  " + "\n  ".join(worse))
        return 1
    print(f"no plan recomputes more seconds than {bins[0][0]}'s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
