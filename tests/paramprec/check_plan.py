"""check_plan.py MEMPLAN MODELS WORKDIR: --param-precision in the plan, from
real compiles of llama-mini at B=2, T=64 (milliseconds each):

- fp32 plans exactly as leaving the option out when fp32 fits: the same
  buffers, dtypes and offsets, and plan.json has no "param_precision";
- bf16: every trainable parameter of at least 4096 elements is a bf16 buffer
  (2 bytes an element), smaller ones f32; each such parameter's update runs on
  an f32 "<param>@f32" copy cast from it and is stored back by a cast into
  the parameter; the report's "trainable weights bf16" line gives the bytes;
- auto: at the smallest budget fp32 weights meet (any moment format), fp32;
  one byte under it, bf16, and the report says "--param-precision auto: fp32
  does not fit; bf16 fits";
- bad requests exit 1 (2: a bad option value) with the message and write
  nothing.
Planted once (2026-12-02): basew_lower ignoring pp (trainable weights never
lowered): 4 failed, "FAIL bf16: emb.weight is bf16, ...", "FAIL bf16: each
bf16 parameter's update ...", "FAIL one byte under fp32's smallest: exit 1,
None" and "FAIL auto's report line".
"""
import json
import os
import re
import subprocess
import sys

memplan, models, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
model = os.path.join(models, "llama-mini.yaml")
dims = ["--set", "B=2", "--set", "T=64"]
failures = []


def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg)
    if not ok:
        failures.append(msg)


def compile_(name, *args):
    out = os.path.join(work, name)
    r = subprocess.run([memplan, "compile", model, "-o", out, *dims, *args], capture_output=True, text=True)
    plan = None
    if r.returncode == 0:
        with open(os.path.join(out, "plan.json")) as f:
            plan = json.load(f)
    return r, plan, out


def bufs(plan):
    return [(b["name"], b["dtype"], b["offset"], b["bytes"]) for b in plan["buffers"]]


r0, p0, _ = compile_("default")
r1, p1, _ = compile_("fp32", "--param-precision", "fp32")
check(r0.returncode == 0 and r1.returncode == 0 and bufs(p0) == bufs(p1) and "param_precision" not in p1,
      "fp32: the same plan as no option, no param_precision key")
rb, pb, _ = compile_("bf16", "--param-precision", "bf16")
check(rb.returncode == 0 and pb.get("param_precision") == "bf16", "bf16: plan.json says param_precision bf16")
params = [b for b in pb["buffers"] if b["role"] == "param"] if pb else []
big = [b for b in params if b["bytes"] // (2 if b["dtype"] == "bf16" else 4) >= 4096]
small = [b for b in params if b not in big]
numel = lambda b: eval("*".join(map(str, b["shape"])) or "1")
check(bool(big) and all(b["dtype"] == "bf16" and b["bytes"] == 2 * numel(b) for b in big) and
      any(b["name"] == "emb.weight" for b in big), "bf16: emb.weight is bf16, every parameter of 4096+ elements too")
check(bool(small) and all(b["dtype"] == "f32" and numel(b) < 4096 for b in small), "bf16: the norms stay f32")
names = {b["id"]: b["name"] for b in pb["buffers"]} if pb else {}
sched = pb["schedule"] if pb else []
upd = [o for o in sched if o.get("op") in ("adamw", "sgd")]
ok = bool(upd)
for o in upd:
    i = sched.index(o)
    w = names[o["outputs"][0]]
    ok = ok and w.endswith("@f32") and sched[i + 1]["op"] == "cast" and names[sched[i + 1]["outputs"][0]] + "@f32" in w \
        if w.split("@")[0] in {b["name"] for b in big} else ok and not w.endswith("@f32")
check(ok, "bf16: each bf16 parameter's update writes its @f32 copy, a cast into the parameter right after")
m = re.search(r"trainable weights bf16: ([0-9.]+ [KMG]iB) \(fp32: ([0-9.]+ [KMG]iB)\)", rb.stdout)
check(m is not None, "bf16: the report's trainable weights line: %s" % (m.group(0) if m else rb.stdout[-400:]))

r, _, _ = compile_("least32", "--param-precision", "fp32", "--budget", "1M")
m = re.search(r"Smallest budget that fits: --budget (\d+)", r.stderr)
check(r.returncode == 1 and m is not None, "fp32 weights at 1M: exit 1 naming the smallest budget")
if m:
    least = int(m.group(1))
    ra, pa, _ = compile_("auto-at", "--budget", str(least))
    check(ra.returncode == 0 and "param_precision" not in pa, "auto at fp32's smallest budget %d: fp32" % least)
    ra, pa, _ = compile_("auto-under", "--budget", str(least - 1))
    check(ra.returncode == 0 and pa.get("param_precision") == "bf16",
          "one byte under fp32's smallest: exit %d, %s" % (ra.returncode, pa and pa.get("param_precision")))
    check("--param-precision auto: fp32 does not fit; bf16 fits" in ra.stdout, "auto's report line")

for rc, args, msg in [(2, ["--param-precision", "fp16"], "--param-precision fp16: choose fp32, bf16 or auto"),
                      (1, ["--param-precision", "bf16", "--ranks", "2"],
                       "--param-precision bf16 with --ranks/--zero: data-parallel plans keep parameters in fp32")]:
    r, _, out = compile_("bad", *args)  # exit 2: a usage error, as --opt-state's
    check(r.returncode == rc and msg in r.stderr and not os.path.exists(out), "%s: exit %d, %s" %
          (" ".join(args), r.returncode, r.stderr.strip()))
if failures:
    sys.exit("%d failed" % len(failures))
print("all param-precision plan checks passed")
