#!/usr/bin/python3
"""accuracy.py: the trainer's held-out accuracy and eval loss (--npy DIR)
against PyTorch on the same weights (CTest label reference).

Trains with the trainer (--npy DIR --save), then runs the plan's eval
schedule (plan_torch.py, float64) over DIR/test in the trainer's batches: the
eval batch's B rows at a time, the last batch padded with the first samples
and those rows dropped. The trainer's count of correct samples must equal
torch's, except for rows whose top-two logits float32 cannot tell apart: their
float64 margin is under 10 times the worst logit error of a float32 torch run
(the yardstick, as reference.py). Its eval loss must be within 10 yardstick
errors of the float64 one, never under 4 float32 ulps. The check has to be
able to fail: counting the padded rows would have to move the count or the
loss by more than the tolerance, else the data set cannot tell and the test fails.
The trainer's loss is read from its --log CSV (9 digits): give --eval-every N
with N dividing --steps.
"""
import argparse
import csv
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import torch
except ImportError:
    print("accuracy: torch or numpy is not installed; skipping")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plan_torch  # noqa: E402
import safetensors_io  # noqa: E402

EPS32 = 2.0 ** -24
TOL_FACTOR = 10.0


def eval_logits(plan, params, inputs, dtype):
    """The eval schedule up to its loss: the loss op's logits, [rows, K]."""
    last = plan["eval_schedule"][-1]
    assert last["op"] == "cross_entropy" and last["outputs"][0] == plan["eval_loss_buffer"], "not a classifier"
    cut = dict(plan, eval_schedule=plan["eval_schedule"][:-1], eval_loss_buffer=last["inputs"][0])
    return plan_torch.forward(cut, params, inputs, dtype, sched_key="eval_schedule").reshape(last["dims"][0], -1)


def score(logits, labels):
    """(correct, summed cross-entropy, top-two margins) of rows of logits."""
    top2 = logits.topk(2, dim=1).values
    ce = torch.nn.functional.cross_entropy(logits, labels, reduction="sum")
    return int((logits.argmax(1) == labels).sum()), float(ce), (top2[:, 0] - top2[:, 1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--npy", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("trainer_args", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    weights = os.path.join(a.workdir, "final.safetensors")
    log = os.path.join(a.workdir, "log.csv")
    cmd = [a.trainer, "--npy", a.npy, "--save", weights, "--log", log] + a.trainer_args
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("accuracy: the trainer failed (%d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    m = re.search(r"^eval loss ([0-9.]+), accuracy [0-9.]+% \((\d+) of (\d+) correct\)", r.stdout, re.M)
    if not m:
        sys.exit("accuracy: no final eval line with an accuracy:\n" + r.stdout)
    t_correct, t_count = int(m.group(2)), int(m.group(3))
    with open(log) as f:  # the CSV has 9 digits of the last evaluation's loss (give --eval-every)
        rows = [row for row in csv.DictReader(f) if row["eval_loss"] != "nan"]
    if not rows or abs(float(rows[-1]["eval_loss"]) - float(m.group(1))) > 5e-7:
        sys.exit("accuracy: the final evaluation is not in %s: give --eval-every N dividing --steps" % log)
    t_loss = float(rows[-1]["eval_loss"])

    plan = plan_torch.load_plan(a.plan)
    inputs = plan_torch.classify_inputs(plan, "eval_schedule", "eval")
    data = {b["id"]: np.load(os.path.join(a.npy, "test", b["name"] + ".npy")) for b, _, _ in inputs}
    label_id = next(b["id"] for b, k, _ in inputs if k == "labels")
    S = len(data[label_id])
    B = inputs[0][0]["shape"][0]
    w = safetensors_io.load(weights)
    runs = {}
    for dtype in (torch.float64, torch.float32):
        params = plan_torch.make_params(plan, w, dtype)
        rows, labels = [], []
        with torch.no_grad():
            for first in range(0, S, B):
                idx = [(first + r) % S for r in range(B)]
                batch = {bid: torch.from_numpy(np.ascontiguousarray(v[idx])).reshape(
                    next(b["shape"] for b, _, _ in inputs if b["id"] == bid)) for bid, v in data.items()}
                rows.append(eval_logits(plan, params, batch, dtype))
                labels.append(batch[label_id].reshape(-1).long())
        runs[dtype] = (torch.cat(rows), torch.cat(labels))
    logits64, labels = runs[torch.float64]
    logits32 = runs[torch.float32][0].double()
    real = logits64[:S], labels[:S]
    correct, ce_sum, margin = score(*real)
    loss64 = ce_sum / S
    loss32 = float(torch.nn.functional.cross_entropy(logits32[:S], labels[:S]))
    yard = float((logits32[:S] - logits64[:S]).abs().max())
    close = int((margin < TOL_FACTOR * yard).sum())
    loss_tol = max(TOL_FACTOR * abs(loss32 - loss64), 4 * EPS32 * loss64)
    # what a trainer counting the padded rows of the last batch would report
    pad_correct, pad_ce, _ = score(logits64, labels)
    pad_loss = pad_ce / len(labels)
    print("%s on %s/test: %d samples in %d batches of %d (the last padded with %d rows)"
          % (plan["model"], a.npy, S, len(labels) // B, B, len(labels) - S))
    print("  trainer: %d of %d correct, eval loss %.9g (%.1e from float64's)" % (t_correct, t_count, t_loss,
                                                                               abs(t_loss - loss64)))
    print("  torch (float64): %d of %d correct, eval loss %.6f; float32 yardstick: worst logit error %.2e, "
          "loss %.6f" % (correct, S, loss64, yard, loss32))
    print("  %d rows with top-two logits closer than %.1e (10 yardstick errors); loss tolerance %.1e"
          % (close, TOL_FACTOR * yard, loss_tol))
    print("  counting the padded rows would give %d of %d correct, eval loss %.6f" % (pad_correct, len(labels),
                                                                                  pad_loss))
    ok = t_count == S and abs(t_correct - correct) <= close and abs(t_loss - loss64) <= loss_tol
    sensitive = abs(pad_loss - loss64) > loss_tol
    if not sensitive:
        print("  FAIL this data set cannot tell a trainer that counts the padding: choose another batch or set")
    print("accuracy: %s" % ("PASS" if ok and sensitive else "FAIL"))
    return 0 if ok and sensitive else 1


if __name__ == "__main__":
    sys.exit(main())
