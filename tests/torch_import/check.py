#!/usr/bin/python3
"""check.py: a module through the PyTorch front door and back, against PyTorch.

  check.py MEMPLAN WORKDIR SPEC [import-torch options...] [--steps N] [--floor-ulps N]

1. `memplan import-torch SPEC OPTIONS -o WORKDIR/import`
2. `memplan compile WORKDIR/import/model.yaml -o WORKDIR/trainer`, built (CPU) with its own CMake
3. the trainer trains N steps from the imported weights (--load), saves, and evaluates one batch
4. PyTorch trains the same module, loaded with the same weights by the load-back helper (load_into), on
   the same batches (tests/reference/plan_torch.py's Batches: the trainer's own), with torch.optim and
   memplan's parameter groups, in float64 (the reference) and float32 (the yardstick)
5. the trainer's checkpoint goes back into a fresh module (`memplan import-torch load`: load_into,
   load_state_dict(strict=True); the saved state_dict loaded strictly again); its
   eval-mode forward on the trainer's eval batch must give the trainer's eval loss, its running
   statistics torch's.

Tolerances are the reference harness's rule (tests/reference/reference.py): the trainer may differ from
the float64 reference by 10x the float32 yardstick's distance from it, never less than 4 float32 ulps.
Exits 77 (CTest's skip) without torch."""
import math
import os
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("check.py: torch is not installed; skipping")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "reference"), os.path.join(HERE, "..", "e2e"),
                os.path.join(HERE, "..", "..", "tools")]
import e2e  # noqa: E402
import plan_torch  # noqa: E402
import torch_import  # noqa: E402

EPS32 = 2.0 ** -24
TOL_FACTOR, FLOOR = 10.0, 4 * EPS32


def rel_tol(w, y):
    return max(FLOOR, TOL_FACTOR * abs(y - w) / abs(w))


def main():
    memplan, work, spec = sys.argv[1:4]
    if spec.startswith("torchvision"):
        try:
            import torchvision  # noqa: F401
        except ImportError:
            print("check.py: torchvision is not installed; skipping")
            sys.exit(77)
    opts = sys.argv[4:]
    steps, text = 5, None
    if "--steps" in opts:
        i = opts.index("--steps")
        steps = int(opts[i + 1])
        del opts[i:i + 2]
    if "--floor-ulps" in opts:  # a model whose float32 sums move by more ulps with the BLAS kernel (measured)
        global FLOOR
        i = opts.index("--floor-ulps")
        FLOOR = float(opts[i + 1]) * EPS32
        del opts[i:i + 2]
    if "--text" in opts:  # token inputs: the trainer's --text FILE (bytes as tokens)
        i = opts.index("--text")
        text = opts[i + 1]
        del opts[i:i + 2]
    imp, tdir = os.path.join(work, "import"), os.path.join(work, "trainer")
    e2e.must([memplan, "import-torch", spec] + opts + ["-o", imp])
    e2e.build(memplan, os.path.join(imp, "model.yaml"), tdir, "-DTRAINER_CUDA=OFF")
    log, final = os.path.join(work, "log.csv"), os.path.join(work, "final.safetensors")
    e2e.must([os.path.join(tdir, "build", "trainer"), "--load", os.path.join(imp, "weights.safetensors"),
              "--steps", str(steps), "--log", log, "--save", final, "--seed", "1337", "--eval-batches", "1",
              "--eval-every", str(steps), "--threads", "2", "--log-every", "1"] + (["--text", text] if text else []))
    import csv
    with open(log) as f:
        rows = list(csv.DictReader(f))
    got, got_eval = [float(r["loss"]) for r in rows], float(rows[-1]["eval_loss"])

    plan = plan_torch.load_plan(os.path.join(tdir, "plan.json"))
    names = {b["id"]: b["name"] for b in plan["buffers"]}
    loss_layer = next(op for op in plan["schedule"] if op["op"] in ("cross_entropy", "mse"))
    kind = loss_layer["op"]
    nmap = os.path.join(imp, "name_map.json")
    mp = torch_import.parse_kwargs
    import json
    with open(nmap) as f:
        nm = json.load(f)
    order = [n for n in torch_import.parse_inputs([opts[i + 1] for i, o in enumerate(opts) if o == "--input"],
                                                  plan["dims"])]
    target = next(o.split(":", 1)[1] for o in opts if o.startswith(("cross_entropy:", "mse:")))
    fwd_names = [n for n, _, _ in order if n != target]

    def fresh(dtype):
        m = torch_import.build_module(nm["spec"], mp(nm["kwargs"]))
        torch_import.load_into(m, os.path.join(imp, "weights.safetensors"), nmap)
        return m.to(dtype)

    def loss_of(m, batch, dtype):
        out = m(*[batch[n].to(dtype) if batch[n].is_floating_point() else batch[n].long() for n in fwd_names])
        t = batch[target]
        if kind == "cross_entropy":
            return F.cross_entropy(out.reshape(-1, out.shape[-1]), t.reshape(-1).long())
        return F.cross_entropy(out, t.long()) if kind == "cross_entropy" else F.mse_loss(out, t.to(dtype))

    torch.set_num_threads(2)
    o = plan["optimizer"]
    runs = {}
    for dt in (torch.float64, torch.float32):
        m = fresh(dt)
        # memplan decays the parameters of rank >= 2 in its own shapes (a ViT class token [1, 1, C] is its [C])
        dec = set(nm["names"][b["name"]] for b in plan["buffers"] if b.get("weight_decay") and b["name"] in
                  nm["names"])
        decay = [p for k, p in m.named_parameters() if k in dec]
        rest = [p for k, p in m.named_parameters() if k not in dec]
        groups = [{"params": decay, "weight_decay": o["weight_decay"]}, {"params": rest, "weight_decay": 0.0}]
        opt = (torch.optim.AdamW(groups, lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"]) if o["type"] == "adamw"
               else torch.optim.SGD(groups, lr=o["lr"], momentum=o["momentum"], nesterov=o["nesterov"]))
        runs[dt] = (m, opt, [])
    tokens = plan_torch.read_tokens(text, True) if text else None
    batches = plan_torch.Batches(plan, tokens, seed=1337)
    for _ in range(steps):
        b = {names[i]: t for i, t in batches.next().items()}
        for dt, (m, opt, ls) in runs.items():
            m.train()
            opt.zero_grad(set_to_none=True)
            loss = loss_of(m, b, dt)
            loss.backward()
            opt.step()
            ls.append(loss.item())
    ok = True
    print("%s: %s trainer vs torch (float64; float32 the yardstick), %d %s steps" % (spec, nm["model"], steps,
                                                                                    o["type"]))
    for i, g in enumerate(got):
        w, y = runs[torch.float64][2][i], runs[torch.float32][2][i]
        rel, tol = abs(g - w) / abs(w), rel_tol(w, y)
        ok &= rel <= tol
        print("  step %d: loss %.9f vs %.9f  rel err %.2e (tolerance %.1e)%s" % (i + 1, g, w, rel, tol,
                                                                                 "" if rel <= tol else "  FAIL"))
    # back into PyTorch: the trainer's checkpoint in a fresh module, strictly, by `memplan import-torch load`
    # (the README's fourth command), its state_dict file read back
    pt = os.path.join(work, "final.pt")
    e2e.must([memplan, "import-torch", "load", final, nmap, "-o", pt])
    back = torch_import.build_module(nm["spec"], mp(nm["kwargs"]))
    back.load_state_dict(torch.load(pt), strict=True)
    eb = {names[i]: t for i, t in plan_torch.Batches(plan, tokens, eval=True).next().items()}
    with torch.no_grad():
        ev = {}
        for dt in (torch.float64, torch.float32):
            m = runs[dt][0]
            m.eval()
            ev[dt] = loss_of(m, eb, dt).item()
        back.eval()
        mine = loss_of(back.double(), eb, torch.float64).item()
    w, y = ev[torch.float64], ev[torch.float32]
    for what, g in (("trainer's eval", got_eval), ("loaded-back module's eval", mine)):
        rel, tol = abs(g - w) / abs(w), rel_tol(w, y)
        ok &= rel <= tol
        print("  %s loss %.9f vs torch's %.9f  rel err %.2e (tolerance %.1e)%s" % (what, g, w, rel, tol,
                                                                                 "" if rel <= tol else "  FAIL"))
    # running statistics: torch's float64 run against the loaded-back module (no AdamW noise in them)
    sd64, sd32, sdb = runs[torch.float64][0].state_dict(), runs[torch.float32][0].state_dict(), back.state_dict()
    for k in sd64:
        if k.endswith(("running_mean", "running_var", "num_batches_tracked")):
            a, r, yy = sdb[k].double(), sd64[k].double(), sd32[k].double()
            err, spread = float((a - r).abs().max()), float((yy - r).abs().max())
            tol = max(FLOOR * max(1.0, float(r.abs().max())), TOL_FACTOR * spread)
            ok &= err <= tol and math.isfinite(err)
            print("  %-28s worst error %.2e (tolerance %.1e)%s" % (k, err, tol, "" if err <= tol else "  FAIL"))
    print("check.py: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
