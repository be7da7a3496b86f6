#!/usr/bin/env python3
"""hostile_files.py CASE MEMPLAN TRAINER WORKDIR: issue #32's malformed files
(safetensors headers for --load/--resume and import-hf, plan.json, .npy),
each made here (standard library only; nothing big is committed) and fed to
the program that reads it. Checks what a user sees: exit status 1 (never a
signal, never 0; a case named *_ok: 0), the expected text on stderr (stdout), a bounded time, and no
OUT.tmp.PID left behind. TRAINER: a CPU trainer of models/mlp.yaml.
`hostile_files.py list` prints the cases."""
import json
import os
import resource
import struct
import subprocess
import sys
import time


def st_file(path, header, data=b"", raw=None):
    """A safetensors file: u64 length, the header (JSON of header, or raw bytes), data."""
    h = raw if raw is not None else json.dumps(header, separators=(",", ":")).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


def entry(begin, end, shape=None, dtype="F32"):
    return {"dtype": dtype, "shape": shape if shape is not None else [(end - begin) // 4], "data_offsets": [begin, end]}


def meta_header(meta_raw):
    """A checkpoint header whose __metadata__ is the raw JSON text meta_raw, one 4-byte tensor."""
    return b'{"__metadata__":' + meta_raw + b',"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}'


def nested(n):
    return b"[" * n + b"]" * n


def npy_file(path, header):
    header += " " * (-(10 + len(header) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())


# name: (how the file is made, which program reads it, expected stderr text, seconds allowed)
def make(case, d):
    f = os.path.join(d, case + ".safetensors")
    if case in ("deep_unknown_load", "deep_unknown_resume"):
        st_file(f, None, b"\0" * 4, raw=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":'
                + nested(1000000) + b"}}")
    elif case in ("deep_metadata_load", "deep_metadata_resume"):
        st_file(f, None, b"\0" * 4, raw=meta_header(b'{"k":' + nested(1000000) + b"}"))
    elif case == "cut_number":
        st_file(f, None, raw=b'{"fc1.weight":{"dtype":"F32","shape":[512,784],"data_offsets":[0,1605632')
    elif case == "trailing_text":
        st_file(f, None, b"\0" * 4, raw=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} and more')
    elif case == "duplicate_name":
        st_file(f, None, b"\0" * 8, raw=b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                b'"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}')
    elif case == "overlap":
        st_file(f, {"a": entry(0, 8), "b": entry(4, 12)}, b"\0" * 12)
    elif case == "nul_name":
        st_file(f, None, b"\0" * 4, raw=b'{"fc1.weight\\u0000x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}')
    elif case == "duplicate_step":
        st_file(f, None, b"\0" * 4, raw=meta_header(b'{"step":"1","plan":"0","step":"2"}'))
    elif case == "metadata_45":
        st_file(f, None, b"\0" * 4,
                raw=meta_header(json.dumps({"k%d" % i: "v" for i in range(45)}, separators=(",", ":")).encode()))
    elif case == "metadata_number":
        st_file(f, None, b"\0" * 4, raw=meta_header(b'{"step":2,"plan":"0"}'))
    elif case == "empty_entry":
        st_file(f, {"fc1.weight": {}})
    elif case == "reversed_offsets":
        st_file(f, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8)
    elif case == "negative_offsets":
        st_file(f, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}}, b"\0" * 8)
    elif case == "rank9":
        st_file(f, {"a": {"dtype": "F32", "shape": [1] * 9, "data_offsets": [0, 4]}}, b"\0" * 4)
    elif case == "many_entries":  # 2.2 M entries "aN":[0] (20 MB): over the reader's 4 M values, refused fast
        st_file(f, None, raw=b"{" + b",".join(b'"a%d":[0]' % i for i in range(2200000)) + b"}")
    elif case == "import_huge_shape":
        st_file(f, {"wte.weight": {"dtype": "F32", "shape": [1 << 62, 4], "data_offsets": [0, 0]}})
    elif case == "import_overlap":  # wpe read from wte's bytes
        st_file(f, {"wte.weight": entry(0, 64, [4, 4]), "wpe.weight": entry(0, 64, [4, 4])}, b"\0" * 64)
    elif case == "import_200000_keys":  # every entry well formed (0 bytes): the whole header is checked
        st_file(f, None, raw=b"{" + b",".join(b'"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}' % i
                                             for i in range(200000)) + b"}")
    elif case in ("plan_set_200000_keys", "plan_set_200000_keys_ok"):  # _ok: all distinct; else the last repeats
        f = os.path.join(d, case + ".json")
        with open(os.path.join(d, "plan", "plan.json")) as g:
            plan = g.read()
        keys = ",".join('"k%d":1' % i for i in range(200000)) + ("" if case.endswith("_ok") else ',"k0":2')
        start = plan.index('"set"')
        end = plan.index("}", start)
        with open(f, "w") as g:
            g.write(plan[:start] + '"set": {' + keys + plan[end:])
    elif case in ("npy_trailing", "npy_negative_dim"):
        f = os.path.join(d, case)
        os.makedirs(os.path.join(f, "train"), exist_ok=True)
        shape = "(-5, 784)" if case == "npy_negative_dim" else "(70, 784)"
        tail = " junk" if case == "npy_trailing" else ""
        npy_file(os.path.join(f, "train", "x.npy"), "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }%s"
                 % (shape, tail))
    return f


CASES = {  # name: (reader, expected stderr text)
    "deep_unknown_load": ("load", "nested deeper than 64 levels"),
    "deep_unknown_resume": ("resume", "nested deeper than 64 levels"),
    "deep_metadata_load": ("load", "nested deeper than 64 levels"),
    "deep_metadata_resume": ("resume", "nested deeper than 64 levels"),
    "cut_number": ("load", "malformed safetensors header at byte 80: the text ends where ',' or ']' was expected "
                   "(truncated?)"),
    "trailing_text": ("load", "malformed safetensors header at byte 63: text after the end of the JSON value"),
    "duplicate_name": ("load", "at byte 62: key \"a\" appears twice in one object"),
    "overlap": ("load", "tensors 'a' [0, 8] and 'b' [4, 12] overlap"),
    "nul_name": ("load", "\\u0000 in a string (names and keys cannot hold NUL)"),
    "duplicate_step": ("resume", "key \"step\" appears twice in one object"),
    "metadata_45": ("resume", "__metadata__ holds 45 entries; a trainer checkpoint has at most 40"),
    "metadata_number": ("resume", "\"__metadata__\": 'step' is a number: metadata values must be strings"),
    "empty_entry": ("load", "tensor 'fc1.weight' has no \"dtype\", \"shape\", \"data_offsets\""),
    "reversed_offsets": ("load", "tensor 'a': data_offsets [8, 0] are reversed (begin after end)"),
    "negative_offsets": ("load", "tensor 'a': data_offsets [-8, 0] hold a negative offset"),
    "rank9": ("load", "tensor 'a': shape of rank 9, at most 8"),
    "many_entries": ("load", "more than 4194304 values: over the limit of this reader"),
    "import_huge_shape": ("import", "tensor 'wte.weight': its shape has more than 2^63 elements"),
    "import_overlap": ("import", "tensors 'wte.weight' [0, 64] and 'wpe.weight' [0, 64] overlap"),
    "import_200000_keys": ("import", "tensor 't0' is not in the GPT-2 name map"),
    "plan_set_200000_keys": ("show", "key \"k0\" appears twice in one object"),
    "plan_set_200000_keys_ok": ("show", "digraph plan"),  # read, verified and drawn: exit 0
    "npy_trailing": ("npy", "malformed .npy header at byte 73: text after the header's dict"),
    "npy_negative_dim": ("npy", "malformed .npy header at byte 63: negative dimension -5 in shape"),
}


def main():
    if sys.argv[1] == "list":
        print(" ".join(CASES))
        return 0
    case, memplan, trainer, d = sys.argv[1:5]
    os.makedirs(d, exist_ok=True)
    reader, want = CASES[case]
    if reader == "show" and not os.path.exists(os.path.join(d, "plan", "plan.json")):
        subprocess.run([memplan, "compile", os.path.join(os.path.dirname(__file__), "../../models/mlp.yaml"), "-o",
                        os.path.join(d, "plan")], check=True, stdout=subprocess.DEVNULL)
    f = make(case, d)
    out = os.path.join(d, case + ".out.safetensors")
    cmd = {"load": [trainer, "--load", f, "--steps", "1", "--eval-batches", "0"],
           "resume": [trainer, "--resume", f, "--steps", "1", "--eval-batches", "0"],
           "import": [memplan, "import-hf", "gpt2", f, "-o", out],
           "show": [memplan, "show", f, "--format", "dot"],
           "npy": [trainer, "--npy", f, "--steps", "1", "--eval-batches", "0"]}[reader]
    t0, c0 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    except subprocess.TimeoutExpired:
        print("FAIL: %s: still running after 30 s: %s" % (case, " ".join(cmd)))
        return 1
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    secs = c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime  # CPU time: a loaded machine's waits don't count
    err = r.stderr.decode(errors="replace")
    status = 0 if case.endswith("_ok") else 1
    if status == 0:
        err = r.stdout.decode(errors="replace")  # what a success shows
    print("$ %s\nexit %d after %.2f s (%.2f s of CPU)\n%s" % (" ".join(cmd), r.returncode, time.time() - t0, secs, err[:2000]))
    problems = []
    if r.returncode != status:
        problems.append("exit status %d, expected %d" % (r.returncode, status))
    if want not in err:
        problems.append("%s lacks: %s" % ("stdout" if status == 0 else "stderr", want))
    limit = float(os.environ.get("MEMPLAN_HOSTILE_CPU_LIMIT", "2"))  # the sanitizer build's: tests/files.cmake
    if secs > limit:  # every case takes well under a second of CPU here
        problems.append("took %.1f s of CPU, over %g s" % (secs, limit))
    left = [x for x in os.listdir(d) if ".tmp." in x]
    if left:
        problems.append("temp files left: %s" % left)
    for p in problems:
        print("FAIL: %s: %s" % (case, p))
    if not problems:
        print("ok: %s" % case)
    return 1 if problems else 0


sys.exit(main())
