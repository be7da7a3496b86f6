#!/usr/bin/env bash
# tests/gpu/run.sh: the GPU checks, in one call sized for a few minutes.
#
# Builds the CUDA backend (runtime/cuda/cuda_*.cu) and its comparison program
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
#   4. the generated trainers (when the folders prepared by tests/gpu/prepare.sh
#      are here, in $PREP, default out/gpu): builds each folder's trainer_cuda
#      with its own CMakeLists.txt (nvcc and cuBLAS only: no libyaml, Graphviz
#      or OpenBLAS on the GPU machine); runs mlp, gpt2-mini and GPT-2 124M
#      (B=4 T=128 fp32 and bf16; B=8 T=1024 fp32 and bf16) from the same
#      initial weights (init.safetensors, or --seed 1337 for GPT-2 124M: the
#      same host code draws them) and data as the CPU runs recorded; compares
#      per-step losses with the CPU's (fp32 within 1e-4 relative, bf16 1e-2);
#      replays fp32 configs with --cuda-graph (same losses); prints planned vs
#      measured device memory; times PyTorch eager on the same plans
#      (tests/gpu/torch_bench.py: tokens/s, torch.cuda.max_memory_allocated);
#      ends with a table.
#
# Prepare on the build machine (no GPU needed; a few minutes on 2 cores):
#   bash tests/gpu/prepare.sh            # writes out/gpu (~15 MiB, ignored by git)
# Carry: the working tree goes by itself (tracked and untracked-not-ignored
# files: runtime/, tests/gpu/, tests/reference/plan_torch.py); out/gpu is
# ignored, so name it: carry=["out/gpu"]. Nothing else (no build/).
# Run from the repository root on the GPU machine:
#   bash tests/gpu/run.sh            # about 3-4 minutes on an H100/H200
# Through the device tool:
#   run(command="bash tests/gpu/run.sh", carry=["out/gpu"], timeout_s=420).
# The log goes to $OUT/gpu-run.log when $OUT is set (the device tool sets it,
# and returns what is there), else to $BUILD_DIR. Environment: NVCC, CC, ARCH (e.g.
# sm_90; default: the GPU's compute capability), BUILD_DIR, PREP, SKIP_KERNELS=1
# (only step 4), SKIP_TORCH=1.
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
  local inc="-Iruntime -Iruntime/cuda -Itests/gpu"
  local cflags="-std=c17 -O2 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror"
  local objs="" f
  for f in runtime/cuda/cuda_*.cu; do
    "$NVCC" -O2 -std=c++17 -arch="$ARCH" --Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
      $inc -c "$f" -o "$BUILD_DIR/$(basename "$f" .cu).o" || return 1
    objs="$objs $BUILD_DIR/$(basename "$f" .cu).o"
  done
  if [ -n "$CC" ]; then
    "$CC" $cflags $inc -c tests/gpu/test_cuda_kernels.c -o "$BUILD_DIR/test.o" || return 1
    "$CC" $cflags -ffp-contract=off $inc -c tests/gpu/ref.c -o "$BUILD_DIR/ref.o" || return 1
  else # nvcc hands .c files to its host compiler as C
    "$NVCC" -O2 -Xcompiler "-std=c17 -D_POSIX_C_SOURCE=200809L" $inc \
      -c tests/gpu/test_cuda_kernels.c -o "$BUILD_DIR/test.o" || return 1
    "$NVCC" -O2 -Xcompiler "-std=c17 -ffp-contract=off" $inc \
      -c tests/gpu/ref.c -o "$BUILD_DIR/ref.o" || return 1
  fi
  # shellcheck disable=SC2086 # one object per file
  "$NVCC" -arch="$ARCH" $objs "$BUILD_DIR/test.o" "$BUILD_DIR/ref.o" \
    -lcublasLt -lcublas -lm -o "$BUILD_DIR/test_cuda_kernels"
}

T=$BUILD_DIR/test_cuda_kernels
if [ "${SKIP_KERNELS:-0}" != 1 ] && step "build (nvcc, $ARCH)" build; then
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

# ---------------------------------------------------------------------------
# 4. the generated trainers against the CPU's recorded losses, and PyTorch

PREP=${PREP:-out/gpu}
PY=$(command -v python3 || echo python3)
TR=$BUILD_DIR/trainers
if [ -f "$PREP/configs.tsv" ]; then
  archnum=${ARCH#sm_}
  [ "$archnum" = native ] && archnum=native
  build_trainers() { # every folder at once: nvcc is single-threaded per file
    local pids=() name rc=0
    mkdir -p "$TR"
    while IFS=$'\t' read -r name _ _ _; do
      ( cmake -S "$PREP/$name" -B "$TR/$name" -DTRAINER_CPU=OFF -DCMAKE_CUDA_ARCHITECTURES="$archnum" \
          -DCMAKE_CUDA_COMPILER="$NVCC" >"$TR/$name.cfg.log" 2>&1 &&
        cmake --build "$TR/$name" --target trainer_cuda -j4 >"$TR/$name.build.log" 2>&1 ) ||
        { echo "build of $name failed:"; tail -30 "$TR/$name.cfg.log" "$TR/$name.build.log"; exit 1; } &
      pids+=($!)
    done <"$PREP/configs.tsv"
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    return $rc
  }
  # run_config NAME STEPS TOL START: GPU losses vs cpu.csv, then a graph replay
  run_config() {
    local name=$1 steps=$2 tol=$3 start=$4 t="$TR/$1/trainer_cuda" data="" init="--seed 1337" n
    grep -q '"embedding"' "$PREP/$name/plan.json" && data="--text $PREP/data.txt"
    [ "$start" = load ] && init="--load $PREP/$name/init.safetensors"
    n=$(( steps > 10 ? steps : 10 ))
    "$t" $init --steps "$n" --eval-batches 1 $data --log "$TR/$name.gpu.csv" >"$TR/$name.gpu.log" 2>&1
    local rc=$?
    grep -vE "^step +([2-9]|[0-9]{2,})/" "$TR/$name.gpu.log" # all but the per-step lines after step 1
    [ $rc -eq 0 ] || return 1
    # the same run replayed from one captured CUDA graph (every prepared plan qualifies:
    # no micro-batches, no loss scaling)
    "$t" $init --steps "$n" --eval-batches 0 $data --cuda-graph --log "$TR/$name.graph.csv" >"$TR/$name.graph.log" 2>&1 ||
      { cat "$TR/$name.graph.log"; return 1; }
    "$PY" - "$name" "$PREP/$name/cpu.csv" "$TR/$name.gpu.csv" "$TR/$name.graph.csv" "$tol" "$steps" <<'PYEOF'
import csv, os, sys
name, cpu_p, gpu_p, graph_p, tol, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]), int(sys.argv[6])
rd = lambda p: [float(r["loss"]) for r in csv.DictReader(open(p))] if os.path.exists(p) else []
cpu, gpu, graph = rd(cpu_p), rd(gpu_p), rd(graph_p)
ok = len(gpu) >= steps and all(x == x for x in gpu)
worst = 0.0
for i in range(min(steps, len(cpu), len(gpu))):
    rel = abs(gpu[i] - cpu[i]) / max(abs(cpu[i]), 1e-12)
    worst = max(worst, rel)
    print("  step %d: cpu %.6f gpu %.6f rel %.2e%s" % (i + 1, cpu[i], gpu[i], rel, "" if rel <= tol else "  > %g" % tol))
    ok = ok and rel <= tol
if graph:
    g = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(graph, gpu))
    print("  --cuda-graph: %d steps, max rel diff to direct launches %.2e" % (len(graph), g))
    ok = ok and g <= 1e-6
open(gpu_p + ".verdict", "w").write("%s %.2e\n" % ("ok" if ok else "FAIL", worst))
sys.exit(0 if ok else 1)
PYEOF
  }
  if step "trainers: build trainer_cuda ($archnum)" build_trainers; then
    while IFS=$'\t' read -r name steps tol start; do
      step "trainer $name (tol $tol)" run_config "$name" "$steps" "$tol" "$start" </dev/null
    done <"$PREP/configs.tsv"
  fi
  # resume on the device: 4 steps with --save-every 2, then the step-2 checkpoint resumed
  # (weights, optimizer state downloaded and uploaded through the staging buffer, data
  # position, loss scale): steps 3 and 4 and the final checkpoint bit for bit the same
  resume_check() {
    local name=$1 t="$TR/$1/trainer_cuda" d="$TR/$1.resume" data=""
    grep -q '"embedding"' "$PREP/$name/plan.json" && data="--text $PREP/data.txt"
    rm -rf "$d" && mkdir -p "$d" || return 1
    "$t" --steps 4 --eval-batches 0 $data --save-every 2 --keep 5 --save "$d/full.safetensors" --log "$d/full.csv" \
      >"$d/full.log" 2>&1 || { cat "$d/full.log"; return 1; }
    "$t" --resume "$d/full-step000002.safetensors" --eval-batches 0 $data --save "$d/part.safetensors" \
      --log "$d/part.csv" >"$d/part.log" 2>&1 || { cat "$d/part.log"; return 1; }
    tail -n 2 "$d/full.csv" | cut -d, -f1,2 >"$d/a" && tail -n +2 "$d/part.csv" | cut -d, -f1,2 >"$d/b"
    paste -d' ' "$d/a" "$d/b"
    cmp "$d/a" "$d/b" && cmp "$d/full.safetensors" "$d/part.safetensors" && echo "  2+2 == 4 steps, bit for bit"
  }
  for name in gpt2-mini mlp; do
    [ -x "$TR/$name/trainer_cuda" ] && step "resume $name (2+2 == 4 steps)" resume_check "$name"
  done
  if [ "${SKIP_TORCH:-0}" != 1 ] && "$PY" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    torch_run() {
      local name=$1 data="" bf=""
      grep -q '"embedding"' "$PREP/$name/plan.json" && data="--text $PREP/data.txt"
      case $name in *bf16) bf=--bf16 ;; esac
      # PyTorch interprets the fp32 plan (same model; bf16 through autocast)
      local plan="$PREP/${name%-bf16}/plan.json"
      "$PY" tests/gpu/torch_bench.py "$plan" $data $bf --steps 10 | tail -1 >"$TR/$name.torch.json"
      cat "$TR/$name.torch.json" | cut -c1-200
    }
    for name in mlp gpt2-mini gpt2-124m gpt2-124m-bf16; do
      [ -d "$PREP/$name" ] && step "pytorch eager $name" torch_run "$name"
    done
  else
    echo "PyTorch with CUDA not available: no PyTorch timings"
  fi
  echo
  echo "=== trainers: memplan CUDA vs CPU record and PyTorch eager"
  "$PY" - "$PREP/configs.tsv" "$TR" <<'PYEOF'
import csv, json, os, re, sys
cfgs, tr = sys.argv[1], sys.argv[2]
peak = float(os.environ.get("PEAK_TFLOPS", "790")) * 1e12  # H200 bf16 matrix products, about
best_of, extra_of = {}, {}
print("%-22s %-9s %9s %11s %11s %9s %6s %12s %12s %12s %7s %7s" % ("config", "losses", "worst rel", "ms/step", "graph ms", "tok/s", "MFU",
      "planned", "device max", "torch max", "speed", "memory"))
for row in csv.reader(open(cfgs), delimiter="\t"):
    name = row[0]
    v = open(os.path.join(tr, name + ".gpu.csv.verdict")).read().split() if os.path.exists(os.path.join(tr, name + ".gpu.csv.verdict")) else ["-", "-"]
    def ms(p):
        p = os.path.join(tr, p)
        if not os.path.exists(p): return float("nan")
        r = [float(x["ms"]) for x in csv.DictReader(open(p))][1:]  # step 1 warms up (cuBLAS, capture)
        return sum(r) / len(r) if r else float("nan")
    log = open(os.path.join(tr, name + ".gpu.log")).read() if os.path.exists(os.path.join(tr, name + ".gpu.log")) else ""
    plan = json.load(open(os.path.join(os.path.dirname(cfgs), name, "plan.json")))
    planned = plan["totals"]["arena_bytes"]
    m = re.findall(r"max (\d+) \(", log)
    dev = int(m[-1]) if m else 0
    per = plan["totals"].get("micro_batch", 1) * plan["totals"].get("accumulation_steps", 1)
    toks = per * plan["dims"].get("T", 1) if "T" in plan["dims"] else per
    gms, dms = ms(name + ".gpu.csv"), ms(name + ".graph.csv")
    best = min(x for x in (gms, dms) if x == x) if (gms == gms or dms == dms) else float("nan")
    tj = os.path.join(tr, name + ".torch.json")
    t = json.load(open(tj)) if os.path.exists(tj) and os.path.getsize(tj) else None
    mib = lambda b: "%.1f MiB" % (b / 2**20) if b < 2**30 else "%.2f GiB" % (b / 2**30)
    # a step's FLOPs from the schedule: forward, recompute and backward run once per
    # micro-batch, updates once; model FLOPs leave the recomputation out
    acc = plan["totals"].get("accumulation_steps") or 1
    run = lambda ph: sum(o["flops"] * (1 if o["phase"] == "update" else acc) for o in plan["schedule"] if o["phase"] in ph)
    model_flops, extra = run(("forward", "backward", "update")), run(("recompute",))
    best_of[name], extra_of[name] = best, extra / model_flops
    mfu = "%.1f%%" % (100 * model_flops / (best * 1e-3) / peak) if best == best else "-"
    print("%-22s %-9s %9s %11.2f %11.2f %9.0f %6s %12s %12s %12s %7s %7s" % (
        name, v[0], v[1], gms, dms, toks * 1e3 / best if best == best else float("nan"), mfu, mib(planned), mib(dev),
        mib(t["max_memory_allocated"]) if t else "-", "%.2fx" % (t["ms_per_step"] / best) if t and best == best else "-",
        "%.2fx" % (planned / t["max_memory_allocated"]) if t else "-"))
print("speed: PyTorch eager ms/step / memplan's best (graph or not); memory: planned arena / torch max_memory_allocated")
print("device max: this process's cudaMemGetInfo use (arena + CUDA context + libraries); MFU against PEAK_TFLOPS=%g" % (peak / 1e12))
base, cut = "gpt2-124m-bf16", "gpt2-124m-bf16-4g"
if best_of.get(base, float("nan")) == best_of.get(base) and best_of.get(cut, float("nan")) == best_of.get(cut):
    est = extra_of[cut]
    got = best_of[cut] / best_of[base] - 1
    print("recompute (%s vs %s): planned extra FLOPs %.1f%%, measured extra time %.1f%%: %s" % (
        cut, base, 100 * est, 100 * got, "within 20%" if abs(got - est) <= 0.2 * est else "NOT within 20% of the estimate"))
PYEOF
else
  echo
  echo "no $PREP/configs.tsv: trainer checks skipped (run tests/gpu/prepare.sh on the build machine, carry out/gpu)"
fi

echo
echo "=== summary"
printf '%s\n' "${steps[@]}"
[ $status -eq 0 ] && echo "ALL OK" || echo "SOME STEPS FAILED"
exit $status
