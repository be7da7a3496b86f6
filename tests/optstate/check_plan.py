"""check_plan.py MEMPLAN MODELS WORKDIR: --opt-state in the plan, from real
compiles of gpt2-mini (milliseconds each):

- fp32 (the default) plans exactly as before: the same buffers, offsets and
  arena as no option at all, and plan.json says "opt_state": "fp32";
- bf16: every AdamW moment is a bf16 buffer of 2 bytes per element;
- 8bit: moments of parameters of at least 4096 elements are u8 buffers of 1
  byte per element, each with an f32 "<moment>.scale" buffer of
  ceil(numel / 256) floats; smaller parameters keep f32 moments; every one has
  role optimizer_state (persistent, so packed below persistent_bytes);
- the report's "optimizer state" line gives the byte total the buffers sum to
  and fp32's, and the arena shrinks by at least what the state saves;
- memplan show reads an 8-bit plan.json back (u8 buffers verify), and a plan
  written before --opt-state (no "opt_state" key) still reads;
- auto under a budget that fp32 meets only by recomputing picks the format
  that keeps everything, and the report says what it compared.
"""
import json
import math
import os
import re
import subprocess
import sys

memplan, models, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
model = os.path.join(models, "gpt2-mini.yaml")
failures = []


def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg)
    if not ok:
        failures.append(msg)


def compile_(name, *args):
    out = os.path.join(work, name)
    r = subprocess.run([memplan, "compile", model, "-o", out, *args], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"FAIL: memplan compile {' '.join(args)}: {r.stderr}")
    with open(os.path.join(out, "plan.json")) as f:
        return json.load(f), r.stdout


def mib(text):  # "889.25 KiB" -> bytes, to the report's two decimals
    v, u = text.split()
    return float(v) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[u]


plain, _ = compile_("default")
plans = {f: compile_(f, "--opt-state", f) for f in ("fp32", "bf16", "8bit")}
params = {b["name"]: math.prod(b["shape"]) for b in plain["buffers"] if b["role"] == "param"}

p32 = plans["fp32"][0]
strip = lambda p: [(b["name"], b["dtype"], b["bytes"], b["offset"]) for b in p["buffers"]]
check(strip(p32) == strip(plain) and p32["totals"] == plain["totals"], "fp32: the plan of no --opt-state")
check(p32["opt_state"] == "fp32" and plain["opt_state"] == "fp32", 'fp32: plan.json "opt_state": "fp32"')

for fmt in ("bf16", "8bit"):
    plan, report = plans[fmt]
    check(plan["opt_state"] == fmt, f'{fmt}: plan.json "opt_state": "{fmt}"')
    state = {b["name"]: b for b in plan["buffers"] if b["role"] == "optimizer_state"}
    bad = []
    for p, n in params.items():
        for mom in ("adam_m", "adam_v"):
            b = state.pop(f"{p}.{mom}", None)
            if fmt == "bf16" or n < 4096:
                want = ("bf16", 2 * n) if fmt == "bf16" else ("f32", 4 * n)
            else:
                want = ("u8", n)
                s = state.pop(f"{p}.{mom}.scale", None)
                if not s or (s["dtype"], s["bytes"]) != ("f32", 4 * -(-n // 256)):
                    bad.append(f"{p}.{mom}.scale")
            if not b or (b["dtype"], b["bytes"]) != want:
                bad.append(f"{p}.{mom}: {b and (b['dtype'], b['bytes'])} != {want}")
    check(not bad and not state, f"{fmt}: every moment's dtype and bytes ({bad[:3] or list(state)[:3]})")
    total = sum(b["bytes"] for b in plan["buffers"] if b["role"] == "optimizer_state")
    m = re.search(r"^optimizer state %s: ([0-9.]+ [KMG]?i?B) \(fp32: ([0-9.]+ [KMG]?i?B)\)" % fmt, report, re.M)
    check(bool(m) and abs(mib(m.group(1)) - total) < 0.01 * total, f"{fmt}: report total {m and m.group(1)} = {total} B")
    fp32_total = 8 * sum(params.values())
    check(bool(m) and abs(mib(m.group(2)) - fp32_total) < 0.01 * fp32_total, f"{fmt}: report's fp32 {fp32_total} B")
    saved = fp32_total - total
    check(plain["totals"]["arena_bytes"] - plan["totals"]["arena_bytes"] >= saved - 64 * 1024,
          f"{fmt}: arena {plan['totals']['arena_bytes']} B, {saved} B of state saved")
    print(f"     {fmt}: optimizer state {total} B (fp32 {fp32_total} B), arena {plan['totals']['arena_bytes']} B")

# plan.json read back: an 8-bit plan, and one from before the key existed
r = subprocess.run([memplan, "show", os.path.join(work, "8bit", "plan.json"), "--format", "dot"], capture_output=True)
check(r.returncode == 0, f"memplan show reads the 8-bit plan back ({r.stderr.decode()[:200]})")
old = json.load(open(os.path.join(work, "default", "plan.json")))
del old["opt_state"]
with open(os.path.join(work, "old.json"), "w") as f:
    json.dump(old, f)
r = subprocess.run([memplan, "show", os.path.join(work, "old.json"), "--format", "dot"], capture_output=True)
check(r.returncode == 0, f"a plan without opt_state reads ({r.stderr.decode()[:200]})")

# auto (the default): fp32 wherever any configuration fits at fp32; lowered
# only below fp32's smallest budget, and the report says why
hi = plain["totals"]["arena_bytes"]
plan, _ = compile_("auto-roomy", "--opt-state", "auto", "--budget", str(hi * 3 // 4))
check(plan["opt_state"] == "fp32", f"auto at {hi * 3 // 4} B, where fp32 fits recomputing: {plan['opt_state']}")
r = subprocess.run([memplan, "compile", model, "-o", os.path.join(work, "none"), "--opt-state", "fp32", "--budget",
                    "1"], capture_output=True, text=True)
m = re.search(r"Smallest budget that fits: --budget ([0-9]+)", r.stderr)
check(r.returncode == 1 and m is not None, f"fp32's smallest budget ({r.stderr[:200]})")
least = int(m.group(1)) if m else hi
plan, report = compile_("auto", "--opt-state", "auto", "--budget", str(least - 1))
check(plan["opt_state"] != "fp32" and plan["totals"]["arena_bytes"] < least,
      f"auto just under fp32's smallest budget {least}: {plan['opt_state']}")
check(re.search(r"--opt-state auto: fp32 does not fit; (bf16 fits|bf16 does not fit; 8bit fits)", report) is not None,
      "auto: the report says fp32 did not fit")
sys.exit(1 if failures else 0)
