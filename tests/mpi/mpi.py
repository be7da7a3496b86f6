#!/usr/bin/env python3
"""Data parallelism on MPI (label mpi, tests/mpi.cmake): plans for 2 ranks
trained with mpirun against one rank at twice the batch, and a rank that
dies. Plain Python (no NumPy).

  mpi.py build MEMPLAN MODEL.yaml BATCHDIM B WORKDIR
      compiles MODEL at BATCHDIM=2B (one rank), at B with --ranks 2 --zero
      0, 1 and 2, and at B with --ranks 2 --zero 2 --micro-batch B/2, builds each plan's trainer_mpi in one generated folder
      (WORKDIR/src, the --ranks 2 --zero 1 plan's CMakeLists.txt: the
      runtime, identical in the four folders, compiles once; each plan's
      trainer.c replaces the last one and relinks): WORKDIR/bin/{r1,z0,z1,z2,z2mb}.
  mpi.py equal WORKDIR
      trains each 10 steps from the same seed (r1 with mpirun -np 1, the
      others -np 2) and checks every step's loss and every saved weight:
      2 ranks x B equal 1 rank x 2B within 1e-6 relative (fp32).
  mpi.py die WORKDIR
      kills rank 1 at step 3 (--kill-rank) and checks that mpirun ends soon,
      not 0, before rank 0 logs step 3, its report naming rank 1 and status 9.
  mpi.py hang WORKDIR
      stops rank 1 at step 3 (--hang-rank) and checks that rank 0's watchdog
      (--comm-timeout 3) ends the run with its error, within 33 s.
"""
import filecmp
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
STEPS = 10
# The bound, fp32. The runs differ in summation order only (one GEMM
# over 2B rows against two over B summed by the collective); measured: the
# losses agree to the printed 9 digits, the weights to ~1e-8 relative.
RTOL = 1e-6
PLANS = {"r1": [], "z0": ["--ranks", "2", "--zero", "0"], "z1": ["--ranks", "2", "--zero", "1"],
         "z2": ["--ranks", "2", "--zero", "2"]}
# ZeRO-2 with 2 micro-batches per rank: reduce-scatters in every pass into accumulating shards
MICRO = "z2mb"


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        sys.exit("FAIL: %s exited %d:\n%s" % (" ".join(cmd), r.returncode, r.stdout[-4000:]))
    return r.stdout


def build(memplan, yaml, dim, b, work):
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work + "/bin")
    for tag, args in PLANS.items():
        rows = 2 * b if tag == "r1" else b
        run([memplan, "compile", yaml, "-o", "%s/%s" % (work, tag), "--set", "%s=%d" % (dim, rows)] + args)
    run([memplan, "compile", yaml, "-o", "%s/%s" % (work, MICRO), "--set", "%s=%d" % (dim, b), "--micro-batch",
         str(b // 2)] + PLANS["z2"])
    src = work + "/src"
    shutil.copytree(work + "/z1", src)
    for tag in PLANS:  # one runtime for all four: only trainer.c and plan.json differ
        for f in os.listdir(src):
            if f not in ("trainer.c", "trainer.cu", "plan.json", "plan.dot", "plan.svg", "timeline.svg",
                         "CMakeLists.txt") and not filecmp.cmp("%s/%s" % (src, f), "%s/%s/%s" % (work, tag, f), False):
                sys.exit("FAIL: %s differs between the plans' folders" % f)
    run(["cmake", "-S", src, "-B", src + "/build", "-DTRAINER_CUDA=OFF", "-DTRAINER_WERROR=" + os.environ.get("MEMPLAN_TRAINER_WERROR", "OFF")])
    for tag in ("z1", "z0", "z2", MICRO, "r1"):
        shutil.copyfile("%s/%s/trainer.c" % (work, tag), src + "/trainer.c")
        os.utime(src + "/trainer.c", (time.time() + 1, time.time() + 1))
        run(["cmake", "--build", src + "/build", "--target", "trainer_mpi", "-j2"])
        shutil.copyfile(src + "/build/trainer_mpi", "%s/bin/%s" % (work, tag))
        os.chmod("%s/bin/%s" % (work, tag), 0o755)
    print("built", ", ".join(list(PLANS) + [MICRO]))


def safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    head = json.loads(data[8 : 8 + n])
    out = {}
    for k, v in head.items():
        if k != "__metadata__":
            b, e = v["data_offsets"]
            out[k] = struct.unpack("<%df" % ((e - b) // 4), data[8 + n + b : 8 + n + e])
    return out


def train(work, tag, np, steps=STEPS):
    log, save = "%s/%s.csv" % (work, tag), "%s/%s.safetensors" % (work, tag)
    out = run(MPIRUN + ["-np", str(np), "%s/bin/%s" % (work, tag), "--steps", str(steps), "--threads", "1", "--log",
                        log, "--save", save, "--eval-batches", "0"])
    with open(log) as f:
        loss = [float(line.split(",")[1]) for line in f.read().splitlines()[1:]]
    return loss, safetensors(save), out


def rel(a, b):
    """max |a - b| / max |b|: norm-wise, so elements near 0 don't blow it up."""
    return max(abs(x - y) for x, y in zip(a, b)) / (max(abs(y) for y in b) or 1.0)


def equal(work):
    ref_loss, ref_w, _ = train(work, "r1", 1)
    _, init_w, _ = train(work, "r1", 1, steps=0)
    moved = max(rel(ref_w[k], init_w[k]) for k in ref_w)
    if moved < 1e-4:  # the comparison means something only if training moved the weights
        sys.exit("FAIL: 10 steps moved the weights by only %.3g relative" % moved)
    for tag in ("z0", "z1", "z2", MICRO):
        loss, w, out = train(work, tag, 2)
        if "data parallel: 2 ranks" not in out:
            sys.exit("FAIL: %s: the trainer did not say it runs on 2 ranks:\n%s" % (tag, out[-2000:]))
        if len(loss) != STEPS:
            sys.exit("FAIL: %s: %d logged steps, want %d" % (tag, len(loss), STEPS))
        for s, (x, y) in enumerate(zip(loss, ref_loss)):
            if abs(x - y) > RTOL * abs(y):
                sys.exit("FAIL: %s: step %d loss %.9g on 2 ranks, %.9g on 1 rank at twice the batch" % (tag, s + 1, x, y))
        # a ZeRO run's --save holds the weights only (its optimizer state is sharded)
        ref_keys = [k for k in ref_w if tag == "z0" or not k.endswith((".momentum", ".adam_m", ".adam_v"))]
        if sorted(w) != sorted(ref_keys):
            sys.exit("FAIL: %s: the saved tensors differ: %s vs %s" % (tag, sorted(w), sorted(ref_keys)))
        worst = 0.0
        for k in ref_keys:
            r = rel(w[k], ref_w[k])
            worst = max(worst, r)
            if r > RTOL:
                sys.exit("FAIL: %s: %s differs by %.3g relative after %d steps (bound %g)" % (tag, k, r, STEPS, RTOL))
        print("%s: %d losses and %d tensors as 1 rank at twice the batch (worst weight %.2g relative; "
              "training moved them %.2g)" % (tag, STEPS, len(w), worst, moved))
    print("PASS")


def die(work, how, timeout):
    """--kill-rank: mpirun ends the job; --hang-rank: the watchdog (--comm-timeout) does."""
    t0 = time.time()
    r = subprocess.run(MPIRUN + ["-np", "2", work + "/bin/z1", "--steps", "50", "--threads", "1", "--eval-batches",
                                 "0", "--%s-rank" % how, "1@3", "--comm-timeout", str(timeout)],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    dt, text = time.time() - t0, r.stdout
    if r.returncode == 0:
        sys.exit("FAIL: mpirun exited 0 after rank 1 stopped:\n" + text[-3000:])
    if dt > timeout + 30:
        sys.exit("FAIL: mpirun took %.1f s to end after rank 1 stopped (--comm-timeout %d)" % (dt, timeout))
    if "step     3/50" in text or "step    50/50" in text:
        sys.exit("FAIL: rank 0 finished a step rank 1 never ran:\n" + text[-3000:])
    if "step     2/50" not in text:
        sys.exit("FAIL: the run did not get to step 2 before rank 1 stopped:\n" + text[-3000:])
    want = [r"Process name: +\[\[\d+,\d+\],1\]", r"Exit code: +9"] if how == "kill" else [
        r"trainer: error: rank 0: step 3 did not finish within %d s \(--comm-timeout\): a rank died or "
        r"stopped answering" % timeout]
    for w in want:
        if not re.search(w, text):
            sys.exit("FAIL: no error matching %r:\n%s" % (w, text[-3000:]))
    print("rank 1 %s at step 3; mpirun ended in %.1f s with status %d:" % ("died" if how == "kill" else "hung", dt,
                                                                           r.returncode))
    print("\n".join(l for l in text.splitlines() if l.strip())[-1500:])
    print("PASS")


if __name__ == "__main__":
    a = sys.argv[1:]
    if len(a) == 6 and a[0] == "build":
        build(a[1], a[2], a[3], int(a[4]), a[5])
    elif len(a) == 2 and a[0] == "equal":
        equal(a[1])
    elif len(a) == 2 and a[0] == "die":
        die(a[1], "kill", 20)
    elif len(a) == 2 and a[0] == "hang":
        die(a[1], "hang", 3)
    else:
        sys.exit(__doc__)
