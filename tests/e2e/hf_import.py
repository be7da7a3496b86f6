#!/usr/bin/python3
"""hf_import.py MEMPLAN PLAN_DIR WORKDIR: memplan import-hf against PyTorch.

A tiny GPT-2 in Hugging Face's layout (gpt2-mini's dims: C 128, 4 heads,
2 layers, V 256, 80 positions) with random weights, written the way
GPT2LMHeadModel.save_pretrained writes it (transformer.-prefixed names,
Conv1D weights [in, out], lm_head.weight tied to wte, the attention mask
buffers), is imported with --plan PLAN_DIR/plan.json (gpt2-mini, T = 64:
wpe cut to 64 rows) and loaded by PLAN_DIR's trainer; its first-step loss
must equal the loss PyTorch computes with Hugging Face's GPT-2 math (Conv1D:
x @ W + b, tanh GELU, layernorm eps 1e-5, tied output layer), in float64,
within 10x PyTorch's own float32 error (4 float32 ulps at least). The check
can fail: the same model with one Conv1D weight left untransposed must miss.
The data is exactly one batch (B*T+1 tokens), so the first batch is that
window however the trainer orders its batches.

Then: a 250-row vocabulary imports padded with zero rows to the plan's 256;
without --plan, names and shapes are HF's transposed (no cut, no padding);
and each bad input (a name outside the map, a shape against the plan, a
missing layer, an untied lm_head, an unknown dtype, a truncated file) exits 1
naming the tensor, with no output file left behind. And the same model as a
GPT2LMHeadModel folder (config.json + model.safetensors) through
`import-hf DIR`: its model.yaml, compiled and built, with its weights gives
the same first loss (planted: the yaml's gelu with approximate: none gave
"rel err 6.23e-06", a FAIL). And the trainer's greedy --generate from the
imported weights: 64 tokens equal to HF's math's greedy continuation.
Standard library, NumPy and PyTorch (skipped, 77, without torch)."""
import csv
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
try:
    import torch
except ImportError:
    print("hf_import: torch is not installed; skipped")
    sys.exit(77)
import safetensors_io  # noqa: E402

C, NH, L, NPOS = 128, 4, 2, 80
EPS32 = 2.0 ** -24


def hf_model(V, seed=0, layers=L):
    """HF GPT-2 tensors by HF name (float64), and a few the file carries."""
    g = np.random.default_rng(seed)
    w = {"transformer.wte.weight": g.normal(0, 0.5, (V, C)), "transformer.wpe.weight": g.normal(0, 0.5, (NPOS, C)),
         "transformer.ln_f.weight": 1 + 0.1 * g.normal(size=C), "transformer.ln_f.bias": 0.1 * g.normal(size=C)}
    for i in range(layers):
        p = "transformer.h.%d." % i
        for n, shape in (("attn.c_attn", (C, 3 * C)), ("attn.c_proj", (C, C)), ("mlp.c_fc", (C, 4 * C)),
                         ("mlp.c_proj", (4 * C, C))):
            w[p + n + ".weight"] = g.normal(0, 0.1, shape)  # Conv1D: [in, out]
            w[p + n + ".bias"] = 0.1 * g.normal(size=shape[1])
        for n in ("ln_1", "ln_2"):
            w[p + n + ".weight"] = 1 + 0.1 * g.normal(size=C)
            w[p + n + ".bias"] = 0.1 * g.normal(size=C)
    return w


def write_hf(path, w, extra=None, dtype="F32"):
    """The file HF writes: the weights, lm_head.weight (tied), the causal mask buffers."""
    t = {k: v.astype(np.float32) for k, v in w.items()}
    t["lm_head.weight"] = t["transformer.wte.weight" if "transformer.wte.weight" in t else "wte.weight"]
    for k in [k for k in w if k.endswith(".attn.c_attn.weight")]:
        t[k.replace("c_attn.weight", "bias")] = np.tril(np.ones((NPOS, NPOS), np.float32)).reshape(1, 1, NPOS, NPOS)
    t.update(extra or {})
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(t):
        a = np.ascontiguousarray(t[name])
        b = a.astype(np.float16).tobytes() if dtype == "F16" else a.tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def hf_logits(w, tokens, dtype, untransposed=None):
    """Hugging Face's GPT-2 forward (GPT2LMHeadModel's math): logits [B, T, V]."""
    t = {k.replace("transformer.", ""): torch.tensor(v, dtype=dtype) for k, v in w.items()}
    B, T = tokens.shape
    hd = C // NH
    x = t["wte.weight"][tokens] + t["wpe.weight"][:T]

    def conv1d(h, n):  # HF's Conv1D: x @ W + b with W [in, out]
        W = t[n + ".weight"]
        return h @ (W.T if n == untransposed else W) + t[n + ".bias"]

    def ln(h, n):
        return torch.nn.functional.layer_norm(h, (C,), t[n + ".weight"], t[n + ".bias"], eps=1e-5)

    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(L):
        p = "h.%d." % i
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(C, dim=2)
        q, k, v = (u.view(B, T, NH, hd).transpose(1, 2) for u in (q, k, v))
        a = (q @ k.transpose(-2, -1)) / (hd ** 0.5)
        a = torch.softmax(a.masked_fill(~mask, float("-inf")), dim=-1)
        y = (a @ v).transpose(1, 2).reshape(B, T, C)
        x = x + conv1d(y, p + "attn.c_proj")
        m = torch.nn.functional.gelu(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc"), approximate="tanh")
        x = x + conv1d(m, p + "mlp.c_proj")
    return ln(x, "ln_f") @ t["wte.weight"].T


def hf_loss(w, tokens, targets, dtype, untransposed=None):
    """hf_logits' mean cross-entropy."""
    B, T = tokens.shape
    logits = hf_logits(w, tokens, dtype, untransposed)
    return float(torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1)))


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    memplan, pdir, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    plan_path, trainer = os.path.join(pdir, "plan.json"), os.path.join(pdir, "build", "trainer")
    plan = json.load(open(plan_path))
    B, T, V = plan["dims"]["B"], plan["dims"]["T"], plan["dims"]["V"]
    fails = []

    def check(ok, what):
        print("%s %s" % ("ok:  " if ok else "FAIL:", what))
        if not ok:
            fails.append(what)

    # the loss: imported weights in the trainer against HF's math in torch
    w = hf_model(V)
    hf, out = os.path.join(work, "hf.safetensors"), os.path.join(work, "memplan.safetensors")
    write_hf(hf, w)
    r = run([memplan, "import-hf", "gpt2", hf, "-o", out, "--plan", plan_path])
    check(r.returncode == 0 and os.path.exists(out), "import-hf --plan exits 0 (%s)" % (r.stdout + r.stderr).strip())
    data = np.random.default_rng(1).integers(0, 256, B * T + 1, dtype=np.uint8)  # one batch exactly
    text = os.path.join(work, "one-batch.txt")
    data.tofile(text)
    log = os.path.join(work, "loss.csv")
    r = run([trainer, "--load", out, "--steps", "1", "--text", text, "--log", log, "--eval-batches", "0",
             "--threads", "2"])
    if r.returncode != 0:
        sys.exit("hf_import: the trainer failed (%d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    got = float(next(csv.DictReader(open(log)))["loss"])
    tok = torch.from_numpy(data[:-1].astype(np.int64)).reshape(B, T)
    tgt = torch.from_numpy(data[1:].astype(np.int64)).reshape(B, T)
    l64, l32 = hf_loss(w, tok, tgt, torch.float64), hf_loss(w, tok, tgt, torch.float32)
    tol = max(4 * EPS32, 10 * abs(l32 - l64) / l64)
    rel = abs(got - l64) / l64
    check(rel <= tol, "trainer loss %.9f vs PyTorch (HF GPT-2 math, float64) %.9f: rel err %.2e (tolerance %.1e)"
          % (got, l64, rel, tol))
    wrong = hf_loss(w, tok, tgt, torch.float64, untransposed="h.1.attn.c_proj")
    check(abs(got - wrong) / wrong > tol, "the check sees a missing transpose: h.1.attn.c_proj untransposed gives "
          "%.9f (rel %.2e)" % (wrong, abs(got - wrong) / wrong))

    # generation from the imported weights: the trainer's greedy --generate (64 tokens after a 7-byte prompt:
    # the window slides past T) against HF's math in float64 on the same windows, token for token; a first
    # difference is forgiven only where float64's two best logits are within 3x the float32-float64 logit
    # difference measured on the same windows (rounding could pick either). Planted once (2026-12-02): the
    # trainer's window one token short (its first token dropped): "FAIL: greedy generation, 64 tokens, equals HF's
    # math (exit 0: first difference at token 0, margin 0.573)". These weights continue with few distinct tokens
    # (4: 41 x3, 150 x11, 51 x25, 61 x25; float32 error 1.6e-5, least margin 0.28): where each run changes is the check.
    r = subprocess.run([trainer, "--load", out, "--generate", "64", "--prompt", "import ", "--temperature", "0",
                        "--threads", "2"], capture_output=True, text=True, errors="replace")
    ids = [l for l in r.stdout.splitlines() if l.startswith("generated ids:")]
    got_ids = [int(x) for x in ids[0].split()[2:]] if ids else []
    ctx, want, margin, err = list(b"import "), [], [], 0.0
    for _ in range(64):
        win = torch.tensor([ctx[-T:]])
        g64, g32 = hf_logits(w, win, torch.float64)[0, -1], hf_logits(w, win, torch.float32)[0, -1].double()
        err = max(err, float((g64 - g32).abs().max()))
        top = torch.topk(g64, 2).values
        margin.append(float(top[0] - top[1]))
        want.append(int(torch.argmax(g64)))
        ctx.append(want[-1])
    first = next((i for i in range(64) if i >= len(got_ids) or got_ids[i] != want[i]), None)
    print("generate: trainer %s\n          torch   %s\n          %d distinct; float32 logit error %.2e, least "
          "margin %.3g" % (got_ids, want, len(set(want)), err, min(margin)))
    check(r.returncode == 0 and len(set(want)) >= 3 and (first is None or margin[first] < 3 * err),
          "greedy generation, 64 tokens, equals HF's math (exit %d%s)"
          % (r.returncode, "" if first is None else ": first difference at token %d, margin %.3g" % (first, margin[first])))

    # a smaller vocabulary: zero rows up to the plan's V; wpe's first T rows
    w250 = hf_model(V - 6, seed=2)
    write_hf(hf, w250)
    r = run([memplan, "import-hf", "gpt2", hf, "-o", out, "--plan", plan_path])
    m = safetensors_io.load(out) if r.returncode == 0 else {}
    wte = m.get("wte.weight", np.zeros((0, C)))
    check(wte.shape == (V, C) and np.array_equal(wte[:V - 6], w250["transformer.wte.weight"].astype(np.float32))
          and not wte[V - 6:].any(), "wte [250, 128] padded with zero rows to the plan's [256, 128]")
    check(np.array_equal(m.get("pos.weight"), w250["transformer.wpe.weight"][:T].astype(np.float32)),
          "wpe [80, 128] cut to the plan's T: pos.weight [64, 128]")
    qkv = m.get("h1.attn.qkv.weight")
    check(qkv is not None and np.array_equal(qkv, w250["transformer.h.1.attn.c_attn.weight"].T.astype(np.float32)),
          "h.1.attn.c_attn.weight [128, 384] transposed to h1.attn.qkv.weight [384, 128]")
    check(len(m) == 4 + 12 * L, "%d tensors: no lm_head, no mask buffers" % len(m))

    # without --plan: HF's shapes, transposed; F16 in, F32 out; no prefix
    write_hf(hf, {k.replace("transformer.", ""): v for k, v in w.items()}, dtype="F16")
    r = run([memplan, "import-hf", "gpt2", hf, "-o", out])
    m = safetensors_io.load(out) if r.returncode == 0 else {}
    check(m.get("pos.weight", np.zeros(0)).shape == (NPOS, C) and m.get("h0.fc.weight", np.zeros(0)).shape == (4 * C, C)
          and np.array_equal(m["h0.fc.weight"], w["transformer.h.0.mlp.c_fc.weight"].astype(np.float32).astype(np.float16).astype(
              np.float32).T), "without --plan, F16 names without 'transformer.': HF's shapes, Conv1D transposed, F32")

    # a GPT2LMHeadModel folder (config.json + model.safetensors): import-hf DIR writes the model.yaml and the
    # weights (wpe whole: the model's position_embedding has max P = n_positions); its trainer's first loss is HF's
    folder, fout = os.path.join(work, "gpt2-folder"), os.path.join(work, "gpt2-imported")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(fout, ignore_errors=True)
    os.makedirs(folder)
    json.dump({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": C, "n_layer": L, "n_head": NH,
               "n_positions": NPOS, "vocab_size": V, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
               "torch_dtype": "float32"}, open(os.path.join(folder, "config.json"), "w"))
    write_hf(os.path.join(folder, "model.safetensors"), w)
    r = run([memplan, "import-hf", folder, "-o", fout, "--set", "B=%d" % B, "--set", "T=%d" % T])
    check(r.returncode == 0, "import-hf of a GPT2LMHeadModel folder exits 0 (%s)" % (r.stdout + r.stderr).strip())
    fplan = os.path.join(work, "gpt2-folder-plan")
    shutil.rmtree(fplan, ignore_errors=True)
    for cmd in ([memplan, "compile", os.path.join(fout, "model.yaml"), "-o", fplan],
                ["cmake", "-S", fplan, "-B", os.path.join(fplan, "build"), "-DTRAINER_CUDA=OFF"],
                ["cmake", "--build", os.path.join(fplan, "build")]):
        r = run(cmd)
        if r.returncode != 0:
            sys.exit("hf_import: %s failed:\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    flog = os.path.join(work, "folder-loss.csv")
    r = run([os.path.join(fplan, "build", "trainer"), "--load", os.path.join(fout, "weights.safetensors"), "--steps",
             "1", "--text", text, "--log", flog, "--eval-batches", "0", "--threads", "2"])
    fgot = float(next(csv.DictReader(open(flog)))["loss"]) if r.returncode == 0 else float("nan")
    rel = abs(fgot - l64) / l64
    check(rel <= tol, "the folder's model.yaml + weights: trainer loss %.9f vs PyTorch %.9f: rel err %.2e (%s)"
          % (fgot, l64, rel, r.stderr.strip()))

    # errors: exit 1 naming the tensor, and no output written
    bad = os.path.join(work, "bad.safetensors")
    cases = [
        ("a name outside the map", dict(w, **{"transformer.h.0.attn.c_attn.scale": np.ones(3)}), {},
         "tensor 'transformer.h.0.attn.c_attn.scale' is not in the GPT-2 name map"),
        ("a shape against the plan", dict(w, **{"transformer.h.0.mlp.c_fc.bias": np.ones(5)}), {},
         "tensor 'transformer.h.0.mlp.c_fc.bias' has shape [5]; the plan's 'h0.fc.bias' is [512]"),
        ("a missing layer", hf_model(V, layers=1), {}, "no tensor for the plan's parameter 'h1.ln1.weight'"),
        ("a vocabulary over the plan's V", hf_model(V + 1), {}, "tensor 'transformer.wte.weight' has 257 vocabulary "
         "rows; the plan's V is 256"),
        ("an untied lm_head", w, {"lm_head.weight": np.ones((V, C), np.float32)},
         "tensor 'lm_head.weight' differs from 'wte.weight' at element 0"),
    ]
    for what, model, extra, want in cases:
        write_hf(bad, model, extra)
        if os.path.exists(out):
            os.remove(out)
        r = run([memplan, "import-hf", "gpt2", bad, "-o", out, "--plan", plan_path])
        check(r.returncode == 1 and want in r.stderr and not os.path.exists(out)
              and not [f for f in os.listdir(work) if ".tmp." in f],
              "%s: exit %d, %s" % (what, r.returncode, r.stderr.strip()))
    write_hf(bad, w, dtype="F16")
    blob = open(bad, "rb").read()
    open(bad, "wb").write(blob.replace(b'"F16"', b'"I16"'))
    r = run([memplan, "import-hf", "gpt2", bad, "-o", out])
    check(r.returncode == 1 and "has dtype I16; the importer reads F32, F16 and BF16" in r.stderr,
          "an unknown dtype: %s" % r.stderr.strip())
    write_hf(bad, w)
    blob = open(bad, "rb").read()
    open(bad, "wb").write(blob[:-100])
    r = run([memplan, "import-hf", "gpt2", bad, "-o", out])
    check(r.returncode == 1 and "run past the" in r.stderr and "(truncated?)" in r.stderr,
          "a truncated file: %s" % r.stderr.strip())
    print("hf_import: %s" % ("FAIL" if fails else "PASS"))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
