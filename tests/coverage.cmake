# Op coverage (issue #13 item 3): every op of planner/ops.c's table has a
# gradient check, a PyTorch reference case, a CUDA kernel comparison, a row
# of the op table in docs/model-format.md and an error test for its attributes, as far as each applies to it
# (tests/test_op_coverage.c says how each is found and which apply to which op).
add_executable(test_op_coverage ${MEMPLAN_TEST_DIR}/test_op_coverage.c)
target_link_libraries(test_op_coverage memplan_planner)
target_compile_options(test_op_coverage PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME op_coverage COMMAND test_op_coverage ${MEMPLAN_SOURCE_DIR})
set_tests_properties(op_coverage PROPERTIES LABELS unit)
# The check can fail: a fictitious op with one attribute lacks all five items,
# each named with where to add it, and the exit status is 1.
add_test(NAME op_coverage_detects_gaps
         COMMAND sh -c "\"$0\" \"$@\"; echo \"exit status $?\"" $<TARGET_FILE:test_op_coverage>
                 ${MEMPLAN_SOURCE_DIR} --pretend-op pretend_op:width)
set_tests_properties(op_coverage_detects_gaps PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION
  "op 'pretend_op' lacks 5 of 5:\n +1\\. gradient check: [^\n]*rt_pretend_op_forward[^\n]*\n +2\\. PyTorch reference: [^\n]*plan_torch\\.py[^\n]*`op: pretend_op`[^\n]*\n +3\\. CUDA comparison: [^\n]*UT\\(pretend_op_forward\\), UT\\(pretend_op_backward\\)[^\n]*\n +4\\. op table row: [^\n]*`pretend_op`[^\n]*\n +5\\. error test: [^\n]*'width'[^\n]*\n.*op coverage: 1 of [0-9]+ ops lack items.*exit status 1")
