# golden.cmake: runs `memplan compile MODEL --dump=PASS` and compares with
# EXPECTED. Regenerate after an intended change with -DUPDATE=1 (see README).
execute_process(COMMAND ${MEMPLAN} compile ${MODEL} --dump=${PASS} OUTPUT_FILE ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "memplan exited ${rc}")
endif()
if(UPDATE)
  configure_file(${OUT} ${EXPECTED} COPYONLY)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${OUT} ${EXPECTED} RESULT_VARIABLE diff)
if(NOT diff EQUAL 0)
  execute_process(COMMAND diff -u ${EXPECTED} ${OUT})
  message(FATAL_ERROR "${PASS} dump of ${MODEL} differs from ${EXPECTED}")
endif()
