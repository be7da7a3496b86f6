# Data parallelism on MPI (label mpi; tests/mpi/mpi.py): plans for 2 ranks at
# ZeRO 0, 1 and 2 trained with mpirun against 1 rank at twice the batch (losses
# and weights within 1e-6 relative over 10 steps), and a rank that dies or
# hangs ending the run with a clear error. Only where mpirun and MPI are found;
# not under ASan (tests/run-all says why).
find_program(MEMPLAN_MPIRUN mpirun)
find_package(MPI COMPONENTS C QUIET)
if(MEMPLAN_MPIRUN AND MPI_C_FOUND AND NOT MEMPLAN_SANITIZE)
  set(mpi_py ${MEMPLAN_TEST_DIR}/mpi/mpi.py)
  set(mpi_dir ${CMAKE_CURRENT_BINARY_DIR}/mpi)
  # mlp at B=32 per rank: its runtime compiles once, each plan's trainer.c relinks
  add_test(NAME mpi_build COMMAND ${MEMPLAN_PYTHON3} ${mpi_py} build $<TARGET_FILE:memplan>
                                  ${MEMPLAN_SOURCE_DIR}/models/mlp.yaml B 32 ${mpi_dir})
  set_tests_properties(mpi_build PROPERTIES LABELS mpi TIMEOUT 240 FIXTURES_SETUP mpi_trainers)
  foreach(t equal die hang)
    add_test(NAME mpi_${t} COMMAND ${MEMPLAN_PYTHON3} ${mpi_py} ${t} ${mpi_dir})
    set_tests_properties(mpi_${t} PROPERTIES LABELS mpi TIMEOUT 120 FIXTURES_REQUIRED mpi_trainers RESOURCE_LOCK mpi)
  endforeach()
else()
  message(STATUS "mpirun or MPI not found: the data-parallel tests (label mpi) are skipped")
endif()
