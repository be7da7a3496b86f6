# sd-unet (models/sd-unet.yaml): Stable Diffusion 1.5's U-Net, compile-only.
# compile_sd-unet and its golden dumps come from planner.cmake's loop over
# models/. Here: diffusers' parameter count (UNet2DConditionModel of
# runwayml/stable-diffusion-v1-5: 859,520,964) and the plans at the budgets of
# docs/vision-models.md's sd-unet table, every lever free. Recomputation is
# remat.c's big-step ranking (over 48 saved tensors: this step saves 1030):
# before it nothing recomputed here, 16G chose 8 micro-batches of 1 keeping
# everything (14.62 GiB), 8G and 4G did not fit (smallest 8.24 GiB).
# Compile time (memplan's CPU s, /usr/bin/time -f %U+%S, the 2-core machine,
# 2026-12-02): 1.1, 7.1 and 3.1 s at 16G, 8G and 4G before; then 0.85, 0.4,
# 0.4 s once levers.c packed no plan whose liveness bound is over the budget
# before one fits, and planned the "fused loss" twin (no classifier loss to
# fuse here) once (Config.twin); with recomputation, 8G fits and packs the
# configurations over the budget for the report, and a big step's schedules
# over it for "recompute reaches": 2.1 s at 8G, 0.6, 1.3 and 0.7 s at 16G, 8G
# and 4G since those arenas (the report's alone) search offsets for
# FIT_SHOW_TIME_LIMIT (0.05 s; the same arenas here as at 0.5 s). 2026-12-03,
# least of 5 (bench_levers_compile.py): 0.85, 1.73, 0.89 s at 16G, 8G, 4G and
# 0.97, 1.77 s for LoRA 4G, 2G (main: 0.93, 1.80, 0.90, 1.11, 2.68) with
# identical packings copied (plan.c's PackMemo) and no exact search built
# that its work units left cannot pay for. Later that day, least of 5
# alternating with main (d625a3c): 0.62, 1.03, 0.55, 0.52, 0.42 s (main:
# 0.64, 1.45, 0.72, 0.76, 1.34), the plans byte for byte main's: no least
# arena packed for a format before one that fits (LoRA 2G, 8G), the step
# keeping everything built once per graph, the format tries that fit nothing
# freed. At 8G about 0.25 s is the chosen plan's offset search, which lowers
# nothing (docs/vision-models.md).
# Planted once: d1t0's kv projection given a bias (diffusers' to_k, to_v have
# none) printed "parameters   859,522,244" and the 16G test failed on its
# regular expression. Mutants remat_big_chains (the ranking dropping a tensor
# whose inputs it dropped: 8G then chose batch 8 at 2571% extra FLOPs) and
# remat_big_bisect_none (the walk's bisection never finding a schedule within
# budget, so it starts at the one dropping the most) fail sd_unet_budget_8g.
add_test(NAME sd_unet_budget_16g COMMAND ${memplan_ok} compile ${MEMPLAN_SOURCE_DIR}/models/sd-unet.yaml --budget 16G)
set_tests_properties(sd_unet_budget_16g PROPERTIES LABELS e2e
  PASS_REGULAR_EXPRESSION "parameters   859,520,964 .*4 micro-batches of 2 +keep all 16.38 GiB. fits at 15.94 GiB, 0.02% extra FLOPs[^\n]*<- chosen\n +fp32, 4 micro-batches of 2, fused loss keep all 16.38 GiB. fits at 15.94 GiB.*plan verified"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
# 8G: 8 micro-batches of 1, bf16 weights, 8-bit moments, fp32 gradients
# (3.20 GiB) and one sample's activations, 1.75 GiB kept, 1.42 GiB with
# recomputation (0.03% extra FLOPs).
add_test(NAME sd_unet_budget_8g COMMAND ${memplan_ok} compile ${MEMPLAN_SOURCE_DIR}/models/sd-unet.yaml --budget 8G)
set_tests_properties(sd_unet_budget_8g PROPERTIES LABELS e2e
  PASS_REGULAR_EXPRESSION "8 micro-batches of 1, 8bit AdamW state +keep all 8.24 GiB. fits at 7.91 GiB, 0.03% extra FLOPs[^\n]*<- chosen.*param-precision auto: fp32 does not fit. bf16 fits.*plan verified"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
# 4G, full training: bf16 weights, fp32 gradients kept across micro-batches
# and 8-bit moments alone are 6.43 GiB; the smallest budget is 7.56 GiB.
memplan_compile_error(sd_unet_budget_4g MODEL ${MEMPLAN_SOURCE_DIR}/models/sd-unet.yaml
  EXPECT "does not fit the budget " "Smallest budget that fits: --budget 8119809536 \\(7.56 GiB\\)"
  ARGS --budget 4G)
# Fine-tuning with LoRA adapters of rank 4 on the attention projections (what
# diffusers' train_text_to_image_lora.py adapts: to_q, to_k, to_v, to_out),
# the base frozen (docs/fine-tuning.md): 4G fits recomputing (4 micro-batches
# of 2, estimated 5.6% faster than 8 of 1 keeping everything, which main
# chose); at 2G only recomputation fits (main's smallest: 2.01 GiB). 0.52 and
# 0.42 CPU s (2026-12-03; 1.0 and 1.8 before).
set(sd_lora --lora-rank 4 --lora-alpha 4 --lora-targets "*_qkv,*_sap,*_q,*_kv,*_cap")
add_test(NAME sd_unet_budget_lora_4g COMMAND ${memplan_ok} compile ${MEMPLAN_SOURCE_DIR}/models/sd-unet.yaml --budget 4G
                                      ${sd_lora})
set_tests_properties(sd_unet_budget_lora_4g PROPERTIES LABELS e2e
  PASS_REGULAR_EXPRESSION "648,192 trainable.*4 micro-batches of 2 +keep all 4.67 GiB. fits at 3.97 GiB, 0.03% extra FLOPs[^\n]*<- chosen.*plan verified"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
add_test(NAME sd_unet_budget_lora_2g COMMAND ${memplan_ok} compile ${MEMPLAN_SOURCE_DIR}/models/sd-unet.yaml --budget 2G
                                      ${sd_lora})
set_tests_properties(sd_unet_budget_lora_2g PROPERTIES LABELS e2e
  PASS_REGULAR_EXPRESSION "8 micro-batches of 1 +keep all 2.01 GiB. fits at 1.92 GiB, 0.01% extra FLOPs[^\n]*<- chosen.*plan verified"
  FAIL_REGULAR_EXPRESSION "${memplan_exit_fails}")
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
