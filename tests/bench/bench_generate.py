#!/usr/bin/python3
"""bench_generate.py: decode tokens/s of GPT-2 124M (seeded weights), the
trainer's --generate against a PyTorch KV-cache loop, in the same run, on the
same weights, prompt and threads (CTest label bench; not pass/fail on time).

  memplan  `memplan compile models/gpt2-124m.yaml --set B=1 --set T=CTX`, built
           Release (TRAINER_NATIVE on); weights from --seed (--steps 0 --save);
           `trainer --load W --generate N --prompt-tokens P --temperature 0`:
           llm.c's loop, each token one eval forward of the whole [1, CTX]
           window (there is no KV cache yet); its own tok/s line;
  torch    float32 eager, torch.no_grad, torch.set_num_threads(TH): the prompt
           in one pass (prefill), then one token a step reading and appending
           to a KV cache ([L][NH][ctx][hd] keys and values), greedy; the same N
           tokens timed from the prefill on, as the trainer times its loop.
Prints both rates, their ratio and the KV cache's bytes (2 x L x NH x CTX x
hd x 4), and whether the two greedy continuations agree (they should: the
same weights, float32 both; a difference at a near-tie is rounding).

Measured 2026-12-02 on the 2-core machine under load (other engineers'
builds; real 3m46 s for user 33 s), --ctx 128 --generate 16 --threads 2:
memplan 0.50 tok/s, PyTorch KV cache 0.97 tok/s, ratio 0.515; continuations
equal. The KV cache would hold 9.0 MiB at context 128 (72 MiB at 1024).

  bench_generate.py --memplan build/bin/memplan --model models/gpt2-124m.yaml --workdir /tmp/bg \\
      [--ctx 128] [--generate 32] [--threads 2]
"""
import argparse
import os
import re
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))


def run(cmd):
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if r.returncode != 0:
        sys.exit("failed (%d):\n%s%s" % (r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
    return r.stdout


def torch_kv_generate(torch, F, w, dims, prompt, n):
    """Greedy GPT-2 with a KV cache: returns (ids, seconds)."""
    C, NH, L, ctx = dims["C"], dims["NH"], dims["L"], dims["T"]
    hd = C // NH
    K = torch.zeros(L, NH, ctx, hd)
    V = torch.zeros(L, NH, ctx, hd)

    def block_forward(x, pos):  # x [t, C] at positions pos..pos+t
        t = x.shape[0]
        for i in range(L):
            p = "h%d." % i
            h = F.layer_norm(x, (C,), w[p + "ln1.weight"], w[p + "ln1.bias"], 1e-5)
            q, k, v = F.linear(h, w[p + "attn.qkv.weight"], w[p + "attn.qkv.bias"]).view(t, 3, NH, hd).unbind(1)
            K[i, :, pos:pos + t] = k.transpose(0, 1)
            V[i, :, pos:pos + t] = v.transpose(0, 1)
            kk, vv = K[i, :, :pos + t], V[i, :, :pos + t]
            att = q.transpose(0, 1) @ kk.transpose(1, 2) / hd ** 0.5  # [NH, t, pos+t]
            mask = torch.ones(t, pos + t, dtype=torch.bool).tril(pos)
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            y = (att @ vv).transpose(0, 1).reshape(t, C)
            x = x + F.linear(y, w[p + "attn.proj.weight"], w[p + "attn.proj.bias"])
            h = F.layer_norm(x, (C,), w[p + "ln2.weight"], w[p + "ln2.bias"], 1e-5)
            x = x + F.linear(F.gelu(F.linear(h, w[p + "fc.weight"], w[p + "fc.bias"]), approximate="tanh"),
                             w[p + "proj.weight"], w[p + "proj.bias"])
        x = F.layer_norm(x[-1:], (C,), w["lnf.weight"], w["lnf.bias"], 1e-5)
        return F.linear(x, w["wte.weight"])[0]

    def embed(ids, pos):
        return w["wte.weight"][ids] + w["pos.weight"][pos:pos + len(ids)]

    with torch.no_grad():
        t0 = time.perf_counter()
        out, pos = [], 0
        ids = torch.tensor(prompt)
        for _ in range(n):
            if pos + len(ids) > ctx:
                sys.exit("the prompt and the tokens exceed the context")
            logits = block_forward(embed(ids, pos), pos)
            pos += len(ids)
            t = int(torch.argmax(logits))
            out.append(t)
            ids = torch.tensor([t])
        return out, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--ctx", type=int, default=128)
    ap.add_argument("--generate", type=int, default=32)
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    # libgomp's spinning threads under load (bench_trainer.py's --torch-omp-wait): passive, for both
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("torch is not installed: skipped")
        return 77
    import safetensors_io

    torch.set_num_threads(a.threads)
    os.makedirs(a.workdir, exist_ok=True)
    d = os.path.join(a.workdir, "gpt2-124m")
    run([a.memplan, "compile", a.model, "--set", "B=1", "--set", "T=%d" % a.ctx, "-o", d])
    b = os.path.join(d, "build")
    run(["cmake", "-S", d, "-B", b, "-DCMAKE_BUILD_TYPE=Release", "-DTRAINER_NATIVE=ON", "-DTRAINER_CUDA=OFF"])
    run(["cmake", "--build", b, "--target", "trainer", "-j", str(a.threads)])
    trainer = os.path.join(b, "trainer")
    w = os.path.join(a.workdir, "weights.safetensors")
    run([trainer, "--text", os.path.abspath(__file__), "--steps", "0", "--eval-batches", "0", "--save", w])
    prompt = [(1000 + 37 * i) % 50257 for i in range(a.prompt_len)]
    pf = os.path.join(a.workdir, "prompt.bin")
    with open(pf, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, len(prompt), *([0] * 253)))
        f.write(struct.pack("<%dH" % len(prompt), *prompt))
    out = run([trainer, "--load", w, "--generate", str(a.generate), "--prompt-tokens", pf, "--temperature", "0",
               "--threads", str(a.threads)])
    mine = [int(t) for t in re.search(r"^generated ids:(.*)$", out, re.M).group(1).split()]
    rate = float(re.search(r"^generate: \d+ tokens in [0-9.]+ s, ([0-9.]+) tok/s", out, re.M).group(1))

    plan = __import__("json").load(open(os.path.join(d, "plan.json")))
    dims = {x["name"]: x["value"] for x in plan["dims"]} if isinstance(plan["dims"], list) else plan["dims"]
    weights = {k: torch.from_numpy(v) for k, v in safetensors_io.load(w).items()}
    theirs, secs = torch_kv_generate(torch, F, weights, dims, prompt, a.generate)
    trate = a.generate / secs
    cache = 2 * dims["L"] * dims["NH"] * a.ctx * (dims["C"] // dims["NH"]) * 4
    print("\nGPT-2 124M, context %d, a %d-token prompt, %d tokens, %d threads:" % (a.ctx, a.prompt_len, a.generate,
                                                                                a.threads))
    print("  memplan trainer (eval plan, recomputes the window): %8.2f tok/s" % rate)
    print("  PyTorch eager with a KV cache (%.1f MiB):           %8.2f tok/s" % (cache / 2**20, trate))
    print("  ratio memplan / PyTorch: %.3f" % (rate / trate))
    agree = sum(1 for x, y in zip(mine, theirs) if x == y)
    first = next((i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), None)
    print("  greedy continuations: %s" % ("equal" if first is None else "first difference at token %d (%d of %d "
                                          "equal)" % (first, agree, a.generate)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
