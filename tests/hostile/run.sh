#!/bin/sh
# run.sh MEMPLAN WORKDIR: hostile layer names produce a trainer that compiles
# with -Wall -Wextra -Werror and trains, and a trainer.cu that nvcc compiles
# (no injection through names).
set -eu
memplan=$1 work=$2
here=$(dirname "$0")
rm -rf "$work"
"$memplan" compile "$here/hostile.yaml" -o "$work" > "$work.report"
cmake -S "$work" -B "$work/build" -DTRAINER_WERROR="${MEMPLAN_TRAINER_WERROR:-OFF}" -DTRAINER_CUDA=OFF > /dev/null
cmake --build "$work/build" -j2
# no name reached the code outside comments and strings: the injected
# preprocessor line only ever appears inside a comment or a string literal
if grep -n '^ *#define float' "$work/trainer.c"; then echo "FAIL: injected define"; exit 1; fi
"$work/build/trainer" --steps 30 --log-every 10 --seed 5 | tee "$work.out"
grep -q "step    30/30" "$work.out"
# and trainer.cu, where nvcc exists (compiled, not run)
if command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  # only trainer.cu, where the names are, and for one architecture: the runtime's .cu files hold
  # no name (cuda_trainers compiles them), and the whole build for sm_80 and sm_90 was 50 of
  # this test's 60 s (Makefiles name the object trainer.cu.o; another generator builds it all)
  cmake -S "$work" -B "$work/cuda" -DTRAINER_CPU=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" > /dev/null
  cmake --build "$work/cuda" --target trainer.cu.o > /dev/null 2>&1 || cmake --build "$work/cuda" -j2 > /dev/null
  echo "trainer.cu with hostile names compiled"
fi
echo "hostile names: ok"
