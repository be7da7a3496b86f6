# AdamW's optimizer state in bf16 and 8 bits (--opt-state, planner/optstate.h).
# The kernels' unit cases are in tests/gpu/test_cuda_kernels.c (cuda_refs).
add_test(NAME opt_state_plan
         COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/optstate/check_plan.py $<TARGET_FILE:memplan>
                 ${MEMPLAN_SOURCE_DIR}/models ${CMAKE_CURRENT_BINARY_DIR}/optstate_plan)
set_tests_properties(opt_state_plan PROPERTIES LABELS e2e TIMEOUT 60)
memplan_compile_error(error_bad_opt_state STATUS 2 MODEL ${MEMPLAN_SOURCE_DIR}/models/mlp.yaml
  EXPECT "error: --opt-state int4: choose fp32, bf16, 8bit or auto" ARGS --opt-state int4)
memplan_compile_error(error_opt_state_sgd MODEL ${MEMPLAN_SOURCE_DIR}/models/mlp.yaml
  EXPECT "--opt-state 8bit stores AdamW's moments, and .*mlp.yaml trains with SGD \\(its momentum stays fp32\\)"
         "leave out --opt-state or use type: adamw"
  ARGS --opt-state 8bit)
# gpt2-mini and llama-mini, 200 steps each with fp32, bf16 and 8-bit moments
# (six trainers built): within 1% of fp32's loss, peak RSS within the arena +
# baseline + 4 MiB + the text (e2e.py memtruth), an 8-bit run's weights saved and loaded back. Minutes: label accuracy.
add_test(NAME opt_state_accuracy
         COMMAND sh ${MEMPLAN_TEST_DIR}/optstate/run.sh $<TARGET_FILE:memplan> ${MEMPLAN_PYTHON3}
                 ${CMAKE_CURRENT_BINARY_DIR}/optstate)
set_tests_properties(opt_state_accuracy PROPERTIES LABELS accuracy TIMEOUT 900)
