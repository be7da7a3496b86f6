#!/usr/bin/python3
"""bench_trainer.py: a generated CPU trainer against PyTorch eager on the same
model, weights, batches and threads (CTest label bench; not pass/fail on time).

For each model: `memplan compile MODEL [--set B=.. --set T=..] -o DIR` (the
model's own B and T unless --B/--T or the model's `:B=..,T=..` say otherwise;
the table prints what was used), the trainer built Release with TRAINER_NATIVE
on, initial weights saved by the trainer (--steps 0 --save), then
  memplan  trainer --load W --steps N --threads TH --profile: step time is the
           median of steps 2..N (the first step touches cold pages); peak RSS
           from a second run that initializes from --seed instead of --load
           (the loader holds the whole file in memory once, and that is not
           training memory);
  torch    a fresh /usr/bin/python3 process (PyTorch float32 eager,
           tests/reference/plan_torch.py interpreting plan.json: the same ops,
           autograd backward, torch.optim.AdamW with the plan's groups) on the
           same weights (read tensor by tensor) and batches,
           torch.set_num_threads(TH), OMP_WAIT_POLICY=PASSIVE (--torch-omp-wait;
           under load, libgomp's default spinning made gpt2-mini's torch steps
           100-1000 ms instead of ~20: the other threads of a parallel region
           wait out a time slice of whatever holds the other core); step =
           zero_grad + forward + backward + optimizer step, median of steps
           2..N; peak RSS = ru_maxrss;
  sgemm    tests/bench/bench_trainer_sgemm.c: OpenBLAS's own cblas_sgemm at TH
           threads (its threading, not the trainer's pool) on exactly the
           matrix products of the plan's training schedule, read from
           plan.json: every `linear` (dims M K N) and `matmul` (Bt M K N),
           forward out[M,N] = x[M,K] W[N,K]^T, backward dx = dout W
           ([M,N] [N,K]) and dW = dout^T x ([M,N]^T [M,K]) where the schedule
           computes them (matmul the same per batch, x Bt), as the CPU runtime
           calls sgemm; the file DIR/sgemm_shapes.txt ("m n k ta tb count
           label"). The rate is total FLOPs / total time, each shape's time its
           best over several rounds of all shapes. Attention is not a GEMM in the CPU runtime (its
           own loops) and is not in it, nor are the element-wise ops, which the
           plan's step FLOPs do count.
Prints the table: B x T, ms/step and peak RSS of both and their ratios, the
trainer's GFLOP/s (plan step FLOPs / median step time) and its fraction of the
sgemm rate.

  bench_trainer.py --memplan build/bin/memplan --sgemm build/bin/bench_trainer_sgemm \\
      --workdir /tmp/bench --model gpt2-mini=models/gpt2-mini.yaml:10 \\
      --model llama-mini=models/llama-mini.yaml:10 \\
      --model gpt2-124m=models/gpt2-124m.yaml:5:B=4,T=64 [--threads 2] [--B 4 --T 64]

Models that read no tokens (cnn-mnist: f32 images [B, 1, 28, 28] and labels)
take their batches from --npy DIR (default out/mnist, made by
models/mnist_npy.py): the trainer with `--npy DIR`, torch with
plan_torch.Batches(npy=DIR), the same windows of B samples; batchnorm's
running statistics are read from the same weight file and updated in
training mode on both sides. cnn-mnist (B = 64, 30 steps) takes about a
minute.

--model NAME=YAML:STEPS[:DIM=V,...]: the dims after the last colon are set for
that model only (here GPT-2 124M at B=4, T=64 instead of its 8 x 1024); --B
and --T set B and T for every model that does not set its own.

Run time on the 2-core machines: gpt2-mini ~35-45 s, llama-mini ~1 minute
(load average 3-4, 2026-12-01; its steps ~0.35 s in both); GPT-2 124M ~2-3
minutes (measured at load average 7-9: its steps take seconds in both; setup,
the torch import and the 470 MiB weight file take the rest). Memory: GPT-2 124M
with fp32 AdamW needs ~1.8 GiB in the trainer and ~2.7 GiB in torch, run one
after the other. Step times on a loaded machine swing by tens of percent
between runs (the ratio with them), and so does the sgemm rate (100-180 GFLOP/s
on 2 cores at load 3-4): compare runs at similar load averages, which the
output reports. Targets (issue 4): step time <= 0.25x torch's, peak RSS
<= 0.7x torch's; printed, not enforced.
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(os.path.dirname(HERE), "reference")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("bench_trainer: failed (%d): %s\n%s%s" % (r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def gib(b):
    return "%.2f GiB" % (b / 2 ** 30) if b >= 2 ** 30 else "%.0f MiB" % (b / 2 ** 20)


def loadavg():
    return "%.2f %.2f %.2f" % os.getloadavg()


# ---------------------------------------------------------------------------
# the torch side, in its own process (`bench_trainer.py torch ...`)

def read_params(path, plan, torch, np, roles=("param",)):
    """{buffer id: leaf tensor} from a safetensors file, one tensor at a time
    (never the whole file in memory: peak RSS is training memory); with
    roles=("state",) the running statistics (plain tensors)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n).decode("utf-8"))
        data0 = 8 + n
        out = {}
        for b in plan["buffers"]:
            if b["role"] not in roles:
                continue
            t = header[b["name"]]
            assert t["dtype"] == "F32" and t["shape"] == b["shape"], b["name"]
            lo, hi = t["data_offsets"]
            f.seek(data0 + lo)
            a = np.frombuffer(f.read(hi - lo), dtype=np.float32).reshape(b["shape"]).copy()
            out[b["id"]] = torch.from_numpy(a).requires_grad_(b["role"] == "param")
    return out


def torch_main(argv):
    ap = argparse.ArgumentParser(prog="bench_trainer.py torch")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--weights", required=True)
    ap.add_argument("--text")
    ap.add_argument("--npy", help="DIR: the inputs from DIR/train/<input>.npy (models that read no tokens)")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    a = ap.parse_args(argv)
    import numpy as np
    import torch
    sys.path.insert(0, REF)
    import plan_torch
    torch.set_num_threads(a.threads)
    plan = plan_torch.load_plan(a.plan)
    params = read_params(a.weights, plan, torch, np)
    state = read_params(a.weights, plan, torch, np, ("state",))  # batchnorm's running statistics
    opt = plan_torch.make_optimizer(plan, params, plan["optimizer"]["lr"])
    if a.npy:
        batches = plan_torch.Batches(plan, npy=a.npy, seed=1337)  # the trainer's default --seed, shuffled
    else:
        batches = plan_torch.Batches(plan, plan_torch.read_tokens(a.text, True), seed=1337)
    ms, losses = [], []
    for i in range(a.steps):
        inputs = batches.next()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        # training mode: batchnorm on batch statistics, updating `state`; dropout with the trainer's keys
        loss = plan_torch.forward(plan, params, inputs, torch.float32, state=state, step=i + 1)
        loss.backward()
        opt.step()
        ms.append(1e3 * (time.perf_counter() - t0))
        losses.append(loss.item())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"ms": ms, "losses": losses, "rss": rss, "torch": torch.__version__}))
    return 0


# ---------------------------------------------------------------------------
# the benchmark

def median_after_first(ms):
    return statistics.median(ms[1:] if len(ms) > 1 else ms)


def gemm_shapes(plan):
    """The sgemm calls of one training step, as runtime/cpu_matmul.c makes them:
    [(m, n, k, ta, tb, count, label)] for C[m,n] = op(A)[m,k] op(B)[k,n], equal
    shapes merged (label: their layers, block numbers as #). Attention runs its
    own loops, not sgemm, and is not here; conv2d's GEMMs (one per sample and
    group, on its im2col matrix) are, im2col and col2im are not."""
    per_step = plan["totals"].get("accumulation_steps", 1)  # the schedule runs once per micro-batch
    shapes = {}

    def add(m, n, k, ta, tb, count, layer, kind):
        e = shapes.setdefault((m, n, k, ta, tb), [0, []])
        e[0] += count * per_step
        lab = "%s.%s" % (re.sub(r"\d+", "#", layer), kind)
        if lab not in e[1]:
            e[1].append(lab)

    for o in plan["schedule"]:
        if o["op"] == "conv2d":  # per sample and group (rt_conv2d_*): im2col [K, P] (1x1 stride 1: x itself)
            nb, c, o_, p_, g = o["dims"][0], o["dims"][1], o["dims"][4], o["dims"][5] * o["dims"][6], o["dims"][14]
            og, kk = o_ // g, (c // g) * o["dims"][7] * o["dims"][8]  # dims 7, 8: kh, kw
            if o["phase"] != "backward":  # out_g[Og, P] = W_g[Og, K] col_g[K, P]
                add(og, p_, kk, 0, 0, nb * g, o["layer"], "fwd")
                continue
            if o["outputs"][1] >= 0:  # dW_g[Og, K] = dout_g[Og, P] col_g^T
                add(og, kk, p_, 0, 1, nb * g, o["layer"], "dW")
            if o["outputs"][0] >= 0:  # col_g[K, P] = W_g^T dout_g, then col2im
                add(kk, p_, og, 1, 0, nb * g, o["layer"], "dx")
            continue
        if o["op"] == "linear":
            bt, (m, k, n) = 1, o["dims"][:3]
        elif o["op"] == "matmul":
            bt, m, k, n = o["dims"][:4]
        else:
            continue
        if o["phase"] != "backward":  # forward, and recompute: out[M,N] = x[M,K] W[N,K]^T (matmul: a[M,K] b[K,N])
            if o["op"] == "linear":
                add(m, n, k, 0, 1, bt, o["layer"], "fwd")
            else:
                add(m, n, k, 0, 0, bt, o["layer"], "fwd")
            continue
        dx, dw = o["outputs"][0] >= 0, o["outputs"][1] >= 0  # -1: the schedule does not compute that gradient
        if o["op"] == "linear":
            if dx:  # dx[M,K] = dout[M,N] W[N,K]
                add(m, k, n, 0, 0, bt, o["layer"], "dx")
            if dw:  # dW[N,K] = dout[M,N]^T x[M,K]
                add(n, k, m, 1, 0, bt, o["layer"], "dW")
        else:
            if dx:  # da[M,K] = dout[M,N] b[K,N]^T
                add(m, k, n, 0, 1, bt, o["layer"], "da")
            if dw:  # db[K,N] = a[M,K]^T dout[M,N]
                add(k, n, m, 1, 0, bt, o["layer"], "db")
    return [k + (c, ",".join(labs)) for k, (c, labs) in shapes.items()]


def bench_model(a, name, yaml, steps, sets):
    d = os.path.join(a.workdir, name)
    plan_path = os.path.join(d, "plan.json")
    cmd = [a.memplan, "compile", yaml, "-o", d]
    for kv in sets:
        cmd += ["--set", kv]
    run(cmd)
    b = os.path.join(d, "build")
    run(["cmake", "-S", d, "-B", b, "-DCMAKE_BUILD_TYPE=Release", "-DTRAINER_NATIVE=ON"])
    run(["cmake", "--build", b, "-j", str(a.threads)])
    trainer = os.path.join(b, "trainer")
    with open(plan_path) as f:
        plan = json.load(f)
    dims = plan["dims"]
    flops = plan["totals"]["step_flops"]
    # a model reads tokens when an embedding looks up a graph input (plan_torch.classify_inputs's rule; not
    # imported here: torch in this process would raise the trainers' ru_maxrss, which Linux keeps across exec)
    tokens = any(o["op"] == "embedding" and o["inputs"][0] >= 0 and plan["buffers"][o["inputs"][0]]["role"] == "input"
                 for o in plan["schedule"])
    data = ["--text", a.text] if tokens else ["--npy", a.npy]  # images: cnn-mnist reads out/mnist
    if not tokens and not os.path.isdir(os.path.join(a.npy, "train")):
        sys.exit("bench_trainer: %s reads no tokens and --npy %s has no train/ (python3 models/mnist_npy.py out)"
                 % (name, a.npy))
    common = data + ["--threads", str(a.threads), "--eval-batches", "0"]

    init = os.path.join(d, "init.safetensors")
    run([trainer, "--steps", "0", "--save", init] + common)

    # memplan: timing (same weights as torch), then memory (no file loaded)
    log = os.path.join(d, "memplan.csv")
    out = run([trainer, "--load", init, "--steps", str(steps), "--profile", "--log", log] + common)
    with open(os.path.join(d, "memplan.profile.txt"), "w") as f:
        f.write(out)
    # the kernel the trainer ran (runtime/cpu_blas.c may have chosen a better one than the library detected)
    blas = re.search(r"^BLAS: (.*)$", out, re.M)
    kernel = re.search(r"^OpenBLAS \S+, (\w+) kernel", blas.group(1)) if blas else None
    with open(log) as f:
        rows = [line.split(",") for line in f.read().split("\n")[1:] if line]
    mp_ms = [float(r[2]) for r in rows]
    mp_losses = [float(r[1]) for r in rows]
    out_rss = run([trainer, "--steps", "2"] + common)
    mp_rss = int(re.search(r"measured peak RSS (\d+) bytes", out_rss).group(1))

    # torch, in a fresh process
    env = dict(os.environ)
    if a.torch_omp_wait != "default":
        env["OMP_WAIT_POLICY"] = a.torch_omp_wait
    out = run([a.python, os.path.abspath(__file__), "torch", "--plan", plan_path, "--weights", init] + data +
              ["--steps", str(steps), "--threads", str(a.threads)], env=env)
    t = json.loads(out.strip().split("\n")[-1])

    # sgemm on this plan's matrix products
    shapes = gemm_shapes(plan)
    if not shapes:
        sys.exit("bench_trainer: %s has no linear or matmul to time sgemm on" % name)
    shapes_path = os.path.join(d, "sgemm_shapes.txt")
    with open(shapes_path, "w") as f:
        f.write("# m n k ta tb count label: C[m,n] = op(A)[m,k] op(B)[k,n], %s, one training step\n" % name)
        for sh in shapes:
            f.write("%d %d %d %d %d %d %s\n" % sh)
    # the floor on the trainer's own kernel: the library alone might detect a generic one
    sg_env = dict(os.environ, **({"OPENBLAS_CORETYPE": kernel.group(1)} if kernel else {}))
    sg = run([a.sgemm, shapes_path, str(a.threads)], env=sg_env)
    rate = float(re.search(r"sgemm_rate ([0-9.]+)", sg).group(1))
    sg_kernel = re.search(r"^sgemm kernel: (\S+)", sg, re.M)

    mp, tc = median_after_first(mp_ms), median_after_first(t["ms"])
    gflops = flops / (mp * 1e-3) * 1e-9
    if a.verbose:
        with open(os.path.join(d, "memplan.profile.txt")) as f:
            print(f.read())
        print(sg)
    bxt = "x".join(str(dims[k]) for k in ("B", "T") if k in dims)  # cnn-mnist: B only (images [B,1,28,28])
    return {"model": name, "bxt": bxt, "steps": steps, "mp_ms": mp, "tc_ms": tc, "mp_rss": mp_rss, "tc_rss": t["rss"],
            "gflops": gflops, "rate": rate, "mp_all": mp_ms, "tc_all": t["ms"], "mp_loss": mp_losses[0],
            "tc_loss": t["losses"][0], "torch": t["torch"], "step_gflop": flops * 1e-9,
            "blas": blas.group(1) if blas else "?", "kernel": sg_kernel.group(1) if sg_kernel else "?"}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "torch":
        return torch_main(sys.argv[2:])
    root = os.path.dirname(os.path.dirname(HERE))
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--sgemm", required=True, help="the bench_trainer_sgemm program")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--model", action="append", help="NAME=YAML:STEPS[:DIM=V,...] (repeatable)")
    ap.add_argument("--text", default=os.path.join(root, "runtime", "memplan_kernels.h"))
    ap.add_argument("--npy", default=os.path.join(root, "out", "mnist"),
                    help="DIR with train/<input>.npy for models that read no tokens (default out/mnist)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--B", type=int, help="B for every model that does not set its own (default: the model's)")
    ap.add_argument("--T", type=int, help="T for every model that does not set its own (default: the model's)")
    ap.add_argument("--python", default="/usr/bin/python3", help="a python3 with torch 1.13")
    ap.add_argument("--torch-omp-wait", default="PASSIVE",
                    help="OMP_WAIT_POLICY of the torch process (default PASSIVE; 'default': the environment's)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print profiles and sgemm shapes")
    a = ap.parse_args()
    if not a.model:
        a.model = ["gpt2-mini=%s:10" % os.path.join(root, "models", "gpt2-mini.yaml"),
                   "llama-mini=%s:10" % os.path.join(root, "models", "llama-mini.yaml"),
                   "gpt2-124m=%s:5:B=4,T=64" % os.path.join(root, "models", "gpt2-124m.yaml")]
    r = subprocess.run([a.python, "-c", "import torch, numpy"], capture_output=True)
    if r.returncode != 0:
        print("bench_trainer: %s has no torch; skipping" % a.python)
        return 77
    os.makedirs(a.workdir, exist_ok=True)
    t0 = time.time()
    print("bench_trainer: fp32, %d threads, %d CPUs, torch OMP_WAIT_POLICY %s; load average at start %s"
          % (a.threads, os.cpu_count(), a.torch_omp_wait if a.torch_omp_wait != "default"
             else os.environ.get("OMP_WAIT_POLICY", "unset"), loadavg()), flush=True)
    res = []
    for m in a.model:
        name, rest = m.split("=", 1)
        parts = rest.rsplit(":", 2)
        if len(parts) == 3 and "=" in parts[2]:
            yaml, steps, own = parts[0], parts[1], [kv for kv in parts[2].split(",") if kv]
        else:
            (yaml, steps), own = rest.rsplit(":", 1), []
        sets = list(own)
        for dim, v in (("B", a.B), ("T", a.T)):
            if v is not None and not any(kv.split("=", 1)[0] == dim for kv in own):
                sets.append("%s=%d" % (dim, v))
        t1 = time.time()
        res.append(bench_model(a, name, yaml, int(steps), sets))
        x = res[-1]
        print("  %s: B x T %s, %d steps, %.0f s; first-step loss memplan %.6f torch %.6f; memplan ms %s; torch ms %s; "
              "load average %s" % (name, x["bxt"], x["steps"], time.time() - t1, x["mp_loss"], x["tc_loss"],
                                   [round(v) for v in x["mp_all"]], [round(v) for v in x["tc_all"]], loadavg()),
              flush=True)
        print("    trainer BLAS: %s; sgemm floor measured on the %s kernel" % (x["blas"], x["kernel"]), flush=True)
    print()
    hdr = ("model", "B x T", "memplan ms", "torch ms", "ratio", "memplan RSS", "torch RSS", "ratio", "GFLOP/s",
           "kernel", "sgemm GFLOP/s", "of sgemm")
    fmt = "%-10s %7s %11s %10s %6s %12s %10s %6s %8s %9s %13s %8s"
    print(fmt % hdr)
    for x in res:
        print(fmt % (x["model"], x["bxt"], "%.1f" % x["mp_ms"], "%.1f" % x["tc_ms"], "%.3f" % (x["mp_ms"] / x["tc_ms"]),
                     gib(x["mp_rss"]), gib(x["tc_rss"]), "%.3f" % (x["mp_rss"] / x["tc_rss"]),
                     "%.1f" % x["gflops"], x["kernel"], "%.1f" % x["rate"], "%.1f%%" % (100 * x["gflops"] / x["rate"])))
    # issue 26's goal: GPT-2 124M (B=4, T=64, fp32) at >= 75% of the sgemm floor on the CPU's best kernel
    for x in res:
        if x["model"] == "gpt2-124m":
            print("goal (issue 26): gpt2-124m at >= 75%% of the sgemm floor: %.1f%%, %s"
                  % (100 * x["gflops"] / x["rate"], "met" if x["gflops"] >= 0.75 * x["rate"] else "MISSED"))
    print("\ntargets (issue 4): time ratio <= 0.25, RSS ratio <= 0.7; %s; torch %s; total %.0f s; "
          "load average at end %s" % ("; ".join("%s %s/%s" % (x["model"], "met" if x["mp_ms"] / x["tc_ms"] <= 0.25
                                                              else "MISSED", "met" if x["mp_rss"] / x["tc_rss"] <= 0.7
                                                              else "MISSED") for x in res),
                                      res[0]["torch"] if res else "?", time.time() - t0, loadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
