# Runtime kernels: gradient checks of the CPU backend against double-precision
# finite differences, in-place (alias-safe) paths, and optimizer steps.
add_executable(test_gradcheck ${MEMPLAN_TEST_DIR}/gradcheck.c)
target_link_libraries(test_gradcheck memplan_rt_cpu m)
target_compile_options(test_gradcheck PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME gradcheck COMMAND test_gradcheck)
set_tests_properties(gradcheck PROPERTIES LABELS unit TIMEOUT 60)
# Stochastic rounding of bf16 parameters' updates (--param-precision,
# planner/basew.h): bit for bit vs a float64 reference, unbiased, keyed.
add_executable(test_bf16_sr ${MEMPLAN_TEST_DIR}/paramprec/test_bf16_sr.c)
target_link_libraries(test_bf16_sr memplan_rt_cpu m)
target_compile_options(test_bf16_sr PRIVATE ${MEMPLAN_WARNINGS})
add_test(NAME bf16_sr COMMAND test_bf16_sr)
set_tests_properties(bf16_sr PROPERTIES LABELS unit TIMEOUT 60)
