# The README's examples (label docs): every `$ command` shown in a code block
# runs against this build and must print the lines shown below it
# (tests/readme/check_readme.py; its conventions are at the top of the
# README's Tests section). Commands run in readme/, never in the source tree.
find_program(MEMPLAN_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(MEMPLAN_PYTHON3 python3)
add_test(NAME readme_examples
         COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/readme/check_readme.py ${MEMPLAN_SOURCE_DIR}/README.md
                 $<TARGET_FILE_DIR:memplan> ${CMAKE_CURRENT_BINARY_DIR}/readme)
# About 20-30 s on two cores (nine GPT-2 124M compiles, two sweeps); the
# sanitizer build needs 4-7 minutes (3.6 min alone, 6.4 beside other work).
if(MEMPLAN_SANITIZE)
  set_tests_properties(readme_examples PROPERTIES LABELS docs TIMEOUT 900)
else()
  set_tests_properties(readme_examples PROPERTIES LABELS docs TIMEOUT 180)
endif()
