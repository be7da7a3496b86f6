"""remat_graphs.py OUTDIR [--seeds N]: memplan YAML models for the exact
recomputation benchmark (bench_remat.py, issue 29), at most 60 layers each,
built from existing ops only.

- unet.yaml: issue 29's U-Net-shaped graph at one resolution (B=8, 64
  channels, 64x64, 3x3 convs): a stem conv; encoder blocks e1..e4 (conv +
  relu); a middle block; decoder blocks d4..d1, each conv(concat(d(i+1), ei))
  + relu; global pooling, a linear layer and cross-entropy.
- densenet.yaml: one DenseNet-shaped dense block (B=8, 32x32): a stem, then
  layers whose input is the concat of the stem and every earlier layer's
  output (up to concat's 6 inputs), each conv 3x3 + relu to the growth rate,
  a 1x1 transition conv over the last concat, pooling, linear, cross-entropy.
- chain.yaml: a plain chain of 12 conv 3x3 + relu blocks (B=8, 32
  channels, 32x32) with the same head: where the checkpointing DP is exact,
  the yardstick of the yardstick.
- random-S.yaml (S = 1, 2, ...): a random layered DAG from seed S: layers of
  1-3 nodes, each node a conv + relu of one earlier node, an add of two or a
  concat of two followed by a 1x1 conv back to the width; every node's
  inputs are drawn from the last three layers (and, with probability 1/4,
  any earlier one: long skips), so every tensor is [B, C, H, W].

Python standard library only; the models are written in a fixed order, so
the same seed writes the same file.
"""
import os
import random
import sys

HEAD = """model: {name}
dims: {{B: {B}, C: {C}, HW: {HW}, K: 10}}
inputs:
  x:       {{shape: [B, C, HW, HW], dtype: f32}}
  targets: {{shape: [B], dtype: i32}}
optimizer: {{type: sgd, lr: 0.01}}
layers:
"""
TAIL = """  - {{name: pool, op: global_avgpool, input: {last}}}
  - {{name: fc, op: linear, out: K}}
  - {{name: loss, op: cross_entropy, inputs: [fc, targets]}}
"""


def conv(name, inp, out="C", kernel=3):
    pad = kernel // 2
    return f"  - {{name: {name}, op: conv2d, out: {out}, kernel: {kernel}, padding: {pad}, input: {inp}}}\n"


def relu(name, inp):
    return f"  - {{name: {name}, op: relu, input: {inp}}}\n"


def unet(B=8, C=64, HW=64):
    s = HEAD.format(name="unet", B=B, C=C, HW=HW) + conv("stem", "x")
    prev = "stem"
    for i in range(1, 5):
        s += conv(f"e{i}conv", prev) + relu(f"e{i}", f"e{i}conv")
        prev = f"e{i}"
    s += conv("midconv", prev) + relu("mid", "midconv")
    prev = "mid"
    for i in range(4, 0, -1):
        s += f"  - {{name: d{i}cat, op: concat, axis: 1, inputs: [{prev}, e{i}]}}\n"
        s += conv(f"d{i}conv", f"d{i}cat") + relu(f"d{i}", f"d{i}conv")
        prev = f"d{i}"
    return s + TAIL.format(last=prev)


def densenet(B=8, C=32, HW=32, layers=5):
    s = HEAD.format(name="densenet", B=B, C=C, HW=HW) + conv("stem", "x")
    feats = ["stem"]
    for i in range(1, layers + 1):
        src = feats[-6:]
        inp = src[0]
        if len(src) > 1:
            s += f"  - {{name: l{i}cat, op: concat, axis: 1, inputs: [{', '.join(src)}]}}\n"
            inp = f"l{i}cat"
        s += conv(f"l{i}conv", inp) + relu(f"l{i}", f"l{i}conv")
        feats.append(f"l{i}")
    s += f"  - {{name: tcat, op: concat, axis: 1, inputs: [{', '.join(feats[-6:])}]}}\n"
    s += conv("trans", "tcat", kernel=1)
    return s + TAIL.format(last="trans")


def chain(B=8, C=32, HW=32, blocks=12):
    s = HEAD.format(name="chain", B=B, C=C, HW=HW) + conv("stem", "x")
    prev = "stem"
    for i in range(1, blocks + 1):
        s += conv(f"c{i}conv", prev) + relu(f"c{i}", f"c{i}conv")
        prev = f"c{i}"
    return s + TAIL.format(last=prev)


def random_dag(seed, B=8, C=32, HW=32, depth=8):
    rnd = random.Random(seed)
    s = HEAD.format(name=f"random-{seed}", B=B, C=C, HW=HW) + conv("stem", "x")
    levels = [["stem"]]
    every = ["stem"]
    read = set()
    n = 0
    for _ in range(depth):
        level = []
        for _ in range(rnd.randint(1, 3)):
            n += 1
            near = [t for lv in levels[-3:] for t in lv]

            def pick():
                return rnd.choice(every) if rnd.random() < 0.25 else rnd.choice(near)

            kind = rnd.choice(["conv", "conv", "add", "cat"])
            a, b = pick(), pick()
            read |= {a} if kind == "conv" or a == b else {a, b}
            if kind == "conv" or a == b:
                s += conv(f"n{n}conv", a) + relu(f"n{n}", f"n{n}conv")
            elif kind == "add":
                s += f"  - {{name: n{n}, op: add, inputs: [{a}, {b}]}}\n"
            else:
                s += f"  - {{name: n{n}cat, op: concat, axis: 1, inputs: [{a}, {b}]}}\n"
                s += conv(f"n{n}", f"n{n}cat", kernel=1)
            level.append(f"n{n}")
        levels.append(level)
        every += level
    # every node no one reads joins the output, so nothing is dead code
    sinks = [t for t in every if t not in read]
    last = sinks[0]
    for i, t in enumerate(sinks[1:]):
        s += f"  - {{name: out{i}, op: add, inputs: [{last}, {t}]}}\n"
        last = f"out{i}"
    return s + TAIL.format(last=last)


def layer_count(text):
    return sum(1 for line in text.splitlines() if line.startswith("  - {name:"))


def write_all(outdir, seeds=3):
    os.makedirs(outdir, exist_ok=True)
    models = {"unet": unet(), "densenet": densenet(), "chain": chain()}
    for seed in range(1, seeds + 1):
        models[f"random-{seed}"] = random_dag(seed)
    paths = []
    for name, text in models.items():
        assert layer_count(text) <= 60, (name, layer_count(text))
        path = os.path.join(outdir, name + ".yaml")
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--seeds"):
        sys.exit("usage: remat_graphs.py OUTDIR [--seeds N]")
    for p in write_all(sys.argv[1], int(sys.argv[3]) if len(sys.argv) == 4 else 3):
        print(p)
