#!/bin/sh
# check_exact_gap.sh MEMPLAN WORKDIR GRAPH BUDGET MAX_PCT [seconds]: bench_remat's
# graph GRAPH (tests/bench/remat_graphs.py, written to WORKDIR) compiled as
# bench_remat.py compiles it, at --budget BUDGET: the plan must fit and pay at
# most MAX_PCT% extra FLOPs (plan.json's totals), a bound the test derives
# from the exact optimum's figure there (tests/remat.cmake says where from).
# With "seconds", MAX_PCT bounds the plan's recompute seconds under memplan's
# cost model in percent of the keep-all step's (remat_ilp.py's
# recompute_seconds and step_seconds, as bench_remat.py --objective seconds).
set -eu
memplan=$1 dir=$2 graph=$3 budget=$4 max=$5 objective=${6:-flops}
here=$(dirname "$0")
python3 "$here/../bench/remat_graphs.py" "$dir/models" >/dev/null
opts="--no-micro-batch --fused-loss off --precision fp32 --param-precision fp32 --opt-state fp32"
# shellcheck disable=SC2086 # opts is a list of words
"$memplan" compile "$dir/models/$graph.yaml" $opts -o "$dir/$graph" --budget "$budget" >"$dir/$graph.log" 2>&1 ||
  { cat "$dir/$graph.log"; echo "FAIL: --budget $budget does not fit"; exit 1; }
if [ "$objective" = seconds ]; then
  # shellcheck disable=SC2086
  "$memplan" compile "$dir/models/$graph.yaml" $opts -o "$dir/$graph-keep" >"$dir/$graph-keep.log" 2>&1 ||
    { cat "$dir/$graph-keep.log"; echo "FAIL: keep-all does not compile"; exit 1; }
fi
python3 - "$dir/$graph/plan.json" "$max" "$objective" "$dir/$graph-keep/plan.json" "$here/../bench" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
if sys.argv[3] == "seconds":
    sys.path.insert(0, sys.argv[5])
    import remat_ilp
    e = remat_ilp.recompute_seconds(json.load(open(sys.argv[1])))
    s = remat_ilp.load(sys.argv[4])["step_seconds"]
    x = 100 * e / s
    print(f"peak {t['train_peak_bytes']} bytes, recompute {1e3 * e:.3f} ms: {x:.2f}% of the step's "
          f"{1e3 * s:.3f} ms (at most {sys.argv[2]}%)")
    sys.exit(0 if x <= float(sys.argv[2]) else "FAIL: too many extra seconds")
x = 100 * t["extra_flops"] / t["step_flops"]
print(f"peak {t['train_peak_bytes']} bytes, {x:.2f}% extra FLOPs (at most {sys.argv[2]}%)")
sys.exit(0 if x <= float(sys.argv[2]) else "FAIL: too many extra FLOPs")
PY
echo ok
