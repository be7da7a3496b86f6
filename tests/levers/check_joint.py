"""check_joint.py MEMPLAN MODELS_DIR OUTDIR: the levers chosen together.

gpt2-mini at B=8, T=256 (big enough that an op's roofline outweighs its call
overhead) at two budgets where the old fixed order (recompute at the whole
batch; failing that, the largest micro-batch that fits) and the joint choice
differ:
- 32M: the whole batch fits only by recomputing (13% extra FLOPs); 2
  micro-batches of 4 fit keeping everything, and are chosen.
- 24M: the whole batch does not fit; 2 micro-batches of 4 fit by
  recomputing; 4 of 2 keep everything, and are chosen.
At each budget, every micro-batch size is also compiled alone (--micro-batch
N): the chosen plan's estimated step time is the least of those that fit,
and its own plan equals the forced one's. The bounds hold: every plan's
arena is at least its configuration's memory bound and its estimate at least
its time bound; what was pruned for time has a bound no lower than the
chosen estimate, and for memory a bound above the budget.

Forbidding: --no-recompute plans nothing recomputed (and reports the smallest
budget under that rule when nothing fits); --no-micro-batch keeps the whole
batch; both together at 24M do not fit, and the error says which levers were
forbidden. The report's levers section says the same as plan.json, and a
plan.json from before the estimates (its levers without the new fields) is
still read.
"""
import json
import os
import re
import shutil
import subprocess
import sys

memplan, models, out = sys.argv[1:]
model = os.path.join(models, "gpt2-mini.yaml")
# recomputation and micro-batches alone: the fused loss and the optimizer
# state's precision (levers of their own, tested in check_levers.py) held
dims = ["--set", "B=8", "--set", "T=256", "--fused-loss", "off", "--opt-state", "fp32"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def compile_(name, *flags, ok=True):
    """(plan.json, report); with ok=False (plan.json or None, the finished process)."""
    d = os.path.join(out, name)
    r = subprocess.run([memplan, "compile", model, *dims, "-o", d, *flags], capture_output=True, text=True)
    if ok and r.returncode:
        sys.exit(f"{name}: memplan exited {r.returncode}: {r.stderr}")
    plan = json.load(open(os.path.join(d, "plan.json"))) if r.returncode == 0 else None
    return (plan, r.stdout) if ok else (plan, r)


def config(l):
    return (l["micro_batch"], l["accumulation_steps"])


shutil.rmtree(out, ignore_errors=True)
os.makedirs(out)
want = {"32M": (4, 2), "24M": (2, 4)}  # (micro-batch, accumulation) the joint choice makes
for budget, (mb, k) in want.items():
    cap = int(float(budget[:-1]) * 2**20)
    plan, report = compile_("joint-" + budget, "--budget", budget)
    t, lv = plan["totals"], plan["levers"]
    chosen = [l for l in lv if l["chosen"]]
    check(len(chosen) == 1, f"{budget}: {len(chosen)} levers chosen")
    c = chosen[0]
    check((t["micro_batch"], t["accumulation_steps"]) == (mb, k) and config(c) == (mb, k),
          f"{budget}: chose {config(c)}, want {mb} x {k}")
    check(c["arena_bytes"] == t["arena_bytes"] and t["arena_bytes"] <= cap, f"{budget}: chosen arena")
    check(len(lv) == 4 and [l["micro_batch"] for l in lv] == [8, 4, 2, 1], f"{budget}: configurations {lv}")
    # every micro-batch size on its own: the chosen estimate is the least of those that fit
    fits = {}
    for size in (8, 4, 2, 1):
        forced, _ = compile_(f"forced-{budget}-{size}", "--budget", budget, "--micro-batch", str(size), ok=False)
        if forced:
            f = forced["levers"][0]
            check(len(forced["levers"]) == 1 and f["chosen"] and f["fits"], f"--micro-batch {size}: {forced['levers']}")
            fits[size] = f["est_seconds"]
            check(f["arena_bytes"] >= f["memory_bound_bytes"] and f["est_seconds"] >= f["time_bound_seconds"],
                  f"--micro-batch {size} at {budget}: a bound above its plan: {f}")
    check(fits and abs(c["est_seconds"] - min(fits.values())) <= 1e-12 * c["est_seconds"]
          and min(fits, key=fits.get) == mb, f"{budget}: chosen est {c['est_seconds']}, forced {fits}")
    # the old fixed order: the whole batch first (it recomputes at 32M), then the largest micro-batch that fits
    first = max(fits)
    check(first != mb and fits[first] > c["est_seconds"], f"{budget}: the fixed order's {first} is not slower")
    if budget == "32M":
        whole, _ = compile_("whole-32M", "--budget", budget, "--no-micro-batch")
        check(whole["totals"]["extra_flops"] > 0 and c["extra_flops"] == 0 and len(whole["levers"]) == 1,
              "32M: the whole batch should recompute and the choice keep everything")
    for l in lv:
        p = l.get("pruned")
        if p == "time":
            check(l["time_bound_seconds"] >= c["est_seconds"] and not l["fits"], f"{budget}: pruned for time: {l}")
        elif p == "memory":
            check(l["memory_bound_bytes"] > cap and not l["fits"], f"{budget}: pruned for memory: {l}")
        else:
            check(p is None and l["arena_bytes"] >= l["memory_bound_bytes"], f"{budget}: memory bound above {l}")
            check(not l["fits"] or l["est_seconds"] >= l["time_bound_seconds"], f"{budget}: time bound above {l}")
    # the report says the same
    check(f"levers (budget {cap / 2**20:.2f} MiB): the least estimated step time that fits, of 4 configurations"
          in report, f"{budget}: levers header")
    check(report.count("<- chosen") == 1, f"{budget}: chosen marks")
    check(report.count("not planned:") == sum("pruned" in l for l in lv), f"{budget}: pruned lines")
    nfit = sum(l["fits"] for l in lv)
    others = [l for l in lv if l["fits"] and not l["chosen"]]
    if others:
        nxt = min(others, key=lambda l: l["est_seconds"])
        pct = 100 * (nxt["est_seconds"] / c["est_seconds"] - 1)
        m = re.search(r"chosen: the least estimated step time of the (\d+) that fit; the next, .*, is ([\d.]+)% slower",
                      report)
        check(m and int(m.group(1)) == nfit and abs(float(m.group(2)) - pct) < 0.051, f"{budget}: chosen line {m}")

# forbidding levers
norc, _ = compile_("norecompute-32M", "--budget", "32M", "--no-recompute")
check(norc["totals"]["extra_flops"] == 0 and all(l["extra_flops"] == 0 for l in norc["levers"]),
      "--no-recompute recomputed")
check(norc["totals"]["micro_batch"] == 4, f"--no-recompute at 32M: {norc['totals']['micro_batch']}")
# (fp32 weights: bf16 ones, --param-precision's auto, would fit below the fp32 plan's keep arena)
_, r = compile_("none-24M", "--budget", "24M", "--no-recompute", "--no-micro-batch", "--param-precision", "fp32",
                ok=False)
keep = whole["levers"][0]["keep_arena_bytes"]  # the whole batch keeping everything: the only plan left
check(r.returncode == 1 and "with recomputation and micro-batches forbidden" in r.stderr
      and f"Smallest budget that fits: --budget {keep} " in r.stderr, f"both forbidden (want {keep}): {r.stderr}")
_, r = compile_("norc-1M", "--budget", "1M", "--no-recompute", ok=False)
m = re.search(r"Smallest budget that fits: --budget (\d+)", r.stderr)
check(r.returncode == 1 and "with recomputation forbidden" in r.stderr and m, f"--no-recompute at 1M: {r.stderr}")
if m:  # the smallest budget named does fit under the same rule
    fit, _ = compile_("norc-least", "--budget", m.group(1), "--no-recompute")
    check(fit["totals"]["extra_flops"] == 0 and fit["totals"]["arena_bytes"] == int(m.group(1)), "least --no-recompute")
nomb, r = compile_("nomb-24M", "--budget", "24M", "--no-micro-batch", ok=False)
check(nomb is None and "with micro-batches forbidden" in r.stderr, "--no-micro-batch at 24M: the whole batch fits?")

# plan.json: read back with the new fields, and without them (a plan from before)
d = os.path.join(out, "joint-32M")
s = subprocess.run([memplan, "show", os.path.join(d, "plan.json"), "--format", "dot"], capture_output=True, text=True)
check(s.returncode == 0, f"memplan show: {s.stderr}")
text = open(os.path.join(d, "plan.json")).read()
old = re.sub(r', "est_seconds": [^,]*, "time_bound_seconds": [^,]*, "memory_bound_bytes": \d+(, "pruned": "\w+")?', "",
             text)
check(old != text and "est_seconds" not in old, "could not strip the new fields")
os.makedirs(os.path.join(out, "old"), exist_ok=True)
open(os.path.join(out, "old", "plan.json"), "w").write(old)
s = subprocess.run([memplan, "show", os.path.join(out, "old", "plan.json"), "--format", "dot"], capture_output=True,
                   text=True)
check(s.returncode == 0, f"an old plan.json without estimates: {s.stderr}")

if failures:
    sys.exit("\n".join(failures))
print("ok: 32M chose 4 x 2 keeping everything, 24M chose 2 x 4; estimates least among the forced plans; "
      "forbidding options hold")
