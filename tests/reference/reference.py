#!/usr/bin/python3
"""reference.py: a generated trainer against PyTorch on the same weights and
batches. Writes initial weights (drawn by torch from plan.json's init specs)
as safetensors, trains N steps with `trainer --load`, runs the same N steps
in PyTorch (float64, plan_torch.py interpreting plan.json, torch.optim with
the plan's param groups), and compares per-step losses (relative 1e-5) and
final weights (1e-4, absolute below 1, relative above) read back from the
trainer's --save file. --perturb-lr F runs torch with lr * F and expects the
comparison to FAIL (the check can catch a wrong update). Exits 77 (CTest's
skip code) when torch is absent."""
import argparse
import csv
import os
import subprocess
import sys

try:
    import numpy as np
    import torch
except ImportError:
    print("reference: torch or numpy is not installed; skipping")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plan_torch  # noqa: E402
import safetensors_io  # noqa: E402

LOSS_RTOL, WEIGHT_TOL = 1e-5, 1e-4


def run_trainer(a, init, final, log):
    cmd = [a.trainer, "--load", init, "--steps", str(a.steps), "--log", log, "--save", final,
           "--eval-batches", "0", "--threads", "2", "--log-every", "1"]
    if a.text:
        cmd += ["--text", a.text]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("reference: the trainer failed (%d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    with open(log) as f:
        return [float(row["loss"]) for row in csv.DictReader(f)]


def run_torch(a, plan, init):
    torch.set_num_threads(2)
    dt = torch.float64
    params = plan_torch.make_params(plan, init, dt)
    lr = plan["optimizer"]["lr"] * a.perturb_lr
    opt = plan_torch.make_optimizer(plan, params, lr)
    tokens = plan_torch.read_tokens(a.text, True) if a.text else None
    batches = plan_torch.Batches(plan, tokens)
    losses = []
    # Per element: did its gradient ever sink to float32 noise (below 1e-6 of
    # its tensor's largest)? AdamW divides by |g|, so such an element's update
    # is decided by rounding (up to lr per step either way) in any float32
    # trainer; it is checked against that bound instead of 1e-4.
    noisy = {i: torch.zeros_like(p, dtype=torch.bool) for i, p in params.items()}
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = plan_torch.forward(plan, params, batches.next(), dt)
        loss.backward()
        for i, p in params.items():
            g = p.grad.abs()
            noisy[i] |= (g < 1e-6 * g.max()) & (g > 0)
        opt.step()
        losses.append(loss.item())
    names = {b["id"]: b["name"] for b in plan["buffers"]}
    if plan["optimizer"]["type"] != "adamw":
        noisy = {i: torch.zeros_like(n) for i, n in noisy.items()}
    return losses, {names[i]: p.detach().numpy() for i, p in params.items()}, \
        {names[i]: n.numpy() for i, n in noisy.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--text")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--perturb-lr", type=float, default=1.0)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    plan = plan_torch.load_plan(a.plan)
    init = plan_torch.init_params(plan, seed=1)
    p_init = os.path.join(a.workdir, "init.safetensors")
    p_final = os.path.join(a.workdir, "final.safetensors")
    safetensors_io.save(p_init, init, {"format": "pt"})
    got = run_trainer(a, p_init, p_final, os.path.join(a.workdir, "losses.csv"))
    want, want_w, noisy = run_torch(a, plan, init)
    got_w = safetensors_io.load(p_final)

    ok = len(got) == len(want)
    print("%s %s, %d %s steps%s" % (plan["model"], "trainer vs torch", a.steps, plan["optimizer"]["type"],
                                    " (torch lr x %g: expecting a mismatch)" % a.perturb_lr if a.perturb_lr != 1 else ""))
    for i, (g, w) in enumerate(zip(got, want)):
        rel = abs(g - w) / abs(w)
        ok &= rel <= LOSS_RTOL
        print("  step %d: loss %.9f vs %.9f  rel err %.2e%s" % (i + 1, g, w, rel, "" if rel <= LOSS_RTOL else "  > 1e-5"))
    worst, worst_name, n_noisy, worst_noisy = 0.0, "", 0, 0.0
    bound = 2.0 * plan["optimizer"]["lr"] * a.steps  # AdamW moves an element at most lr per step
    for name, w in want_w.items():
        err = np.abs(got_w[name].astype(np.float64) - w) / np.maximum(1.0, np.abs(w))
        n_noisy += int(noisy[name].sum())
        if noisy[name].any():
            worst_noisy = max(worst_noisy, float(err[noisy[name]].max()))
        err = float(np.max(np.where(noisy[name], 0.0, err)))
        if err > worst:
            worst, worst_name = err, name
    ok &= worst <= WEIGHT_TOL and worst_noisy <= bound
    print("  final weights: worst error %.2e in %s (tolerance %.0e)" % (worst, worst_name, WEIGHT_TOL))
    if n_noisy:
        print("  %d elements with gradients at float32 noise level: worst error %.2e (bound 2 lr steps = %.0e)"
              % (n_noisy, worst_noisy, bound))
    expect = a.perturb_lr == 1.0
    print("reference: %s" % ("PASS" if ok == expect else "FAIL"))
    return 0 if ok == expect else 1


if __name__ == "__main__":
    sys.exit(main())
