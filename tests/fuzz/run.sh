#!/bin/sh
# tests/fuzz/run.sh [SECONDS] [BUILD_DIR]: builds the libFuzzer harnesses
# (fuzz_model: YAML through planning; fuzz_pack: pack's CSV reader and the
# packing; fuzz_plan: the plan.json reader; fuzz_st: the trainers'
# safetensors header reader, runtime/memplan_json.c; fuzz_npy: its .npy
# header parser; fuzz_import: import-hf's header path, st_read_header) with
# clang (-fsanitize=fuzzer,address,undefined) straight from the sources into
# BUILD_DIR (default build-fuzz/), then runs each for SECONDS (default 30)
# on a seed corpus made from models/, tests/errors/, tests/data/ and
# tests/fuzz/regressions/. Exit 0: no finding; 1: a crash, hang, leak or
# failed verification (the input is left in BUILD_DIR/NAME-findings/);
# 77: clang or libFuzzer is missing (CTest's skip code).
#
# Longer campaigns: FUZZ_JOBS=N runs N workers per harness; the corpora in
# BUILD_DIR/NAME-corpus/ grow across runs. FUZZ_SEED (default 1, so CI runs
# are repeatable) seeds libFuzzer; FUZZ_SEED=0 picks a random seed per run.
# FUZZ_ONLY="fuzz_pack fuzz_plan" runs only those harnesses.
# FUZZ_RUNS=N stops each after N executions instead of SECONDS (-runs=N).
set -u
secs=${1:-30}
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$src/build-fuzz}
jobs=${FUZZ_JOBS:-1}
cc=${FUZZ_CC:-}
if [ -z "$cc" ]; then
  for c in clang-14 clang; do command -v "$c" >/dev/null 2>&1 && cc=$c && break; done
fi
[ -n "$cc" ] || { echo "SKIP: no clang (apt-get install clang-14 libclang-rt-14-dev)"; exit 77; }
mkdir -p "$out" || exit 1
probe=$out/probe.c
echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { (void)d; (void)n; return 0; }' >"$probe"
if ! "$cc" -fsanitize=fuzzer "$probe" -o "$out/probe" >/dev/null 2>&1; then
  echo "SKIP: $cc cannot link libFuzzer (apt-get install libclang-rt-14-dev)"
  exit 77
fi
yaml_cflags=$(pkg-config --cflags yaml-0.1 2>/dev/null)
yaml_libs=$(pkg-config --libs yaml-0.1 2>/dev/null || echo -lyaml)

# -fno-sanitize-recover: a UBSan report (signed overflow, bad shift) stops
# the run like a crash instead of scrolling past
flags="-std=c17 -D_POSIX_C_SOURCE=200809L -g -O1 -fsanitize=fuzzer,address,undefined
  -fno-sanitize-recover=all -fno-omit-frame-pointer -I$src/planner -I$src/runtime $yaml_cflags"
names=${FUZZ_ONLY:-fuzz_model fuzz_pack fuzz_plan fuzz_st fuzz_npy fuzz_import}
# the planner (with the runtime files it calls: the tokenizer and the JSON
# reader) compiled once into an archive that every harness links (each
# takes only the objects it uses): six harnesses each compiling all of it
# took most of the test's time on a 2-core machine
mkdir -p "$out/planner-obj" && rm -f "$out/planner-obj"/*.o "$out/libplanner.a"
for f in "$src"/planner/*.c "$src"/runtime/memplan_bpe.c "$src"/runtime/memplan_json.c; do
  o=$out/planner-obj/$(basename "$f" .c).o
  # shellcheck disable=SC2086
  "$cc" $(echo "$flags" | sed 's/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,/') -c "$f" -o "$o" \
    2>>"$out/planner.build.log" || { echo "FAIL: building $f"; cat "$out/planner.build.log"; exit 1; }
done
ar rcs "$out/libplanner.a" "$out"/planner-obj/*.o || exit 1
build() { # name sources...: only the harnesses that run
  name=$1
  shift
  case " $names " in *" $name "*) ;; *) return 0 ;; esac
  # shellcheck disable=SC2086
  "$cc" $flags "$@" "$out/libplanner.a" $yaml_libs -lm -o "$out/$name" 2>"$out/$name.build.log" ||
    { echo "FAIL: building $name"; cat "$out/$name.build.log"; exit 1; }
}
build fuzz_model "$src/tests/fuzz/fuzz_model.c"
build fuzz_pack "$src/tests/fuzz/fuzz_pack.c" -I"$src/codegen" "$src/codegen/pack.c" "$src/codegen/text.c"
build fuzz_plan "$src/tests/fuzz/fuzz_plan.c" -I"$src/codegen" "$src/codegen/plan_read.c" "$src/codegen/json.c" \
  "$src/codegen/text.c" "$src/codegen/timeline.c"
build fuzz_st "$src/tests/fuzz/fuzz_st.c"
build fuzz_npy "$src/tests/fuzz/fuzz_npy.c"
build fuzz_import "$src/tests/fuzz/fuzz_import.c" -I"$src/codegen" "$src/codegen/plan_read.c" "$src/codegen/text.c"

# seeds: small files copied (never the source tree's own) into a fresh
# seed folder; what the fuzzer finds grows NAME-corpus/
seed() { # name files...
  name=$1
  shift
  mkdir -p "$out/$name-seeds" "$out/$name-corpus" "$out/$name-findings"
  for f in "$@"; do [ -f "$f" ] && cp "$f" "$out/$name-seeds/"; done
}
seed fuzz_model "$src"/models/*.yaml "$src"/tests/errors/*.yaml "$src"/tests/fuzz/regressions/*.yaml
seed fuzz_pack "$src"/tests/data/*.csv "$src"/tests/fuzz/regressions/*.csv
seed fuzz_plan "$src"/tests/fuzz/seeds/*.json "$src"/tests/fuzz/regressions/*.json
# real headers: a trainer's checkpoint and an HF-layout GPT-2, each as 8
# bytes of data size then the JSON (their data left out); NumPy's own headers
seed fuzz_st "$src"/tests/fuzz/seeds/st_*.bin "$src"/tests/fuzz/regressions/st_*.bin
seed fuzz_import "$src"/tests/fuzz/seeds/st_*.bin "$src"/tests/fuzz/regressions/st_*.bin
seed fuzz_npy "$src"/tests/fuzz/seeds/npy_*.txt

status=0
total=0
for name in $names; do
  log=$out/$name.log
  maxlen=8192
  [ "$name" = fuzz_plan ] && maxlen=131072 # the seed plans are 12 to 66 KB
  [ "$name" = fuzz_npy ] && maxlen=1024
  # -timeout is a hang detector, per input. fuzz_model plans each model at a
  # tight budget, where remat.c's refinement builds the step up to 3000 times:
  # the cnn-mnist seed took 19.5 s of CPU under the fuzzer's ASan and coverage
  # (2026-12-02, 2-core machine under load; 1.1 s uninstrumented), over 10 s.
  to=10
  [ "$name" = fuzz_model ] && to=60
  # -close_fd_mask=1: pack prints a summary per input; sanitizer reports go to stderr
  par=""
  [ "$jobs" -gt 1 ] && par="-jobs=$jobs -workers=$jobs"
  rm -f "$out"/fuzz-*.log
  # shellcheck disable=SC2086
  (cd "$out" && "./$name" -max_total_time="$secs" -timeout=$to -rss_limit_mb=2048 -malloc_limit_mb=1024 \
    -max_len=$maxlen ${FUZZ_RUNS:+-runs=$FUZZ_RUNS} -close_fd_mask=1 -print_final_stats=1 -seed="${FUZZ_SEED:-1}" $par \
    -artifact_prefix="$out/$name-findings/" -dict="$src/tests/fuzz/$name.dict" \
    "$out/$name-corpus" "$out/$name-seeds") >"$log" 2>&1
  rc=$?
  runs=$(grep -h '^stat::number_of_executed_units' "$log" "$out"/fuzz-*.log 2>/dev/null |
    awk '{s += $2} END {print s + 0}')
  total=$((total + runs))
  echo "$name: $runs executions in ${FUZZ_RUNS:+at most }${secs}s, exit $rc"
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "FAIL: $name found a problem; input in $out/$name-findings/, log $log:"
    grep -A40 -E '^==[0-9]+==ERROR|runtime error|fails verification|deadly signal|timeout' "$log" | head -60
  fi
done
echo "total: $total executions"
exit $status
