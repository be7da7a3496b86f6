#!/bin/sh
# ckpt_exact.sh MEMPLAN MODEL WORKDIR [--blobs] BUDGET...: each trainer planned
# to fit a BUDGET (recomputing) must give bit-identical losses and final
# weights (running statistics included) to the trainer that keeps everything:
# same seed, same threads, 20 steps. Token models train on the README's text;
# --blobs: a model with f32 inputs, on the trainer's synthetic blobs data set.
set -eu
memplan=$1 model=$2 work=$3
shift 3
rm -rf "$work"
mkdir -p "$work"
text=$(cd "$(dirname "$0")/../.." && pwd)/README.md
blobs=0
if [ "${1:-}" = --blobs ]; then
  blobs=1
  shift
fi
train() { # name [--budget B]
  v=$1
  shift
  "$memplan" compile "$model" "$@" -o "$work/$v" > "$work/$v.report"
  cmake -S "$work/$v" -B "$work/$v/build" -DCMAKE_BUILD_TYPE=Release -DTRAINER_CUDA=OFF > /dev/null
  cmake --build "$work/$v/build" -j2 > /dev/null
  if [ "$blobs" = 1 ]; then set -- --steps 20; else set -- --text "$text" --steps 20; fi
  "$work/$v/build/trainer" "$@" --seed 7 --threads 2 --log-every 20 --eval-batches 0 \
    --log "$work/$v.csv" --save "$work/$v.safetensors" > "$work/$v.out"
  cut -d, -f1,2 "$work/$v.csv" > "$work/$v.losses"
}
train full
for b in "$@"; do
  train "b$b" --budget "$b"
  grep -q "checkpointing: .* extra FLOPs" "$work/b$b.report" || { echo "FAIL: $b did not force recomputation"; exit 1; }
  echo "budget $b: $(grep 'checkpointing:' "$work/b$b.report")"
  cmp "$work/full.losses" "$work/b$b.losses" || { echo "FAIL: losses differ"; paste "$work/full.losses" "$work/b$b.losses"; exit 1; }
  cmp "$work/full.safetensors" "$work/b$b.safetensors" || { echo "FAIL: final weights differ"; exit 1; }
done
echo "ok: $(wc -l < "$work/full.losses") loss lines and the final weights are bit-identical at every budget"
