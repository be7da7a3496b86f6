#!/usr/bin/env bash
# tests/gpu/run.sh: the GPU checks, in one call sized for a few minutes.
#
# Builds the CUDA backend (runtime/cuda/kernels.cu) and its comparison program
# (tests/gpu: test_cuda_kernels.c against the double references of ref.c)
# with nvcc and cc alone: no CMake, libyaml, Graphviz or OpenBLAS needed,
# only the CUDA toolkit (nvcc, cuBLAS, compute-sanitizer) and a C compiler.
# Then runs, each step reported and the whole log kept:
#   1. test_cuda_kernels: every kernel, forward and backward, acc 0/1, NULL
#      gradients, in-place pairs, TF32, no-cuBLASLt path, determinism; a
#      table of kernel / max abs err / max rel err / ok;
#   2. compute-sanitizer memcheck, racecheck and synccheck on --quick shapes
#      (out-of-bounds accesses, shared-memory races, bad barriers);
#   3. --bench: timings of GPT-2 124M-sized kernels (information, no verdict).
#
# Run from the repository root on the GPU machine:
#   bash tests/gpu/run.sh            # about 1-3 minutes on an H100/H200
# Through the device tool: run(command="bash tests/gpu/run.sh", timeout_s=480).
# The log goes to $OUT/gpu-run.log when $OUT is set (the device tool sets it,
# and returns what is there), else to $BUILD_DIR. Environment: NVCC, CC, ARCH (e.g.
# sm_90; default: the GPU's compute capability), BUILD_DIR.
# Exit status: 0 when every step passed, 1 otherwise.
set -u
cd "$(dirname "$0")/../.." || exit 1

BUILD_DIR=${BUILD_DIR:-/tmp/memplan-gpu-build}
mkdir -p "$BUILD_DIR" ${OUT:+"$OUT"}
LOG=${OUT:-$BUILD_DIR}/gpu-run.log
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CUDA_BIN=$(dirname "$NVCC")
SANITIZER=$(command -v compute-sanitizer || echo "$CUDA_BIN/compute-sanitizer")
CC=${CC:-$(command -v gcc || command -v cc || echo "")}
status=0
steps=()

step() { # step NAME COMMAND...: runs it, records ok/FAIL
  local name=$1 t0=$SECONDS rc
  shift
  echo
  echo "=== $name"
  "$@"
  rc=$?
  steps+=("$(printf '%-34s %s (%ds)' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAIL rc=$rc")" $((SECONDS - t0)))")
  [ $rc -eq 0 ] || status=1
  return $rc
}

echo "memplan GPU checks, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader || true
"$NVCC" --version | tail -2

if [ -z "${ARCH:-}" ]; then
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  ARCH=${cap:+sm_$cap}
  ARCH=${ARCH:-native}
fi
echo "arch: $ARCH"

build() {
  local inc="-Iruntime/cuda -Itests/gpu"
  local cflags="-std=c17 -O2 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror"
  "$NVCC" -O2 -std=c++17 -arch="$ARCH" --Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
    $inc -c runtime/cuda/kernels.cu -o "$BUILD_DIR/kernels.o" || return 1
  if [ -n "$CC" ]; then
    "$CC" $cflags $inc -c tests/gpu/test_cuda_kernels.c -o "$BUILD_DIR/test.o" || return 1
    "$CC" $cflags -ffp-contract=off $inc -c tests/gpu/ref.c -o "$BUILD_DIR/ref.o" || return 1
  else # nvcc hands .c files to its host compiler as C
    "$NVCC" -O2 -Xcompiler "-std=c17 -D_POSIX_C_SOURCE=200809L" $inc \
      -c tests/gpu/test_cuda_kernels.c -o "$BUILD_DIR/test.o" || return 1
    "$NVCC" -O2 -Xcompiler "-std=c17 -ffp-contract=off" $inc \
      -c tests/gpu/ref.c -o "$BUILD_DIR/ref.o" || return 1
  fi
  "$NVCC" -arch="$ARCH" "$BUILD_DIR/kernels.o" "$BUILD_DIR/test.o" "$BUILD_DIR/ref.o" \
    -lcublasLt -lcublas -lm -o "$BUILD_DIR/test_cuda_kernels"
}

T=$BUILD_DIR/test_cuda_kernels
if step "build (nvcc, $ARCH)" build; then
  step "kernels vs references" "$T"
  san() { "$SANITIZER" --tool "$1" --error-exitcode 3 "$T" --quick "${@:2}"; }
  if [ -x "$SANITIZER" ] || command -v "$SANITIZER" >/dev/null; then
    step "compute-sanitizer memcheck" san memcheck
    # racecheck and synccheck see only shared memory and barriers: the
    # hand-written kernels with either (attention, row sums, losses).
    for tool in racecheck synccheck; do
      for f in attention layernorm embedding cross_entropy; do
        step "compute-sanitizer $tool $f" san $tool $f
      done
    done
  else
    echo "compute-sanitizer not found: sanitizer steps skipped"
  fi
  step "timing (--bench)" "$T" --bench nothing-else
fi

echo
echo "=== summary"
printf '%s\n' "${steps[@]}"
[ $status -eq 0 ] && echo "ALL OK" || echo "SOME STEPS FAILED"
exit $status
