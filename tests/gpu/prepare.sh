#!/usr/bin/env bash
# tests/gpu/prepare.sh [DIR]: run HERE (the build machine, no GPU needed) to
# prepare the trainer part of tests/gpu/run.sh. Writes DIR (default out/gpu,
# ignored by git: carry it to the GPU machine), about 15 MiB:
#   DIR/data.txt          the training text (bytes are tokens), for every token model
#   DIR/<config>/         a generated trainer folder (memplan compile -o), sources only
#   DIR/<config>/cpu.csv  per-step losses of the CPU trainer (step,loss,ms,eval_loss)
#   DIR/<config>/init.safetensors  initial weights, for the small models only
#   DIR/configs.tsv       name, steps recorded, tolerance, how the GPU run starts
# Configs:
#   mlp                  fp32, 8 steps from init.safetensors (synthetic blobs data)
#   gpt2-mini            fp32, 8 steps from init.safetensors
#   gpt2-124m-small      GPT-2 124M at B=4 T=128, fp32, 3 steps from --seed 1337
#   gpt2-124m-small-bf16 the same with --precision bf16 (tolerance 1e-2)
#   gpt2-124m            GPT-2 124M at B=8 T=1024 (the bundled dims), fp32: FULL_STEPS
#                        CPU steps recorded (default 1: ~1-2 min a step on 2 cores),
#                        then timing and memory on the GPU
#   gpt2-124m-bf16       B=8 T=1024, --precision bf16: timing and memory only (no CPU
#                        record: a bf16 step costs as much as fp32 here; the bf16 loss
#                        comparison is gpt2-124m-small-bf16's)
#   gpt2-124m-bf16-4g    the same under --budget 4G --no-micro-batch, which forces
#                        recomputation (~12% extra FLOPs; the levers alone would run
#                        2 micro-batches of 4): its step time against gpt2-124m-bf16's
#                        checks the plan's extra-FLOPs estimate, its device memory the plan
# GPT-2 124M's initial weights (~500 MB) are too big to carry: both sides draw
# them from --seed with the same host code (memplan_trainer.c's init_params:
# splitmix64 and Box-Muller in double), so they are the same weights.
# Environment: MEMPLAN (default build/bin/memplan), FULL_STEPS, THREADS.
set -eu
cd "$(dirname "$0")/../.."
DIR=${1:-out/gpu}
MEMPLAN=${MEMPLAN:-build/bin/memplan}
FULL_STEPS=${FULL_STEPS:-1}
THREADS=${THREADS:-$(nproc)}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
rm -rf "$DIR"
mkdir -p "$DIR"
cat runtime/memplan_trainer.c runtime/trainer_*.c >"$DIR/data.txt" # 118 KB of text: > 8193 tokens for B=8 T=1024
: >"$DIR/configs.tsv"

# config NAME STEPS TOL START(load|seed) -- memplan options
config() {
  local name=$1 steps=$2 tol=$3 start=$4
  shift 5
  echo "== $name: memplan compile $*"
  "$MEMPLAN" compile "$@" -o "$DIR/$name" | grep -E "^  (dims|parameters)|arena  " || true
  rm -f "$DIR/$name/plan.svg" "$DIR/$name/plan.dot" "$DIR/$name/timeline.svg" # not needed there
  local data=""
  grep -q '"tokens"\|"embedding"' "$DIR/$name/plan.json" && data="--text $DIR/data.txt"
  if [ "$steps" -gt 0 ]; then
    cmake -S "$DIR/$name" -B "$TMP/$name" -DTRAINER_CUDA=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$TMP/$name" -j"$THREADS" >/dev/null
    local t="$TMP/$name/trainer" init=""
    if [ "$start" = load ]; then
      "$t" --steps 0 --seed 1337 --save "$DIR/$name/init.safetensors" --eval-batches 0 $data >/dev/null
      init="--load $DIR/$name/init.safetensors"
    else
      init="--seed 1337"
    fi
    echo "   CPU trainer: $steps steps ($init)"
    "$t" $init --steps "$steps" --eval-batches 0 --threads "$THREADS" $data --log "$DIR/$name/cpu.csv" |
      grep -E "^step|mean" || true
  fi
  printf '%s\t%s\t%s\t%s\n' "$name" "$steps" "$tol" "$start" >>"$DIR/configs.tsv"
}

config mlp 8 1e-4 load -- models/mlp.yaml
config gpt2-mini 8 1e-4 load -- models/gpt2-mini.yaml
config vit-tiny 8 1e-4 load -- tests/reference/vit-tiny.yaml      # the shape ops (blobs data)
config gpt2-124m-small 3 1e-4 seed -- models/gpt2-124m.yaml --set B=4 --set T=128
config gpt2-124m-small-bf16 3 1e-2 seed -- models/gpt2-124m.yaml --set B=4 --set T=128 --precision bf16
config gpt2-124m "$FULL_STEPS" 1e-4 seed -- models/gpt2-124m.yaml
config gpt2-124m-bf16 0 1e-2 seed -- models/gpt2-124m.yaml --precision bf16
config gpt2-124m-bf16-4g 0 1e-2 seed -- models/gpt2-124m.yaml --precision bf16 --budget 4G --no-micro-batch
echo
du -sh "$DIR"
echo "prepared $DIR: carry it to the GPU machine (run.sh's header says how)"
