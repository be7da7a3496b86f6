#!/bin/sh
# kill_save.sh MEMPLAN WORKDIR: a trainer killed (SIGKILL) while it saves
# its weights leaves the previous weights file intact and loadable: save
# writes a temp file in the same folder and renames it over the old one.
# The model is mlp with 4096-wide hidden layers (20M parameters, 80 MB), so
# the save takes long enough for kills to land inside it; each round kills
# at a different delay, then loads the file.
set -eu
memplan=$1 work=$2
here=$(dirname "$0")
rm -rf "$work"
"$memplan" compile "$here/../../models/mlp.yaml" --set H=4096 -o "$work" > /dev/null
cmake -S "$work" -B "$work/build" -DTRAINER_CUDA=OFF > /dev/null
cmake --build "$work/build" -j2 > /dev/null
t="$work/build/trainer"
"$t" --steps 0 --eval-batches 0 --seed 1 --save "$work/w.safetensors" > /dev/null
size=$(wc -c < "$work/w.safetensors")
killed=0
for delay in 0.05 0.1 0.15 0.2 0.25 0.3 0.35 0.4 0.5 0.6 0.7 0.8; do
  "$t" --steps 1 --eval-batches 0 --seed 2 --save "$work/w.safetensors" > /dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  if kill -9 "$pid" 2>/dev/null; then killed=$((killed + 1)); fi
  wait "$pid" 2>/dev/null || true
  # whatever happened, the file is a whole weights file that loads
  [ "$(wc -c < "$work/w.safetensors")" -eq "$size" ] || { echo "FAIL: weights file size changed after kill at $delay s"; exit 1; }
  "$t" --load "$work/w.safetensors" --steps 0 --eval-batches 0 > /dev/null || { echo "FAIL: weights file unloadable after kill at $delay s"; exit 1; }
done
# a kill inside a save leaves its temp file: evidence the window was hit
inside=$(ls "$work"/w.safetensors.tmp.* 2>/dev/null | wc -l)
# the next save that succeeds removes the temp files of dead writers, and
# nothing else (a file of the same pattern for a live process stays)
sleep 1000 & live=$!
trap 'kill $live 2>/dev/null' EXIT
true & dead=$!
wait "$dead"
: >"$work/w.safetensors.tmp.$live"
: >"$work/w.safetensors.tmp.$dead"
: >"$work/w.safetensors.tmp.notapid"
"$t" --steps 0 --eval-batches 0 --seed 3 --save "$work/w.safetensors" > /dev/null
left=$(ls "$work"/w.safetensors.tmp.* 2>/dev/null | sort | tr '\n' ' ')
[ "$left" = "$work/w.safetensors.tmp.$live $work/w.safetensors.tmp.notapid " ] ||
  { echo "FAIL: after a good save the temp files left are: $left"; exit 1; }
echo "kill during save: $killed of 12 runs killed, $inside inside a save; the weights file stayed whole and loadable every time; the next save removed the dead writers' temp files"
