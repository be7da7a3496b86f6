"""bench_levers.py MEMPLAN MODELS_DIR WORKDIR: the budget's levers.

1. GPT-2 124M (B=8, T=1024): for budgets 8G, 4G, 3G, 2.2G (fp32, and auto
   precision), the plan's arena, the levers pulled (recompute %, lowered
   tensors, micro-batches) and the step time the CPU roofline estimates
   (FLOPs incl. recomputation at the sgemm rate this project measured,
   350 GFLOP/s: an estimate, printed as such); and the smallest budget
   memplan can plan.
2. gpt2-mini: the CPU trainer's measured step time with the bf16 plan vs
   the fp32 plan (same seed, threads and data), in the same run.
"""
import json
import os
import re
import subprocess
import sys

memplan, models, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
RATE = 350e9


def compile_plan(model, out, *opts):
    r = subprocess.run([memplan, "compile", model, "-o", out, *opts], capture_output=True, text=True)
    return r, (json.load(open(os.path.join(out, "plan.json"))) if r.returncode == 0 else None)


gpt2 = os.path.join(models, "gpt2-124m.yaml")
print("GPT-2 124M, B=8, T=1024")
print(f"{'budget':>8} {'precision':>9} {'arena GiB':>10} {'micro-batch':>12} {'lowered':>8} {'extra %':>8} {'est. s/step':>12}")
for budget in ["8G", "4G", "3G", "2200M"]:
    for prec in ["fp32", "auto"]:
        out = os.path.join(work, f"gpt2-{budget}-{prec}")
        r, p = compile_plan(gpt2, out, "--budget", budget, "--precision", prec)
        if not p:
            print(f"{budget:>8} {prec:>9}   does not fit")
            continue
        t = p["totals"]
        k = t["accumulation_steps"]
        lowered = sum(1 for b in p["buffers"] if b["dtype"] in ("bf16", "f16"))
        flops = (t["step_flops"] + t["extra_flops"]) * k
        extra = 100.0 * t["extra_flops"] / t["step_flops"]
        print(f"{budget:>8} {p['precision']:>9} {t['arena_bytes'] / 2**30:>10.2f} {str(t['micro_batch']) + ' x ' + str(k):>12} "
              f"{lowered:>8} {extra:>8.2f} {flops / RATE:>12.1f}")
r = subprocess.run([memplan, "compile", gpt2, "--budget", "1M", "--precision", "auto"], capture_output=True, text=True)
m = re.search(r"Smallest budget that fits: --budget (\d+)", r.stderr)
print(f"smallest budget memplan can plan: {int(m.group(1)) / 2**30:.2f} GiB" if m else r.stderr)

print("\ngpt2-mini CPU trainer, 30 steps, 2 threads: bf16 storage vs fp32")
text = os.path.join(models, "..", "README.md")
ms = {}
for prec in ["fp32", "bf16"]:
    out = os.path.join(work, f"mini-{prec}")
    compile_plan(os.path.join(models, "gpt2-mini.yaml"), out, "--precision", prec)
    subprocess.run(["cmake", "-S", out, "-B", out + "/build", "-DTRAINER_CUDA=OFF"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", out + "/build", "-j2"], check=True, capture_output=True)
    r = subprocess.run([out + "/build/trainer", "--text", text, "--steps", "30", "--threads", "2", "--log-every", "30",
                        "--eval-batches", "0"], check=True, capture_output=True, text=True)
    ms[prec] = float(re.search(r"mean ([\d.]+) ms/step", r.stdout).group(1))
    arena = re.search(r"planned arena (\d+)", r.stdout).group(1)
    print(f"{prec}: {ms[prec]:.2f} ms/step, arena {int(arena) / 2**20:.2f} MiB")
print(f"bf16 / fp32 step time: {ms['bf16'] / ms['fp32']:.3f} (casts add memory traffic; the kernels compute in fp32)")
