#!/bin/sh
# check_exact_gap.sh MEMPLAN WORKDIR GRAPH BUDGET MAX_PCT: bench_remat's
# graph GRAPH (tests/bench/remat_graphs.py, written to WORKDIR) compiled as
# bench_remat.py compiles it, at --budget BUDGET: the plan must fit and pay at
# most MAX_PCT% extra FLOPs (plan.json's totals), a bound the test derives
# from the exact optimum's figure there (tests/remat.cmake says where from).
set -eu
memplan=$1 dir=$2 graph=$3 budget=$4 max=$5
here=$(dirname "$0")
python3 "$here/../bench/remat_graphs.py" "$dir/models" >/dev/null
"$memplan" compile "$dir/models/$graph.yaml" --no-micro-batch --fused-loss off --precision fp32 \
  --param-precision fp32 --opt-state fp32 -o "$dir/$graph" --budget "$budget" >"$dir/$graph.log" 2>&1 ||
  { cat "$dir/$graph.log"; echo "FAIL: --budget $budget does not fit"; exit 1; }
python3 - "$dir/$graph/plan.json" "$max" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["totals"]
x = 100 * t["extra_flops"] / t["step_flops"]
print(f"peak {t['train_peak_bytes']} bytes, {x:.2f}% extra FLOPs (at most {sys.argv[2]}%)")
sys.exit(0 if x <= float(sys.argv[2]) else "FAIL: too many extra FLOPs")
PY
echo ok
