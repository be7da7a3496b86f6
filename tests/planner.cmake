# The compiler: unit tests per pass, golden dumps, user errors, verifier
# mutants, and every bundled model compiling to a verified plan.
add_executable(test_planner ${MEMPLAN_TEST_DIR}/test_planner.c)
target_link_libraries(test_planner memplan_planner)
target_compile_options(test_planner PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME planner_unit COMMAND test_planner ${MEMPLAN_SOURCE_DIR}/models)
set_tests_properties(planner_unit PROPERTIES LABELS unit)

# every file in models/ compiles and verifies
file(GLOB memplan_models ${MEMPLAN_SOURCE_DIR}/models/*.yaml)
foreach(m ${memplan_models})
  get_filename_component(name ${m} NAME_WE)
  add_test(NAME compile_${name} COMMAND memplan compile ${m})
  set_tests_properties(compile_${name} PROPERTIES LABELS e2e PASS_REGULAR_EXPRESSION "plan verified")
  foreach(pass graph step live)
    add_test(NAME golden_${name}_${pass}
             COMMAND ${CMAKE_COMMAND} -DMEMPLAN=$<TARGET_FILE:memplan> -DMODEL=${m} -DPASS=${pass}
                     -DEXPECTED=${MEMPLAN_TEST_DIR}/golden/${name}.${pass}.txt
                     -DOUT=${CMAKE_CURRENT_BINARY_DIR}/golden_${name}.${pass}.txt
                     -P ${MEMPLAN_TEST_DIR}/scripts/golden.cmake)
    set_tests_properties(golden_${name}_${pass} PROPERTIES LABELS golden)
  endforeach()
endforeach()

# GPT-2 small without vocabulary padding has the published parameter count
add_test(NAME gpt2_param_count COMMAND memplan compile ${MEMPLAN_SOURCE_DIR}/models/gpt2-124m.yaml --set V=50257)
set_tests_properties(gpt2_param_count PROPERTIES LABELS e2e PASS_REGULAR_EXPRESSION "parameters   124,439,808 ")

# a budget that is too small names the bytes needed
add_test(NAME budget_too_small COMMAND memplan compile ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml --budget 1M)
set_tests_properties(budget_too_small PROPERTIES LABELS errors
  PASS_REGULAR_EXPRESSION "does not fit the budget of 1048576 bytes .*Smallest budget that fits: --budget [0-9]+.*tried recomputation, then every micro-batch size down to 1")

# a budget between the least and the full arena is met by recomputation
add_test(NAME budget_checkpointing COMMAND memplan compile ${MEMPLAN_SOURCE_DIR}/models/gpt2-124m.yaml --budget 6G)
set_tests_properties(budget_checkpointing PROPERTIES LABELS e2e
  PASS_REGULAR_EXPRESSION "checkpointing: [0-9.]+% extra FLOPs.*selective: matrix products kept.*plan verified")
add_test(NAME sweep_gpt2_mini COMMAND memplan sweep ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml)
set_tests_properties(sweep_gpt2_mini PROPERTIES LABELS e2e
  PASS_REGULAR_EXPRESSION "all kept \\(no recomputation\\).*R[KSR]*\n")

# one test per user error class: tests/errors/*.yaml carry their expected message
file(GLOB memplan_error_cases ${MEMPLAN_TEST_DIR}/errors/*.yaml)
foreach(f ${memplan_error_cases})
  get_filename_component(name ${f} NAME_WE)
  add_test(NAME error_${name} COMMAND sh ${MEMPLAN_TEST_DIR}/scripts/check_error.sh $<TARGET_FILE:memplan> ${f})
  set_tests_properties(error_${name} PROPERTIES LABELS errors)
endforeach()
add_test(NAME error_unreadable COMMAND memplan compile ${MEMPLAN_TEST_DIR}/errors/no-such-file.yaml)
set_tests_properties(error_unreadable PROPERTIES LABELS errors WILL_FAIL OFF
  PASS_REGULAR_EXPRESSION "no-such-file.yaml: error: cannot read the model file: No such file or directory")
add_test(NAME error_set_unknown_dim COMMAND sh ${MEMPLAN_TEST_DIR}/scripts/check_error.sh $<TARGET_FILE:memplan>
         ${MEMPLAN_SOURCE_DIR}/models/mlp.yaml --set BB=4)
set_tests_properties(error_set_unknown_dim PROPERTIES LABELS errors
  PASS_REGULAR_EXPRESSION "--set BB: the model has no dim 'BB'; did you mean 'B'\\?")
add_test(NAME error_bad_budget COMMAND memplan compile ${MEMPLAN_SOURCE_DIR}/models/mlp.yaml --budget 8Q)
set_tests_properties(error_bad_budget PROPERTIES LABELS errors
  PASS_REGULAR_EXPRESSION "--budget '8Q' is not a size")
add_test(NAME cli_help COMMAND memplan compile --help)
set_tests_properties(cli_help PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "--budget SIZE")
add_test(NAME cli_version COMMAND memplan --version)
set_tests_properties(cli_version PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "^memplan [0-9]+\\.[0-9]+\\.[0-9]+")

# plan.json is written atomically, records --set, and holds the whole plan
add_test(NAME plan_json COMMAND ${CMAKE_COMMAND} -DMEMPLAN=$<TARGET_FILE:memplan>
         -DMODEL=${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml -DOUT=${CMAKE_CURRENT_BINARY_DIR}/plan_json
         -P ${MEMPLAN_TEST_DIR}/scripts/plan_json.cmake)
set_tests_properties(plan_json PROPERTIES LABELS e2e)

# benchmark (not run by CI: ctest -L bench -V)
add_executable(bench_compile ${MEMPLAN_TEST_DIR}/bench/bench_compile.c)
target_link_libraries(bench_compile memplan_planner)
target_compile_options(bench_compile PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME bench_compile COMMAND bench_compile ${MEMPLAN_SOURCE_DIR}/models)
set_tests_properties(bench_compile PROPERTIES LABELS bench)

# checkpointing: DP against exhaustive search and Revolve, budgets on models
add_executable(test_ckpt ${MEMPLAN_TEST_DIR}/test_ckpt.c)
target_link_libraries(test_ckpt memplan_planner)
target_compile_options(test_ckpt PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME ckpt_unit COMMAND test_ckpt ${MEMPLAN_SOURCE_DIR}/models)
set_tests_properties(ckpt_unit PROPERTIES LABELS unit)
add_executable(bench_ckpt ${MEMPLAN_TEST_DIR}/bench/bench_ckpt.c)
target_link_libraries(bench_ckpt memplan_planner)
target_compile_options(bench_ckpt PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME bench_ckpt COMMAND bench_ckpt ${MEMPLAN_SOURCE_DIR}/models)
set_tests_properties(bench_ckpt PROPERTIES LABELS bench)

# recomputation is exact: bit-identical losses and weights with and without
# (8M recomputes whole stages from checkpoints, 9500K recomputes selectively)
add_test(NAME ckpt_exact_gpt2_mini
         COMMAND sh ${MEMPLAN_TEST_DIR}/scripts/ckpt_exact.sh $<TARGET_FILE:memplan>
                 ${MEMPLAN_SOURCE_DIR}/models/gpt2-mini.yaml ${CMAKE_CURRENT_BINARY_DIR}/ckpt_exact 8M 9500K)
set_tests_properties(ckpt_exact_gpt2_mini PROPERTIES LABELS e2e PASS_REGULAR_EXPRESSION "bit-identical at every budget")

# no injection through names: a model whose layer names are hostile to C
add_test(NAME hostile_names COMMAND sh ${MEMPLAN_TEST_DIR}/hostile/run.sh $<TARGET_FILE:memplan>
         ${CMAKE_CURRENT_BINARY_DIR}/hostile)
set_tests_properties(hostile_names PROPERTIES LABELS e2e PASS_REGULAR_EXPRESSION "hostile names: ok")

# nothing lost: SIGKILL while saving weights leaves the previous file loadable
add_test(NAME kill_during_save COMMAND sh ${MEMPLAN_TEST_DIR}/crash/kill_save.sh $<TARGET_FILE:memplan>
         ${CMAKE_CURRENT_BINARY_DIR}/kill_save)
set_tests_properties(kill_during_save PROPERTIES LABELS e2e TIMEOUT 300
  PASS_REGULAR_EXPRESSION "stayed whole and loadable every time")

# guard mode: canaries after every buffer catch a planted off-by-one write
add_test(NAME guard_mode COMMAND sh ${MEMPLAN_TEST_DIR}/crash/guard.sh $<TARGET_FILE:memplan>
         ${CMAKE_CURRENT_BINARY_DIR}/guard)
set_tests_properties(guard_mode PROPERTIES LABELS e2e TIMEOUT 300 PASS_REGULAR_EXPRESSION "guard mode: ok")
