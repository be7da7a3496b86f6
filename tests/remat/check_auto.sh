#!/bin/sh
# check_auto.sh MEMPLAN PYTHON MODEL WORKDIR BUDGET TOL [--set DIM=V ...]: both
# levers together on a graph the chain DP cannot cut (planner/remat.c under
# --precision auto, fit.c's whole_variants). At BUDGET bytes
# (--no-micro-batch --fused-loss off):
#  1. fp32 fits by recomputing (a whole-graph plan); --precision auto fits
#     with fewer extra FLOPs, storing saved activations in bf16 (the report's
#     "precision bf16" line), still a whole-graph plan (its "whole graph:"
#     summary line), and plan.json's stages mark half storage;
#  2. the auto plan's trainer trains (100 SGD steps, lr 0.05, on
#     channel_blobs.py's data set): every loss finite, the mean of the last
#     10 below that of the first 10, and its held-out loss (the whole test
#     split) within TOL (relative) of the fp32 plan keeping everything, like
#     the other half-storage plans (tests/precision/run.sh), and not equal
#     to it (a plan that silently kept fp32 would be);
# SEEDS (default 11) lists the seeds, for measuring TOL.
set -eu
memplan=$1 py=$2 model=$3 work=$4 budget=$5 tol=$6
shift 6
rm -rf "$work"
mkdir -p "$work"
extra() { # report: its extra FLOPs in %, 0 when it keeps everything
  awk '/^checkpointing:/ { sub("%", "", $2); x = $2 } END { print x ? x : 0 }' "$1"
}
plan() { # name [compile options]
  v=$1
  shift
  "$memplan" compile "$model" "$@" --fused-loss off -o "$work/$v" > "$work/$v.report" 2>&1 || {
    cat "$work/$v.report"
    echo "FAIL: $v does not compile"
    exit 1
  }
}
plan fp32 "$@" --no-micro-batch --budget "$budget"
plan auto "$@" --no-micro-batch --budget "$budget" --precision auto
plan full "$@"
x32=$(extra "$work/fp32.report") xa=$(extra "$work/auto.report")
grep -A12 "^checkpointing:" "$work/auto.report"
echo "at $budget bytes: fp32 $x32% extra FLOPs, auto $xa%"
grep -q "whole graph: " "$work/fp32.report" || { echo "FAIL: fp32 at $budget is not a whole-graph plan"; exit 1; }
grep -q "whole graph: " "$work/auto.report" || { echo "FAIL: auto at $budget is not a whole-graph plan"; exit 1; }
grep -q "^precision bf16: .* saved activations stored in half precision" "$work/auto.report" ||
  { echo "FAIL: auto at $budget stores nothing in bf16"; exit 1; }
grep -q '"half": true' "$work/auto/plan.json" || { echo "FAIL: plan.json's stages mark no half storage"; exit 1; }
awk -v a="$xa" -v f="$x32" 'BEGIN { exit !(a < f) }' || { echo "FAIL: auto recomputes no less than fp32"; exit 1; }
# One CMake build folder compiles the runtime once; each trainer.c replaces
# the last (ckpt_exact.sh's way)
cp -R "$work/full" "$work/src"
cmake -S "$work/src" -B "$work/bld" -DCMAKE_BUILD_TYPE=Release -DTRAINER_CUDA=OFF > /dev/null
for v in full auto; do
  cp "$work/$v/trainer.c" "$work/src/trainer.c"
  cmake --build "$work/bld" -j2 > /dev/null
  cp "$work/bld/trainer" "$work/$v.trainer"
done
h=16 # the images' side: the model's H where a --set gives it
for a in "$@"; do case $a in H=*) h=${a#H=} ;; esac; done
"$py" "$(dirname "$0")/channel_blobs.py" "$work/data" 512 3 "$h" 10
for seed in ${SEEDS:-11}; do
  for v in full auto; do
    "$work/$v.trainer" --npy "$work/data" --steps 100 --lr 0.05 --seed "$seed" --threads 2 --log-every 100 \
      --eval-batches 64 --log "$work/$v.$seed.csv" > "$work/$v.$seed.out"
  done
  # step,loss,...: the training losses; the held-out loss: "eval loss X, accuracy ..." after the last step
  ef=$(awk '/^eval loss / { sub(",", "", $3); print $3 }' "$work/full.$seed.out")
  ea=$(awk '/^eval loss / { sub(",", "", $3); print $3 }' "$work/auto.$seed.out")
  awk -F, -v tol="$tol" -v seed="$seed" -v ef="$ef" -v ea="$ea" '
    FNR == 1 { next }
    { if ($2 !~ /^[-0-9.e+]+$/) bad = 1
      if ($1 <= 10) first += $2 / 10
      if ($1 > 90) last += $2 / 10 }
    END {
      d = ea / ef - 1
      printf "seed %s: auto loss %.4f -> %.4f (means of the first and last 10); held-out %s, fp32 keeping everything %s (%+.5f%%, at most %g%%)\n",
             seed, first, last, ea, ef, 100 * d, 100 * tol
      if (bad || ea !~ /^[0-9.e+-]+$/ || ef !~ /^[0-9.e+-]+$/) { print "FAIL: a loss is not finite, or no held-out loss was logged"; exit 1 }
      if (!(last < first)) { print "FAIL: the loss did not fall"; exit 1 }
      if (ea == ef) { print "FAIL: held-out loss equal to fp32: nothing was stored in bf16"; exit 1 }
      if (d > tol || -d > tol) { print "FAIL: held-out loss off fp32"; exit 1 }
    }' "$work/auto.$seed.csv"
done
echo "ok"
