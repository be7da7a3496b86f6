# Fuzzing (label fuzz): libFuzzer harnesses for the YAML front end through
# planning, for `memplan pack`'s CSV reader, for the plan.json reader and
# for the header readers of runtime/memplan_json.c (fuzz_st: --load and
# --resume; fuzz_import: import-hf; fuzz_npy: --npy), built with clang by
# tests/fuzz/run.sh (the main build may use gcc), 10 s each, about 2 minutes
# in all with the builds; skipped
# (77) without clang or libFuzzer. Run longer: see tests/fuzz/run.sh.
add_test(NAME fuzz COMMAND sh ${MEMPLAN_TEST_DIR}/fuzz/run.sh 10 ${CMAKE_CURRENT_BINARY_DIR}/fuzz)
set_tests_properties(fuzz PROPERTIES LABELS fuzz SKIP_RETURN_CODE 77 TIMEOUT 900)

# fuzz_plan's seed plans stay plans memplan reads, verifies and draws
file(GLOB memplan_seed_plans ${MEMPLAN_TEST_DIR}/fuzz/seeds/*.json)
foreach(f ${memplan_seed_plans})
  get_filename_component(n ${f} NAME_WE)
  add_test(NAME fuzz_seed_${n} COMMAND ${memplan_ok} show ${f} --format dot)
  set_tests_properties(fuzz_seed_${n} PROPERTIES LABELS unit TIMEOUT 20 PASS_REGULAR_EXPRESSION "^digraph plan"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
endforeach()

# What the fuzzers found, replayed through the command line: each must end
# cleanly (a plan, or exit 1 with a user error), never crash or hang.
add_test(NAME fuzz_regression_many_names
         COMMAND ${memplan_ok} compile ${MEMPLAN_TEST_DIR}/fuzz/regressions/many_names.yaml)
set_tests_properties(fuzz_regression_many_names PROPERTIES LABELS unit TIMEOUT 20
  PASS_REGULAR_EXPRESSION "plan verified"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
memplan_compile_error(fuzz_regression_empty_after_load MODEL ${MEMPLAN_TEST_DIR}/fuzz/regressions/empty_after_load.yaml
  EXPECT "empty_after_load.yaml:1:1: error: empty file")
set_tests_properties(fuzz_regression_empty_after_load PROPERTIES TIMEOUT 20)
# a size of 2^63 - 1 bytes: assign.c's align_up overflowed (x + a - 1); and
# heights that saturate left the best-fit portfolio with no ordering (index
# -1): sizes summing past 2^62 are now an input error naming the line
# (UBSan, in CI's sanitizer run: qsort of no skipped candidates passed NULL)
memplan_compile_error(fuzz_regression_nothing_skipped MODEL ${MEMPLAN_TEST_DIR}/fuzz/regressions/nothing_skipped.yaml
  EXPECT "does not fit the budget of 1 bytes" "Smallest budget that fits: --budget [0-9]+" ARGS --budget 1)
set_tests_properties(fuzz_regression_nothing_skipped PROPERTIES TIMEOUT 20)
foreach(f pack_size_int64_max pack_saturated_height)
  add_test(NAME fuzz_regression_${f} COMMAND sh ${MEMPLAN_TEST_DIR}/scripts/check_status.sh 1
                                     "${f}.csv:2: error: sizes or lifetimes too large to pack in 64 bits"
                                     $<TARGET_FILE:memplan> pack ${MEMPLAN_TEST_DIR}/fuzz/regressions/${f}.csv)
  set_tests_properties(fuzz_regression_${f} PROPERTIES LABELS errors TIMEOUT 20)
endforeach()

# a leaf search that beat plain best fit after plain best fit had won once:
# the stacked buffers kept plain's offsets beside the leaves' new ones, and
# the packing overlapped (the verifier caught it: internal error). The
# default time limit: the search proves 23 optimal in well under a
# millisecond, and a tiny --timeout made the result depend on the machine's
# speed (a loaded CI machine under ASan hit the wall-clock backstop first).
add_test(NAME fuzz_regression_pack_mixed_solutions
         COMMAND ${memplan_ok} pack ${MEMPLAN_TEST_DIR}/fuzz/regressions/pack_mixed_solutions.csv)
set_tests_properties(fuzz_regression_pack_mixed_solutions PROPERTIES LABELS unit TIMEOUT 20
  PASS_REGULAR_EXPRESSION "height 23\n.*optimal yes"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
