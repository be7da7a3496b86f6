#!/usr/bin/python3
"""e2e.py: end-to-end checks of generated CPU trainers (CTest label e2e).
Standard library only. Subcommands:
  build MEMPLAN MODEL.yaml DIR [cmake args]  compile MODEL into DIR, build DIR/build/trainer
                                              with -Wall -Wextra -Werror
  train TRAINER MARGIN [trainer args]        train; the mean loss of the last 10 steps must
                                              be below the first step's loss by MARGIN
  determinism TRAINER [trainer args]         two runs, identical per-step losses
  roundtrip TRAINER DIR [trainer args]       --save, --load, --save gives the same bytes
  noalloc TRAINER LIBALLOC [trainer args]    no allocation inside the training loop
  errors TRAINER DIR [trainer args]          bad data and weights files: clear error, exit != 0
"""
import csv
import json
import os
import struct
import subprocess
import sys


def run(cmd, **kw):
    print("$ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def must(cmd, **kw):
    r = run(cmd, **kw)
    if r.returncode != 0:
        sys.exit("failed (%d):\n%s%s" % (r.returncode, r.stdout, r.stderr))
    return r


def losses(trainer, args, log):
    must([trainer, "--log", log] + args)
    with open(log) as f:
        return [float(row["loss"]) for row in csv.DictReader(f)]


def build(memplan, model, out, *cmake_args):
    must([memplan, "compile", model, "-o", out])
    must(["cmake", "-S", out, "-B", os.path.join(out, "build"), "-DTRAINER_WERROR=ON"] + list(cmake_args))
    r = must(["cmake", "--build", os.path.join(out, "build")])
    if "warning" in r.stdout + r.stderr:
        sys.exit("warnings while building the trainer:\n" + r.stdout + r.stderr)
    print("built %s/build/trainer" % out)


def train(trainer, margin, *args):
    log = trainer + ".train.csv"
    ls = losses(trainer, list(args), log)
    first, last = ls[0], sum(ls[-10:]) / len(ls[-10:])
    print("first loss %.4f, mean of the last 10 %.4f: fell by %.4f (need %s)" % (first, last, first - last, margin))
    return 0 if first - last >= float(margin) else 1


def determinism(trainer, *args):
    a = losses(trainer, list(args), trainer + ".det1.csv")
    b = losses(trainer, list(args), trainer + ".det2.csv")
    print("run 1: %s\nrun 2: %s" % (a, b))
    return 0 if a == b else 1


def roundtrip(trainer, d, *args):
    p1, p2 = os.path.join(d, "rt1.safetensors"), os.path.join(d, "rt2.safetensors")
    must([trainer, "--steps", "3", "--save", p1, "--eval-batches", "0"] + list(args))
    must([trainer, "--steps", "0", "--load", p1, "--save", p2, "--eval-batches", "0"] + list(args))
    with open(p1, "rb") as f1, open(p2, "rb") as f2:
        same = f1.read() == f2.read()
    print("save -> load -> save: %s" % ("identical" if same else "DIFFERENT"))
    leftovers = [f for f in os.listdir(d) if ".tmp." in f]
    return 0 if same and not leftovers else 1


def noalloc(trainer, lib, *args):
    env = dict(os.environ, LD_PRELOAD=os.path.abspath(lib))
    r = run([trainer, "--check-alloc", "--profile", "--eval-every", "2"] + list(args), env=env)
    print(r.stdout[-600:] + r.stderr)
    return 0 if r.returncode == 0 and "allocations inside the training loop: 0" in r.stdout else 1


def write_safetensors(path, tensors, header_extra=b""):
    header, data, off = {}, b"", 0
    for name, (shape, n) in tensors.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + 4 * n]}
        data += struct.pack("<%df" % n, *([0.5] * n))
        off += 4 * n
    h = json.dumps(header).encode() + header_extra
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def errors(trainer, d, *args):
    """Each case must exit non-zero with a message naming the problem."""
    args = list(args)
    good = os.path.join(d, "good.safetensors")
    must([trainer, "--steps", "0", "--save", good, "--eval-batches", "0"] + args)
    with open(good, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    name, t = next((k, v) for k, v in header.items() if k != "__metadata__" and len(v["shape"]) == 2)
    cases = []
    p = os.path.join(d, "truncated.safetensors")
    with open(p, "wb") as f:
        f.write(blob[:len(blob) - 100])
    cases.append((["--load", p], "truncated"))
    p = os.path.join(d, "shape.safetensors")
    bad = {k: (v["shape"], (v["data_offsets"][1] - v["data_offsets"][0]) // 4) for k, v in header.items()
           if k != "__metadata__"}
    r, c = bad[name][0]
    bad[name] = ([c, r + 1], c * (r + 1))
    write_safetensors(p, bad)
    cases.append((["--load", p], "shape mismatch for tensor '%s'" % name))
    p = os.path.join(d, "missing.safetensors")
    write_safetensors(p, {k: v for k, v in bad.items() if k != name})
    cases.append((["--load", p], "no tensor '%s'" % name))
    p = os.path.join(d, "garbage.safetensors")
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", 16) + b'{"a": [1, 2,    ')
    cases.append((["--load", p], "malformed safetensors header"))
    cases.append((["--load", os.path.join(d, "absent.safetensors")], "cannot open"))
    if "--text" in args:
        i = args.index("--text")
        base = args[:i] + args[i + 2:]
        p = os.path.join(d, "short.txt")
        with open(p, "w") as f:
            f.write("too short")
        cases.append((base + ["--text", p], "too short"))
        cases.append((base + ["--text", os.path.join(d, "absent.txt")], "cannot open"))
        p = os.path.join(d, "badmagic.bin")
        with open(p, "wb") as f:
            f.write(struct.pack("<256i", *([7] + [0] * 255)))
        cases.append((base + ["--data", p], "not a token file"))
        p = os.path.join(d, "shortshard.bin")
        with open(p, "wb") as f:
            f.write(struct.pack("<256i", *([20240520, 1, 1000] + [0] * 253)) + b"\0\0" * 10)
        cases.append((base + ["--data", p], "truncated"))
    failed = 0
    for extra, msg in cases:
        r = run([trainer, "--steps", "1", "--eval-batches", "0"] + (args if "--load" in extra else []) + extra)
        ok = r.returncode != 0 and msg in r.stderr
        failed += not ok
        print("  %s exit %d: %s" % ("ok  " if ok else "FAIL", r.returncode, r.stderr.strip()))
    return 1 if failed else 0


if __name__ == "__main__":
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd in ("roundtrip", "errors"):
        os.makedirs(rest[1], exist_ok=True)
    fn = {"build": build, "train": train, "determinism": determinism, "roundtrip": roundtrip,
          "noalloc": noalloc, "errors": errors}[cmd]
    sys.exit(fn(*rest) or 0)
