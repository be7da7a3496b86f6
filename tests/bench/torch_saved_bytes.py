#!/usr/bin/python3
"""torch_saved_bytes.py: the bytes PyTorch keeps for backward in one training
forward of ResNet-50 and ViT-B/16 (batch 32, 224x224), against memplan's
arenas for models/resnet-50.yaml and models/vit-b16.yaml (CTest label bench;
issue 15, "Measured").

PyTorch side: the two models written here in torch.nn (torchvision is not
installed): torchvision's resnet50 (v1.5: the stride on the 3x3 conv of each
bottleneck, ReLU in place, `out += identity`) and vit_b_16 (16x16 patches
through a conv, a class token, 12 pre-norm encoder blocks of width 768 with
nn.MultiheadAttention, 12 heads, an MLP of 3072 with exact GELU, LayerNorm eps
1e-6, dropout 0). One forward in training mode (BatchNorm on batch
statistics) to the cross-entropy loss runs under
torch.autograd.graph.saved_tensors_hooks; every tensor autograd saves is
counted by its storage, each storage once (a view, or ReLU's in-place output,
is the same storage), and split into parameters (already in the
parameter/gradient/optimizer line), running statistics, the input batch
(images and labels) and activations. The forward runs on the meta device
(shapes only, instant); the script first checks that meta saves exactly what
a CPU run saves, storage by storage, at batch 2. Both models' parameter
counts must equal memplan's (plan.json's param_count).

Training footprint, like for like: PyTorch keeps parameters, their
gradients (all of them at once before optimizer.step()) and the optimizer
state (SGD momentum: one copy, ResNet-50's YAML; AdamW: two, ViT-B/16's)
besides the saved tensors; that sum is a floor of PyTorch's peak (backward's
transient gradients and the allocator's caching come on top), while memplan's
arena is its whole training peak. memplan's own saved bytes are the
activation and input bytes live across the forward/backward boundary in its
keep-everything plan (the union of their arena ranges).

memplan side: `memplan compile MODEL -o DIR [--budget X --no-micro-batch]` for keep-all and
each budget, read from DIR/plan.json (arena_bytes, extra_flops, step_flops).

  /usr/bin/python3 tests/bench/torch_saved_bytes.py --memplan build/bin/memplan \\
      --models models --workdir /tmp/saved [--budgets 8G,4G,2G]

Fails (exit 1) when a parameter count differs, when meta and CPU disagree,
or when a budgeted plan is over its budget; skips (77) without torch.
"""
import argparse
import json
import os
import subprocess
import sys


def gib(b):
    return "%.2f GiB" % (b / 2 ** 30) if b >= 2 ** 30 else "%.2f MiB" % (b / 2 ** 20)


def parse_size(s):
    u = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}
    return int(float(s[:-1]) * u[s[-1].upper()]) if s[-1].upper() in u else int(s)


# ---------------------------------------------------------------------------
# the models (torchvision's layouts)

def build_models(torch):
    nn = torch.nn

    class Bottleneck(nn.Module):
        def __init__(self, inplanes, planes, stride):
            super().__init__()
            w = planes
            self.conv1 = nn.Conv2d(inplanes, w, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(w)
            self.conv2 = nn.Conv2d(w, w, 3, stride=stride, padding=1, bias=False)  # v1.5
            self.bn2 = nn.BatchNorm2d(w)
            self.conv3 = nn.Conv2d(w, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = None
            if stride != 1 or inplanes != planes * 4:
                self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False),
                                                nn.BatchNorm2d(planes * 4))

        def forward(self, x):
            identity = x
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            if self.downsample is not None:
                identity = self.downsample(x)
            out += identity
            return self.relu(out)

    class ResNet50(nn.Module):
        def __init__(self, classes=1000):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
            blocks, inplanes = [], 64
            for planes, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                layer = []
                for i in range(n):
                    layer.append(Bottleneck(inplanes, planes, stride if i == 0 else 1))
                    inplanes = planes * 4
                blocks.append(nn.Sequential(*layer))
            self.layer1, self.layer2, self.layer3, self.layer4 = blocks
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(2048, classes)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    class EncoderBlock(nn.Module):
        def __init__(self, d, heads, mlp):
            super().__init__()
            self.ln_1 = nn.LayerNorm(d, eps=1e-6)
            self.self_attention = nn.MultiheadAttention(d, heads, dropout=0.0, batch_first=True)
            self.dropout = nn.Dropout(0.0)
            self.ln_2 = nn.LayerNorm(d, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(d, mlp), nn.GELU(), nn.Dropout(0.0), nn.Linear(mlp, d), nn.Dropout(0.0))

        def forward(self, x):
            y = self.ln_1(x)
            y, _ = self.self_attention(y, y, y, need_weights=False)
            x = self.dropout(y) + x
            return x + self.mlp(self.ln_2(x))

    class ViTB16(nn.Module):
        def __init__(self, image=224, patch=16, layers=12, heads=12, d=768, mlp=3072, classes=1000):
            super().__init__()
            self.patch, self.d = patch, d
            n = (image // patch) ** 2
            self.conv_proj = nn.Conv2d(3, d, patch, stride=patch)
            self.class_token = nn.Parameter(torch.zeros(1, 1, d))
            self.pos_embedding = nn.Parameter(torch.empty(1, n + 1, d).normal_(std=0.02))
            self.dropout = nn.Dropout(0.0)
            self.layers = nn.Sequential(*[EncoderBlock(d, heads, mlp) for _ in range(layers)])
            self.ln = nn.LayerNorm(d, eps=1e-6)
            self.head = nn.Linear(d, classes)

        def forward(self, x):
            x = self.conv_proj(x)
            x = x.reshape(x.shape[0], self.d, -1).permute(0, 2, 1)
            x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)
            x = self.ln(self.layers(self.dropout(x + self.pos_embedding)))
            return self.head(x[:, 0])

    return ResNet50, ViTB16


# ---------------------------------------------------------------------------
# saved tensors

def saved_bytes(torch, model, batch, device):
    """{'activation', 'input', 'param', 'state': bytes} of the storages autograd
    saves in one training forward, each storage once; and the per-storage
    list [(kind, dtype, shape of the first tensor saved from it, bytes)]."""
    model = model.to(device).train()
    x = torch.randn(batch, 3, 224, 224, device=device)
    y = torch.zeros(batch, dtype=torch.long, device=device)
    kinds = {}
    for p in model.parameters():
        kinds[p.storage()._cdata] = "param"
    for b in model.buffers():
        kinds[b.storage()._cdata] = "state"
    kinds[x.storage()._cdata] = kinds[y.storage()._cdata] = "input"
    return count_saved(torch, kinds, lambda: torch.nn.functional.cross_entropy(model(x), y),
                       ("activation", "input", "param", "state"))


def count_saved(torch, kinds, run, keys):
    """Runs run() (a training forward) under saved_tensors_hooks; returns
    {kind: bytes} over keys, each saved storage once, its kind from kinds
    (storage id: kind; "activation" where absent), and the list of saved
    storages [(kind, dtype, shape of the first tensor saved from it, bytes)]."""
    seen = {}

    def pack(t):
        s = t.storage()
        if s._cdata not in seen:
            seen[s._cdata] = (kinds.get(s._cdata, "activation"), str(t.dtype), tuple(t.shape), s.nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = run()
    out = dict.fromkeys(keys, 0)
    for k, _, _, n in seen.values():
        out[k] += n
    del loss
    return out, sorted(seen.values())


# ---------------------------------------------------------------------------
# memplan side

def compile_plan(memplan, yaml, d, budget):
    # the whole batch, as PyTorch runs it (the levers alone may micro-batch instead)
    cmd = [memplan, "compile", yaml, "-o", d] + (["--budget", budget, "--no-micro-batch"] if budget else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip().split("\n")[-1]
    with open(os.path.join(d, "plan.json")) as f:
        return json.load(f), None


def plan_saved_bytes(plan):
    """Bytes of activation and input buffers live across the forward/backward
    boundary (the first backward op's position), as the union of their arena
    ranges (a buffer hosting an op's output in place shares its input's)."""
    sched = plan["schedule"]
    b0 = next(i for i, o in enumerate(sched) if o["phase"] == "backward")
    spans = sorted((b["offset"], b["offset"] + b["bytes"]) for b in plan["buffers"]
                   if b["role"] in ("activation", "input") and b["schedule"] == "train"
                   and b["live"][0] < b0 < b["live"][1])
    total, end = 0, -1
    for lo, hi in spans:
        if hi <= end:
            continue
        total += hi - max(lo, end)
        end = hi
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memplan", required=True)
    ap.add_argument("--models", required=True, help="the models/ folder")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--budgets", default="8G,4G,2G")
    ap.add_argument("--batch", type=int, default=32, help="must be the YAMLs' B (32)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every saved storage")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("torch_saved_bytes: %s has no torch; skipping" % sys.executable)
        return 77
    torch.manual_seed(0)
    ResNet50, ViTB16 = build_models(torch)
    budgets = [s for s in a.budgets.split(",") if s]
    os.makedirs(a.workdir, exist_ok=True)
    fail = []
    print("torch_saved_bytes: torch %s, batch %d, 224x224, fp32; saved tensors counted on the meta device" %
          (torch.__version__, a.batch))
    for name, yaml, cls, opt_copies, opt_name in (
            ("resnet-50", "resnet-50.yaml", ResNet50, 1, "SGD momentum"),
            ("vit-b16", "vit-b16.yaml", ViTB16, 2, "AdamW")):
        model = cls()
        nparams = sum(p.numel() for p in model.parameters())
        plans = {}
        for bud in [None] + budgets:
            plans[bud] = compile_plan(a.memplan, os.path.join(a.models, yaml),
                                      os.path.join(a.workdir, "%s-%s" % (name, bud or "keepall")), bud)
        keep = plans[None][0]
        if keep is None:
            sys.exit("torch_saved_bytes: memplan compile %s failed: %s" % (yaml, plans[None][1]))
        if keep["dims"]["B"] != a.batch:
            sys.exit("torch_saved_bytes: %s has B=%d, not %d" % (yaml, keep["dims"]["B"], a.batch))
        if nparams != keep["totals"]["param_count"]:
            fail.append("%s: torch has %d parameters, memplan %d" % (name, nparams, keep["totals"]["param_count"]))
        # meta must save what CPU saves (batch 2 keeps the CPU run short)
        cpu, cpu_list = saved_bytes(torch, cls().to(torch.float32), 2, "cpu")
        meta2, meta_list = saved_bytes(torch, cls(), 2, "meta")
        if cpu_list != meta_list:
            fail.append("%s: meta saves %s, CPU %s at batch 2" % (name, meta2, cpu))
        sv, lst = saved_bytes(torch, model, a.batch, "meta")
        if a.verbose:
            for e in lst:
                print("   ", e)
        pbytes = 4 * nparams
        static = pbytes * (2 + opt_copies)
        t_total = static + sv["activation"] + sv["input"] + sv["state"]
        print("\n%s: %s parameters (memplan %s), optimizer %s; %d storages saved" %
              (name, format(nparams, ","), format(keep["totals"]["param_count"], ","), opt_name, len(lst)))
        print("  PyTorch %s saves for backward: activations %s, input batch %s, running statistics %s "
              "(and %s of parameters)" % (torch.__version__, gib(sv["activation"]), gib(sv["input"]),
                                          gib(sv["state"]), gib(sv["param"])))
        print("  PyTorch training floor: %s saved + %s params + grads + %s state = %s" %
              (gib(sv["activation"] + sv["input"] + sv["state"]), gib(static), opt_name, gib(t_total)))
        print("  memplan keep-all: saved across forward/backward %s; arena %s" %
              (gib(plan_saved_bytes(keep)), gib(keep["totals"]["arena_bytes"])))
        row = "  | %-32s | %17s | %15s | %16s |"
        print(row % ("", "kept for backward", "training memory", "extra FLOPs"))
        print(row % ("PyTorch (floor: saved + P/G/opt)", gib(sv["activation"] + sv["input"] + sv["state"]),
                     gib(t_total), "0"))
        print(row % ("memplan keep all (arena)", gib(plan_saved_bytes(keep)), gib(keep["totals"]["arena_bytes"]), "0"))
        for bud in budgets:
            p, err = plans[bud]
            if p is None:
                print(row % ("memplan --budget " + bud, "", "does not fit", err[:16]))
                continue
            t = p["totals"]
            ex = t["extra_flops"] * t.get("accumulation_steps", 1)
            mb = "" if t["accumulation_steps"] == 1 else ", %d x %d" % (t["accumulation_steps"], t["micro_batch"])
            print(row % ("memplan --budget " + bud + mb, gib(plan_saved_bytes(p)), gib(t["arena_bytes"]),
                         "+%.2f%% (%.0f GF)" % (100.0 * ex / t["step_flops"], ex * 1e-9)))
            if t["arena_bytes"] > parse_size(bud):
                fail.append("%s: --budget %s planned %d bytes" % (name, bud, t["arena_bytes"]))
    for f in fail:
        print("torch_saved_bytes: FAIL " + f)
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
