#!/bin/sh
# kill_save.sh MEMPLAN WORKDIR: a trainer killed (SIGKILL) while it saves
# its weights leaves the previous weights file intact and loadable: save
# writes a temp file in the same folder and renames it over the old one.
# The model is mlp with 4096-wide hidden layers (20M parameters, 80 MB).
# No clock decides where a kill lands: each round starts a save and watches
# its temp file (w.safetensors.tmp.PID) grow, and kills the writer once
# k/12 of the file is written (k = 0..11), so every round that the watcher
# catches in time is killed inside the save, at a different point of it.
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
inside=0
for k in 0 1 2 3 4 5 6 7 8 9 10 11; do
  "$t" --steps 0 --eval-batches 0 --seed 2 --save "$work/w.safetensors" > /dev/null 2>&1 &
  pid=$!
  tmp="$work/w.safetensors.tmp.$pid"
  want=$((size * k / 12))
  # until the temp file holds `want` bytes, or the writer has exited (Z: a zombie, awaiting wait)
  while :; do
    state=$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null || echo X)
    [ "$state" = Z ] || [ "$state" = X ] && break
    # before the save starts, poll gently (the trainer is drawing weights)
    if [ ! -e "$tmp" ]; then sleep 0.005; continue; fi
    got=$(stat -c %s "$tmp" 2>/dev/null || echo -1)
    [ "$got" -ge "$want" ] && break
  done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -e "$tmp" ]; then inside=$((inside + 1)); fi
  # whatever happened, the file is a whole weights file that loads
  [ "$(wc -c < "$work/w.safetensors")" -eq "$size" ] || { echo "FAIL: weights file size changed after kill at $k/12"; exit 1; }
  "$t" --load "$work/w.safetensors" --steps 0 --eval-batches 0 > /dev/null ||
    { echo "FAIL: weights file unloadable after a kill at $k/12 of the save"; exit 1; }
done
# at least one kill must have landed inside a save (it left its temp file),
# or the test tested nothing
[ "$inside" -gt 0 ] || { echo "FAIL: no kill landed inside a save (the watcher never caught one)"; exit 1; }
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
echo "kill during save: $inside of 12 kills landed inside a save; the weights file stayed whole and loadable every time; the next save removed the dead writers' temp files"
