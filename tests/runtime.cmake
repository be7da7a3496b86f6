# Runtime kernels: gradient checks of the CPU backend against double-precision
# finite differences, in-place (alias-safe) paths, and optimizer steps.
add_executable(test_gradcheck ${MEMPLAN_TEST_DIR}/gradcheck.c)
target_link_libraries(test_gradcheck memplan_rt_cpu m)
target_compile_options(test_gradcheck PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME gradcheck COMMAND test_gradcheck)
set_tests_properties(gradcheck PROPERTIES LABELS unit TIMEOUT 60)
