#!/usr/bin/env python3
"""pack_corpus.py: the large-instance corpus for bench_pack, regenerated from
memplan's own plans (nothing stored in the repository).

    pack_corpus.py MEMPLAN MODELS_DIR OUT_DIR

For each configuration below it runs `memplan compile ... -o` and turns the
plan.json's training-schedule buffers into a MiniMalloc CSV
(id,lower,upper,size; half-open lifetimes over schedule positions; sizes are
the plan's bytes plus guard bytes rounded up to the plan's alignment, so
`memplan pack` at alignment 1 sees the instance the planner packed). The
persistent buffers (parameters, optimizer state) are left out: the planner
stacks them below the packed region, as this instance's caller would.

With micro-batches the trainer runs the forward and backward ops once per
micro-batch over the same buffers; the corpus unrolls that loop, as an
allocator that sees the whole step would: every buffer of the forward and
backward part is repeated per micro-batch (shifted by the part's length),
gradients live from their first write in the first micro-batch to their
update after the last one, and the update part follows the last micro-batch.
That gives 5,000 to 60,000 buffers per instance. Deterministic: the same
memplan gives the same files.
"""
import json
import os
import subprocess
import sys

# name, model, extra compile arguments
CONFIGS = [
    ("gpt2-124m-b32-mb1", "gpt2-124m", ["--set", "B=32", "--micro-batch", "1"]),
    ("gpt2-124m-b64-mb2-recompute", "gpt2-124m", ["--set", "B=64", "--micro-batch", "2", "--budget", "2.5G"]),
    ("gpt2-124m-b128-mb1-recompute", "gpt2-124m", ["--set", "B=128", "--micro-batch", "1", "--budget", "2.2G"]),
    ("gpt2-124m-b48-mb1-bf16", "gpt2-124m", ["--set", "B=48", "--micro-batch", "1", "--precision", "bf16"]),
    ("smollm2-135m-b8-mb1", "smollm2-135m", ["--micro-batch", "1"]),
    ("smollm2-135m-b16-mb1-recompute", "smollm2-135m", ["--set", "B=16", "--micro-batch", "1", "--budget", "3G"]),
    ("llama-3.2-1b-b16-mb1", "llama-3.2-1b", ["--set", "B=16", "--micro-batch", "1"]),
    ("llama-3.2-1b-b32-mb1-recompute", "llama-3.2-1b", ["--set", "B=32", "--micro-batch", "1", "--budget", "20G"]),
    ("llama-mini-b64-mb1", "llama-mini", ["--set", "B=64", "--micro-batch", "1"]),
    ("gpt2-mini-b128-mb1", "gpt2-mini", ["--set", "B=128", "--micro-batch", "1"]),
]


def unroll(plan):
    align = plan["align"]
    guard = plan.get("guard_bytes", 0)
    sched = plan["schedule"]
    k = plan["totals"].get("accumulation_steps", 1)
    # the forward and backward part: positions before the first update
    period = next((i for i, op in enumerate(sched) if op["phase"] == "update"), len(sched))
    rows = []
    for b in plan["buffers"]:
        if b["schedule"] != "train":
            continue
        lo, hi = b["live"]
        if hi <= lo:
            continue
        size = (b["bytes"] + guard + align - 1) // align * align
        shift = (k - 1) * period
        if k == 1:
            rows.append((f"b{b['id']}", lo, hi, size))
        elif b["role"] == "grad" and hi > period:
            rows.append((f"b{b['id']}", lo, hi + shift, size))
        elif hi <= period:
            for m in range(k):
                rows.append((f"b{b['id']}.{m}", lo + m * period, hi + m * period, size))
        else:
            # lives into the update part: only its last micro-batch's copy
            rows.append((f"b{b['id']}", lo + shift, hi + shift, size))
    return rows


def main():
    memplan, models, out = sys.argv[1:4]
    only = set(sys.argv[4:])
    os.makedirs(out, exist_ok=True)
    for name, model, args in CONFIGS:
        if only and name not in only:
            continue
        path = os.path.join(out, name + ".csv")
        work = os.path.join(out, "plans", name)
        cmd = [memplan, "compile", os.path.join(models, model + ".yaml"), "-o", work, "--time-limit", "0"] + args
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            sys.exit(f"pack_corpus: {' '.join(cmd)} failed:\n{r.stdout}")
        with open(os.path.join(work, "plan.json")) as f:
            rows = unroll(json.load(f))
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            f.write("id,lower,upper,size\n")
            for row in rows:
                f.write("%s,%d,%d,%d\n" % row)
        os.replace(tmp, path)
        print(f"{name}: {len(rows)} buffers")


if __name__ == "__main__":
    main()
