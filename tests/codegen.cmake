# The codegen library linked directly: the planner's driver on a model, the
# trainers emitted to memory, plan.json round-tripped, the folder writer.
add_executable(test_codegen ${MEMPLAN_TEST_DIR}/test_codegen.c)
target_link_libraries(test_codegen memplan_codegen)
target_compile_options(test_codegen PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME codegen_unit COMMAND test_codegen ${MEMPLAN_SOURCE_DIR}/models ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(codegen_unit PROPERTIES LABELS unit)
