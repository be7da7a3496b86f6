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
    dict(name="batchnorm_dw_doubled", file="runtime/cpu_norm.c",
         search="    if (A->dw) A->dw[c] = (float)(A->acc_dw ? A->dw[c] + sgx : sgx);",
         replace="    if (A->dw) A->dw[c] = (float)(A->acc_dw ? A->dw[c] + 2 * sgx : 2 * sgx);",
         tests=["gradcheck"], targets=["test_gradcheck"]),
    dict(name="embedding_backward_halved", file="runtime/cpu_shape.c",
         search="      for (int64_t j = 0; j < nj; j++) row[j] += gi[j];",
         replace="      for (int64_t j = 0; j < nj; j++) row[j] += 0.5f * gi[j];",
         tests=["gradcheck"], targets=["test_gradcheck"]),
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
