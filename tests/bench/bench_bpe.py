#!/usr/bin/env python3
"""bench_bpe.py: memplan tokenize's MB/s against the npm package gpt-3-encoder's
own JavaScript encoder (tests/bpe/reference.js), in the same run, on the same
text, each on one core, in CPU seconds (the machine may be shared: wall clock
would measure the neighbours). memplan's time is the whole command, the
vocabulary's loading included; the encoder's is its encoding loop alone.

    bench_bpe.py MEMPLAN PKGDIR WORKDIR FILE...

Fails when memplan tokenize is under the 5 MB/s goal (issue 30), or when its
tokens differ from the encoder's."""
import os
import resource
import shutil
import subprocess
import sys

GOAL = 5.0  # MB/s, one core


def main():
    memplan, pkg, work, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bpe", "reference.js")
    js = subprocess.run(["node", ref, pkg, work] + files + ["--repeat", "2"], check=True, capture_output=True,
                        text=True).stdout.strip()
    corpus = os.path.join(work, "corpus.txt")
    size = os.path.getsize(corpus)
    best = None
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([memplan, "tokenize", "--vocab", pkg, corpus, "-o", os.path.join(work, "got.bin")], check=True,
                       stdout=subprocess.DEVNULL)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        best = cpu if best is None else min(best, cpu)
    with open(os.path.join(work, "got.bin"), "rb") as a, open(os.path.join(work, "expected.bin"), "rb") as b:
        same = a.read() == b.read()
    rate = size / max(best, 1e-6) / 1e6
    js_rate = float(js.rsplit(":", 1)[1].split()[0])
    print(js)
    print("memplan tokenize: %d bytes in %.3f s CPU (best of 3, loading included): %.1f MB/s CPU, %.0fx the JS "
          "encoder; goal %.0f MB/s; tokens %s" % (size, best, rate, rate / js_rate, GOAL, "equal" if same else "DIFFER"))
    return 0 if same and rate >= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
