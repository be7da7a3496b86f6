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
  errors TRAINER DIR [trainer args]          bad data, weights, options and --save paths: exit 1 before
                                              the first step, stderr naming the problem
  portable DIR                               DIR (a built `build` folder) is the portable default:
                                              TRAINER_NATIVE OFF, no -march=native, -ffp-contract=off;
                                              -DTRAINER_NATIVE=ON still gives -march=native
"""
import csv
import json
import os
import re
import shlex
import shutil
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
    # A fresh cache: an old one would keep options at the defaults of the CMakeLists.txt it was made from.
    shutil.rmtree(os.path.join(out, "build"), ignore_errors=True)
    must(["cmake", "-S", out, "-B", os.path.join(out, "build"), "-DTRAINER_WERROR=ON",
          "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"] + list(cmake_args))
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


def write_safetensors(path, tensors, header_extra=b"", poison=None):
    """poison: (name, k, value): element k of tensor name is value, the rest 0.5."""
    header, data, off = {}, b"", 0
    for name, (shape, n) in tensors.items():
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + 4 * n]}
        values = [0.5] * n
        if poison and poison[0] == name:
            values[poison[1]] = poison[2]
        data += struct.pack("<%df" % n, *values)
        off += 4 * n
    h = json.dumps(header).encode() + header_extra
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def errors(trainer, d, *args):
    """Each case must exit 1 before the first step (no step line on stdout), its
    stderr holding every expected piece of text."""
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
    shapes = {k: (v["shape"], (v["data_offsets"][1] - v["data_offsets"][0]) // 4) for k, v in header.items()
              if k != "__metadata__"}
    bad = dict(shapes)
    r, c = bad[name][0]
    bad[name] = ([c, r + 1], c * (r + 1))
    write_safetensors(p, bad)
    cases.append((["--load", p], "shape mismatch for tensor '%s'" % name))
    p = os.path.join(d, "missing.safetensors")
    write_safetensors(p, {k: v for k, v in bad.items() if k != name})
    cases.append((["--load", p], "no tensor '%s'" % name))
    for k in (k for k in shapes if k.endswith(".running_var")):  # running state (batchnorm): needed like params
        p = os.path.join(d, "no-state.safetensors")
        write_safetensors(p, {j: v for j, v in shapes.items() if j != k})
        cases.append((["--load", p], "no tensor '%s' (the model needs every running statistic" % k))
        break
    p = os.path.join(d, "garbage.safetensors")
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", 16) + b'{"a": [1, 2,    ')
    cases.append((["--load", p], "malformed safetensors header"))
    cases.append((["--load", os.path.join(d, "absent.safetensors")], "cannot open"))
    # A directory is not "out of memory allocating 9223372036854775807 bytes".
    cases.append((["--load", d], ["cannot read weights file %s: it is a directory" % d]))
    # Non-finite weights: named at load time (tensor, flat and per-dimension index), not a later loss.
    r, c = t["shape"]
    k = min(r * c - 1, c + 1)
    for value, shown in ((float("nan"), "nan"), (float("inf"), "inf"), (float("-inf"), "-inf")):
        p = os.path.join(d, "nonfinite-%s.safetensors" % shown)
        write_safetensors(p, shapes, poison=(name, k, value))
        cases.append((["--load", p], ["%s: tensor '%s' has a non-finite weight: element %d (index [%d, %d]) is %s"
                                      % (p, name, k, k // c, k % c, shown)]))
    # Float options: finite and > 0, refused up front.
    for v in ("inf", "nan", "-inf", "1e999", "0", "-0.001", "x"):
        cases.append((args + ["--lr", v], ["--lr '%s': expected a finite number > 0" % v]))
    for v in ("inf", "nan", "0"):
        cases.append((args + ["--loss-scale", v], ["--loss-scale '%s': expected a finite number > 0" % v]))
    # --save is checked before the first step, not after the last.
    p = os.path.join(d, "no-such-dir", "w.safetensors")
    cases.append((args + ["--save", p], ["cannot write --save %s: No such file or directory" % p]))
    cases.append((args + ["--save", d], ["cannot write --save %s: it is a directory" % d]))
    if os.geteuid() != 0:  # root writes anywhere
        ro = os.path.join(d, "read-only")
        os.makedirs(ro, exist_ok=True)
        os.chmod(ro, 0o555)
        p = os.path.join(ro, "w.safetensors")
        cases.append((args + ["--save", p], ["cannot write --save %s: Permission denied" % p]))
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
        cases.append((base + ["--text", d], ["cannot read text file %s: it is a directory" % d]))
        cases.append((base + ["--data", d], ["cannot read token file %s: it is a directory" % d]))
        cases.append((args + ["--val", d], ["cannot read text file %s: it is a directory" % d]))
    failed = 0
    for extra, msgs in cases:
        msgs = [msgs] if isinstance(msgs, str) else msgs
        r = run([trainer, "--steps", "1", "--eval-batches", "0"] + (args if "--load" in extra else []) + extra)
        stepped = re.search(r"^step ", r.stdout, re.M)
        ok = r.returncode == 1 and all(m in r.stderr for m in msgs) and not stepped
        failed += not ok
        print("  %s exit %d: %s" % ("ok  " if ok else "FAIL", r.returncode, r.stderr.strip()))
        if not ok:
            print("       expected exit 1, no step run, stderr with: %s%s"
                  % (" | ".join(msgs), "\n       but it ran a step" if stepped else ""))
    leftovers = [f for f in os.listdir(d) if ".tmp." in f]
    if leftovers:
        print("  FAIL temp files left behind: %s" % leftovers)
    return 1 if failed or leftovers else 0


def compile_flags(build_dir):
    """file name -> compiler arguments of the trainer's C sources, from compile_commands.json."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    flags = {}
    for e in entries:
        base = os.path.basename(e["file"])
        if base in ("trainer.c", "memplan_trainer.c", "cpu.c"):
            flags[base] = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    return flags


def portable(d):
    """The trainer the tests build (DIR/build, configured with the default
    options) is portable, and -DTRAINER_NATIVE=ON is still the way to ask for
    a native build."""
    problems = []
    with open(os.path.join(d, "CMakeLists.txt")) as f:
        m = re.search(r'^option\(TRAINER_NATIVE\s+"[^"]*"\s+(\w+)\)', f.read(), re.M)
    print("CMakeLists.txt: %s" % (m.group(0) if m else "no TRAINER_NATIVE option"))
    if not m or m.group(1) != "OFF":
        problems.append("the generated CMakeLists.txt does not default TRAINER_NATIVE to OFF")
    with open(os.path.join(d, "build", "CMakeCache.txt")) as f:
        cached = re.search(r"^TRAINER_NATIVE:BOOL=(\w+)$", f.read(), re.M)
    print("build/CMakeCache.txt: TRAINER_NATIVE=%s" % (cached.group(1) if cached else "?"))
    if not cached or cached.group(1) != "OFF":
        problems.append("the tested build has TRAINER_NATIVE=%s" % (cached.group(1) if cached else "unset"))
    flags = compile_flags(os.path.join(d, "build"))
    if len(flags) != 3:
        problems.append("compile_commands.json has %s, expected trainer.c, memplan_trainer.c, cpu.c" % sorted(flags))
    for src, argv in sorted(flags.items()):
        print("%s: %s" % (src, " ".join(argv)))
        tuned = [a for a in argv if a in ("-march=native", "-mtune=native", "-mcpu=native")]
        if tuned:
            problems.append("%s is compiled with %s" % (src, " ".join(tuned)))
        if "-ffp-contract=off" not in argv:
            problems.append("%s is compiled without -ffp-contract=off" % src)
    native = os.path.join(d, "build-native")
    shutil.rmtree(native, ignore_errors=True)
    must(["cmake", "-S", d, "-B", native, "-DTRAINER_NATIVE=ON", "-DTRAINER_CUDA=OFF",
          "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"])
    for src, argv in sorted(compile_flags(native).items()):
        if "-march=native" not in argv:
            problems.append("-DTRAINER_NATIVE=ON: %s is compiled without -march=native" % src)
        if "-ffp-contract=off" not in argv:
            problems.append("-DTRAINER_NATIVE=ON: %s is compiled without -ffp-contract=off" % src)
    for p in problems:
        print("FAIL " + p)
    print("portable build: %s" % ("ok" if not problems else "%d problems" % len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    cmd, rest = sys.argv[1], sys.argv[2:]
    if cmd in ("roundtrip", "errors"):
        os.makedirs(rest[1], exist_ok=True)
    fn = {"build": build, "train": train, "determinism": determinism, "roundtrip": roundtrip,
          "noalloc": noalloc, "errors": errors, "portable": portable}[cmd]
    sys.exit(fn(*rest) or 0)
