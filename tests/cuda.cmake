# CUDA backend (runtime/cuda): the comparison program of tests/gpu, built two
# ways from one source.
#
# cuda_refs (unit, runs anywhere): the CPU backend against the double
#   references of tests/gpu/ref.c, with the tolerances the GPU run uses, so
#   the references are known good before a GPU session relies on them.
# cuda_kernels (unit, gpu): links memplan_rt_cuda (so the CUDA library is
#   compiled and linked in every build that has nvcc); without a GPU it exits
#   77 and CTest reports it skipped; with one it checks every CUDA kernel
#   against the same references. tests/gpu/run.sh builds the same program
#   with nvcc alone on a GPU machine.
set(MEMPLAN_GPU_TEST_DIR ${MEMPLAN_TEST_DIR}/gpu)

# The optimizer references replay cpu.c's float operations; no contraction
# into fused multiply-adds, whatever the compiler's default.
set_source_files_properties(${MEMPLAN_GPU_TEST_DIR}/ref.c PROPERTIES COMPILE_OPTIONS
                            -ffp-contract=off)

add_executable(test_cuda_refs ${MEMPLAN_GPU_TEST_DIR}/test_cuda_kernels.c
                              ${MEMPLAN_GPU_TEST_DIR}/ref.c)
target_compile_definitions(test_cuda_refs PRIVATE TEST_CPU_BACKEND)
target_compile_options(test_cuda_refs PRIVATE ${MEMPLAN_WARNINGS})
target_link_libraries(test_cuda_refs memplan_rt_cpu m)
add_test(NAME cuda_refs COMMAND test_cuda_refs)
set_tests_properties(cuda_refs PROPERTIES LABELS unit TIMEOUT 120)

if(TARGET memplan_rt_cuda)
  add_executable(test_cuda_kernels ${MEMPLAN_GPU_TEST_DIR}/test_cuda_kernels.c
                                   ${MEMPLAN_GPU_TEST_DIR}/ref.c)
  target_compile_options(test_cuda_kernels PRIVATE ${MEMPLAN_WARNINGS})
  target_link_libraries(test_cuda_kernels memplan_rt_cuda m)
  add_test(NAME cuda_kernels COMMAND test_cuda_kernels)
  set_tests_properties(cuda_kernels PROPERTIES LABELS "unit;gpu" TIMEOUT 300
                                               SKIP_RETURN_CODE 77)
  if(MEMPLAN_SANITIZE)
    # ASan's shadow gap blocks the CUDA driver's mappings; the CUDA runtime
    # keeps allocations until exit, which LeakSanitizer would report.
    set_tests_properties(cuda_kernels PROPERTIES ENVIRONMENT
                         "ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0")
  endif()
endif()
