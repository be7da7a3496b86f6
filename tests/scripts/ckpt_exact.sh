#!/bin/sh
# ckpt_exact.sh MEMPLAN MODEL WORKDIR [--blobs] CONFIG...: each trainer planned
# to fit a budget CONFIG (8M: it must recompute) or with the compile options
# of a CONFIG "opts:OPT,OPT" (opts:--budget=925K,--dropout-masks=regen) must
# give bit-identical losses and final weights (running statistics included)
# to the trainer that keeps everything: same seed, same threads, 20 steps.
# Token models train on README.md; --blobs (or CKPT_TEXT= empty): a model
# with f32 inputs, on the trainer's synthetic blobs data set. Every plan
# keeps the loss unfused (--fused-loss off, unless a CONFIG says otherwise):
# a fused loss sums its gradients in another order, equal within rounding
# only (e2e_fused_loss_same_gpt2-mini), and this test is about recomputation.
# CKPT_COMPILE: options for every plan, the one keeping everything too (e.g.
# "--set B=2 --set H=16": a smaller size of the model's dims).
set -eu
memplan=$1 model=$2 work=$3
shift 3
rm -rf "$work"
mkdir -p "$work"
text=${CKPT_TEXT-$(cd "$(dirname "$0")/../.." && pwd)/README.md}
if [ "${1:-}" = --blobs ]; then
  text=
  shift
fi
# The trainers differ only in trainer.c: one CMake build folder ($work/src,
# $work/bld) compiles the runtime once, and each plan's trainer.c replaces
# the last (make recompiles it alone and relinks).
train() { # name [compile options]
  v=$1
  shift
  # shellcheck disable=SC2086 # CKPT_COMPILE splits at spaces
  "$memplan" compile "$model" --fused-loss off ${CKPT_COMPILE:-} "$@" -o "$work/$v" > "$work/$v.report"
  if [ ! -d "$work/src" ]; then
    cp -R "$work/$v" "$work/src"
    cmake -S "$work/src" -B "$work/bld" -DCMAKE_BUILD_TYPE=Release -DTRAINER_CUDA=OFF > /dev/null
  fi
  for f in "$work/$v"/*.c "$work/$v"/*.h "$work/$v/CMakeLists.txt"; do
    fn=$(basename "$f")
    [ "$fn" = trainer.c ] || cmp -s "$f" "$work/src/$fn" || { echo "FAIL: $v/$fn differs from the first plan's"; exit 1; }
  done
  cp "$work/$v/trainer.c" "$work/src/trainer.c"
  cmake --build "$work/bld" -j2 > /dev/null
  cp "$work/bld/trainer" "$work/$v.trainer"
  "$work/$v.trainer" ${text:+--text "$text"} --steps 20 --seed 7 --threads 2 --log-every 20 --eval-batches 0 \
    --log "$work/$v.csv" --save "$work/$v.safetensors" > "$work/$v.out"
  cut -d, -f1,2 "$work/$v.csv" > "$work/$v.losses"
}
train full
n=0
for b in "$@"; do
  n=$((n + 1))
  case $b in
  opts:*)
    # shellcheck disable=SC2046 # the options split at commas
    train "c$n" --no-micro-batch $(echo "${b#opts:}" | tr ',' ' ')
    echo "$b: $(grep -E 'checkpointing:|dropout:' "$work/c$n.report" | tr '\n' ' ')"
    ;;
  *)
    train "c$n" --budget "$b" --no-micro-batch # micro-batches would sum the gradients in another order
    grep -q "checkpointing: .* extra FLOPs" "$work/c$n.report" || { echo "FAIL: $b did not force recomputation"; exit 1; }
    echo "budget $b: $(grep -E 'checkpointing:|dropout:' "$work/c$n.report" | tr '\n' ' ')"
    ;;
  esac
  cmp "$work/full.losses" "$work/c$n.losses" || { echo "FAIL: losses differ"; paste "$work/full.losses" "$work/c$n.losses"; exit 1; }
  cmp "$work/full.safetensors" "$work/c$n.safetensors" || { echo "FAIL: final weights differ"; exit 1; }
done
echo "ok: $(wc -l < "$work/full.losses") loss lines and the final weights are bit-identical at every budget"
