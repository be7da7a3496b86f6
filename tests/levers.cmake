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
# The report's dims line under micro-batching: the model's batch, then the micro-batch the plan runs (dims and
# plan.json hold the micro-batch): gpt2-mini at 6M chooses 4 micro-batches of 1 (well under a second); a
# --set batch keeps its mark. The report printed "B=1" for both before.
add_test(NAME report_dims_micro_batch COMMAND ${memplan_ok} compile ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml
                                              --budget 6M)
set_tests_properties(report_dims_micro_batch PROPERTIES LABELS golden
  PASS_REGULAR_EXPRESSION "\n  dims         B=4 \\(micro-batch 1\\) T=64 C=128 NH=4 L=2 V=256\n.*4 micro-batches of 1[^\n]*<- chosen"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
add_test(NAME report_dims_micro_batch_set COMMAND ${memplan_ok} compile ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml
                                                  --set B=8 --micro-batch 2)
set_tests_properties(report_dims_micro_batch_set PROPERTIES LABELS golden
  PASS_REGULAR_EXPRESSION "\n  dims         B=8\\* \\(micro-batch 2\\) T=64 C=128 NH=4 L=2 V=256\n"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
