"""check_levers.py MEMPLAN MODELS_DIR OUTDIR: what the report and plan.json say
about the budget's levers, checked against plans compiled in the same run.

- The fused-updates line: plan.json's unfused_lower_bound_bytes equals the
  lower bound of the same model compiled with --no-fuse-updates (it once left
  out the workspace).
- Levers: GPT-2 124M at --budget 3G lists every configuration considered, in
  order (the full batch first, which does not fit, then micro-batches),
  exactly one chosen, and the chosen one is the plan's own arena, extra FLOPs
  and batch split; the report prints the same lines (tests/levers/
  check_joint.py checks the choice itself).
- --precision auto at 3G (2 micro-batches of 4: --micro-batch 4) chooses per
  stage: it lowers some but not all of what bf16 lowers, and recomputes no
  more than fp32 does at that budget; at 8G, where everything fits, it
  lowers nothing.
- A micro-batch is the planner's choice, not a --set: plan.json's "set" does
  not list the batch dim, and the report does not star it.
- --precision bf16: the report names every lowered tensor (all of plan.json's
  bf16 buffers).
- The fused classifier loss (--fused-loss, default auto): at 8G GPT-2 124M
  keeps the logits (plan.json "fused_loss" false); at 3G it fuses them, so
  the full batch fits without micro-batches, and the report says so. The
  checks of micro-batches above pass --fused-loss off, which needs them.
- memplan show reads every plan.json written here back (levers and stages
  included).
"""
import json
import os
import shutil
import subprocess
import sys

memplan, models, out = sys.argv[1:]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)


def compile_(name, model, *flags):
    d = os.path.join(out, name)
    r = subprocess.run([memplan, "compile", os.path.join(models, model + ".yaml"), "-o", d, *flags],
                       capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{name}: memplan exited {r.returncode}: {r.stderr}")
    s = subprocess.run([memplan, "show", os.path.join(d, "plan.json"), "--format", "dot"], capture_output=True, text=True)
    check(s.returncode == 0, f"{name}: memplan show cannot read the plan back: {s.stderr}")
    return json.load(open(os.path.join(d, "plan.json"))), r.stdout


shutil.rmtree(out, ignore_errors=True)
for model in ("mlp", "gpt2-mini"):
    fused, _ = compile_(model, model)
    unfused, _ = compile_(model + "-unfused", model, "--no-fuse-updates")
    want, got = unfused["totals"]["lower_bound_bytes"], fused["totals"]["unfused_lower_bound_bytes"]
    check(got == want, f"{model}: unfused lower bound reported {got}, --no-fuse-updates plans {want}")

plan, report = compile_("gpt2-3g", "gpt2-124m", "--budget", "3G", "--fused-loss", "off")
lv, t = plan["levers"], plan["totals"]
check(len(lv) >= 2 and not lv[0]["fits"] and lv[0]["accumulation_steps"] == 1, f"first lever: {lv[:1]}")
chosen = [l for l in lv if l["chosen"]]
check(len(chosen) == 1, f"{len(chosen)} levers chosen")
if chosen:
    c = chosen[0]
    check(c["fits"] and c["arena_bytes"] == t["arena_bytes"] and c["extra_flops"] == t["extra_flops"]
          and c["micro_batch"] == t["micro_batch"] and c["accumulation_steps"] == t["accumulation_steps"],
          f"chosen lever {c} is not the plan ({t['arena_bytes']}, {t['extra_flops']})")
    check(c["micro_batch"] * c["accumulation_steps"] == plan["dims"]["B"] * t["accumulation_steps"], "batch split")
check(all(l["arena_bytes"] <= l["keep_arena_bytes"] for l in lv), "recompute above keep-all")
check(all(l["arena_bytes"] <= 3 << 30 for l in lv if l["fits"]), "a lever that fits is over the budget")
check("levers (budget 3.00 GiB): the least estimated step time that fits" in report, "report has no levers section")
check(report.count("<- chosen") == 1, "report: not exactly one chosen lever")
check(sum(1 for line in report.splitlines() if "does not fit" in line)
      == sum(not l["fits"] and "pruned" not in l for l in lv),
      "report and plan.json disagree on the levers that do not fit")
check(sum(1 for line in report.splitlines() if "not planned:" in line) == sum("pruned" in l for l in lv),
      "report and plan.json disagree on the pruned levers")
check("B" not in plan["set"], f"micro-batch recorded as a --set: {plan['set']}")
mbs = t["micro_batch"]
# the dims line: the YAML's batch (8), then the micro-batch, neither starred (no --set)
check(f" B=8 (micro-batch {mbs}) " in report and "B=8*" not in report,
      "report's dims line is not B=8 (micro-batch %d), unstarred" % mbs)

fp32_3g, _ = compile_("gpt2-3g-mb4", "gpt2-124m", "--budget", "3G", "--micro-batch", "4", "--fused-loss", "off")
auto, report_auto = compile_("gpt2-3g-auto", "gpt2-124m", "--budget", "3G", "--precision", "auto", "--micro-batch", "4", "--fused-loss", "off")
allbf, _ = compile_("gpt2-3g-bf16", "gpt2-124m", "--budget", "3G", "--precision", "bf16", "--micro-batch", "4", "--fused-loss", "off")
half = lambda p: sum(b["dtype"] == "bf16" for b in p["buffers"])
check(0 < half(auto) < half(allbf), f"auto lowered {half(auto)} tensors, bf16 lowers {half(allbf)}")
check(auto["precision"] == "bf16" and auto["totals"]["arena_bytes"] <= 3 << 30, "auto at 3G")
ft = fp32_3g["totals"]
check(ft["extra_flops"] > 0 and ft["accumulation_steps"] == 2, f"--micro-batch 4 at 3G: {ft}")
check(auto["totals"]["extra_flops"] <= ft["extra_flops"], f"auto recomputes {auto['totals']['extra_flops']}, fp32 {ft['extra_flops']}")
check(any(s["half"] for s in auto["stages"]) and not all(s["half"] for s in auto["stages"]), "auto: stages' half flags")
check("in bf16" in report_auto, "report: no stage kept in bf16")
roomy, _ = compile_("gpt2-8g-auto", "gpt2-124m", "--budget", "8G", "--precision", "auto")
check(half(roomy) == 0 and roomy["precision"] == "fp32", "auto lowers tensors when everything fits")
# the fused loss is a lever configuration beside the unfused one: each planned
# one's estimate is at least the chosen's, and a fused plan never stores logits
check(roomy["totals"]["extra_flops"] == 0, "8G: recomputes though everything fits")
for p_ in (roomy,):
    est = [l["est_seconds"] for l in p_["levers"] if l["fits"]]
    ch = [l for l in p_["levers"] if l["chosen"]][0]
    check(ch["est_seconds"] == min(est), f"8G: chosen est {ch['est_seconds']}, least {min(est)}")
fl, report_fl = compile_("gpt2-3g-fused", "gpt2-124m", "--budget", "3G")
ft = fl["totals"]
rows = 8192 // ft["accumulation_steps"]
check(fl["fused_loss"] and 64 <= fl["loss_chunk"] < rows and ft["arena_bytes"] <= 3 << 30,
      f"3G, fused loss: chunk {fl['loss_chunk']}, {ft['accumulation_steps']} micro-batches")
check(any(l.get("loss_chunk", 0) == 0 for l in fl["levers"]) and any(l.get("loss_chunk", 0) for l in fl["levers"]),
      "3G: the levers list the unfused and the fused configurations")
check(not any(b["name"] == "logits" for b in fl["buffers"]), "3G, fused loss: the logits are still a buffer")
check(f"fused loss: linear + cross_entropy in chunks of {fl['loss_chunk']} of {rows} rows" in report_fl,
      "report: no fused loss line")

forced, _ = compile_("mini-mb2", "gpt2-mini", "--micro-batch", "2")
check("B" not in forced["set"] and len(forced["levers"]) == 1 and forced["levers"][0]["chosen"],
      f"--micro-batch 2: set {forced['set']}, levers {forced['levers']}")
user, _ = compile_("mini-set-mb", "gpt2-mini", "--set", "B=8", "--micro-batch", "2")
check("B" in user["set"], "a user's --set of the batch dim is still recorded")

bf, report = compile_("mini-bf16", "gpt2-mini", "--precision", "bf16")
names = {b["name"].split("@")[0] for b in bf["buffers"] if b["dtype"] == "bf16"}
lines = report.split("stored in half precision", 1)[1].splitlines()[1:]
block = []
for line in lines:  # the wrapped list ends at a blank line or the "compiled in" line
    if not line.strip() or line.startswith("  compiled in"):
        break
    block.append(line)
listed = set(" ".join(block).split())
check(names and listed == names, f"lowered tensors: report lists {sorted(listed)}, plan has {sorted(names)}")

if failures:
    sys.exit("\n".join(failures))
print(f"ok: {len(lv)} levers at 3G, chosen {chosen[0]['precision']} x{chosen[0]['accumulation_steps']}; "
      f"{len(names)} lowered tensors listed")
