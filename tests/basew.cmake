# Frozen weights' storage (--base-weights, planner/basew.h). The codes, the
# dequantization, peak RSS and resume: tests/e2e.cmake (e2e_basew_codes_*,
# e2e_resume_frozen-lm-nf4); the user errors and auto: tests/planner.cmake.
memplan_compile_error(error_bad_base_weights STATUS 2 MODEL ${MEMPLAN_SOURCE_DIR}/models/mlp.yaml
  EXPECT "error: --base-weights nf2: choose fp32, bf16, int8, nf4 or auto" ARGS --base-weights nf2)
# NF4 vs bf16 frozen weights (llama-mini, B=2, T=64, embedding and projections
# frozen): the held-out loss after 200 steps within 1.5%, peak RSS within the
# arena + baseline + 4 MiB + the text (e2e.py memtruth) (two trainers built, two runs; about a minute: label accuracy).
# Measured 2026-12-01 over --seed 11-13 and the Zen and Prescott OpenBLAS
# kernels (AMD EPYC, 2 threads; `sh tests/basew/run.sh build/bin/memplan
# /tmp/basew "11 12 13" "Zen Prescott"`), |eval(nf4) / eval(bf16) - 1|:
# 0.277%, 0.473%, 0.375% (seeds 11, 12, 13; the same under both kernels), NF4
# always the higher loss (quantization error, not noise; bf16's own
# seed-to-seed spread is 1.2%). 1.5% is 3x the largest, within the issue's 2%.
# Planted in cpu.c's rt_nf4_to_f32 (seed 11, Zen): absmax x 0.25 gave held-out
# 3.619785 against bf16's 3.178245, 13.9% off (caught); absmax x 0.9 gave
# 3.169944, 0.26% (not caught: the frozen base here is random, not pretrained,
# and the trained norms absorb a uniform scale). Exactness of the codes and of
# the dequantization is e2e_basew_codes_*'s job (bit for bit).
add_test(NAME basew_accuracy COMMAND sh ${MEMPLAN_TEST_DIR}/basew/run.sh $<TARGET_FILE:memplan>
                                     ${CMAKE_CURRENT_BINARY_DIR}/basew 11 default)
set_tests_properties(basew_accuracy PROPERTIES LABELS accuracy TIMEOUT 900 ENVIRONMENT MEMPLAN_BASEW_MARGIN=0.015)
# A bf16 base is not a saved activation in half precision: the report lists
# none under --precision fp32, and --precision auto keeping everything in fp32
# writes plan.json "precision": "fp32" (exit 0 both). Planted once:
# plan.c's plan_buf_half_saved counting frozen weights again; this test printed
# "precision fp32: 31 saved activations stored in half precision" and "FAIL:
# frozen weights listed".
add_test(NAME basew_bf16_not_half_activations
         COMMAND sh -c "out=$(mktemp -d) && trap 'rm -rf $out' EXIT &&
           \"$0\" compile \"$1\" --base-weights bf16 > $out/fp32 || { echo 'FAIL: exit status' $?; exit 1; }
           \"$0\" compile \"$1\" --base-weights bf16 --precision auto -o $out/plan > $out/auto || exit 1
           if grep 'stored in half precision' $out/fp32; then echo 'FAIL: frozen weights listed'; exit 1; fi
           grep -q '\"precision\": \"fp32\"' $out/plan/plan.json || { echo 'FAIL: auto says bf16'; exit 1; }
           grep -q 'frozen weights bf16' $out/fp32 && echo ok"
         $<TARGET_FILE:memplan> ${MEMPLAN_TEST_DIR}/reference/llama-mini-lora.yaml)
# (its exit status is the outcome: no PASS_REGULAR_EXPRESSION, which would
# ignore it, and under ASan LeakSanitizer's report of its suppressions comes
# before the "ok")
set_tests_properties(basew_bf16_not_half_activations PROPERTIES LABELS unit)
