#!/bin/sh
# compile_trainers.sh MEMPLAN WORKDIR NAME:MODEL.yaml[:OPT,OPT...]...
# Compiles each model into WORKDIR/NAME with memplan (OPTs are memplan
# compile options, "--budget=300K"), then builds its trainer_cuda with nvcc
# (warnings as errors) into WORKDIR/NAME/build: the CUDA trainer compiles and
# links for every plan, nothing runs (CTest: tests/cuda_trainer.cmake, no
# GPU needed). The trainer folders differ only in trainer.c and trainer.cu
# (the runtime is embedded in memplan, and this checks it): one build folder
# compiles the runtime (cuda_*.cu, memplan_trainer_cuda.cu, ...) once, and
# each plan's trainer.cu replaces the last, so nvcc recompiles only that.
# A data-parallel plan (memplan compile --ranks N, last in the list: its
# CMakeLists.txt adds trainer_mpi and trainer_cuda_mpi) replaces the
# CMakeLists.txt too and builds trainer_cuda_mpi (NCCL and MPI), where MPI
# and NCCL are found.
set -eu
memplan=$1 work=$2
shift 2
rm -rf "$work"
mkdir -p "$work"
n=0
for cfg in "$@"; do
  name=${cfg%%:*} rest=${cfg#*:}
  model=${rest%%:*} opts=
  [ "$rest" = "$model" ] || opts=$(echo "${rest#*:}" | tr ',' ' ')
  dir=$work/$name
  # shellcheck disable=SC2086 # the options split at commas
  "$memplan" compile "$model" -o "$dir" $opts > "$dir.compile.log" 2>&1 ||
    { cat "$dir.compile.log"; echo "FAIL: $name: memplan compile"; exit 1; }
  if [ ! -d "$work/src" ]; then
    cp -R "$dir" "$work/src"
    # one architecture (sm_90, the H200 tests/gpu runs on), not the folders' default 80;90:
    # nothing in runtime/ or the emitted trainer.cu depends on __CUDA_ARCH__, and the second
    # architecture was 40% of each runtime file's nvcc time
    cmake -S "$work/src" -B "$work/bld" -DTRAINER_CPU=OFF -DTRAINER_WERROR="${MEMPLAN_TRAINER_WERROR:-OFF}" \
      -DCMAKE_CUDA_ARCHITECTURES="${MEMPLAN_CUDA_ARCHITECTURES:-90}" > "$work/configure.log" 2>&1 ||
      { cat "$work/configure.log"; exit 1; }
    grep -q "no CUDA compiler found" "$work/configure.log" && { echo "no CUDA compiler: nothing compiled"; exit 1; }
  fi
  for f in "$dir"/*; do
    fn=$(basename "$f")
    case $fn in trainer.c | trainer.cu | plan.json | plan.dot | plan.svg | timeline.svg) continue ;; esac
    if [ "$fn" = CMakeLists.txt ] && grep -q trainer_cuda_mpi "$f"; then # data parallel: its own targets
      cp "$f" "$work/src/$fn"
      continue
    elif [ "$fn" = CMakeLists.txt ]; then # its comment names the model
      a=$work/a.txt b=$work/b.txt
      grep -v '^#' "$f" > "$a"
      grep -v '^#' "$work/src/$fn" > "$b"
    else
      a=$f b=$work/src/$fn
    fi
    cmp -s "$a" "$b" || { echo "FAIL: $name/$fn differs from the first model's"; exit 1; }
  done
  cp "$dir/trainer.cu" "$work/src/trainer.cu"
  touch "$work/src/trainer.cu"
  target=trainer_cuda
  if grep -q trainer_cuda_mpi "$dir/CMakeLists.txt"; then
    cmake -S "$work/src" -B "$work/bld" > "$work/configure.log" 2>&1 || { cat "$work/configure.log"; exit 1; }
    if grep -q "MPI or NCCL not found" "$work/configure.log"; then
      echo "FAIL: $name: MPI or NCCL not found: trainer_cuda_mpi cannot be built"
      exit 1
    fi
    target=trainer_cuda_mpi
  fi
  cmake --build "$work/bld" --target $target > "$dir.build.log" 2>&1 ||
    { cat "$dir.build.log"; echo "FAIL: $name: the build"; exit 1; }
  if grep -qi "warning" "$dir.build.log"; then
    cat "$dir.build.log"
    echo "FAIL: $name: warnings while compiling trainer.cu"
    exit 1
  fi
  mkdir -p "$dir/build"
  cp "$work/bld/$target" "$dir/build/$target"
  echo "compiled $dir/build/$target ($(grep -c '^#define' "$dir/trainer.cu") buffer macros," \
    "$(grep -c 'rt_cuda_' "$dir/trainer.cu") kernel calls)"
  n=$((n + 1))
done
echo "ok: $n CUDA trainers compiled"
