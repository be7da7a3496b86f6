/* test_codegen.c: the planner's driver and the codegen library, linked
 * directly: models/mlp.yaml planned (plan_model), its trainers emitted to
 * memory, plan.json written, read back and written again byte for byte, the
 * levers' outcomes, the YAML parsed once and built at two sizes, and the
 * all-or-nothing folder writer, a convolutional model's op-local scratch
 * under recomputation, and the lr schedule in plan.json and the trainers. Usage: test_codegen MODELS_DIR TMP_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver.h"
#include "emit.h"
#include "plan_read.h"
#include "verify.h"
#include "check.h"

static PlanRequest request(const char *model) {
  return (PlanRequest){.model = model,
                       .fit = {.fuse = true, .align = 256, .time_limit = 0.2, .units = 500, .accumulation = 1}};
}

/* The trainers from the plan alone: every kernel the MLP needs is called. */
static void test_trainers(const Plan *p) {
  Text c = {0}, cu = {0};
  CHECK(emit_trainer(p, &emit_backend_c, &c) == 0);
  CHECK(emit_trainer(p, &emit_backend_cuda, &cu) == 0);
  static const char *const kernels[] = {"linear_forward(", "linear_backward(",       "relu_forward(",
                                        "relu_backward(",  "cross_entropy_forward(", "cross_entropy_backward(",
                                        "sgd_update("};
  for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
    char call[64];
    snprintf(call, sizeof call, "rt_%s", kernels[k]);
    CHECK(c.s && strstr(c.s, call));
    snprintf(call, sizeof call, "rt_cuda_%s", kernels[k]);
    CHECK(cu.s && strstr(cu.s, call));
  }
  CHECK(!strstr(c.s, "rt_adamw_update(")); /* the MLP trains with SGD */
  text_free(&c);
  text_free(&cu);
}

/* A classification model's eval logits, which the trainer reads for accuracy
 * after eval() returns, or a token model's, for --generate: the eval plan ends
 * with the loss reading them, no op after their writer writes any of their
 * bytes, and both trainers' model tables carry their offset and classes (V);
 * -1 for other models. */
static void test_eval_logits(const Plan *p, bool classifier) {
  Text c = {0}, cu = {0};
  CHECK(emit_trainer(p, &emit_backend_c, &c) == 0);
  CHECK(emit_trainer(p, &emit_backend_cuda, &cu) == 0);
  const PlanOp *loss = &p->eval[p->neval - 1];
  CHECK(loss->op == OP_CROSS_ENTROPY && loss->out[0] == p->eval_loss_buf);
  const PlanBuffer *lg = &p->buf[loss->in[0]];
  int writer = -1;
  for (int i = 0; i < p->neval; i++)
    for (int k = 0; k < p->eval[i].nout; k++) {
      int b = p->eval[i].out[k];
      if (b == loss->in[0]) writer = i;
      else if (b >= 0 && writer >= 0) /* written after the logits: disjoint bytes */
        CHECK(p->buf[b].offset + p->buf[b].bytes <= lg->offset || lg->offset + lg->bytes <= p->buf[b].offset);
    }
  CHECK(writer >= 0 && writer < p->neval - 1);
  char want[128];
  if (classifier)
    snprintf(want, sizeof want, ".eval_logits_offset = %lld, .eval_logits_classes = %lld,", (long long)lg->offset,
             (long long)lg->shape.d[lg->shape.rank - 1]);
  else snprintf(want, sizeof want, ".eval_logits_offset = -1, .eval_logits_classes = 0,");
  CHECK(c.s && strstr(c.s, want));
  CHECK(cu.s && strstr(cu.s, want));
  text_free(&c);
  text_free(&cu);
}

/* plan.json read back is the same plan: it verifies and writes the same text. */
static void test_json_round_trip(const Plan *p) {
  Arena ar = {0};
  Text a = {0}, b = {0};
  json_plan(p, &a);
  Plan *q = plan_read(&ar, "plan.json", a.s, a.n);
  CHECK(verify_plan(q) == NULL);
  CHECK(q->arena_bytes == p->arena_bytes && q->nbuf == p->nbuf && q->nsched == p->nsched);
  json_plan(q, &b);
  CHECK(a.n == b.n && !memcmp(a.s, b.s, a.n));
  text_free(&a);
  text_free(&b);
  ar_free(&ar);
}

/* The lr schedule travels: plan.json carries it and round-trips byte for
 * byte, both trainers' model tables hold it, and a plan written before
 * schedules (no such keys) reads as constant. */
static void test_schedule(const Plan *p) {
  Plan s = *p;
  s.opt.schedule = SCHED_COSINE, s.opt.warmup = 100, s.opt.final_fraction = 0.1;
  test_json_round_trip(&s);
  Arena ar = {0};
  Text a = {0}, c = {0}, cu = {0};
  json_plan(&s, &a);
  CHECK(a.s && strstr(a.s, ", \"schedule\": \"cosine\", \"warmup\": 100, \"final_fraction\": 0.1}"));
  Plan *q = plan_read(&ar, "plan.json", a.s, a.n);
  CHECK(q->opt.schedule == SCHED_COSINE && q->opt.warmup == 100 && q->opt.final_fraction == 0.1);
  CHECK(emit_trainer(q, &emit_backend_c, &c) == 0 && emit_trainer(q, &emit_backend_cuda, &cu) == 0);
  const char *want = ".schedule = TR_SCHED_COSINE, .warmup = 100, .final_fraction = 0.1,";
  CHECK(c.s && strstr(c.s, want) && cu.s && strstr(cu.s, want));
  char *k = strstr(a.s, ", \"schedule\"");
  if (k) { /* an old plan: the optimizer object ends after its last hyperparameter */
    char *end = strchr(k, '}');
    memmove(k, end, strlen(end) + 1);
    q = plan_read(&ar, "plan.json", a.s, strlen(a.s));
    CHECK(q->opt.schedule == SCHED_CONSTANT && q->opt.warmup == 0 && q->opt.final_fraction == 0.0);
  }
  text_free(&a);
  text_free(&c);
  text_free(&cu);
  ar_free(&ar);
}

/* Gradient clipping travels: the planner keeps every gradient until the
 * updates (all after backward) and prices that against the plan without
 * clipping; plan.json carries the threshold and the price and round-trips;
 * both trainers sum every gradient's squares and hold the threshold; a plan
 * that fuses its updates cannot clip (the emitter refuses it). */
static void test_clip(const char *yaml, const Plan *fused) {
  Arena ar = {0};
  PlanRequest rq = request(yaml);
  PlanOutcome r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_OK && r.plan);
  if (!r.plan) return;
  const Plan *p = r.plan;
  int last_bwd = -1, first_upd = p->nsched;
  for (int i = 0; i < p->nsched; i++)
    if (p->sched[i].phase == PHASE_UPDATE && i < first_upd) first_upd = i;
    else if (p->sched[i].phase == PHASE_BACKWARD) last_bwd = i;
  CHECK(p->opt.clip_grad_norm == 0.25 && last_bwd < first_upd);
  /* kept gradients cost bytes here: the peak moves past backward's start */
  CHECK(p->noclip_fits && p->noclip_arena > 0 && p->noclip_accumulation == 1);
  CHECK(p->lower_bound_bytes > p->noclip_lower_bound && p->noclip_lower_bound > 0);
  test_json_round_trip(p);
  Text a = {0}, c = {0}, cu = {0}, f = {0};
  json_plan(p, &a);
  CHECK(a.s && strstr(a.s, ", \"clip_grad_norm\": 0.25}") && strstr(a.s, "\"noclip\": {\"fits\": true, "));
  Plan *q = plan_read(&ar, "plan.json", a.s, a.n);
  CHECK(q->opt.clip_grad_norm == 0.25 && q->noclip_fits && q->noclip_arena == p->noclip_arena &&
        q->noclip_lower_bound == p->noclip_lower_bound && q->noclip_accumulation == 1);
  CHECK(emit_trainer(q, &emit_backend_c, &c) == 0 && emit_trainer(q, &emit_backend_cuda, &cu) == 0);
  CHECK(c.s && strstr(c.s, ".clip_grad_norm = 0.25,") && strstr(c.s, "  s += rt_grad_sqnorm(fc1_weight_grad, 4096);"));
  CHECK(cu.s && strstr(cu.s, ".clip_grad_norm = 0.25,") &&
        strstr(cu.s, "  rt_cuda_grad_sqnorm(fc1_weight_grad, 4096);") &&
        strstr(cu.s, "  s = rt_cuda_grad_sqnorm_total();"));
  CHECK(c.s && !strstr(c.s, "each parameter updated as soon as its gradient is complete"));
  Plan bad = *fused; /* fused updates free gradients inside backward */
  bad.opt.clip_grad_norm = 1.0;
  CHECK(emit_trainer(&bad, &emit_backend_c, &f) == -1);
  text_free(&a);
  text_free(&c);
  text_free(&cu);
  text_free(&f);
  ar_free(&ar);
}

/* Fine-tuning travels: plan.json carries the frozen flags and counts and the
 * lora section, and round-trips byte for byte; a plan without them reads as
 * nothing frozen and no adapters. (Planted once: plan_read.c not reading
 * "frozen"; the round trip and the frozen count checks failed.) */
static void test_finetune(const char *path) {
  Arena ar = {0};
  PlanRequest rq = request(path);
  PlanOutcome r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_OK && r.plan);
  if (r.plan) {
    const Plan *p = r.plan;
    test_json_round_trip(p);
    Text a = {0};
    json_plan(p, &a);
    CHECK(a.s && strstr(a.s, "\"lora\": {\"rank\": 4, \"alpha\": 8, \"dropout\": 0.10000000000000001}"));
    Plan *q = plan_read(&ar, "plan.json", a.s, a.n);
    int frozen = 0, adapters = 0;
    for (int b = 0; b < q->nbuf; b++) {
      frozen += q->buf[b].frozen;
      adapters += q->buf[b].role == ROLE_PARAM && strstr(q->buf[b].name, ".lora_") && !q->buf[b].frozen;
    }
    CHECK(q->lora_rank == 4 && q->lora_alpha == 8 && q->lora_dropout == 0.1);
    CHECK(q->frozen_count == 114944 && q->param_count == 121664 && frozen == 16 && adapters == 16);
    char *k = strstr(a.s, "  \"lora\": ");
    if (k) { /* a plan from before fine-tuning */
      memmove(k, strchr(k, '\n') + 1, strlen(strchr(k, '\n') + 1) + 1);
      for (char *f; (f = strstr(a.s, ", \"frozen\": true"));) memmove(f, f + 16, strlen(f + 16) + 1);
      q = plan_read(&ar, "plan.json", a.s, strlen(a.s));
      bool none = true;
      for (int b = 0; b < q->nbuf; b++) none &= !q->buf[b].frozen;
      CHECK(q->lora_rank == 0 && none);
    }
    text_free(&a);
  }
  ar_free(&ar);
}

static void test_plan_model(const char *mlp, const char *models_dir) {
  Arena ar = {0};
  PlanRequest rq = request(mlp);
  PlanOutcome r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_OK && r.plan && r.step && r.graph);
  if (r.plan) {
    const Plan *p = r.plan;
    CHECK(!strcmp(p->model, "mlp"));
    CHECK(p->nlevers == 1 && p->levers[0].chosen && p->levers[0].fits);
    CHECK(p->budget_bytes == 0 && p->compile_seconds > 0 && p->unfused_lower_bound > 0);
    test_trainers(p);
    test_eval_logits(p, true);
    test_json_round_trip(p);
    test_schedule(p);
    char clip[4096];
    snprintf(clip, sizeof clip, "%s/../tests/reference/mlp-clip.yaml", models_dir);
    test_clip(clip, p);
    char ft[4096];
    snprintf(ft, sizeof ft, "%s/../tests/reference/lora-dropout-lm.yaml", models_dir);
    test_finetune(ft);
  }
  ar_free(&ar);

  /* forced micro-batches: the batch of 64 runs as 4 of 16 */
  rq.micro_batch = 16;
  r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_OK && r.plan && r.plan->micro_batch == 16 && r.plan->accumulation_steps == 4);
  CHECK(r.graph && r.graph->dims[0].value == 64); /* the model as asked for */
  if (r.plan) test_eval_logits(r.plan, true);
  ar_free(&ar);

  /* a micro-batch that does not divide the batch is the request's error */
  rq.micro_batch = 7;
  r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_BAD_REQUEST && !r.plan && r.message && strstr(r.message, "must divide the batch B = 64"));
  ar_free(&ar);

  /* one byte fits nothing: every micro-batch size was tried, the least arena named */
  rq.micro_batch = 0;
  rq.budget = 1;
  r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_OVER_BUDGET && !r.plan && r.min_arena > 1);
  int64_t least = r.min_arena;
  ar_free(&ar);

  /* the least arena that fits, buffers packed tightest: the logits still intact */
  rq.budget = least;
  r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_OK && r.plan);
  if (r.plan) test_eval_logits(r.plan, true);
  ar_free(&ar);
}

/* A token model's cross_entropy reads targets shifted from its tokens: no
 * accuracy (the trainer reads labels only of kind TR_IN_LABELS), but its
 * logits for --generate. */
static void test_token_model(const char *yaml) {
  Arena ar = {0};
  PlanRequest rq = request(yaml);
  PlanOutcome r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_OK && r.plan);
  if (r.plan) test_eval_logits(r.plan, true);
  ar_free(&ar);
}

/* plan.json and running state: a plan written before the role existed (no
 * "state" in peak_by_role) reads as 0 there; the verifier refuses a state
 * buffer written as an op's output or hosting a tensor in place. */
static void test_state_json(const Plan *p) {
  Arena ar = {0};
  Text a = {0};
  json_plan(p, &a);
  char *key = strstr(a.s, ", \"state\": ");
  CHECK(key != NULL);
  if (!key) return;
  char *end = key + 2;
  while (*end != '}') end++;
  memmove(key, end, strlen(end) + 1); /* the key dropped */
  Plan *q = plan_read(&ar, "old.json", a.s, strlen(a.s));
  CHECK(q->peak_by_role[ROLE_STATE] == 0 && verify_plan(q) == NULL);
  int st = -1;
  for (int b = 0; b < q->nbuf && st < 0; b++)
    if (q->buf[b].role == ROLE_STATE) st = b;
  CHECK(st >= 0);
  if (st < 0) return;
  for (int i = 0; i < q->nsched; i++)
    if (q->sched[i].op == OP_BATCHNORM2D && q->sched[i].phase == PHASE_FORWARD) {
      int keep = q->sched[i].out[1];
      q->sched[i].out[1] = st;
      const char *e = verify_plan(q);
      CHECK(e && strstr(e, "writes state buffer"));
      q->sched[i].out[1] = keep;
      break;
    }
  q->buf[st].aliases = "h0.bn";
  const char *e = verify_plan(q);
  CHECK(e && strstr(e, "hosts tensors computed in place"));
  text_free(&a);
  ar_free(&ar);
}

/* The report describes a plan's stages as a whole-graph schedule's ops only
 * where the plan says so (stages_whole_graph), not wherever each stage is
 * one op: a chain's stages can be too. The flag round-trips in plan.json. */
static void test_report_whole_graph(const Plan *p) {
  PlanStage st[2] = {{.first_layer = "a", .last_layer = "a", .choice = 'R', .runs = 2},
                     {.first_layer = "b", .last_layer = "b", .choice = 'K', .runs = 1}};
  Plan q = *p;
  q.stages = st, q.nstages = 2;
  for (int wg = 0; wg < 2; wg++) {
    q.whole_graph = wg;
    char *rep = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&rep, &n);
    CHECK(f != NULL);
    if (!f) return;
    report_plan(&q, f);
    fclose(f);
    CHECK(rep && (strstr(rep, "whole graph: 1 of 2 forward ops recomputed") != NULL) == (wg == 1));
    CHECK(rep &&
          (strstr(rep, "  a            .. a            recomputed from its input checkpoint") != NULL) == (wg == 0));
    free(rep);
    test_json_round_trip(&q);
    Arena ar = {0};
    Text a = {0};
    json_plan(&q, &a);
    CHECK(plan_read(&ar, "plan.json", a.s, a.n)->whole_graph == wg);
    text_free(&a);
    ar_free(&ar);
  }
}

/* Running state end to end on tests/reference/bn-mlp.yaml (4 batchnorms):
 * 8 state buffers, persistent (both schedules, below persistent_bytes, never
 * in place), initialized zeros and ones, no gradient or optimizer state of
 * their own; every batchnorm op, forward, recompute (a budget that reruns
 * blocks) and eval alike, reads them in slots 3 and 4; plan.json round-trips
 * them byte for byte, the report's table has them, and the trainers' STATES
 * table lists them. */
static void test_state(const char *bn) {
  Arena ar = {0};
  PlanRequest rq = request(bn);
  rq.budget = 300 << 10;
  PlanOutcome r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_OK && r.plan);
  if (!r.plan) return;
  const Plan *p = r.plan;
  int nstate = 0, recompute = 0, eval = 0;
  for (int b = 0; b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    const char *n = pb->name;
    bool named = strstr(n, ".running_mean") || strstr(n, ".running_var");
    if (pb->role != ROLE_STATE) {
      CHECK(!named); /* no gradient, no optimizer state of a running statistic */
      continue;
    }
    nstate++;
    CHECK(named && pb->sched == SCHED_BOTH && pb->offset + pb->bytes <= p->persistent_bytes && !*pb->aliases);
    CHECK(pb->init.kind == (strstr(n, ".running_mean") ? INIT_ZEROS : INIT_ONES));
  }
  CHECK(nstate == 8 && p->peak_by_role[ROLE_STATE] == 8 * 256);
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < (s ? p->neval : p->nsched); i++) {
      const PlanOp *o = s ? &p->eval[i] : &p->sched[i];
      if (o->op != OP_BATCHNORM2D || o->phase == PHASE_BACKWARD) continue;
      CHECK(o->nin == 5 && p->buf[o->in[3]].role == ROLE_STATE && p->buf[o->in[4]].role == ROLE_STATE);
      CHECK(strstr(p->buf[o->in[3]].name, ".running_mean") && strstr(p->buf[o->in[4]].name, ".running_var"));
      recompute += o->phase == PHASE_RECOMPUTE;
      eval += s;
    }
  CHECK(recompute > 0 && eval == 4);
  test_json_round_trip(p);
  test_state_json(p);
  Text c = {0};
  CHECK(emit_trainer(p, &emit_backend_c, &c) == 0);
  const char *states = c.s ? strstr(c.s, "static const TrParam STATES[]") : NULL, *rm = states;
  if (rm) rm = strstr(c.s, "{\"h0.bn.running_mean\""); /* in STATES, not in PARAMS */
  CHECK(states && rm > states && strstr(c.s, ".nstates = 8"));
  CHECK(c.s && strstr(c.s, "RT_MODE_RECOMPUTE") && strstr(c.s, "RT_MODE_EVAL, 0)"));
  text_free(&c);
  char *rep = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&rep, &n);
  CHECK(f != NULL);
  if (f) {
    report_plan(p, f);
    fclose(f);
    const char *par = rep ? strstr(rep, "\n  param ") : NULL; /* state listed right after the params */
    CHECK(par && strstr(par + 1, "\n") == strstr(par + 1, "\n  state                2.00 KiB\n"));
    free(rep);
  }
  test_report_whole_graph(p);
  ar_free(&ar);
}

/* Builds src with ov, or NULL when a user error was caught. */
static Graph *try_build(ModelSrc *src, const DimOverride *ov, int nov) {
  static jmp_buf jb;
  if (setjmp(jb)) {
    diag_catch(NULL);
    return NULL;
  }
  diag_catch(&jb);
  Graph *g = load_build(src, ov, nov);
  diag_catch(NULL);
  return g;
}

/* The YAML parsed once gives a graph per set of dims; a user error frees
 * the document once (ASan checks), and load_free after it does nothing. */
static void test_parse_once(const char *mlp) {
  Arena ar = {0};
  ModelSrc *src = load_parse(&ar, mlp);
  DimOverride b8 = {"B", 8}, bad = {"BB", 8};
  Graph *g = try_build(src, NULL, 0), *h = try_build(src, &b8, 1);
  CHECK(g && h && g->dims[0].value == 64 && h->dims[0].value == 8 && h->dims[0].overridden);
  CHECK(g && h && g->nt == h->nt && g->nops == h->nops);
  CHECK(try_build(src, &bad, 1) == NULL && strstr(diag_last(), "--set BB: the model has no dim 'BB'"));
  load_free(src);
  load_free(src);
  ar_free(&ar);
}

/* A user error while the levers build the model at a smaller micro-batch
 * (here Q = B - 1 becomes 0) reaches the caller's catcher with the parsed
 * document freed once: ASan's leak check sees the arena freed below. */
static void test_error_in_levers(const char *tmp) {
  char path[4096];
  snprintf(path, sizeof path, "%s/test_codegen_mb.yaml", tmp);
  FILE *f = fopen(path, "wb");
  CHECK(f &&
        fputs("model: m\ndims: {B: 2, Q: B - 1, D: 4}\ninputs:\n  x: {shape: [B, D]}\n"
              "  y: {shape: [B], dtype: i32}\nlayers:\n  - {name: fc, op: linear, input: x, out: D}\n"
              "  - {name: loss, op: cross_entropy, inputs: [fc, y]}\n",
              f) >= 0 &&
        fclose(f) == 0);
  Arena ar = {0};
  PlanRequest rq = request(path);
  rq.budget = 1;
  static jmp_buf jb;
  volatile bool caught = false;
  if (setjmp(jb)) caught = true;
  else {
    diag_catch(&jb);
    plan_model(&ar, &rq);
  }
  diag_catch(NULL);
  CHECK(caught && strstr(diag_last(), "dim Q = 0 must be positive"));
  ar_free(&ar);
}

/* Op-local scratch through the driver and codegen: a convolutional model
 * under a budget that forces recomputation, so forward, recompute and
 * backward each get their own temp buffer; plan.json keeps the "scratch"
 * references byte for byte; the trainers pass the buffer to the kernels. */
static void test_conv_scratch(const char *tmp) {
  char path[4096];
  snprintf(path, sizeof path, "%s/test_codegen_conv.yaml", tmp);
  FILE *f = fopen(path, "wb");
  CHECK(f &&
        fputs("model: m\ndims: {B: 8, C: 16}\ninputs:\n  x: {shape: [B, 3, 32, 32]}\n  y: {shape: [B, C, 32, 32]}\n"
              "layers:\n  - {name: stem, op: conv2d, input: x, out: C, kernel: 3, padding: 1}\n"
              "  - repeat: 6\n    name: h\n    layers:\n      - {name: c, op: conv2d, out: C, kernel: 3, padding: 1}\n"
              "      - {name: a, op: relu}\n      - {name: r, op: add, inputs: [a, $in]}\n"
              "  - {name: loss, op: mse, inputs: [h5.r, y]}\n",
              f) >= 0 &&
        fclose(f) == 0);
  Arena ar = {0};
  PlanRequest rq = request(path);
  rq.budget = 4 << 20;      /* keeping everything takes 7.8 MiB */
  rq.no_micro_batch = true; /* recomputation, not micro-batches (the levers would choose those) */
  PlanOutcome r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_OK && r.plan);
  if (!r.plan) {
    ar_free(&ar);
    return;
  }
  const Plan *p = r.plan;
  int fwd = 0, rec = 0, bwd = 0;
  for (int i = 0; i < p->nsched; i++) {
    const PlanOp *o = &p->sched[i];
    if (o->op != OP_CONV2D) continue;
    CHECK(o->scratch >= 0 && p->buf[o->scratch].role == ROLE_TEMP && p->buf[o->scratch].first == i);
    fwd += o->phase == PHASE_FORWARD, rec += o->phase == PHASE_RECOMPUTE, bwd += o->phase == PHASE_BACKWARD;
  }
  CHECK(p->extra_flops > 0 && fwd == 7 && bwd == 7 && rec > 0);
  test_json_round_trip(p);
  Text c = {0}, cu = {0};
  CHECK(emit_trainer(p, &emit_backend_c, &c) == 0 && emit_trainer(p, &emit_backend_cuda, &cu) == 0);
  CHECK(c.s && strstr(c.s, "rt_conv2d_forward(stem, x, stem_weight, stem_bias, stem_scratch, 8, 3, 32, 32, 16, "));
  CHECK(cu.s && strstr(cu.s, "rt_cuda_conv2d_backward(") && strstr(cu.s, "_bwd_scratch, 8, 16, 32, 32, 16, "));
  text_free(&c);
  text_free(&cu);
  ar_free(&ar);
}

static bool file_is(const char *path, const char *text) {
  char buf[64] = {0};
  FILE *f = fopen(path, "rb");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  return n == strlen(text) && !memcmp(buf, text, n);
}

/* The folder writer: a new folder whole, then an existing one updated in
 * place (its other files stay). */
static void test_folder(const char *tmp) {
  char dir[4096], path[4096 + 16];
  snprintf(dir, sizeof dir, "%s/test_codegen_folder", tmp);
  snprintf(path, sizeof path, "%s/a.txt", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/b.txt", dir);
  remove(path);
  snprintf(path, sizeof path, "%s/keep.txt", dir);
  remove(path);
  rmdir(dir);
  const char *names[] = {"a.txt", "b.txt"};
  Text out[2] = {{0}, {0}};
  text_printf(&out[0], "one");
  text_printf(&out[1], "two");
  CHECK(text_write_folder(dir, names, out, 2) == 0);
  snprintf(path, sizeof path, "%s/a.txt", dir);
  CHECK(file_is(path, "one"));
  snprintf(path, sizeof path, "%s/keep.txt", dir);
  FILE *f = fopen(path, "wb");
  CHECK(f && fputs("kept", f) >= 0 && fclose(f) == 0);
  text_free(&out[1]);
  text_printf(&out[1], "three");
  CHECK(text_write_folder(dir, names, out, 2) == 0);
  snprintf(path, sizeof path, "%s/b.txt", dir);
  CHECK(file_is(path, "three"));
  snprintf(path, sizeof path, "%s/keep.txt", dir);
  CHECK(file_is(path, "kept"));
  text_free(&out[0]);
  text_free(&out[1]);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_codegen MODELS_DIR TMP_DIR\n");
    return 2;
  }
  char mlp[4096];
  snprintf(mlp, sizeof mlp, "%s/mlp.yaml", argv[1]);
  test_plan_model(mlp, argv[1]);
  char bn[4096];
  snprintf(bn, sizeof bn, "%s/../tests/reference/bn-mlp.yaml", argv[1]);
  test_state(bn);
  test_parse_once(mlp);
  char gpt2[4096];
  snprintf(gpt2, sizeof gpt2, "%s/gpt2-mini.yaml", argv[1]);
  test_token_model(gpt2);
  test_error_in_levers(argv[2]);
  test_conv_scratch(argv[2]);
  test_folder(argv[2]);
  return check_summary("test_codegen");
}
