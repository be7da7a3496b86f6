#!/bin/sh
# compile_trainer.sh MEMPLAN MODEL.yaml DIR [memplan compile options...]
# Compiles MODEL into DIR with memplan, then configures DIR with its own
# CMakeLists.txt (CUDA trainer only, warnings as errors) and builds
# trainer_cuda with nvcc: the CUDA trainer compiles and links, nothing runs
# (CTest: tests/cuda_trainer.cmake, no GPU needed). Any compiler warning fails.
set -eu
memplan=$1 model=$2 dir=$3
shift 3
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
"$memplan" compile "$model" -o "$dir" "$@" > "$dir.compile.log" 2>&1 || { cat "$dir.compile.log"; exit 1; }
cmake -S "$dir" -B "$dir/build" -DTRAINER_CPU=OFF -DTRAINER_WERROR=ON > "$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log"; exit 1; }
grep -q "no CUDA compiler found" "$dir.configure.log" && { echo "no CUDA compiler: nothing compiled"; exit 1; }
cmake --build "$dir/build" --target trainer_cuda > "$dir.build.log" 2>&1 || { cat "$dir.build.log"; exit 1; }
if grep -qi "warning" "$dir.build.log"; then cat "$dir.build.log"; echo "warnings while compiling trainer.cu"; exit 1; fi
test -x "$dir/build/trainer_cuda"
echo "compiled $dir/build/trainer_cuda ($(grep -c '^#define' "$dir/trainer.cu") buffer macros," \
  "$(grep -c 'rt_cuda_' "$dir/trainer.cu") kernel calls)"
