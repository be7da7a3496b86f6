# `memplan show`: a plan.json read back (codegen/plan_read.c) is drawn
# exactly as compile drew it (tests/diagram/check_diagrams.py), and anything
# that is not a sound plan is refused with its place named (here).
add_test(NAME show_errors
         COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/show/check_show.py $<TARGET_FILE:memplan>
                 ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml ${CMAKE_CURRENT_BINARY_DIR}/show_errors)
set_tests_properties(show_errors PROPERTIES LABELS errors)
add_test(NAME show_help COMMAND ${memplan_ok} show --help)
set_tests_properties(show_help PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "--format F +the plan graph as svg"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
