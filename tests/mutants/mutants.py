"""The mutants of tests/mutants/run.py: each plants one realistic bug as an exact, unique text replacement in
one file (text, not line numbers, so unrelated edits leave them valid), and names the CTest tests that must
catch it (fail). A mutant whose search text is missing or not unique is reported stale: update it with the
code. Issue 33: the first four passed the whole relevant suite before it."""

WASTE = ("\n  { char *waste = malloc(48u << 20); /* MUTANT: 48 MiB touched at setup */\n"
         "    if (waste) memset(waste, 1, 48u << 20); __asm__ volatile(\"\" ::\"r\"(waste) : \"memory\"); }")

MUTANTS = [
    dict(name="layernorm_dw_doubled", file="runtime/cpu_norm.c",
         search="        sw[j] += gi[j] * ((xi[j] - mean[i]) * rstd[i]);",
         replace="        sw[j] += 2 * gi[j] * ((xi[j] - mean[i]) * rstd[i]);",
         tests=["gradcheck", "reference_layernorm_lm_sgd"], targets=["test_gradcheck"]),
    dict(name="setup_waste_48mib", file="runtime/memplan_trainer.c",
         search="  r.arena = alloc_arena(m);\n", replace="  r.arena = alloc_arena(m);" + WASTE + "\n",
         tests=["e2e_fused_loss_same_gpt2-mini", "e2e_lean_load_gpt2-mini"]),
    dict(name="load_skips_running_mean", file="runtime/trainer_params.c",
         search="    if (e->end - e->begin != c->bytes) /* a dtype and shape",
         replace="    if (!resume && strstr(e->name, \".running_mean\")) { seen[i] = 1; continue; } /* MUTANT */\n"
                 "    if (e->end - e->begin != c->bytes) /* a dtype and shape",
         tests=["e2e_roundtrip_bn-mlp"]),
    # fp32 has no skipped steps: optimizer_step == step there, so this mutant is equivalent in every fp32
    # run; the fp16 micro-batch resume (a forced overflow skips step 1) is the test that can see it
    dict(name="resume_optimizer_step_from_step", file="runtime/trainer_resume.c",
         search="  rs.ls.applied = meta_int(mt, \"optimizer_step\", p, 0, rs.step);",
         replace="  rs.ls.applied = rs.step - 0 * meta_int(mt, \"optimizer_step\", p, 0, rs.step);",
         tests=["e2e_resume_gpt2-mini-fp16-mb2"]),
    # op backward, one per family
    dict(name="rmsnorm_dw_doubled", file="runtime/cpu_norm.c",
         search="      for (int64_t j = 0; j < nj; j++) sw[j] += gi[j] * (xi[j] * rstd[i]);",
         replace="      for (int64_t j = 0; j < nj; j++) sw[j] += 2 * gi[j] * (xi[j] * rstd[i]);",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    dict(name="gelu_tanh_backward", file="runtime/cpu_elementwise.c",
         search="    float g = dout[i] * (s + 2.0f * xi * du * ((e * s) * s));",
         replace="    float g = dout[i] * (s + xi * du * ((e * s) * s));",
         tests=["gradcheck", "reference_gpt2-mini_adamw"], targets=["test_gradcheck"]),
    dict(name="gelu_erf_backward", file="runtime/cpu_elementwise.c",
         search="    float g = dout[i] * (cdf + xi * pdf);",
         replace="    float g = dout[i] * cdf;",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    dict(name="softmax_backward_no_sum", file="runtime/cpu_norm.c",
         search="      float g = yi[j] * (gi[j] - (float)s);", replace="      float g = yi[j] * gi[j];",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    dict(name="cross_attention_ds_without_D", file="runtime/cpu_cross_attention.c",
         search="        float ds = p * (dot(g, vs, hs) - D) * scale;",
         replace="        float ds = p * dot(g, vs, hs) * scale;",
         tests=["gradcheck", "reference_xattn_mse"], targets=["test_gradcheck"]),
    dict(name="batchnorm_dw_doubled", file="runtime/cpu_norm.c",
         search="    if (A->dw) A->dw[c] = (float)(A->acc_dw ? A->dw[c] + sgx : sgx);",
         replace="    if (A->dw) A->dw[c] = (float)(A->acc_dw ? A->dw[c] + 2 * sgx : 2 * sgx);",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    dict(name="layer_scale_dw_one_sample", file="runtime/cpu_elementwise.c",
         search="      for (int64_t n = 0; n < N; n++) {\n        const float *g = dout + (n * C + c) * S, *xp",
         replace="      for (int64_t n = 0; n < 1; n++) {\n        const float *g = dout + (n * C + c) * S, *xp",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    dict(name="conv2d_im2col_row_square", file="runtime/cpu_conv.c",
         search="    int64_t ch = r / kk, ki = r / c->kw % c->kh, kj = r % c->kw;",
         replace="    int64_t ch = r / kk, ki = r / c->kh % c->kh, kj = r % c->kw;",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    # Swin's shift mask: without it a shifted window attends across the roll's seams
    dict(name="window_attention_no_shift_mask", file="runtime/cpu_window.c",
         search="(region[j] != region[k] ? -100.0f : 0.0f)", replace="(region[j] != region[k] ? 0.0f : 0.0f)",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    dict(name="embedding_backward_halved", file="runtime/cpu_shape.c",
         search="      for (int64_t j = 0; j < nj; j++) row[j] += gi[j];",
         replace="      for (int64_t j = 0; j < nj; j++) row[j] += 0.5f * gi[j];",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    dict(name="groupnorm_dw_doubled", file="runtime/cpu_diffusion.c",
         search="        sw += (double)gc[j] * ((xc[j] - mean[ng]) * rstd[ng]);",
         replace="        sw += 2.0 * gc[j] * ((xc[j] - mean[ng]) * rstd[ng]);",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    # conv_transpose2d's forward is conv2d's dx onto the bias: written over it (acc 0), the bias is lost
    dict(name="conv_transpose2d_bias_overwritten", file="runtime/cpu_conv.c",
         search="W, scratch, N, O, Ho, Wo, C, H, Wd, k, k, s, s, p, p, 1, 1, b != NULL, 0,",
         replace="W, scratch, N, O, Ho, Wo, C, H, Wd, k, k, s, s, p, p, 1, 1, 0, 0,",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    # its dx is conv2d's forward of dout: onto dx's contents when another consumer wrote it first
    dict(name="conv_transpose2d_dx_acc_ignored", file="runtime/cpu_conv.c",
         search="if (dx) conv2d_forward(dx, dout, W, NULL, scratch, N, O, Ho, Wo, C, H, Wd, k, k, s, s, p, p, 1, 1, acc_dx);",
         replace="if (dx) conv2d_forward(dx, dout, W, NULL, scratch, N, O, Ho, Wo, C, H, Wd, k, k, s, s, p, p, 1, 1, 0);",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    # ddpm_noise: the noise the loss targets must be the noise in x_t (and a recompute must draw it again)
    dict(name="ddpm_eps_not_the_noise", file="runtime/cpu_diffusion.c",
         search="      c->eps[i] = e;", replace="      c->eps[i] = -e;",
         tests=["gradcheck", "reference_diffusion_mini"], targets=["test_gradcheck"]),
    # checkpoint fields
    dict(name="ckpt_optimizer_step_off_by_one", file="runtime/trainer_resume.c",
         search="  meta_set(mt, \"optimizer_step\", \"%lld\", (long long)ls->applied);",
         replace="  meta_set(mt, \"optimizer_step\", \"%lld\", (long long)ls->applied + 1);",
         tests=["e2e_resume_mlp"]),
    dict(name="ckpt_data_index_lost", file="runtime/trainer_resume.c",
         search="  meta_set(mt, \"data_index\", \"%lld\", (long long)r->order.index);",
         replace="  meta_set(mt, \"data_index\", \"%lld\", (long long)0);",
         tests=["e2e_resume_gpt2-mini"]),
    # levers
    dict(name="fused_loss_dw_doubled", file="runtime/cpu_loss.c",
         search="  lce_scale(dW, sdW, V * K, scale, acc_dW);",
         replace="  lce_scale(dW, sdW, V * K, 2 * scale, acc_dW);",
         tests=["e2e_fused_loss_same_gpt2-mini"]),
]
# levers (issue 33, one per lever)
MUTANTS += [
    # recompute: a batchnorm replayed for backward in training mode updates its running statistics twice
    dict(name="recompute_in_train_mode", file="codegen/emitc.c",
         search="o->phase == PHASE_RECOMPUTE ? \"RT_MODE_RECOMPUTE\" : \"RT_MODE_TRAIN\",",
         replace="o->phase == PHASE_RECOMPUTE ? \"RT_MODE_TRAIN\" : \"RT_MODE_TRAIN\",",
         tests=["ckpt_exact_bn_mlp"]),
    # recompute: the replayed op reads the first forward's (stale, reused) buffers, not the replayed inputs
    dict(name="recompute_reads_stale_input", file="planner/autodiff.c",
         search="  for (int k = 0; k < oi->nin; k++) f.in[k] = o->in[k] >= 0 ? a->cur[o->in[k]] : -1;",
         replace="  for (int k = 0; k < oi->nin; k++) f.in[k] = o->in[k] >= 0 ? o->in[k] : -1;",
         tests=["ckpt_exact_gpt2_mini"]),
    # precision: bf16 storage rounding toward zero instead of to nearest even
    dict(name="bf16_cast_toward_zero", file="runtime/cpu_precision.c",
         search="  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);                /* nearest even */",
         replace="  return (uint16_t)(x >> 16); /* MUTANT: toward zero */",
         tests=["precision_and_microbatch"]),
    # precision: fp16 loss scaling never unapplied (the gradients stay 65536x)
    dict(name="loss_scale_not_unapplied", file="runtime/memplan_trainer.c",
         search="  if (m->unscale(arena, (float)(1.0 / ls->scale))) {",
         replace="  if (m->unscale(arena, (float)(1.0 / 1.0))) {",
         tests=["precision_and_microbatch"]),
    # micro-batch: the loss gradient not scaled by 1/k (k micro-batches sum, not average)
    dict(name="microbatch_not_averaged", file="runtime/memplan_trainer.c",
         search="    float scale = (float)((m->loss_scaling ? ls.scale : 1.0) / m->accumulation / tr_ranks);",
         replace="    float scale = (float)((m->loss_scaling ? ls.scale : 1.0) / tr_ranks);",
         tests=["precision_and_microbatch"]),
    # micro-batch: the first micro-batch accumulates onto the last step's gradients instead of overwriting them
    dict(name="microbatch_first_accumulates", file="codegen/emitc.c",
         search="accum && param_grad ? \"mb > 0\" : \"0\"",
         replace="accum && param_grad ? \"1\" : \"0\"",
         tests=["precision_and_microbatch"]),
    # 8-bit moments: the first moment's block absmax stored at half its value
    dict(name="adam8bit_m_absmax_halved", file="runtime/cpu_optim.c",
         search="    A->ms[b] = mmax, A->vs[b] = vmax;",
         replace="    A->ms[b] = 0.5f * mmax, A->vs[b] = vmax;",
         tests=["opt_state_accuracy"]),
    # ZeRO: a rank copies the first shard's slice of the reduced gradient into its own shard
    dict(name="zero_shard_offset_lost", file="runtime/trainer_ranks.c",
         search="    if (!accumulate) memcpy(shard, g + lo, (size_t)len * sizeof(float));",
         replace="    if (!accumulate) memcpy(shard, g, (size_t)len * sizeof(float));",
         tests=["mpi_equal"]),
    # param-precision bf16: round to nearest instead of stochastic rounding (small updates vanish)
    dict(name="param_bf16_nearest_not_stochastic", file="runtime/cpu_precision.c",
         search="  return (uint16_t)((x + (uint32_t)(bits & 0xffffu)) >> 16);",
         replace="  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u) + 0 * (uint32_t)bits) >> 16);",
         tests=["bf16_sr", "e2e_paramprec_llama-mini"], targets=["test_bf16_sr"]),
]
# loaders and checkpoint fields (issue 33, one per loader and field)
MUTANTS += [
    dict(name="npy_fortran_order_ignored", file="runtime/trainer_npy.c",
         search="  if (fortran)\n    die(\"%s: fortran_order is True",
         replace="  if (0 && fortran)\n    die(\"%s: fortran_order is True",
         tests=["e2e_npy_mlp"]),
    dict(name="npy_last_dim_unchecked", file="runtime/trainer_npy.c",
         search="  for (int d = 1; ok && d < rank; d++) ok = shape[d] == in->shape[d];",
         replace="  for (int d = 1; ok && d < rank - 1; d++) ok = shape[d] == in->shape[d];",
         tests=["e2e_npy_mlp"]),
    # safetensors: data offsets taken from the file's start, not from the end of the header
    dict(name="safetensors_offset_without_header", file="runtime/trainer_params.c",
         search="      read_at(fd, arena + c->offset, c->bytes, data0 + e->begin, path, c->name);",
         replace="      read_at(fd, arena + c->offset, c->bytes, 0 * data0 + e->begin, path, c->name);",
         tests=["e2e_roundtrip_bn-mlp", "e2e_resume_mlp"]),
    # token files (llm.c shards): the uint16 tokens read big-endian
    dict(name="token_file_big_endian", file="runtime/trainer_data.c",
         search="width == 2 ? (uint32_t)(b[1024 + 2 * i] | b[1024 + 2 * i + 1] << 8)",
         replace="width == 2 ? (uint32_t)(b[1024 + 2 * i] << 8 | b[1024 + 2 * i + 1])",
         tests=["e2e_tokens_file_gpt2-mini"]),
    # 32-bit token files (llm.c's Llama 3 format): the ids cut to their low 16 bits
    dict(name="token_file32_low_half", file="runtime/trainer_data.c",
         search=": get32(b + 1024 + 4 * i);", replace=": (uint16_t)get32(b + 1024 + 4 * i);",
         tests=["bpe_llama3_vocab"]),  # e2e_tokens_file's byte ids fit in 16 bits: it cannot see this
    # lr schedule position: the resumed run restarts the schedule (warmup, cosine) at its own first step
    dict(name="resume_lr_schedule_restarts", file="runtime/memplan_trainer.c",
         search="    double lr = tr_schedule_lr(o.schedule, o.lr, o.warmup, o.final_fraction, step, o.steps);",
         replace="    double lr = tr_schedule_lr(o.schedule, o.lr, o.warmup, o.final_fraction, step - rs.step, "
                 "o.steps);",
         tests=["e2e_resume_gpt2-mini"]),
    # loss scale: the resumed run starts at --loss-scale's initial value, not the checkpoint's (halved) scale
    dict(name="resume_loss_scale_not_restored", file="runtime/trainer_resume.c",
         search="  rs.ls.scale = meta_num(mt, \"loss_scale\", p, FLT_MAX);",
         replace="  rs.ls.scale = meta_num(mt, \"loss_scale\", p, FLT_MAX) > 0 ? o->loss_scale : 0;",
         tests=["e2e_resume_gpt2-mini-fp16-mb2"]),
    # RNG state: the resumed run keeps its own --seed (the default), not the checkpoint's (shuffle, dropout keys)
    dict(name="resume_seed_not_restored", file="runtime/trainer_resume.c",
         search="  TAKE(o->seed_given, seed, seed, long long, \"%lld\", \"--seed (dropout keys, shuffling)\");",
         replace="  (void)seed;",
         tests=["e2e_resume_seed_gpt2-mini"]),
    # running statistics: each saved from the first one's place (a checkpoint's state tensors all alike)
    dict(name="ckpt_running_stats_misplaced", file="runtime/trainer_params.c",
         search="          p->name,  p->offset,           p->bytes,",
         replace="          p->name,  i < m->nparams ? p->offset : m->states[0].offset, p->bytes,",
         tests=["reference_bn_mlp"]),
    # whole-graph recomputation (planner/remat.c): a recomputed copy reused however far its next read, so a
    # U-Net's skip is held from its decoder block's backward to its own instead of recomputed for each
    dict(name="remat_no_second_recompute", file="planner/remat.c",
         search="  if (r->used[t] >= 0 && now - r->used[t] <= r->gap) {",
         replace="  if (r->used[t] >= 0) {",
         tests=["remat_goals_unet"]),
    # --precision auto: a whole-graph schedule's bf16 variant planned in fp32 (its casts charged, nothing lowered)
    dict(name="remat_auto_half_ignored", file="planner/fit.c",
         search="  if (w) return w->half;",
         replace="  if (w) return NULL;",
         tests=["remat_auto_unet"]),
    # the big steps' ranking (remat.c, over 48 saved tensors): a tensor dropped though its producer's inputs
    # were, so every backward read reruns a chain back to the nearest kept tensor (sd-unet at 8G: batch 8
    # chosen at 2571% extra FLOPs instead of 8 micro-batches of 1 at 0.03%)
    dict(name="remat_big_chains", file="planner/remat.c",
         search="    if (!inputs_kept(r, keep, v[i].t)) continue;",
         replace="    if (!inputs_kept(r, keep, v[i].t) && 0) continue;",
         tests=["sd_unet_budget_8g", "remat_unet_mnist_least"]),
    # the walk's bisection over the big steps' schedules (fit.c rc_first) never finding one within budget:
    # the walk starts at the schedule dropping the most, the slowest
    dict(name="remat_big_bisect_none", file="planner/fit.c",
         search="    if (c.lb <= budget) hi = mid;",
         replace="    if (c.lb < 0) hi = mid;",
         tests=["sd_unet_budget_8g"]),
    # remat_refine.c's descent deleting nothing: only the greedy's keep-set schedules (the U-Net at 101.26 MiB
    # back to +47.63% extra FLOPs, the exact optimum +19.05%)
    dict(name="remat_refine_deletes_nothing", file="planner/remat_refine.c",
         search="      if (p <= target)",
         replace="      if (p <= target && p < 0)",
         tests=["remat_exact_gap_unet"]),
    # remat_refine.c's kicks never taken: the descents alone (the U-Net at 50% of keep-all +50.01%, the optimum
    # +38.10%)
    dict(name="remat_refine_no_kicks", file="planner/remat_refine.c",
         search="  if (!any || tried(S, at)) return false;",
         replace="  if (!any || s >= 0 || tried(S, at)) return false;",
         tests=["remat_exact_gap_unet_50", "remat_exact_gap_random3"]),
    # remat_refine.c's second search order (the points by their closure's seconds) not run: random-2 at 14.34 MiB
    # +33.42% of the step's seconds with the other two (+31.37% with it; +36.87% with the first alone)
    dict(name="remat_refine_no_closure", file="planner/remat.c",
         search="  for (RematOrder o = REMAT_ORDER_CLOSURE; closure > 0 && o <= REMAT_ORDER_PER_BYTE; o++) {",
         replace="  for (RematOrder o = REMAT_ORDER_PER_BYTE; closure > 0 && o <= REMAT_ORDER_PER_BYTE; o++) {",
         tests=["remat_exact_gap_random2"]),
    # remat_refine.c's third search order (the points by their seconds per byte) not run: random-2 at 14.76 MiB
    # back to +26.89% of the step's seconds (+20.52% with it; the optimum +19.33%)
    dict(name="remat_refine_no_per_byte", file="planner/remat.c",
         search="  for (RematOrder o = REMAT_ORDER_CLOSURE; closure > 0 && o <= REMAT_ORDER_PER_BYTE; o++) {",
         replace="  for (RematOrder o = REMAT_ORDER_CLOSURE; closure > 0 && o < REMAT_ORDER_PER_BYTE; o++) {",
         tests=["remat_exact_gap_random2_1476"]),
    # remat.c's candidates pruned by liveness peak again (a faster one peaking as low drops a slower one, which
    # may pack into a smaller arena): random-1 at 12.47 MiB +46.54%
    dict(name="remat_candidates_pruned", file="planner/remat.c",
         search="    if (j < 0 || all.v[j].recompute != all.v[i].recompute) all.v[m++] = all.v[i];",
         replace="    if (!m || all.v[i].peak < all.v[m - 1].peak) all.v[m++] = all.v[i];",
         tests=["remat_exact_gap_random1"]),
    # remat.c's schedules never planned beside the DP on a finely cut chain (the chain at 8.75 MiB: +41.04%, the
    # optimum +20.52%)
    dict(name="remat_chain_dp_only", file="planner/remat.c",
         search="  return saved_count(plain) <= REMAT_CHAIN_SAVED ? REMAT_CHAIN : REMAT_NONE;",
         replace="  return saved_count(plain) < 0 ? REMAT_CHAIN : REMAT_NONE;",
         tests=["remat_exact_gap_chain"]),
    # no refinement on chains: the greedy alone (the chain at 5.75 MiB: +197.48%, the optimum +169.26%)
    dict(name="remat_chain_no_refine", file="planner/remat.c",
         search="    int t1 = chain ? REMAT_CHAIN_TRIALS : REMAT_REFINE_TRIALS",
         replace="    int t1 = chain ? 0 : REMAT_REFINE_TRIALS",
         tests=["remat_exact_gap_chain_least"]),
    # the walk packs a schedule whose plan's lower bound (with the library workspace) is over the budget: the
    # same plan, two packings more on the DenseNet-shaped graph at 91% of keep-all (test_plan_bound_skips)
    dict(name="fit_packs_over_plan_bound", file="planner/fit.c",
         search="  if (plan_lower_bound(p) > budget) {",
         replace="  if (plan_lower_bound(p) > budget && 0) {",
         tests=["planner_unit"], targets=["test_planner"]),
    # bench_remat's MIP start (tests/bench/remat_ilp.py from_plan): a value read by a backward op not held
    # into its stage, only for recomputing its users; remat_graphs replays each plan as the start (the U-Net's:
    # "replay: stage 17's backward op reads a value not held")
    dict(name="remat_ilp_start_ignores_reads", file="tests/bench/remat_ilp.py",
         search='            if k in stages[t]["reads"] or any(R[t][j] and k in nodes[j]["deps"]',
         replace='            if False or any(R[t][j] and k in nodes[j]["deps"]',
         tests=["remat_graphs"]),
    # CBC's best found taken for its lower bound where it stopped on its time limit: every ratio "proven"
    # (remat_graphs reads CBC 2.10.8's log ends, bench_remat.CBC_LOGS)
    dict(name="remat_ilp_bound_is_best_found", file="tests/bench/remat_ilp.py",
         search="    return result, objective, float(lb.group(1)) - 1e-3 if lb else None",
         replace="    return result, objective, objective",
         tests=["remat_graphs"]),
    # remat_refine.c's kick trials shared equally among the targets (as before): random-3's least target gets
    # 30 trials, no kick finishes (at 14.77 MiB +54.15% of the step's seconds, the exact optimum +45.00%)
    dict(name="remat_refine_kicks_shared", file="planner/remat_refine.c",
         search="    int left = S.trials, share = left;",
         replace="    int left = S.trials, share = left / (ntargets - t);",
         tests=["remat_exact_gap_random3"]),
    # --head-grad deferred forced where the plan's updates wait (micro-batches, fp16, clipping): kept silently
    dict(name="headgrad_deferred_unapplied_kept", file="planner/driver.c",
         search="  if (rq->fit.head_grad == HG_DEFERRED && strcmp(p->head_grad, \"deferred\")) {",
         replace="  if (0 && rq->fit.head_grad == HG_DEFERRED && strcmp(p->head_grad, \"deferred\")) {",
         tests=["head_grad_plan"]),
    # planner/levers.c's deferred packing: keep-all plans whose liveness bound is over the budget are left
    # unpacked until one fits (then packed for the report) or the least arena is wanted (then packed when their
    # bound is below the least found). Leaving them unpacked after a fit printed "keep all 0 B; recompute reaches
    # 0 B" for 4 micro-batches of 2 at 16G. (Leaving them unpacked when the least is wanted changed no least of
    # any bundled model at --budget 1K, with or without --no-recompute, since recomputation's least arenas are
    # packed: no test can catch it, so it is not a mutant.)
    dict(name="levers_fit_rows_left_unpacked", file="planner/levers.c",
         search="    if (cfg[i].planned && !cfg[i].twin) fit_complete(ar, &cfg[i].r, 0, FIT_SHOW_TIME_LIMIT);",
         replace="    if (cfg[i].planned && !cfg[i].twin) fit_complete(ar, &cfg[i].r, rq->budget + 1, FIT_SHOW_TIME_LIMIT);",
         tests=["sd_unet_budget_16g"]),
    # a configuration whose fused loss is the unfused graph takes another's result: planted by hand, the 16G
    # test's "4 micro-batches of 2, fused loss" row read batch 8's arenas (23.70 GiB)
    dict(name="levers_twin_of_another_batch", file="planner/levers.c",
         search="c->twin = &cfg[i * nv];", replace="c->twin = &cfg[0];",
         tests=["sd_unet_budget_16g"]),
    # the PyTorch front door's RoPE: tables of another rotation (Llama 3.1's scaling) imported as plain theta
    dict(name="torch_import_rope_tables_unchecked", file="tools/torch_import.py",
         search="    if not err <= tol:\n", replace="    if False:\n",
         tests=["torch_import_errors"]),
    # the trainer's --text line: every tokenizer reported as GPT-2's (a Llama 3 tokenizer.json included)
    dict(name="bpe_kind_always_gpt2", file="runtime/memplan_bpe.c",
         search="  return b->pretok == PRE_LLAMA3   ? \"Llama 3 BPE\"",
         replace="  return 0 ? \"Llama 3 BPE\"",
         tests=["bpe_llama3_vocab"]),
    # compile's tokenizer check one id short: a tokenizer whose largest id is V compiles (and --text dies later)
    dict(name="tokenizer_vocab_off_by_one", file="planner/load.c",
         search="    if (nvocab <= num->i) continue;",
         replace="    if (nvocab <= num->i + 1) continue;",
         tests=["error_tokenizer_vocab"]),
    # the report's dims line under micro-batching: the micro-batch printed as the model's batch (B=1 for B=4)
    dict(name="report_dims_micro_as_batch", file="codegen/report.c",
         search="      fprintf(out, \" %s=%lld%s (micro-batch %lld)\", d->name, (long long)p->batch,",
         replace="      fprintf(out, \" %s=%lld%s (micro-batch %lld)\", d->name, (long long)d->value,",
         tests=["report_dims_micro_batch", "report_dims_micro_batch_set"]),
    # the packings' memo (planner/plan.c) matching on the number of items alone: a plan with guard bytes (as
    # many items, larger) gets the unguarded plan's offsets
    dict(name="pack_memo_count_only", file="planner/plan.c",
         search="    if (e->hash == h && e->n == n && e->align == align && e->tl == tl &&\n        !memcmp(e->items, it, sizeof(AsgItem) * (size_t)n)) {",
         replace="    if (e->n == n && e->align == align && e->tl == tl) {",
         tests=["planner_unit"], targets=["test_planner"]),
    # the arena's in-place growth (planner/base.c) leaving the new bytes as the reused block held them
    dict(name="arena_grow_in_place_unzeroed", file="planner/base.c",
         search="    memset((char *)old + oldn, 0, newn - oldn);\n",
         replace="",
         tests=["planner_unit"], targets=["test_planner"]),
    # fit.c's second whole-graph search, under the budget's arena, never run: random-1 at 11.59 MiB back to the
    # greedy's +83.89% of the step's seconds (the optimum +40.49%)
    dict(name="remat_packed_never", file="planner/fit.c",
         search="  if (S.use == REMAT_GRAPH && !S.big && S.missed < best_time) {",
         replace="  if (S.use == REMAT_GRAPH && !S.big && S.missed < 0) {",
         tests=["remat_exact_gap_random1_least"]),
    # that search run only where the plan is over 1.05x a schedule packed over the budget (as before): random-1
    # at 13.59 MiB +30.60% of the step's seconds (1.043x the fastest missed, +25.18%), the optimum +23.88%
    dict(name="remat_packed_gap", file="planner/fit.c",
         search="  if (S.use == REMAT_GRAPH && !S.big && S.missed < best_time) {",
         replace="  if (S.use == REMAT_GRAPH && !S.big && S.missed * 1.05 < best_time) {",
         tests=["remat_exact_gap_random1_1359"]),
    # the packed search without its third order (per byte, 0 trials): random-1 at 13.59 MiB back to +30.60%
    dict(name="remat_packed_no_per_byte", file="planner/remat_refine.h",
         search="REMAT_PACKED_PER_BYTE_TRIALS = 900 };",
         replace="REMAT_PACKED_PER_BYTE_TRIALS = 0 };",
         tests=["remat_exact_gap_random1_1359"]),
    # that search's trials judged by their live bytes, not their packed arena (trial_arena never packing): the
    # same search as the first under the budget, whose schedules do not pack (random-1 at 11.59 MiB +83.89%)
    dict(name="remat_packed_by_liveness", file="planner/fit.c",
         search="  if (*peak > S->target) return;",
         replace="  if (*peak > S->target || 1) return;",
         tests=["remat_exact_gap_random1_least"]),
    # remat.c's refinement under the budget itself (beside the greedy's peaks) not run: random-1 at 12.59 MiB
    # back to +43.99% (the best CBC found +33.15%)
    dict(name="remat_budget_refine_none", file="planner/remat.c",
         search="    if (budget_too) { /* and under the budget alone, beside the greedy's peaks */",
         replace="    if (!budget_too) {",
         tests=["remat_exact_gap_random1_1259"]),
    # the levers' micro-batch graphs (planner/levers.c) never found again: each format's fit builds them anew
    dict(name="lever_graphs_never_hit", file="planner/levers.c",
         search="e->nov == rq->nov && e->mb == mb) {",
         replace="e->nov == rq->nov && e->mb == -mb) {",
         tests=["planner_unit"], targets=["test_planner"]),
    # the fused loss's graph (planner/build.c) sharing its source graph's memo: ad_build hands it the unfused
    # step
    dict(name="graph_memo_shared_by_fused", file="planner/build.c",
         search="  f->memo = NULL; /* g's steps are not f's;",
         replace="  (void)0; /* g's steps are not f's;",
         tests=["planner_unit"], targets=["test_planner"]),
    # ad_build (planner/autodiff.c) handing out the kept step itself: build_step's accumulation lands in
    # every other holder's step
    dict(name="step_memo_no_copy", file="planner/autodiff.c",
         search="  Step *s = ar_alloc(ar, sizeof(Step));\n  *s = **kept;\n  return s;",
         replace="  return (Step *)*kept;",
         tests=["planner_unit"], targets=["test_planner"]),
    # the format levers (planner/driver.c's fit_formats) looking for every format's least arena though a
    # later one fits: llama-mini's frozen weights at 66 MiB pack 10 plans, not 6
    dict(name="formats_least_always", file="planner/driver.c",
         search="    r.no_least = rq->no_least || f < n - 1;\n",
         replace="    r.no_least = rq->no_least;\n",
         tests=["planner_unit"], targets=["test_planner"]),
    # the MILP's liveness rows (tests/bench/remat_ilp.py formulate()) counting a value computed later in the
    # stage as held at an earlier step: a row cutting feasible schedules, so a bound above the optimum;
    # remat_graphs checks each converted plan against every row (the U-Net's: "breaks ... live_24_10_0_1")
    dict(name="remat_ilp_live_row_without_recompute", file="tests/bench/remat_ilp.py",
         search=" + [nv - r(t, i) for nv in need]",
         replace=" + [nv for nv in need]",
         tests=["remat_graphs"]),
    # the checkpointing DP (planner/ckpt.c) without its held outputs: Rotor's model reruns a conv to tape an
    # output it still holds (the chain at 7.75 MiB: +36.40% of the step's seconds, CBC's best +29.46%); the
    # exhaustive search of test_ckpt's random chains finds cheaper schedules than the table
    dict(name="ckpt_no_held", file="planner/ckpt.c",
         search="        if (!T->hcost || !T->c->s[j - 1].out_only) continue;",
         replace="        if (1) continue;",
         tests=["remat_exact_gap_chain_775", "ckpt_unit"], targets=["memplan", "test_ckpt"]),
    # a held output's segment emitted as if the output were not held (planner/ckpt.c emit): the stage's forward
    # is never taped and its backward then reads a value the plan does not hold where the DP says
    dict(name="ckpt_held_emitted_plain", file="planner/ckpt.c",
         search="  if (ch > n) emit(e, s, j - 1, m - units(T, T->c->s[j].x_in), true);",
         replace="  if (ch > n) emit(e, s, j - 1, m - units(T, T->c->s[j].x_in), false);",
         tests=["ckpt_unit"], targets=["test_ckpt"]),
    # chain.c cutting between a conv and the relu written in place over its output: the DP counts the one
    # buffer twice (the chain at 7.75 MiB: +36.40% again)
    dict(name="chain_cut_in_place", file="planner/chain.c",
         search="          tbytes(g, o->out[0]) == tbytes(g, t))\n        cut[i] = false;",
         replace="          tbytes(g, o->out[0]) == tbytes(g, t))\n        cut[i] = true;",
         tests=["remat_exact_gap_chain_775"]),
    # the report taking any plan whose stages are one op each for a whole-graph one (codegen/report.c): a
    # chain's one-op stages would read "whole graph: ..."; codegen_unit's test_report_whole_graph
    dict(name="report_whole_graph_by_shape", file="codegen/report.c",
         search="  if (p->whole_graph) {",
         replace="  if (p->nstages) {",
         tests=["codegen_unit"], targets=["test_codegen"]),
    # the exact DP (tests/bench/remat_chain_exact.py) never freeing k's inputs at their last use: it counts more
    # than the MILP's rows, so its optimum is above CBC's (the chain at 5.75 MiB: no schedule fits)
    dict(name="remat_exact_dp_inputs_never_freed", file="tests/bench/remat_chain_exact.py",
         search="nxt[q2] = (c2, by - bx + (b[k] if keep else 0), held, rmask | bits[k])",
         replace="nxt[q2] = (c2, by + (b[k] if keep else 0), held, rmask | bits[k])",
         tests=["remat_graphs"]),
    # the exact DP without the backward op's row (its temporaries beside the values held): a schedule over the
    # budget ("replay: the schedule peaks at 10220800 bytes in stage 20 ..., over its budget 9172224")
    dict(name="remat_exact_dp_no_op_row", file="tests/bench/remat_chain_exact.py",
         search='            if s["node"] is None and by > cap - s["fixed"]:',
         replace='            if False and by > cap - s["fixed"]:',
         tests=["remat_graphs"]),
    # the exact DP counting a computed node without its scratch (a conv's im2col): the U-Net at 50% of keep-all
    # ("replay: the schedule peaks at 105879040 bytes in stage 26 ..., over its budget 99224448")
    dict(name="remat_exact_dp_no_scratch", file="tests/bench/remat_chain_exact.py",
         search="row = by + work[k] - (b[inplace[k]]",
         replace="row = by + b[k] - (b[inplace[k]]",
         tests=["remat_graphs"]),
    # remat_dag_exact's dominance ignoring cost (a state discarded under a superset that costs more): remat_graphs'
    # optima differ from CBC's
    dict(name="remat_dag_exact_dominance_costlier", file="tests/bench/remat_dag_exact.c",
         search="if (x->c != y->c) return x->c < y->c ? -1 : 1;",
         replace="if (x->c != y->c) return x->c > y->c ? -1 : 1;",
         tests=["remat_graphs"]),
    # its bound counting values already present as computed again: the search cut just above CBC's optimum
    # finds none
    dict(name="remat_dag_exact_bound_counts_present", file="tests/bench/remat_dag_exact.c",
         search="Mask u = a->need & ~p & a->passed, todo = u;",
         replace="Mask u = a->need & a->passed, todo = u;",
         tests=["remat_graphs"]),
    # only the first minimal set of values dropped where a row overflows: the optimum is missed
    dict(name="remat_dag_exact_one_drop_set", file="tests/bench/remat_dag_exact.c",
         search="      drops[ndrops++] = m | (Mask)1 << dc[q];",
         replace="      drops[ndrops++] = m | (Mask)1 << dc[q];\n      return;",
         tests=["remat_graphs"]),
    # the knapsack of spill() counting values neither present nor read before the op: over-cuts
    dict(name="remat_dag_exact_spill_counts_absent", file="tests/bench/remat_dag_exact.c",
         search="Mask later = later_reads[u + 1] & (p | between);",
         replace="Mask later = later_reads[u + 1];",
         tests=["remat_graphs"]),
]
