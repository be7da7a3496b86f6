#!/bin/sh
# guard.sh MEMPLAN WORKDIR: guard mode. mlp compiled with --guard trains
# cleanly; the same plan built with a planted off-by-one write in the relu
# kernel (RT_PLANT_OFF_BY_ONE) stops at the first op that wrote past its
# buffer, naming the op and the buffer.
set -eu
memplan=$1 work=$2
here=$(dirname "$0")
rm -rf "$work"
"$memplan" compile "$here/../../models/mlp.yaml" --guard -o "$work" > /dev/null
grep -q "rt_guard_check" "$work/trainer.c" || { echo "FAIL: no guard checks emitted"; exit 1; }
cmake -S "$work" -B "$work/clean" -DTRAINER_CUDA=OFF -DTRAINER_WERROR="${MEMPLAN_TRAINER_WERROR:-OFF}" > /dev/null
cmake --build "$work/clean" -j2 > /dev/null
"$work/clean/trainer" --steps 3 --eval-batches 1 > "$work/clean.out"
cmake -S "$work" -B "$work/planted" -DTRAINER_CUDA=OFF -DCMAKE_C_FLAGS=-DRT_PLANT_OFF_BY_ONE > /dev/null
cmake --build "$work/planted" -j2 > /dev/null
if "$work/planted/trainer" --steps 3 --eval-batches 0 > "$work/planted.out" 2> "$work/planted.err"; then
  echo "FAIL: the planted out-of-bounds write went unnoticed"
  exit 1
fi
cat "$work/planted.err"
grep -q "guard: op 1 (act1) wrote past the end of buffer fc1" "$work/planted.err" || { echo "FAIL: wrong report"; exit 1; }
echo "guard mode: ok"
