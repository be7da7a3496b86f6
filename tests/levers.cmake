# The budget's levers as the report and plan.json explain them, the fused
# updates' saving, and the command line's number checks.
add_test(NAME levers_report
         COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/levers/check_levers.py $<TARGET_FILE:memplan>
                 ${MEMPLAN_SOURCE_DIR}/models ${CMAKE_CURRENT_BINARY_DIR}/levers)
set_tests_properties(levers_report PROPERTIES LABELS e2e TIMEOUT 300)
# The levers chosen together: the least estimated step time among the plans
# that fit, against every micro-batch size compiled alone; bounds; forbidding
add_test(NAME levers_joint
         COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/levers/check_joint.py $<TARGET_FILE:memplan>
                 ${MEMPLAN_SOURCE_DIR}/models ${CMAKE_CURRENT_BINARY_DIR}/levers_joint)
set_tests_properties(levers_joint PROPERTIES LABELS e2e TIMEOUT 300)
memplan_compile_error(error_bad_time_limit STATUS 2 MODEL ${MEMPLAN_SOURCE_DIR}/models/mlp.yaml
  EXPECT "error: --time-limit wants seconds \\(e.g. 0.5\\), got 'abc'" ARGS --time-limit abc)
memplan_compile_error(error_bad_micro_batch STATUS 2 MODEL ${MEMPLAN_SOURCE_DIR}/models/mlp.yaml
  EXPECT "error: --micro-batch '4x' must be a positive integer" ARGS --micro-batch 4x)
