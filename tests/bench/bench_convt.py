#!/usr/bin/env python3
"""bench_convt.py: conv_transpose2d's CPU kernels (runtime/cpu_conv.c: im2col,
col2im and OpenBLAS sgemm) against torch's F.conv_transpose2d, forward and
backward (dx, dW, db), at the same size and thread count in the same run.

  bench_convt.py --bin build/tests/bench_convt [--size N,C,H,W,O,k,s,p]... [--threads T] [--reps R]

Prints one line per size: memplan's and torch's milliseconds (the best of R
runs each) and the ratio memplan / torch of the step (forward + backward).
Exit 77 (skipped) without torch; 1 when the binary fails."""
import argparse
import subprocess
import sys
import time

SIZES = ["2,320,32,32,320,4,2,1",  # SD-like up-block: [2, 320, 32, 32] -> [2, 320, 64, 64]
         "2,320,32,32,320,3,1,1"]  # k3 stride 1: the same spatial size


def torch_ms(torch, dims, threads, reps):
    N, C, H, W, O, k, s, p = dims
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(N, C, H, W, generator=g) - 0.5).requires_grad_()
    w = (torch.rand(C, O, k, k, generator=g) - 0.5).requires_grad_()
    b = (torch.rand(O, generator=g) - 0.5).requires_grad_()
    best_f = best_b = float("inf")
    for _ in range(reps):
        x.grad = w.grad = b.grad = None
        t0 = time.perf_counter()
        y = torch.nn.functional.conv_transpose2d(x, w, b, stride=s, padding=p)
        t1 = time.perf_counter()
        y.backward(torch.ones_like(y))
        t2 = time.perf_counter()
        best_f, best_b = min(best_f, t1 - t0), min(best_b, t2 - t1)
    return 1e3 * best_f, 1e3 * best_b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--size", action="append")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("bench_convt: no torch (run it with /usr/bin/python3): skipped")
        return 77
    print("conv_transpose2d, %d threads, best of %d: ms forward / backward (dx, dW, db)" % (a.threads, a.reps))
    print("%-34s %10s %10s %10s %10s %7s" % ("N,C,H,W,O,k,s,p", "memplan f", "memplan b", "torch f", "torch b",
                                           "ratio"))
    for size in a.size or SIZES:
        dims = [int(v) for v in size.split(",")]
        r = subprocess.run([a.bin] + [str(v) for v in dims] + [str(a.threads), str(a.reps)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("bench_convt: %s failed (exit %d): %s" % (a.bin, r.returncode, r.stderr.strip()))
            return 1
        mf, mb = (float(v) for v in r.stdout.split("\n")[0].split()[1:3])
        tf, tb = torch_ms(torch, dims, a.threads, a.reps)
        print("%-34s %10.1f %10.1f %10.1f %10.1f %7.2f" % (size, mf, mb, tf, tb, (mf + mb) / (tf + tb)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
