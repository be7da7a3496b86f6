#!/usr/bin/env python3
"""torch_bench.py PLAN.json [--text FILE] [--steps N] [--bf16]: the same
training step in PyTorch eager on the GPU, for tests/gpu/run.sh's ratios.

The model is the plan itself, interpreted op by op by
tests/reference/plan_torch.py (the reference tests' interpreter: same ops,
same AdamW / SGD hyperparameters and param groups, the trainer's batches), with
attention through F.scaled_dot_product_attention (what a PyTorch user
writes) and autograd for backward. fp32 runs without TF32, like the memplan
CUDA trainer; --bf16 runs the forward under torch.autocast(bfloat16), PyTorch's
usual mixed precision. Prints one JSON line: tokens (or samples) per second
over the steps after 3 warm-up steps, ms/step, and
torch.cuda.max_memory_allocated / memory_allocated."""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import plan_torch  # noqa: E402


def sdpa_attention(qkv, B, T, C, NH, KVH, causal):
    q, k, v = plan_torch._split_qkv(qkv, B, T, C, NH, KVH)
    return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal)).transpose(1, 2).reshape(B, T, C)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("--text")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--bf16", action="store_true")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    plan_torch._attention = sdpa_attention
    plan = plan_torch.load_plan(a.plan)
    dev = torch.device("cuda")
    tokens = plan_torch.read_tokens(a.text, True) if a.text else None
    batches = plan_torch.Batches(plan, tokens, seed=1337)  # the trainer's default --seed, shuffled
    weights = plan_torch.init_params(plan, seed=1337)
    params = {k: torch.tensor(v, device=dev, requires_grad=True)
              for k, v in ((b["id"], weights[b["name"]]) for b in plan["buffers"] if b["role"] == "param")}
    opt = plan_torch.make_optimizer(plan, params, plan["optimizer"]["lr"])
    per_step = 0
    for b, k, _ in batches.inputs:
        if k == "tokens":
            per_step = 1
            for d in b["shape"]:
                per_step *= d
    if not per_step:
        per_step = batches.inputs[0][0]["shape"][0]
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times, losses = [], []
    for step in range(a.warmup + a.steps):
        inputs = {bid: t.to(dev, non_blocking=True) for bid, t in batches.next().items()}
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.bf16):
            loss = plan_torch.forward(plan, params, inputs, torch.float32)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())  # synchronizes
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    ms = 1e3 * sum(times) / len(times)
    print(json.dumps({"model": plan["model"], "bf16": a.bf16, "ms_per_step": ms,
                      "per_s": per_step * 1e3 / ms, "unit": "tok" if tokens is not None else "samples",
                      "max_memory_allocated": torch.cuda.max_memory_allocated(),
                      "memory_allocated": torch.cuda.memory_allocated(), "losses": losses}))


if __name__ == "__main__":
    main()
