# Models near the loader's size limits must compile and verify: relu_chain
# once took minutes and tens of gigabytes (quadratic in-place name lists;
# it fails that way again if they come back), linear_chain stresses the
# verifier's live set (see the comments in tests/scale/). The timeout is a
# guard, not a performance claim.
foreach(m relu_chain linear_chain)
  add_test(NAME scale_${m} COMMAND ${memplan_ok} compile ${MEMPLAN_TEST_DIR}/scale/${m}.yaml)
  set_tests_properties(scale_${m} PROPERTIES LABELS e2e TIMEOUT 120 PASS_REGULAR_EXPRESSION "plan verified"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
endforeach()
add_test(NAME scale_big_diagram COMMAND sh ${MEMPLAN_TEST_DIR}/scale/check_big_diagram.sh $<TARGET_FILE:memplan>
                                        ${CMAKE_CURRENT_BINARY_DIR}/scale_big_diagram)
set_tests_properties(scale_big_diagram PROPERTIES LABELS e2e TIMEOUT 120)
