#!/usr/bin/python3
"""llama_plan.py MEMPLAN WORKDIR: the Llama of tests/torch_import/modules.py imported (memplan import-torch) plans
the forward models/llama-mini.yaml plans at the same sizes (--set C=64, L=2, F=172, B=2, T=8: 4 heads, 2 kv
heads, V 256): op for op, with each op's dims (plan.json's schedule), but for its separate q, k, v projections,
three linears and a concat where llama-mini's causal_self_attention has one packed linear, and SwiGLU's silu
run before its up projection; and the same Llama with k and v repeated by torch.repeat_interleave, the softmax
in float32 and back, and transformers 4.28's mask (finfo.min, [B, 1, T, T]) imports to the same model.yaml. Exits 77 without torch."""
import json
import os
import subprocess
import sys

try:
    import torch  # noqa: F401 (only whether it imports)
except ImportError:
    print("llama_plan.py: torch is not installed; skipping")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("llama_plan.py: FAIL: %s exited %d:\n%s" % (" ".join(cmd), r.returncode, r.stderr))


def forward(plan_dir):
    with open(os.path.join(plan_dir, "plan.json")) as f:
        plan = json.load(f)
    return [(o["op"], o["dims"]) for o in plan["schedule"] if o["phase"] == "forward"]


def main():
    memplan, work = sys.argv[1:3]
    imp = os.path.join(work, "import")
    run([memplan, "import-torch", os.path.join(HERE, "modules.py") + ":Llama", "--input", "idx=[B,T]:i32",
         "--input", "targets=[B,T]:i32", "--dims", "B=2,T=8", "--loss", "cross_entropy:targets", "-o", imp])
    run([memplan, "compile", os.path.join(imp, "model.yaml"), "-o", os.path.join(work, "imported")])
    mini = os.path.join(HERE, "..", "..", "models", "llama-mini.yaml")
    run([memplan, "compile", mini, "-o", os.path.join(work, "mini")] +
        sum((["--set", s] for s in ("B=2", "T=8", "C=64", "L=2", "F=172")), []))
    # k and v repeated by torch.repeat_interleave(x, n_rep, dim=1) instead of repeat_kv, the softmax upcast to
    # float32 and back, a [B, 1, T, T] mask of finfo.min: the same model.yaml
    imp2 = os.path.join(work, "import-interleave")
    run([memplan, "import-torch", os.path.join(HERE, "modules.py") + ":Llama", "--kwargs", "interleave=True,upcast=True",
         "--input", "idx=[B,T]:i32", "--input", "targets=[B,T]:i32", "--dims", "B=2,T=8", "--loss",
         "cross_entropy:targets", "-o", imp2])
    with open(os.path.join(imp, "model.yaml")) as f, open(os.path.join(imp2, "model.yaml")) as g:
        same = f.read().split("\n")[1:] == g.read().split("\n")[1:]  # but the first line, the command
    print("  repeat_interleave, upcast softmax, [B, 1, T, T] mask: %s" % ("the same model.yaml" if same else "another model.yaml  DIFFERS"))
    got, want = forward(os.path.join(work, "imported")), forward(os.path.join(work, "mini"))
    # q, k, v: three linears (out H hd, KVH hd, KVH hd) and their concat are llama-mini's one qkv linear
    folded, i = [], 0
    while i < len(got):
        if [o for o, _ in got[i:i + 4]] == ["linear", "linear", "linear", "concat"] and \
                i + 4 < len(got) and got[i + 4][0] == "rope":
            (_, dq), (_, dk), (_, dv) = got[i:i + 3]
            folded.append(("linear", [dq[0], dq[1], dq[2] + dk[2] + dv[2]]))
            i += 4
        else:
            folded.append(got[i])
            i += 1
    # SwiGLU: act_fn(gate_proj(x)) * up_proj(x) runs gate, silu, up; llama-mini's layers gate, up, silu
    # (the same dataflow): each silu compared right before its mul
    for ops in (folded, want):
        for k in range(len(ops)):
            if ops[k][0] == "silu" and k + 2 < len(ops) and ops[k + 1][0] == "linear" and ops[k + 2][0] == "mul":
                ops[k], ops[k + 1] = ops[k + 1], ops[k]
    ok = folded == want and same
    for k in range(max(len(folded), len(want))):
        a = folded[k] if k < len(folded) else None
        b = want[k] if k < len(want) else None
        print("  %-40s %-40s%s" % (a, b, "" if a == b else "  DIFFERS"))
    print("llama_plan.py: %s (%d forward ops)" % ("PASS" if ok else "FAIL", len(want)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
