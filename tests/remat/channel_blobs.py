"""channel_blobs.py DIR N C H K: a data set a pooled conv net learns (tests/remat/check_auto.sh), as
DIR/{train,test}/{x,targets}.npy for the trainer's --npy: sample s of class y = s mod K (shuffled) has
x[c, i, j] = centre(y, c) + noise, centre uniform in [-1, 1] per class and channel, noise uniform in
[-2, 2] per element (the trainer's blobs separate classes per pixel, which global pooling averages away).
Pure Python, no NumPy: the .npy v1.0 header written by hand. Deterministic (seed 1)."""
import os
import random
import struct
import sys
from array import array


def save(path, descr, shape, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape))
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(values.tobytes())


def main():
    out, n, c, h, k = sys.argv[1], *map(int, sys.argv[2:6])
    rnd = random.Random(1)
    centre = [[rnd.uniform(-1, 1) for _ in range(c)] for _ in range(k)]
    for split, rows in (("train", n), ("test", n // 4)):
        os.makedirs(os.path.join(out, split), exist_ok=True)
        ys = [s % k for s in range(rows)]
        rnd.shuffle(ys)
        x = array("f", (centre[y][ch] + rnd.uniform(-2, 2) for y in ys for ch in range(c) for _ in range(h * h)))
        save(os.path.join(out, split, "x.npy"), "<f4", (rows, c, h, h), x)
        save(os.path.join(out, split, "targets.npy"), "<i4", (rows,), array("i", ys))


main()
