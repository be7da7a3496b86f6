#!/usr/bin/python3
"""torch_zoo.py: which torchvision classification models `memplan import-torch` imports, and for the
others what it misses (docs/pytorch.md quotes the figure).

  /usr/bin/python3 tools/torch_zoo.py [--size 224] [--batch 2] [NAME...]

Each model of torchvision.models.list_models(module=torchvision.models) (or the NAMEs) is imported by
this tool's own import (the same code `memplan import-torch torchvision.models:NAME` runs) with
x=[B,3,S,S] (inception_v3: 299; a ViT: S rounded down to whole patches, its
image_size) and cross_entropy targets into a temporary folder, then removed. Prints a
line per model, `ok` or what refused it: the unsupported ops, counted by kind, or else the error's line
(torch's warnings, such as maxvit's torch.meshgrid UserWarning, ignored); and the total."""
import argparse
import collections
import contextlib
import io
import os
import re
import shutil
import sys
import tempfile
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_import  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    try:
        import torchvision
        import torchvision.models
    except ImportError:
        sys.exit("torch_zoo.py: torchvision is not installed for %s (Debian: apt install python3-torchvision)"
                 % sys.executable)
    names = a.names or torchvision.models.list_models(module=torchvision.models)
    ok, missing = 0, collections.Counter()
    for name in names:
        size = 299 if name == "inception_v3" else a.size
        out = tempfile.mkdtemp(prefix="memplan-zoo-")
        args = ["import", "torchvision.models:" + name, "-o", out, "--input", "x=[B,3,%d,%d]:f32" % (size, size),
                "--input", "targets=[B]:i32", "--dims", "B=%d" % a.batch, "--loss", "cross_entropy:targets"]
        if name == "inception_v3":
            args += ["--kwargs", "aux_logits=False,init_weights=False"]
        if name.startswith("vit_"):  # a ViT asserts its image_size: the size rounded down to whole patches
            patch = int(name.rsplit("_", 1)[1])
            size = size // patch * patch
            args[5] = "x=[B,3,%d,%d]:f32" % (size, size)
            args += ["--kwargs", "image_size=%d" % size]
        err = io.StringIO()
        try:
            # torch's warnings (maxvit's torch.meshgrid UserWarning) are not findings: without them the
            # error is the first line of stderr
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rc = torch_import.main(args)
        except Exception as e:  # a crash in the tool is a finding too
            rc, err = 3, io.StringIO("crash: %s: %s" % (type(e).__name__, e))
        finally:
            shutil.rmtree(out, ignore_errors=True)
        if rc == 0:
            ok += 1
            print("ok       %s" % name)
            continue
        text = err.getvalue()
        kinds = sorted(set(re.findall(r"^  (\S+(?: \([^)]*\))?) at ", text, re.M)))
        kinds = sorted(set(re.sub(r" \(.*\)", "", k) for k in kinds))
        missing.update(kinds)
        lines = text.strip().splitlines() or ["(no message)"]
        first = next((ln for ln in lines if "error:" in ln or ln.startswith("crash:")), lines[0])
        first = first.replace("memplan import-torch: error: ", "").replace("torchvision.models:%s: " % name, "")
        print("refused  %s: %s" % (name, ", ".join(kinds) if kinds else first[:200]))
    print("%d of %d torchvision classification models import; the missing ops by the number of models they "
          "block: %s" % (ok, len(names), ", ".join("%s %d" % kv for kv in missing.most_common())))


if __name__ == "__main__":
    main()
