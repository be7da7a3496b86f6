# The codegen library linked directly: the planner's driver on a model, the
# trainers emitted to memory, plan.json round-tripped, the folder writer.
add_executable(test_codegen ${MEMPLAN_TEST_DIR}/test_codegen.c)
target_link_libraries(test_codegen memplan_codegen)
target_compile_options(test_codegen PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME codegen_unit COMMAND test_codegen ${MEMPLAN_SOURCE_DIR}/models ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(codegen_unit PROPERTIES LABELS unit)

# Plans for N ranks (planner/comm.c): collectives, shards, buckets, GPT-2
# 124M's per-rank arena at N = 1, 2, 4, 8 per ZeRO level, --zero auto, the
# verifier's checks, plan.json, the report and the emitted calls.
add_executable(test_ranks ${MEMPLAN_TEST_DIR}/test_ranks.c)
target_link_libraries(test_ranks memplan_codegen)
target_compile_options(test_ranks PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME ranks_unit COMMAND test_ranks ${MEMPLAN_SOURCE_DIR}/models)
set_tests_properties(ranks_unit PROPERTIES LABELS unit)
# --ranks and --zero usage errors: exit 2 with what to write, no output written
foreach(case "zero_auto_one_rank|--zero;auto|--zero auto with one rank has nothing to choose"
             "ranks_zero|--ranks;0|--ranks wants the number of processes, 1 to 65536, got '0'"
             "zero_level|--ranks;2;--zero;3|--zero 3: choose 0 \\(all-reduce\\), 1 \\(ZeRO-1\\), 2 \\(ZeRO-2\\) or auto"
             "fp16|--ranks;2;--precision;fp16|--ranks with --precision fp16: loss scaling's skipped steps")
  # (fp16 with ranks: each option is well formed, the pair is refused: a user error, exit 1)
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts -1 expect)
  list(REMOVE_AT parts 0 -1)
  set(status 2)
  if(name STREQUAL "fp16")
    set(status 1)
  endif()
  memplan_compile_error(ranks_usage_${name} STATUS ${status} MODEL ${MEMPLAN_SOURCE_DIR}/models/mlp.yaml
                        EXPECT "${expect}" ARGS ${parts})
endforeach()
