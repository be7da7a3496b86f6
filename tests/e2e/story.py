#!/usr/bin/python3
"""story.py MEMPLAN SOURCE_DIR WORKDIR [--seed N]: the fine-tuning story of
README's "End to end: pretrain, export, import, QLoRA, merge",
command for command as a user runs it (exit statuses 0, each output there):

1. pretrain llama-mini (B 4, T 32 by --set; 30 steps) on the GPL-3 text;
2. memplan export-hf its checkpoint to a Hugging Face folder;
3. memplan import-hf that folder back (model.yaml + weights.safetensors): the
   weights must be the pretrained ones, bit for bit;
4. compile the imported model with rank-4 LoRA on every projection and an
   NF4 base (--base-weights nf4), --load the imported weights, fine-tune 20
   steps on OTHER text (Apache-2.0), evaluating on held-out text (MPL-2.0);
   a --steps 0 run of the same command saves step 4's start;
5. memplan export-hf --merge the fine-tuned checkpoint;
6. Hugging Face's Llama equations in PyTorch (tests/e2e/hf_llama.py's
   hf_loss, float64) on the merged folder and the same held-out batches must
   give the trainer's eval loss.

Also: the LoRA run trained (its held-out loss fell from the start's), while
its base stayed bit-identical (every frozen tensor of its checkpoint, the NF4
codes and their absmax, equals step 4's start); export-hf of an NF4 weight
without its absmax, or of the NF4 base with the fp32 run's plan, exits 1
naming the tensor and writes nothing.

The tolerance of step 6: the trainer computes in float32 with the base
dequantized from NF4 and the adapters as their own ops; the merged folder
holds float32 W_deq + (alpha/r) B A, rounded once per element, and the
reference is float64. So the difference is float32 rounding: the trainer's
forward and the merge's. PyTorch's own float32 forward on the merged folder
misses its float64 by the same kind of error; the bound is 10x that (at least
4 float32 ulps), hf_llama.py's bound. Measured over --seed 1337, 1, 2 under
the Zen and Prescott OpenBLAS kernels: 1.7e-9 to 3.2e-8 against 2.4e-7 allowed
(tests/e2e.cmake's e2e_story comment has the figures and the command).

Planted bugs, each seen failing once by hand: see tests/e2e.cmake (e2e_story).
Standard library, NumPy and PyTorch (skipped, 77, without torch or without
/usr/share/common-licenses)."""
import csv
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import basew  # noqa: E402  (read_st: every dtype of a checkpoint)
import hf_llama  # noqa: E402  (hf_loss: HF's Llama equations; exits 77 without torch)
import torch  # noqa: E402

LIC = "/usr/share/common-licenses"
B, T = 4, 32
EVAL_BATCHES = 4
EPS32 = 2.0 ** -24


def main():
    args = sys.argv[1:]
    seed = "1337"
    if "--seed" in args:
        i = args.index("--seed")
        seed = args[i + 1]
        del args[i:i + 2]
    memplan, src, work = (os.path.abspath(a) for a in args)
    pretrain_text, tune_text, heldout = (os.path.join(LIC, f) for f in ("GPL-3", "Apache-2.0", "MPL-2.0"))
    if not all(os.access(f, os.R_OK) for f in (pretrain_text, tune_text, heldout)):
        print("story: %s's GPL-3, Apache-2.0 and MPL-2.0 are not there; skipped" % LIC)
        return 77
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    fails = []

    def check(ok, what):
        print("%s %s" % ("ok:  " if ok else "FAIL:", what))
        if not ok:
            fails.append(what)
        return ok

    def user(cmd, *outputs):
        """A command as the user types it: exit 0 and each output there, else the story stops here."""
        shown = " ".join("memplan" if c == memplan else os.path.relpath(c, work) if c.startswith(work) else c
                         for c in cmd)
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
        missing = [os.path.relpath(o, work) for o in outputs if not os.path.exists(o)]
        if not check(r.returncode == 0 and not missing, "%s: exit %d%s" % (
                shown, r.returncode, ", missing %s" % missing if missing else "")):
            sys.exit("story: stopped:\n%s%s" % (r.stdout, r.stderr))
        return r.stdout

    def build(pdir):
        user(["cmake", "-S", pdir, "-B", os.path.join(pdir, "build"), "-DTRAINER_CUDA=OFF"])
        user(["cmake", "--build", os.path.join(pdir, "build")], os.path.join(pdir, "build", "trainer"))
        return os.path.join(pdir, "build", "trainer")

    W = lambda *p: os.path.join(work, *p)  # noqa: E731
    common = ["--threads", "2", "--seed", seed]
    # 1. pretrain
    user([memplan, "compile", os.path.join(src, "models", "llama-mini.yaml"), "--set", "B=%d" % B, "--set", "T=%d" % T,
          "-o", W("pre")], W("pre", "plan.json"))
    trainer = build(W("pre"))
    user([trainer, "--text", pretrain_text, "--steps", "30", "--lr", "3e-3", "--eval-batches", "0",
          "--save", W("pre.safetensors")] + common, W("pre.safetensors"))
    # 2. export-hf
    user([memplan, "export-hf", W("pre"), W("pre.safetensors"), "-o", W("hf-pre")],
         W("hf-pre", "config.json"), W("hf-pre", "model.safetensors"))
    # 3. import-hf
    user([memplan, "import-hf", W("hf-pre"), "-o", W("imported"), "--set", "B=%d" % B, "--set", "T=%d" % T],
         W("imported", "model.yaml"), W("imported", "weights.safetensors"))
    pre, imp = basew.read_st(W("pre.safetensors")), basew.read_st(W("imported", "weights.safetensors"))
    params = [k for k in pre if not k.startswith("opt.") and k in imp]
    same = len(imp) and all(imp[k][0] == pre[k][0] and imp[k][1].tobytes() == pre[k][1].tobytes() for k in imp)
    check(same and len(params) == len(imp), "export-hf then import-hf gives the %d pretrained tensors back, bit for "
          "bit" % len(imp))
    # 4. LoRA on an NF4 base, from the imported weights, on other text
    lora = ["--lora-rank", "4", "--lora-alpha", "8", "--lora-targets", "q,k,v,attn.proj,gate,up,down"]  # PEFT's usual
    user([memplan, "compile", W("imported", "model.yaml")] + lora + ["--base-weights", "nf4", "-o", W("tuned")],
         W("tuned", "plan.json"))
    check(json.load(open(W("tuned", "plan.json"))).get("base_weights") == "nf4", "the plan stores its base as nf4")
    trainer = build(W("tuned"))
    data = ["--load", W("imported", "weights.safetensors"), "--text", tune_text, "--val", heldout,
            "--eval-batches", str(EVAL_BATCHES)] + common
    out = user([trainer, "--steps", "0", "--save", W("start.safetensors")] + data, W("start.safetensors"))
    start_eval = float(re.search(r"^eval loss ([0-9.]+)", out, re.M).group(1))
    user([trainer, "--steps", "20", "--lr", "1e-2", "--eval-every", "20", "--log", W("tuned.csv"),
          "--save", W("tuned.safetensors")] + data, W("tuned.safetensors"), W("tuned.csv"))
    rows = list(csv.DictReader(open(W("tuned.csv"))))
    got = float(rows[-1]["eval_loss"])
    # the base stayed bit-identical; the adapters trained
    s0, s1 = basew.read_st(W("start.safetensors")), basew.read_st(W("tuned.safetensors"))
    base = [k for k in s0 if ".lora_" not in k and not k.startswith("opt.")]
    nf4 = [k for k in base if s0[k][0] == "U8"]
    moved = [k for k in base if k not in s1 or s1[k][0] != s0[k][0] or s1[k][1].tobytes() != s0[k][1].tobytes()]
    check(len(nf4) == len(imp) and not moved, "the base is bit-identical to step 4's start: %d tensors, of them %d NF4 "
          "code arrays (every imported weight's; each with its absmax)%s" % (len(base), len(nf4), ", moved: %s" % moved if moved else ""))
    bmax = max(float(np.abs(s1[k][1]).max()) for k in s1 if k.endswith(".lora_B"))
    check(bmax > 0, "the adapters trained (max |lora_B| %.3g, zero at the start)" % bmax)
    # held-out loss at the start (LoRA's B is zero: the NF4 base alone) against after 20 steps; measured 3.891
    # -> 3.794 (--seed 1337, PEFT's targets), see tests/e2e.cmake for the other seeds and kernels
    check(got < start_eval - 0.03, "the LoRA run trained: held-out loss %.6f at its start, %.6f after 20 steps "
          "(must fall by 0.03)" % (start_eval, got))
    # 5. export-hf --merge
    user([memplan, "export-hf", W("tuned"), W("tuned.safetensors"), "-o", W("hf-tuned"), "--merge"],
         W("hf-tuned", "config.json"), W("hf-tuned", "model.safetensors"))
    # a stored base without its absmax: exit 1 naming both, nothing written
    blob = open(W("tuned.safetensors"), "rb").read()
    n = int.from_bytes(blob[:8], "little")
    hdr = json.loads(blob[8:8 + n])
    hdr = {k + ("_old" if k == "h1.up.weight.absmax" else ""): v for k, v in hdr.items()}  # renamed: absent
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open(W("no-absmax.safetensors"), "wb").write(len(h).to_bytes(8, "little") + h + blob[8 + n:])
    r = subprocess.run([memplan, "export-hf", W("tuned"), W("no-absmax.safetensors"), "-o", W("hf-bad"), "--merge"],
                       capture_output=True, text=True)
    check(r.returncode == 1 and "tensor 'h1.up.weight' is stored as NF4: it needs 'h1.up.weight.absmax', F32 with "
          "2752 values" in r.stderr and not [f for f in os.listdir(work) if f.startswith("hf-bad")],
          "an NF4 weight without its absmax: exit %d, %s" % (r.returncode, r.stderr.strip()))
    # the base alone (NF4 codes, no adapters) with the fp32 run's plan: exit 1, the plan's storage named
    hdr, off, blobs = {}, 0, []
    for k in base:
        b = s1[k][1].tobytes()
        hdr[k] = {"dtype": s1[k][0], "shape": list(s1[k][1].shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    open(W("base-only.safetensors"), "wb").write(len(h).to_bytes(8, "little") + h + b"".join(blobs))
    r = subprocess.run([memplan, "export-hf", W("pre"), W("base-only.safetensors"), "-o", W("hf-bad")],
                       capture_output=True, text=True)
    check(r.returncode == 1 and "tensor 'emb.weight' is stored as NF4 (U8), but the plan stores it as f32: give the "
          "plan of the run that saved the checkpoint" in r.stderr and not os.path.exists(W("hf-bad")),
          "an NF4 checkpoint with the fp32 plan: exit %d, %s" % (r.returncode, r.stderr.strip()))
    # 6. Hugging Face's equations on the merged folder, the trainer's held-out batches
    cfg = json.load(open(W("hf-tuned", "config.json")))
    w = hf_llama.st_read(W("hf-tuned", "model.safetensors"))
    toks = np.frombuffer(open(heldout, "rb").read(), np.uint8).astype(np.int64)

    def eval_loss(weights, dtype):
        losses = []
        for k in range(EVAL_BATCHES):  # the trainer's eval: windows of B*T+1 at multiples of B*T, from the start
            win = torch.from_numpy(toks[k * B * T:(k + 1) * B * T + 1])
            losses.append(hf_llama.hf_loss(cfg, weights, win[:-1].reshape(B, T), win[1:].reshape(B, T), dtype))
        return sum(losses) / len(losses)

    l64, l32 = eval_loss(w, torch.float64), eval_loss(w, torch.float32)
    own = abs(l32 - l64) / l64
    tol = max(4 * EPS32, 10 * own)
    rel = abs(got - l64) / l64
    check(rel <= tol, "the merged folder in HF's equations (float64) %.9f vs the trainer's eval %.9f: rel err %.2e "
          "(tolerance %.1e: 10x float32 torch's own %.2e)" % (l64, got, rel, tol, own))
    print("story: %s" % ("FAIL" if fails else "PASS"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
