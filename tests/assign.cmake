# The offset assigner (planner/assign.c) and `memplan pack`.
add_executable(test_assign ${MEMPLAN_TEST_DIR}/test_assign.c)
target_link_libraries(test_assign memplan_planner)
target_compile_options(test_assign PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME assign_unit COMMAND test_assign ${MEMPLAN_TEST_DIR}/data)
set_tests_properties(assign_unit PROPERTIES LABELS unit)

# memplan pack on the README example: optimal height 12
add_test(NAME pack_example COMMAND ${memplan_ok} pack ${MEMPLAN_TEST_DIR}/data/input.12.csv)
set_tests_properties(pack_example PROPERTIES LABELS unit
  PASS_REGULAR_EXPRESSION "lower bound 12\nheight 12\ngap 0.00 %\n.*optimal yes"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
add_test(NAME pack_reordered_columns COMMAND ${memplan_ok} pack ${MEMPLAN_TEST_DIR}/data/pack_reordered.csv)
set_tests_properties(pack_reordered_columns PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "height 12\n"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
add_test(NAME pack_capacity_fits COMMAND ${memplan_ok} pack ${MEMPLAN_TEST_DIR}/data/input.12.csv --capacity 12)
set_tests_properties(pack_capacity_fits PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "fits: yes"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
# below the lower bound: proven not to fit, exit 1 with the verdict on stderr
# (stdout's report says "fits: no (proven)")
add_test(NAME pack_capacity_below_bound COMMAND sh ${MEMPLAN_TEST_DIR}/scripts/check_status.sh 1
         "input.12.csv does not fit the capacity of 11 bytes \\(proven\\)"
         $<TARGET_FILE:memplan> pack ${MEMPLAN_TEST_DIR}/data/input.12.csv --capacity 11)
set_tests_properties(pack_capacity_below_bound PROPERTIES LABELS unit)

# bad input names the file and line and exits 1
set(memplan_pack_errors
  "missing_column|pack_missing_column.csv:1: error: missing column 'upper'"
  "non_integer|pack_non_integer.csv:3: error: column 'upper': 'x7' is not an integer"
  "upper_le_lower|pack_upper_le_lower.csv:4: error: upper \\(5\\) must be greater than lower \\(5\\)"
  "negative_size|pack_negative_size.csv:2: error: size -4 is negative"
  "duplicate_id|pack_duplicate_id.csv:4: error: duplicate id 'a' \\(first on line 2\\)")
foreach(entry ${memplan_pack_errors})
  string(REPLACE "|" ";" parts "${entry}")
  list(GET parts 0 name)
  list(GET parts 1 expect)
  # one test, the message and the exit status (check_status.sh: PASS_REGULAR_EXPRESSION would ignore the status)
  add_test(NAME pack_error_${name} COMMAND sh ${MEMPLAN_TEST_DIR}/scripts/check_status.sh 1 "${expect}"
                                   $<TARGET_FILE:memplan> pack ${MEMPLAN_TEST_DIR}/data/pack_${name}.csv)
  set_tests_properties(pack_error_${name} PROPERTIES LABELS errors)
endforeach()
add_test(NAME pack_error_unreadable COMMAND sh ${MEMPLAN_TEST_DIR}/scripts/check_status.sh 1
         "no_such_file.csv: error: cannot open" $<TARGET_FILE:memplan> pack ${MEMPLAN_TEST_DIR}/data/no_such_file.csv)
set_tests_properties(pack_error_unreadable PROPERTIES LABELS errors)

# Benchmark (not pass/fail on time): `ctest -L bench`; CI runs with -LE bench.
add_executable(bench_pack ${MEMPLAN_TEST_DIR}/bench/bench_pack.c)
target_link_libraries(bench_pack memplan_planner)
target_compile_options(bench_pack PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME bench_pack COMMAND bench_pack ${MEMPLAN_SOURCE_DIR}/../shared/bench/minimalloc)
set_tests_properties(bench_pack PROPERTIES LABELS bench)
# The large-instance corpus (issue 19): tests/bench/pack_corpus.py regenerates
# it from memplan's own plans (GPT-2 124M, SmolLM2, Llama 3.2 1B, the minis;
# micro-batches unrolled, some with recomputation; 5,000 to 50,000 buffers),
# bench_pack adds generated training steps of 5,000 to 60,000 and prints,
# per instance, the lower bound, the best plain greedy, memplan's height, the
# gaps and the times, then which goals held. Minutes on 2 cores:
# `ctest --test-dir build -L bench -R bench_pack_corpus -V`.
add_test(NAME bench_pack_corpus
         COMMAND sh -c "\"$1\" \"$2\" \"$3\" \"$4\" \"$5\" >/dev/null && \"$6\" --corpus \"$5\" --time-limit 10"
                 bench_pack_corpus python3 ${MEMPLAN_TEST_DIR}/bench/pack_corpus.py $<TARGET_FILE:memplan>
                 ${MEMPLAN_SOURCE_DIR}/models ${CMAKE_CURRENT_BINARY_DIR}/pack_corpus $<TARGET_FILE:bench_pack>)
set_tests_properties(bench_pack_corpus PROPERTIES LABELS bench TIMEOUT 1800)
