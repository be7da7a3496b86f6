#!/bin/sh
# run.sh MEMPLAN WORKDIR [SEEDS] [KERNELS]: frozen weights stored as NF4 vs bf16
# (--base-weights, planner/basew.h), end to end on the CPU trainer: llama-mini
# at B=2, T=64 with every projection and the embedding frozen (the norms and
# the head train), 200 steps from --seed at lr 3e-4 (20 warmup steps, cosine
# to 0) on the licenses of tests/scripts/heldout_text.sh; the NF4 run's
# held-out loss (64 batches of GPL-2) must be within MARGIN of the bf16 run's,
# and each run's peak RSS within its arena + baseline + 4 MiB + its text (tests/e2e/e2e.py memtruth).
# MARGIN: measured 2026-12-01 over --seed 11-13 and OpenBLAS's Zen and
# Prescott kernels (AMD EPYC, 2 threads): |eval(nf4) / eval(bf16) - 1| at
# most 0.473% (tests/basew.cmake has the figures); the check, 1.5%, is 3x it.
set -eu
memplan=$1 work=$2 seeds=${3:-11} kernels=${4:-default}
margin=${MEMPLAN_BASEW_MARGIN:-0.015}
here=$(dirname "$0")
rm -rf "$work"
mkdir -p "$work"
val=$(sh "$here/../scripts/heldout_text.sh" "$work") text=$work/train.txt
fail() {
  echo "FAIL: $*"
  exit 1
}
freeze="--freeze emb.weight --freeze h*.attn.* --freeze h*.gate.* --freeze h*.up.* --freeze h*.down.*"
for f in bf16 nf4; do
  # shellcheck disable=SC2086 # the patterns split at spaces, unexpanded (set -f below)
  (set -f && "$memplan" compile "$here/../../models/llama-mini.yaml" --set B=2 --set T=64 $freeze --base-weights $f \
    -o "$work/$f" >"$work/$f.report")
  grep -q "frozen weights $f" "$work/$f.report" || fail "$f: the report names no frozen-weight format"
  cmake -S "$work/$f" -B "$work/$f/build" -DCMAKE_BUILD_TYPE=Release -DTRAINER_CUDA=OFF \
    -DTRAINER_WERROR="${MEMPLAN_TRAINER_WERROR:-OFF}" >/dev/null
  cmake --build "$work/$f/build" -j2 >/dev/null
done
worst=0
for k in $kernels; do
  for s in $seeds; do
    for f in bf16 nf4; do
      if [ "$k" = default ]; then unset OPENBLAS_CORETYPE; else export OPENBLAS_CORETYPE=$k; fi
      "$work/$f/build/trainer" --text "$text" --val "$val" --steps 200 --lr 3e-4 --schedule cosine --warmup 20 \
        --final-fraction 0 --seed "$s" --threads 2 --log-every 100 --eval-every 200 --eval-batches 64 \
        >"$work/$f-$k-$s.out"
      python3 "$here/../e2e/e2e.py" memtruth "$work/$f/build/trainer" "$work/$f-$k-$s.out" \
        $((3 * ($(wc -c <"$text") + $(wc -c <"$val")))) || fail "$f: memory truth"
    done
    b=$(grep "^eval loss" "$work/bf16-$k-$s.out" | tail -1 | awk '{print $3}')
    n=$(grep "^eval loss" "$work/nf4-$k-$s.out" | tail -1 | awk '{print $3}')
    d=$(awk -v a="$n" -v b="$b" 'BEGIN { d = a / b - 1; if (d < 0) d = -d; printf "%.6f", d }')
    echo "kernel $k seed $s: held-out loss bf16 base $b, nf4 base $n, |ratio - 1| $d"
    worst=$(awk -v a="$d" -v b="$worst" 'BEGIN { print (a > b) ? a : b }')
  done
done
echo "largest |nf4 / bf16 - 1| $worst (margin $margin)"
awk -v a="$worst" -v m="$margin" 'BEGIN { exit !(a <= m) }' || fail "nf4's held-out loss is $worst off bf16's"
