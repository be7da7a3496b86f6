#!/bin/sh
# lora_load_base.sh BASE_TRAINER LORA_TRAINER DIR TEXT: a base model's
# weights (BASE_TRAINER's --save: no adapters) --load into the LoRA trainer
# of the same model: the adapters are initialized, the run trains, and the
# trainer says how many it initialized; a base tensor missing is still an
# error (exit 1, named).
set -u
base=$1 lora=$2 dir=$3 text=$4
mkdir -p "$dir"
fail() { echo "FAIL: $1"; exit 1; }
"$base" --steps 1 --text "$text" --save "$dir/base.safetensors" >/dev/null || fail "base trainer"
"$lora" --load "$dir/base.safetensors" --steps 2 --text "$text" >"$dir/out" 2>&1 || { cat "$dir/out"; fail "--load"; }
grep -q "40 LoRA adapter tensors not in the file: initialized" "$dir/out" || { cat "$dir/out"; fail "no note"; }
echo "ok: $(grep "LoRA adapter" "$dir/out")"
