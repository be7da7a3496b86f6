# Precision and micro-batching end to end (issue: precision and batch under the budget)
find_program(MEMPLAN_PY3 python3)
add_test(NAME precision_and_microbatch
         COMMAND sh ${MEMPLAN_TEST_DIR}/precision/run.sh $<TARGET_FILE:memplan> ${MEMPLAN_PY3}
                 ${CMAKE_CURRENT_BINARY_DIR}/precision)
# (label e2e, not accuracy: its held-out checks have 50x their spread over
# seeds and kernels to spare, so tests/run-all's second-kernel rerun of the
# accuracy label, which would rebuild its nine trainers, leaves it out)
set_tests_properties(precision_and_microbatch PROPERTIES LABELS e2e TIMEOUT 600 FIXTURES_REQUIRED mnist)
