# The examples of README.md and docs/*.md (label docs): every `$ command`
# shown in a code block runs against this build and must print the lines
# shown below it, and every relative link must name a file of the repository
# (and a heading of it, with #anchor) (tests/readme/check_readme.py; its
# conventions are in docs/testing.md, "The README-examples test"). README.md
# runs first, then docs/ in path order. Commands run in readme/, never in the
# source tree.
# Planted once (2026-12-02): a command added to docs/compile.md,
#   $ build/bin/memplan compile models/mlp.yaml --budget 1K
#   memplan: error: models/mlp.yaml fits
# failed it: "FAIL  docs/compile.md:36: ...", a diff of the shown line against
# "memplan: error: models/mlp.yaml does not fit the budget of 1024 bytes
# (1.00 KiB)." and "[1]", exit status 1; and links planted in docs/packing.md,
# [the assigner](design.md#assigncc) and [the instance](../tests/no-such.csv),
# failed it: "FAIL  docs/packing.md:3: link `design.md#assigncc`:
# docs/design.md has no heading or anchor `#assigncc`" and "link
# `../tests/no-such.csv`: no such file (tests/no-such.csv)"; and one byte of
# docs/img/timeline.svg changed (font-size 17 -> 18) failed it at
# "FAIL  docs/plan-json-and-diagrams.md:123: cmp out/gpt2-124m-3g/timeline.svg
# docs/img/timeline.svg" (the README's images are what the tour's compile writes).
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
