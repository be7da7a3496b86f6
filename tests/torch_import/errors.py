#!/usr/bin/python3
"""errors.py MEMPLAN WORKDIR: `memplan import-torch`'s bad input, case by case: exit status 1, every expected
piece of text in stderr, and nothing written (the -o folder never created). Exits 77 without torch."""
import os
import shutil
import subprocess
import sys

try:
    import torch  # noqa: F401 (only whether it imports)
except ImportError:
    print("errors.py: torch is not installed; skipping")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
BAD, MODS = os.path.join(HERE, "bad.py"), os.path.join(HERE, "modules.py")
MLP_IO = ["--input", "x=[B,12]:f32", "--input", "targets=[B]:i32", "--dims", "B=4", "--loss", "cross_entropy:targets"]
IO8 = ["--input", "x=[B,8]:f32", "--input", "y=[B,4]:f32", "--dims", "B=2", "--loss", "mse:y"]


def main():
    memplan, work = sys.argv[1:3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # a python3 without torch: Debian's, without its site packages
    nopy = os.path.join(work, "python3-without-torch")
    with open(nopy, "w") as f:
        f.write("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n")
    os.chmod(nopy, 0o755)
    # a checkpoint of another plan for the load-back helper: the MLP's weights against the CNN's name map
    good = os.path.join(work, "mlp")
    r = subprocess.run([memplan, "import-torch", MODS + ":MLP"] + MLP_IO + ["-o", good], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cnn = os.path.join(work, "cnn")
    r = subprocess.run([memplan, "import-torch", MODS + ":SmallCNN", "--input", "x=[B,3,8,8]:f32", "--input",
                        "targets=[B]:i32", "--dims", "B=2", "--loss", "cross_entropy:targets", "-o", cnn],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cases = [
        ("spec that does not import", ["no_such_package_xyz.models:net"] + MLP_IO,
         ["SPEC 'no_such_package_xyz.models:net': importing no_such_package_xyz.models failed",
          "ModuleNotFoundError"], {}),
        ("no such factory", [MODS + ":Nope"] + MLP_IO, ["modules.py has no class or function 'Nope'"], {}),
        ("factory that raises", [BAD + ":raises"] + MLP_IO,
         ["raises() raised ValueError: no weights for this size"], {}),
        ("tuple without --output", [BAD + ":TupleOut"] + IO8,
         ["forward returns a tuple of 2 values: say which one the loss reads with --output INDEX"], {}),
        ("input dim that disagrees", [MODS + ":MLP", "--input", "x=[B,13]:f32"] + MLP_IO[2:],
         ["forward fails on inputs of shapes x [4, 13]", "do the --input dims match the module?"], {}),
        ("loss target of the wrong dtype", [MODS + ":MLP", "--input", "x=[B,12]:f32", "--input", "targets=[B]:f32",
                                            "--dims", "B=4", "--loss", "cross_entropy:targets"],
         ["--input targets: cross_entropy's targets are class indices: give dtype i32, not f32"], {}),
        ("mse targets of another shape", [BAD + ":TupleOut", "--output", "0", "--input", "x=[B,8]:f32", "--input",
                                          "y=[B,5]:f32", "--dims", "B=2", "--loss", "mse:y"],
         ["--input y=[2, 5]: mse's targets must have the output's shape [2, 4]"], {}),
        ("unsupported nodes, all of them", [BAD + ":Unsupported"] + IO8[:2] + ["--input", "y=[B,8]:f32"] + IO8[4:],
         ["3 node(s) have no memplan op; nothing written:",
          "ELU (gate) at gate: no memplan op for ELU", "bad.py:14: y = self.gate(self.fc(x))",
          "tanh at (top level): no memplan op for it", "bad.py:15: return torch.tanh(y) * 2.0",
          "mul at (top level): mul with a Python number"], {}),
        ("nn.MultiheadAttention returning its weights", [BAD + ":Attn", "--input", "x=[B,4,8]:f32", "--input",
                                                          "y=[B,4,8]:f32", "--dims", "B=2", "--loss", "mse:y"],
         ["1 node(s) have no memplan op; nothing written:", "MultiheadAttention (att) at att: memplan maps "
          "self-attention without masks or dropout: not need_weights=True (the default: pass need_weights=False)",
          "bad.py:49: y, _ = self.att(x, x, x)"], {}),
        ("a chunk of unequal pieces, average pooling without the padding", [BAD + ":Pieces", "--input",
                                                                      "x=[B,3,5,5]:f32", "--input", "y=[B,27]:f32",
                                                                      "--dims", "B=2", "--loss", "mse:y"],
         ["2 node(s) have no memplan op; nothing written:", "Tensor.chunk at (top level): chunk(2, dim=1) of "
          "[2, 3, 5, 5]: memplan splits a dim other than the batch in equal pieces",
          "bad.py:55: a, b = x.chunk(2, dim=1)", "avg_pool2d at (top level): memplan's avgpool2d takes "
          "no count_include_pad=False"], {}),
        ("a Llama whose RoPE tables are not theta's", [BAD + ":scaled_rope_llama", "--input", "idx=[B,T]:i32",
                                                       "--input", "targets=[B,T]:i32", "--dims", "B=2,T=8", "--loss",
                                                       "cross_entropy:targets"],
         ["1 node(s) have no memplan op; nothing written:", "Tensor.reshape at layers.0.self_attn: RoPE not "
          "matched: cos and sin tables", "off Llama's RoPE of the nearest theta", "memplan's rope turns position t "
          "by t theta^(-2i/hd)", "modules.py:"], {}),
        ("data-dependent control flow", [BAD + ":DataDependent"] + IO8,
         ["torch.fx cannot trace the module (data-dependent control flow",
          "bad.py:24: if x.sum() > 0:"], {}),
        ("no python3", [MODS + ":MLP"] + MLP_IO,
         ["cannot run /nonexistent/python3", "install Debian's python3-torch"],
         {"MEMPLAN_PYTHON": "/nonexistent/python3"}),
        ("python3 without torch", [MODS + ":MLP"] + MLP_IO,
         ["PyTorch is not installed for", "apt install python3-torch"], {"MEMPLAN_PYTHON": nopy}),
        ("checkpoint of another plan", ["load", os.path.join(good, "weights.safetensors"),
                                        os.path.join(cnn, "name_map.json")],
         ["a checkpoint of model 'mlp', not of 'smallcnn'"], {}),
        ("not a name map", ["load", os.path.join(good, "weights.safetensors"),
                            os.path.join(good, "weights.safetensors")],
         ["not a name map written by memplan import-torch"], {}),
    ]
    # torchvision's Swin V2 (32x32: one 8x8 window per stage), each of its 12 attentions listed. Planted once
    # (the tool refusing it after its input's check, as first written): "25 node(s)", the attention listed once.
    try:
        import torchvision  # noqa: F401 (only whether it imports)
        cases.append(("Swin V2's attention", ["torchvision.models:swin_v2_t", "--input", "x=[B,3,32,32]:f32",
                                              "--input", "y=[B]:i32", "--dims", "B=1", "--loss", "cross_entropy:y"],
                      ["36 node(s) have no memplan op; nothing written:", "shifted_window_attention at "
                       "features.7.1.attn: memplan's window_attention maps torchvision's Swin V1 attention: not Swin "
                       "V2's cosine attention (logit_scale) and its continuous position bias"], {}))
    except ImportError:
        print("errors.py: no torchvision; Swin V2's case skipped")
    bad = 0
    for i, (what, args, want, env) in enumerate(cases):
        out = os.path.join(work, "out%d" % i)
        r = subprocess.run([memplan, "import-torch"] + args + ["-o", out], capture_output=True, text=True,
                           env=dict(os.environ, **env))
        miss = [w for w in want if w not in r.stderr]
        wrote = os.path.exists(out)
        ok = r.returncode == 1 and not miss and not wrote and "Traceback" not in r.stderr
        bad += not ok
        print("%s: %s (exit %d)%s%s" % ("ok" if ok else "FAIL", what, r.returncode, "".join(
            "\n  missing: " + m for m in miss), "\n  wrote " + out if wrote else ""))
        print("  " + r.stderr.strip().replace("\n", "\n  "))
    print("errors.py: %s" % ("PASS" if not bad else "FAIL (%d)" % bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
