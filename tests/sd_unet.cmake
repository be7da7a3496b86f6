# sd-unet (models/sd-unet.yaml): Stable Diffusion 1.5's U-Net, compile-only.
# compile_sd-unet and its golden dumps come from planner.cmake's loop over
# models/. Here: diffusers' parameter count (UNet2DConditionModel of
# runwayml/stable-diffusion-v1-5: 859,520,964) and the plans at the budgets of
# docs/vision-models.md's sd-unet table, every lever free (micro-batches
# included: with --no-micro-batch nothing fits below keep-all's 23.70 GiB, as
# recomputation of this graph's chain stages frees nothing). Measured
# 2026-12-02 on the 2-core machine: 1.1, 7.1 and 3.1 CPU s (16G, 8G, 4G);
# 0.6 and 0.5 CPU s at 8G and 4G since levers.c packs no plan whose liveness
# bound is over the budget before one fits (the time went to offset searches
# of keep-all plans that could not fit). The 16G test also reads a
# configuration that does not fit: its keep-all plan, over the budget, is
# packed only once one configuration fits (left unpacked, it reads 0 B);
# its "fused loss" twin (the U-Net has no classifier loss to fuse) takes the
# same plans, not planned again (levers.c's Config.twin). Measured after
# both: 0.4, 0.4 and 0.85 CPU s at 8G, 4G and 16G.
# Planted once: d1t0's kv projection given a bias (diffusers' to_k, to_v have
# none) printed "parameters   859,522,244" and the 16G test failed on its
# regular expression; sd_unet_budget_8g on "Smallest budget that fits:
# --budget 8850609664".
add_test(NAME sd_unet_budget_16g COMMAND ${memplan_ok} compile ${MEMPLAN_SOURCE_DIR}/models/sd-unet.yaml --budget 16G)
set_tests_properties(sd_unet_budget_16g PROPERTIES LABELS e2e
  PASS_REGULAR_EXPRESSION "parameters   859,520,964 .*4 micro-batches of 2 +keep all 16.38 GiB; recompute reaches 16.38 GiB: does not fit\n +fp32, 4 micro-batches of 2, fused loss keep all 16.38 GiB; recompute reaches 16.38 GiB: does not fit\n.*8 micro-batches of 1 +fits at 14.62 GiB keeping everything[^\n]*<- chosen.*plan verified"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
# 8G and 4G: no plan yet; the smallest budget is 8 micro-batches of 1 with
# bf16 weights and 8-bit moments, fp32 gradients (3.20 GiB) and 1.75 GiB of
# one sample's activations, all kept. At the default --time-limit (0.5 s):
# no configuration's plan is packed unless its liveness bound is below the
# budget or the least arena found so far (docs/compile.md).
foreach(b 8 4)
  memplan_compile_error(sd_unet_budget_${b}g MODEL ${MEMPLAN_SOURCE_DIR}/models/sd-unet.yaml
    EXPECT "does not fit the budget " "Smallest budget that fits: --budget 8850589184 \\(8.24 GiB\\)"
    ARGS --budget ${b}G)
endforeach()
# -o writes the trainer folder at once: plan.svg is a note, not a layout (dot
# took over 10 minutes on its 1679 nodes and 3061 edges before
# codegen/dot.c's DOT_LAYOUT_MAX_EDGES; 0.2 CPU s since)
add_test(NAME sd_unet_output COMMAND ${memplan_ok} compile ${MEMPLAN_SOURCE_DIR}/models/sd-unet.yaml -o
                                     ${CMAKE_CURRENT_BINARY_DIR}/sd_unet_output)
set_tests_properties(sd_unet_output PROPERTIES LABELS e2e TIMEOUT 120
  PASS_REGULAR_EXPRESSION "wrote [^\n]*plan.svg timeline.svg" FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
# PyTorch eager's saved-for-backward bytes of the same U-Net (written in
# torch.nn as diffusers builds it, counted with saved_tensors_hooks on the
# meta device, batch 8) against memplan's keep-all plan
# (tests/bench/sd_unet_saved_bytes.py; docs/vision-models.md). About 2 CPU s
# (10 s wall here). Fails on another parameter count, a meta run that saves
# other storages than a CPU run, or memplan keeping more; skipped (77)
# without torch. Planted once: the torch U-Net's GEGLU width 2 x 2c instead
# of 2 x 4c printed "torch has 785128644 parameters, memplan 859520964".
add_test(NAME sd_unet_saved_bytes
         COMMAND ${MEMPLAN_BENCH_PYTHON3} ${MEMPLAN_TEST_DIR}/bench/sd_unet_saved_bytes.py
                 --memplan $<TARGET_FILE:memplan> --models ${MEMPLAN_SOURCE_DIR}/models
                 --workdir ${CMAKE_CURRENT_BINARY_DIR}/sd_unet_saved_bytes)
set_tests_properties(sd_unet_saved_bytes PROPERTIES LABELS bench TIMEOUT 300 SKIP_RETURN_CODE 77)
