# sd-unet (models/sd-unet.yaml): Stable Diffusion 1.5's U-Net, compile-only.
# compile_sd-unet and its golden dumps come from planner.cmake's loop over
# models/. Here: diffusers' parameter count (UNet2DConditionModel of
# runwayml/stable-diffusion-v1-5: 859,520,964) and the plans at the budgets of
# docs/diffusion-models.md's table, every lever free (micro-batches
# included: with --no-micro-batch nothing fits below keep-all's 23.70 GiB, as
# recomputation of this graph's chain stages frees nothing). Measured
# 2026-12-02 on the 2-core machine: 0.9, 4.5 and 2.1 CPU s (16G, 8G, 4G).
# Planted once: d1t0's kv projection given a bias (diffusers' to_k, to_v have
# none) printed "parameters   859,522,244" and the 16G test failed on its
# regular expression.
add_test(NAME sd_unet_budget_16g COMMAND ${memplan_ok} compile ${MEMPLAN_SOURCE_DIR}/models/sd-unet.yaml --budget 16G)
set_tests_properties(sd_unet_budget_16g PROPERTIES LABELS e2e
  PASS_REGULAR_EXPRESSION "parameters   859,520,964 .*8 micro-batches of 1 +fits at 14.62 GiB keeping everything[^\n]*<- chosen.*plan verified"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
# 8G and 4G: no plan yet; the smallest budget is 8 micro-batches of 1 with
# bf16 weights and 8-bit moments, fp32 gradients (3.20 GiB) and 1.75 GiB of
# one sample's activations, all kept
foreach(b 8G 4G)
  memplan_compile_error(sd_unet_budget_${b} MODEL ${MEMPLAN_SOURCE_DIR}/models/sd-unet.yaml
    EXPECT "does not fit the budget " "Smallest budget that fits: --budget 8850589184 \\(8.24 GiB\\)" ARGS --budget ${b})
endforeach()
