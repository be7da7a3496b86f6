"""Frozen weights stored by --base-weights (planner/basew.h), checked against
this file's own float64 implementation of the formats:

  basew.py codes   TRAINER_DIR FP32_TRAINER_DIR KERNELS_H WORK [trainer args]

TRAINER_DIR holds a trainer compiled with --base-weights int8, nf4 or bf16 (its
plan.json says which), FP32_TRAINER_DIR the same model at fp32. Random weights
(F32, every parameter) go through the quantized trainer's --load and one step,
and its checkpoint must hold, for every frozen weight, exactly the codes and
absmax computed here (bitsandbytes' published NF4 algorithm: absmax per block
of 64, the nearest of the 16 NormalFloat values to x / absmax, two codes a
byte, the even element in the high nibble; int8: absmax per row, round(127 x /
absmax); bf16: round to nearest even). The NF4 table in memplan_kernels.h must
be, value for value, the float32 of bitsandbytes' literals (functional.py).
Then the dequantization: the same weights dequantized here (float32 table
value x absmax) and loaded as F32 into the fp32 plan must give the step-1 loss
the quantized trainer computes, bit for bit (both plans then compute with the
same fp32 weights, so a wrong dequant kernel shows as another loss), and
so must the trained weights after that step. The quantized trainer's peak RSS
stays within its arena + baseline + 4 MiB (e2e.py memory_truth).
Weights include blocks that hit every table value exactly, an all-zero block
and a row of one repeated value."""
import json
import os
import re
import struct
import subprocess
import sys

import numpy as np

from e2e import memory_truth, probed, text_bytes

# bitsandbytes/functional.py, get_4bit_type("nf4"): the published table
NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0]
NF4_BLOCK = 64


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    dt = {"F32": np.float32, "BF16": np.uint16, "I8": np.int8, "U8": np.uint8}
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        out[k] = (v["dtype"], np.frombuffer(data[b:e], dtype=dt[v["dtype"]]).reshape(v["shape"]))
    return out


def write_st(path, tensors, bf16=()):
    """F32 tensors, those named in bf16 as BF16 (their values must be bf16's)."""
    hdr, off, blobs = {}, 0, []
    for k, a in tensors.items():
        f = np.ascontiguousarray(a, dtype=np.float32)
        b = (f.view(np.uint32) >> 16).astype(np.uint16).tobytes() if k in bf16 else f.tobytes()
        hdr[k] = {"dtype": "BF16" if k in bf16 else "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def nf4_quant(w):
    """float64 reference: codes (one per element) and absmax per block."""
    flat = w.reshape(-1).astype(np.float64)
    n = flat.size
    nb = (n + NF4_BLOCK - 1) // NF4_BLOCK
    codes, absmax = np.zeros(n, dtype=np.int64), np.zeros(nb, dtype=np.float32)
    mids = [(float(np.float32(NF4[c])) + float(np.float32(NF4[c + 1]))) / 2 for c in range(15)]
    for b in range(nb):
        x = flat[b * NF4_BLOCK:(b + 1) * NF4_BLOCK]
        a = np.abs(x).max()
        absmax[b] = a
        r = x / a if a > 0 else np.zeros_like(x)
        codes[b * NF4_BLOCK:b * NF4_BLOCK + x.size] = [sum(1 for m in mids if v > m) for v in r]  # ties: the lower
    return codes, absmax


def nf4_pack(codes):
    c = np.concatenate([codes, np.zeros(codes.size % 2, dtype=np.int64)])
    return ((c[0::2] << 4) | c[1::2]).astype(np.uint8)


def nf4_dequant(codes, absmax, shape):
    t = np.array(NF4, dtype=np.float32)
    a = np.repeat(absmax, NF4_BLOCK)[:codes.size]
    return (t[codes] * a).astype(np.float32).reshape(shape)  # float32 product, as the kernel


def int8_quant(w):
    rows = w.reshape(-1, w.shape[-1]).astype(np.float64)
    absmax = np.abs(rows).max(axis=1).astype(np.float32)
    q = np.zeros(rows.shape, dtype=np.int64)
    for i, a in enumerate(absmax):
        if a > 0:
            q[i] = np.rint(127.0 * rows[i] / float(a))  # half to even, as lrint
    return q, absmax


def int8_dequant(q, absmax, shape):
    scale = (absmax / np.float32(127.0)).astype(np.float32)
    return (q.astype(np.float32) * scale[:, None]).astype(np.float32).reshape(shape)


def bf16_round(w):
    x = w.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((x + 0x7FFF + ((x >> 16) & 1)) >> 16).astype(np.uint16)


def weights(plan, rng):
    out = {}
    for b in plan["buffers"]:
        if b["role"] != "param" or b["name"].endswith(".absmax"):
            continue
        w = rng.standard_normal(b["shape"]).astype(np.float32) * np.float32(rng.uniform(0.01, 1.0))
        flat = w.reshape(-1)
        if flat.size >= 3 * NF4_BLOCK:  # every NF4 value exactly (absmax 1), zeros, one value repeated
            flat[:16] = np.array(NF4, dtype=np.float32)
            flat[16:NF4_BLOCK] = 0.0
            flat[NF4_BLOCK:2 * NF4_BLOCK] = 0.0
            flat[2 * NF4_BLOCK:3 * NF4_BLOCK] = np.float32(-0.3)
        out[b["name"]] = w
    return out


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("%s: exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r


def step1_loss(log):
    with open(log) as f:
        next(f)
        return next(f).split(",")[1]


def codes(qdir, fdir, kernels_h, work, *args):
    os.makedirs(work, exist_ok=True)
    plan = json.load(open(os.path.join(qdir, "plan.json")))
    fmt = plan.get("base_weights", "fp32")
    ok = True
    # the table in the kernels, literal by literal
    text = open(kernels_h).read()
    m = re.search(r"#define RT_NF4_TABLE\s*\\?\s*\{([^}]*)\}", text)
    lits = [float(np.float32(float(s.strip().rstrip("f")))) for s in m.group(1).replace("\\", "").split(",")]
    want = [float(np.float32(v)) for v in NF4]
    print("NF4 table: %s" % ("the published values" if lits == want else "DIFFERENT: %s" % lits))
    ok &= lits == want
    rng = np.random.default_rng(20261201)
    w = weights(plan, rng)
    wfile, out = os.path.join(work, "w.safetensors"), os.path.join(work, "out.safetensors")
    write_st(wfile, w)
    common = ["--steps", "1", "--eval-batches", "0", "--threads", "2"] + list(args)
    qtrainer = os.path.join(qdir, "build", "trainer")
    r = run(probed([qtrainer, "--load", wfile, "--save", out, "--log", os.path.join(work, "q.csv")] + common))
    # memory truth: the trainer's peak RSS within its arena + baseline + 4 MiB (the quantizing load streams in
    # chunks; e2e.py's memory_truth)
    problem = memory_truth(qtrainer, r.stdout, text_bytes(common))
    if problem:
        print("FAIL: " + problem)
    ok &= problem is None
    got = read_st(out)
    deq, nweights = dict(w), 0
    for b in plan["buffers"]:
        if b["role"] != "param" or not b.get("frozen") or b["name"].endswith(".absmax"):
            continue
        name, x = b["name"], w[b["name"]]
        dt, a = got[name]
        nweights += 1
        if fmt == "nf4":
            c, am = nf4_quant(x)
            same = dt == "U8" and np.array_equal(a, nf4_pack(c)) and np.array_equal(got[name + ".absmax"][1], am)
            deq[name] = nf4_dequant(c, am, x.shape)
        elif fmt == "int8":
            q, am = int8_quant(x)
            same = dt == "I8" and np.array_equal(a.reshape(q.shape), q) and np.array_equal(got[name + ".absmax"][1], am)
            deq[name] = int8_dequant(q, am, x.shape)
        else:
            h = bf16_round(x)
            same = dt == "BF16" and np.array_equal(a.reshape(-1), h.reshape(-1))
            deq[name] = (h.astype(np.uint32) << 16).view(np.float32).reshape(x.shape)
        if not same:
            print("%s: the trainer's %s storage differs from the float64 reference" % (name, fmt))
            ok = False
    print("%d frozen weights stored as %s: %s" % (nweights, fmt, "codes and absmax exact" if ok else "MISMATCH"))
    # dequantization: the fp32 plan on the dequantized weights computes the same step-1 loss
    dfile = os.path.join(work, "deq.safetensors")
    write_st(dfile, deq)
    fout = os.path.join(work, "f.safetensors")
    run([os.path.join(fdir, "build", "trainer"), "--load", dfile, "--save", fout, "--log", os.path.join(work, "f.csv")]
        + common)
    lq, lf = step1_loss(os.path.join(work, "q.csv")), step1_loss(os.path.join(work, "f.csv"))
    fgot = read_st(fout)
    trained = [b["name"] for b in plan["buffers"] if b["role"] == "param" and not b.get("frozen")]
    moved = [n for n in trained if not np.array_equal(got[n][1], fgot[n][1])]
    print("step-1 loss: %s quantized, %s fp32 plan on the dequantized weights; %d trained weights after the step: %s"
          % (lq, lf, len(trained), "identical" if not moved else "DIFFERENT: %s" % moved))
    ok &= nweights > 0 and lq == lf and not moved
    # --load of BF16 frozen weights quantizes them too: the same codes as their F32 values
    frozen = [b["name"] for b in plan["buffers"] if b["role"] == "param" and b.get("frozen")
              and not b["name"].endswith(".absmax")]
    wb = {k: ((v.view(np.uint32) >> 16) << 16).view(np.float32) if k in frozen else v for k, v in w.items()}
    bfile, bout = os.path.join(work, "wb.safetensors"), os.path.join(work, "wb-out.safetensors")
    write_st(bfile, wb, bf16=set(frozen))
    write_st(os.path.join(work, "wb-f32.safetensors"), wb)
    run([os.path.join(qdir, "build", "trainer"), "--load", bfile, "--save", bout] + common)
    run([os.path.join(qdir, "build", "trainer"), "--load", os.path.join(work, "wb-f32.safetensors"), "--save",
         os.path.join(work, "wb-f32-out.safetensors")] + common)
    x, y = read_st(bout), read_st(os.path.join(work, "wb-f32-out.safetensors"))
    same = all(np.array_equal(x[k][1], y[k][1]) and x[k][0] == y[k][0] for k in y)
    print("--load of BF16 frozen weights: %s" % ("stored as their F32 values are" if same else "DIFFERENT"))
    ok &= same
    # a frozen weight of the wrong shape: the error names it and both shapes, exit 1
    bad = dict(w)
    bad[frozen[0]] = w[frozen[0]].reshape(-1)[:-1]
    badfile = os.path.join(work, "bad.safetensors")
    write_st(badfile, bad)
    r = subprocess.run([os.path.join(qdir, "build", "trainer"), "--load", badfile] + common, capture_output=True,
                       text=True)
    want = "shape mismatch for tensor '%s': the file has [%d], the model needs %s" % (
        frozen[0], w[frozen[0]].size - 1, str(list(w[frozen[0]].shape)))
    print("--load of a wrongly shaped weight: exit %d, %s" % (r.returncode, r.stderr.strip()))
    ok &= r.returncode == 1 and want in r.stderr
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) < 6 or sys.argv[1] != "codes":
        sys.exit(__doc__)
    sys.exit(codes(*sys.argv[2:]))
