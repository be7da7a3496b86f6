# Trainable weights stored bf16 (--param-precision, planner/basew.h). The
# stochastic rounding kernel: bf16_sr (tests/runtime.cmake); training, resume
# and peak RSS: e2e_paramprec (tests/e2e.cmake).
add_test(NAME param_precision_plan
         COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/paramprec/check_plan.py $<TARGET_FILE:memplan>
                 ${MEMPLAN_SOURCE_DIR}/models ${CMAKE_CURRENT_BINARY_DIR}/paramprec_plan)
set_tests_properties(param_precision_plan PROPERTIES LABELS e2e TIMEOUT 60)
