#!/usr/bin/python3
"""tests/mutants/run.py SOURCE WORK [--only NAME,...] [--subset K/N] [-j J]: the mutant suite (issue 33).

Copies SOURCE's tracked and unignored files (git ls-files) to WORK/src once, configures WORK/build once, then
for each mutant of tests/mutants/mutants.py: applies it (an exact, unique text replacement; a missing or
ambiguous search text is 'stale', counted as a failure of the suite), builds memplan and the mutant's
targets, runs only the mutant's tests (ctest -R, their fixtures with them: trainers are generated again from
the mutated runtime), and restores the file. A mutant is caught when every test it names fails.
Prints caught / survived / stale per mutant and the total; exit status 0 only when every mutant ran was
caught. --subset K/N runs every N-th mutant starting at the K-th (0-based, K mod N); K 'commit' picks it
from SOURCE's commit hash (git rev-parse --short=6 HEAD, as tests/run-all picks its accuracy test), so each
commit runs another bounded slice and N commits cover every mutant.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mutants import MUTANTS  # noqa: E402


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def copy_tree(source, dst):
    r = sh(["git", "-C", source, "ls-files", "-co", "--exclude-standard", "-z"])
    if r.returncode:  # not a git checkout: every file but the build trees
        files = [os.path.relpath(os.path.join(d, f), source) for d, dirs, fs in os.walk(source)
                 for f in fs if not os.path.relpath(d, source).split(os.sep)[0].startswith(("build", ".git"))]
    else:
        files = r.stdout.split("\0")
    for f in filter(None, files):
        s, d = os.path.join(source, f), os.path.join(dst, f)
        if not os.path.isfile(s):
            continue
        os.makedirs(os.path.dirname(d), exist_ok=True)
        if not os.path.exists(d) or open(s, "rb").read() != open(d, "rb").read():
            shutil.copy2(s, d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("work")
    ap.add_argument("--only", default="")
    ap.add_argument("--subset", default="")
    ap.add_argument("-j", default="2")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    todo = MUTANTS
    if a.only:
        names = a.only.split(",")
        unknown = [n for n in names if n not in {m["name"] for m in MUTANTS}]
        if unknown:
            sys.exit("run.py: no mutant %s (see --list)" % ", ".join(unknown))
        todo = [m for m in MUTANTS if m["name"] in names]
    if a.subset:
        k, _, n = a.subset.partition("/")
        if k == "commit":
            h = sh(["git", "-C", a.source, "rev-parse", "--short=6", "HEAD"]).stdout.strip()
            k = str(int(h, 16)) if re.fullmatch(r"[0-9a-f]{6}", h) else "0"
        if not (k.isdigit() and n.isdigit() and int(n) > 0):
            sys.exit("run.py: --subset %s: give K/N (0 <= K, 1 <= N) or commit/N" % a.subset)
        todo = todo[int(k) % int(n)::int(n)]
        print("subset %d/%s: %s" % (int(k) % int(n), n, ", ".join(m["name"] for m in todo)), flush=True)
    if a.list:
        for m in todo:
            print("%-36s %-28s %s" % (m["name"], m["file"], " ".join(m["tests"])))
        return 0
    src, bld = os.path.join(a.work, "src"), os.path.join(a.work, "build")
    os.makedirs(src, exist_ok=True)
    copy_tree(os.path.abspath(a.source), src)
    if not os.path.exists(os.path.join(bld, "CMakeCache.txt")):
        r = sh(["cmake", "-S", src, "-B", bld, "-DCMAKE_BUILD_TYPE=RelWithDebInfo"])
        if r.returncode:
            sys.exit("run.py: cmake failed:\n" + r.stdout + r.stderr)
    results = []
    for m in todo:
        t0 = time.time()
        path = os.path.join(src, m["file"])
        with open(path) as f:
            text = f.read()
        n = text.count(m["search"])
        if n != 1:
            results.append((m["name"], "stale", "search text found %d times in %s" % (n, m["file"])))
            print("%-36s stale: search text found %d times in %s" % (m["name"], n, m["file"]), flush=True)
            continue
        try:
            with open(path, "w") as f:
                f.write(text.replace(m["search"], m["replace"]))
            targets = ["memplan", "rss_probe", "remat_dag_exact"] + m.get("targets", [])
            r = sh(["cmake", "--build", bld, "-j", a.j, "--target"] + targets)
            if r.returncode:  # a mutant that does not compile is the mutant's bug, not a catch
                verdict, why = "stale", "does not build: " + (r.stdout + r.stderr)[-400:]
            else:
                regex = "^(%s)$" % "|".join(re.escape(t) for t in m["tests"])
                r = sh(["ctest", "--test-dir", bld, "-R", regex, "-j", a.j])
                status = dict(re.findall(r"\d+ - (\S+) \(([^)]*)\)", r.stdout))
                unrun = [t for t in m["tests"] if status.get(t) == "Not Run"]
                passed = [t for t in m["tests"] if t not in status]
                if unrun or not re.search(r"tests failed out of [1-9]", r.stdout):
                    verdict, why = "stale", "not run: %s (a fixture failed?)" % ", ".join(unrun or m["tests"])
                elif passed:  # every named test must catch it: the claim is each test's
                    verdict, why = "survived", "%s passed" % ", ".join(passed)
                else:
                    verdict, why = "caught", "by " + ", ".join(m["tests"])
        finally:
            with open(path, "w") as f:
                f.write(text)
        results.append((m["name"], verdict, why))
        print("%-36s %s %s (%.0f s)" % (m["name"], verdict, why, time.time() - t0), flush=True)
    caught = sum(v == "caught" for _, v, _ in results)
    print("mutants: %d of %d caught%s" % (caught, len(results), "" if caught == len(results) else
                                           ": " + ", ".join("%s %s" % (n, v) for n, v, _ in results
                                                             if v != "caught")))
    return 0 if caught == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
