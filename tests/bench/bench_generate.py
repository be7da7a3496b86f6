#!/usr/bin/python3
"""bench_generate.py: decode tokens/s of GPT-2 124M (seeded weights), the
trainer's --generate from its planned KV cache and llm.c-style (recomputing
the window) against a PyTorch KV-cache loop, in the same run, on the same
weights, prompt and threads (CTest label bench; not pass/fail on time).

  memplan  `memplan compile models/gpt2-124m.yaml --set B=1 --set T=CTX
           --gen-context CTX`, built Release (TRAINER_NATIVE on); weights from
           --seed (--steps 0 --save); `trainer --load W --generate N
           --prompt-tokens P --temperature 0`: the prompt prefilled in one
           pass, then one token a step from the cache (runtime/cpu_generate.c);
           with --no-kv-cache, llm.c's loop, each token one eval forward of
           the whole [1, CTX] window; their own tok/s lines;
  torch    float32 eager, torch.no_grad, torch.set_num_threads(TH): the prompt
           in one pass (prefill), then one token a step reading and appending
           to a KV cache ([L][NH][ctx][hd] keys and values), greedy; the same N
           tokens timed from the prefill on, as the trainer times its loop.
Prints the rates (overall, and decode alone: the tokens after the first,
timed after the prefill), the ratios, the KV cache's bytes in plan.json
against PyTorch's cache (2 x L x NH x CTX x hd x 4), and whether the greedy
continuations agree (they should: the same weights, float32 all; a
difference at a near-tie is rounding).

Measured 2026-12-02 on the 2-core machine under load (load average 14),
--ctx 128 --generate 16 --threads 2: the cache 5.10 tok/s overall (5.46
decoding, prefill 0.42 s), recomputing 0.50, PyTorch's KV cache 1.45 (1.44
decoding): 3.5x; the caches 9,437,184 bytes both; all three greedy
continuations equal.

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
        out, pos, prefill = [], 0, 0.0
        ids = torch.tensor(prompt)
        for i in range(n):
            if pos + len(ids) > ctx:
                sys.exit("the prompt and the tokens exceed the context")
            logits = block_forward(embed(ids, pos), pos)
            pos += len(ids)
            t = int(torch.argmax(logits))
            out.append(t)
            ids = torch.tensor([t])
            if i == 0:
                prefill = time.perf_counter() - t0
        return out, time.perf_counter() - t0, prefill, (K.numel() + V.numel()) * K.element_size()


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
    run([a.memplan, "compile", a.model, "--set", "B=1", "--set", "T=%d" % a.ctx, "--gen-context", str(a.ctx), "-o", d])
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
    gen = [trainer, "--load", w, "--generate", str(a.generate), "--prompt-tokens", pf, "--temperature", "0",
           "--threads", str(a.threads)]
    out = run(gen)
    mine = [int(t) for t in re.search(r"^generated ids:(.*)$", out, re.M).group(1).split()]
    rate = float(re.search(r"^generate: \d+ tokens in [0-9.]+ s, ([0-9.]+) tok/s", out, re.M).group(1))
    m = re.search(r"prefilled in ([0-9.]+) s, then ([0-9.]+) decode tok/s", out)
    if not m:
        sys.exit("the trainer did not decode from a KV cache:\n" + out[-2000:])
    prefill, drate = float(m.group(1)), float(m.group(2))
    out = run(gen + ["--no-kv-cache"])
    recomputed = [int(t) for t in re.search(r"^generated ids:(.*)$", out, re.M).group(1).split()]
    rrate = float(re.search(r"^generate: \d+ tokens in [0-9.]+ s, ([0-9.]+) tok/s", out, re.M).group(1))

    plan = __import__("json").load(open(os.path.join(d, "plan.json")))
    dims = {x["name"]: x["value"] for x in plan["dims"]} if isinstance(plan["dims"], list) else plan["dims"]
    weights = {k: torch.from_numpy(v) for k, v in safetensors_io.load(w).items()}
    theirs, secs, tprefill, cache = torch_kv_generate(torch, F, weights, dims, prompt, a.generate)
    trate, tdrate = a.generate / secs, (a.generate - 1) / (secs - tprefill)
    planned = plan["generation"]["kv_cache_bytes"]
    print("\nGPT-2 124M, context %d, a %d-token prompt, %d tokens, %d threads:" % (a.ctx, a.prompt_len, a.generate,
                                                                                a.threads))
    print("                                         overall tok/s   decode tok/s   prefill s")
    print("  memplan, planned KV cache              %10.2f     %10.2f     %7.3f" % (rate, drate, prefill))
    print("  memplan, llm.c's recompute (no cache)  %10.2f     %10.2f" % (rrate, rrate))
    print("  PyTorch eager with a KV cache          %10.2f     %10.2f     %7.3f" % (trate, tdrate, tprefill))
    print("  ratio memplan cached / PyTorch: %.3f overall, %.3f decode; recompute / PyTorch %.3f"
          % (rate / trate, drate / tdrate, rrate / trate))
    print("  KV cache: plan.json %d bytes, PyTorch's %d bytes: %s" % (planned, cache,
                                                                      "equal" if planned == cache else "DIFFERENT"))
    for name, ids in (("cached", mine), ("recompute", recomputed)):
        agree = sum(1 for x, y in zip(ids, theirs) if x == y)
        first = next((i for i, (x, y) in enumerate(zip(ids, theirs)) if x != y), None)
        print("  greedy continuations, memplan %s vs PyTorch: %s" % (
            name, "equal" if first is None else "first difference at token %d (%d of %d equal)"
            % (first, agree, a.generate)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
