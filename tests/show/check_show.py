"""check_show.py: `memplan show` refuses what is not a sound plan, naming the
file and the place, and never writes a half file. Starts from the plan.json
that `memplan compile` writes for MODEL, then breaks it one way at a time:
truncated, not JSON, foreign JSON, a newer format, a mistyped field, an id
out of range, an edited offset that makes two buffers overlap, an op writing
into its own input, a buffer never written (the verifier must refuse them),
and bad command lines.

usage: check_show.py MEMPLAN MODEL.yaml OUTDIR
"""
import json
import os
import shutil
import subprocess
import sys

memplan, model, out = sys.argv[1:]
failures = []
shutil.rmtree(out, ignore_errors=True)
r = subprocess.run([memplan, "compile", model, "-o", os.path.join(out, "ok")], capture_output=True, text=True)
if r.returncode:
    sys.exit(f"compile failed: {r.stderr}")
good_path = os.path.join(out, "ok", "plan.json")
good = open(good_path).read()
plan = json.loads(good)


def case(name, text, want, args=(), status=1):
    """Writes text as NAME.json, runs show on it, expects exit status (1, a
    user error; 2, a usage error), every string of want in stderr, and no
    output file."""
    path = os.path.join(out, name + ".json")
    with open(path, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    target = os.path.join(out, name + ".svg")
    r = subprocess.run([memplan, "show", path, "-o", target, *args], capture_output=True, text=True, errors="replace")
    problems = []
    if r.returncode != status:
        problems.append(f"exit {r.returncode}, expected {status}")
    problems += [f"missing {w!r}" for w in want if w not in r.stderr]
    if os.path.exists(target) or [f for f in os.listdir(out) if ".tmp." in f]:
        problems.append("wrote an output file")
    if "Sanitizer" in r.stderr or "internal error" in r.stderr:
        problems.append("crashed")
    if problems:
        failures.append(f"{name}: {'; '.join(problems)}\n--- stderr:\n{r.stderr}")
    else:
        print(f"ok: {name}: {r.stderr.splitlines()[0] if r.stderr else ''}")


def edited(fn):
    p = json.loads(good)
    fn(p)
    return json.dumps(p, indent=1)


# malformed JSON: the place is named, with a caret under the source line
cut = good.index('"buffers"') + 300
case("truncated", good[:cut], ["truncated.json:", "truncated?"])
case("not_json", "memplan_plan: 1\n", ["not_json.json:1:1: error: expected a value", "^"])
case("trailing_comma", '{"memplan_plan": 1,}', ["trailing_comma.json:1:20: error: expected a key in quotes"])
case("empty", "", ["empty.json:1:1: error: empty file"])
case("deep", "[" * 100000, ["deep.json:1:33: error: nested deeper than 32 levels"])
case("bad_escape", '{"memplan_plan": 1, "model": "a\\qb"}', ["bad_escape.json:1:32: error: unknown escape"])
case("not_utf8", b'{"memplan_plan": 1, "model": "\xff"}', ["not_utf8.json:1:31: error: a string holds bytes that are not UTF-8"])
case("duplicate_key", '{"memplan_plan": 1, "memplan_plan": 1}', ["duplicate_key.json:1:21: error: key \"memplan_plan\" appears twice"])
# JSON, but not a plan memplan can read
case("foreign", '{"name": "resnet", "layers": []}\n', ["foreign.json:1:1: error: not a memplan plan"])
case("array", "[1, 2, 3]\n", ["array.json:1:1: error: not a memplan plan"])
case("newer", good.replace('"memplan_plan": 1', '"memplan_plan": 99', 1), ["newer.json:2:19: error: plan format 99 is newer"])
# fields checked by type and range, by name and place
case("mistyped", edited(lambda p: p["totals"].update(arena_bytes="lots")), ["mistyped.json:", '"arena_bytes" must be a number, not a string'])
case("missing", edited(lambda p: p.pop("buffers")), ["missing.json:1:1: error: missing key \"buffers\""])
case("bad_id", edited(lambda p: p["schedule"][0]["inputs"].__setitem__(0, 10**6)), ["bad_id.json:", "an input buffer id must be an integer in [-1,"])
case("bad_role", edited(lambda p: p["buffers"][0].update(role="weights")), ['"role": unknown value "weights"'])
case("huge_shape", edited(lambda p: p["buffers"][0].update(shape=[2**40, 2**40], shape_sym=["A", "B"])), ["shape too large"])
case("bad_live", edited(lambda p: p["buffers"][-1].update(live=[5, 2])), ["live range [5, 2) is not within its schedule"])


# an edit that parses but makes the packing unsound: the verifier refuses it
def overlap(p):
    acts = [b for b in p["buffers"] if b["schedule"] == "train" and b["bytes"] > 0]
    a, b = max(acts, key=lambda x: x["live"][1] - x["live"][0]), None
    for x in acts:
        if x is not a and x["live"][0] < a["live"][1] and a["live"][0] < x["live"][1]:
            b = x
            break
    b["offset"] = a["offset"]


case("overlap", edited(overlap), ["overlap.json: error: the plan fails verification:", "overlap", "compile the model again"])
# the verifier compile runs: an op that writes into an input it cannot
# overwrite, and a buffer that the first op using it never writes (issue #32:
# both were drawn). Planted: without these two checks in planner/verify.c
# both exited 0 and drew the plan ("exit 0, expected 1").
def first_linear(p):
    return next(o for o in p["schedule"] if o["op"] == "linear" and o["phase"] == "forward")


case("writes_own_input", edited(lambda p: first_linear(p)["outputs"].__setitem__(0, first_linear(p)["inputs"][0])),
     ["fails verification", "output 0 writes into its input 0", "which this op cannot do in place"])
case("never_written", edited(lambda p: first_linear(p)["outputs"].__setitem__(0, -1)),
     ["fails verification", "is read before any op writes it", "does not write it"])
case("over_budget", edited(lambda p: p.update(budget_bytes=1000)), ["fails verification", "exceeds the budget"])
# command lines
case("bad_format", good, ["--format gif: choose svg, png or dot"], ["--format", "gif"], status=2)
case("timeline_png", good, ["the timeline is drawn as SVG only"], ["--timeline", "-f", "png"], status=2)
case("no_block", good, ["--block h99: the plan has no repeat block"], ["--block", "h99"])
r = subprocess.run([memplan, "show", os.path.join(out, "nope.json")], capture_output=True, text=True)
if r.returncode != 1 or "cannot open" not in r.stderr or "nope.json" not in r.stderr:
    failures.append(f"missing file: exit {r.returncode}: {r.stderr}")
# the unedited plan still draws
r = subprocess.run([memplan, "show", good_path, "-o", os.path.join(out, "ok.svg")], capture_output=True, text=True)
if r.returncode or not open(os.path.join(out, "ok.svg")).read().startswith("<?xml"):
    failures.append(f"the good plan: exit {r.returncode}: {r.stderr}")
if failures:
    sys.exit("\n".join(failures))
print("all show errors ok")
