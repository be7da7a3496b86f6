# Diagrams: `memplan compile -o` writes plan.dot, plan.svg and timeline.svg;
# tests/diagram/check_diagrams.py checks them against the plan.json of the
# same run (DOT parsed by Graphviz's own parser in dot_stats, SVG by
# xml.etree): op nodes, collapsed blocks and clusters, legend, one timeline
# rect per buffer with its hover title, and the limit lines.
add_executable(diagram_dot_stats ${MEMPLAN_TEST_DIR}/diagram/dot_stats.c)
target_link_libraries(diagram_dot_stats PkgConfig::GVC)
target_compile_options(diagram_dot_stats PRIVATE ${MEMPLAN_WARNINGS})

find_program(MEMPLAN_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(MEMPLAN_PYTHON3 python3)

function(memplan_diagram_test name model)
  add_test(NAME diagram_${name}
           COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/diagram/check_diagrams.py $<TARGET_FILE:memplan>
                   $<TARGET_FILE:diagram_dot_stats> ${MEMPLAN_SOURCE_DIR}/models/${model}.yaml
                   ${CMAKE_CURRENT_BINARY_DIR}/diagram_${name} ${ARGN})
  set_tests_properties(diagram_${name} PROPERTIES LABELS e2e)
endfunction()

memplan_diagram_test(mlp mlp)                       # small: every op drawn, no clusters
memplan_diagram_test(gpt2_mini gpt2-mini)           # deep enough to start collapsed
memplan_diagram_test(gpt2_mini_expand gpt2-mini --expand)
memplan_diagram_test(gpt2_mini_block gpt2-mini --block h1)
memplan_diagram_test(gpt2_mini_budget gpt2-mini --budget 12M)
memplan_diagram_test(gpt2_124m gpt2-124m)
# recomputation and micro-batches on the big model: dot's mincross drops a
# subgraph here (a Graphviz leak the sanitizer build must not report as ours)
memplan_diagram_test(gpt2_124m_3g gpt2-124m --budget 3G)
# running state (batchnorm2d): the generic checks, then the timeline's band
# and hover name the role and a training forward's tooltip says it updates it
add_test(NAME diagram_bn_mlp
         COMMAND sh -c "\"$0\" \"$@\" && grep -q 'running state, f32' \"$5\"/timeline.svg && grep -q 'updates state h0.bn.running_mean' \"$5\"/plan.svg && echo 'running state drawn'"
                 ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/diagram/check_diagrams.py $<TARGET_FILE:memplan>
                 $<TARGET_FILE:diagram_dot_stats> ${MEMPLAN_TEST_DIR}/reference/bn-mlp.yaml
                 ${CMAKE_CURRENT_BINARY_DIR}/diagram_bn_mlp --budget 300K)
set_tests_properties(diagram_bn_mlp PROPERTIES LABELS e2e)
