/* driver.c: the planner's passes in order, for `memplan compile`. */
#include "driver.h"

#include <string.h>

#include "build.h"
#include "decode.h"
#include "levers.h"
#include "plan_build.h"
#include "verify.h"

/* --opt-state: a format given is fitted as asked (AdamW only); auto fits
 * fp32, bf16 and 8bit in that order and takes the first with any
 * configuration that fits (the levers then choosing among that format's
 * configurations by estimated time): lower precision changes the numbers,
 * so it is the lever pulled last, only when nothing fits without it. What
 * auto saw goes to the report. *chosen: rq with the format fitted; *g: the
 * graph of the plan returned. */
static FitResult fit_opt_state(Arena *ar, ModelSrc *src, const PlanRequest *rq, PlanRequest *chosen, Graph **g,
                               const char **error) {
  OptPrec want = rq->fit.opt_state;
  *chosen = *rq;
  if ((*g)->opt.kind != OPT_ADAMW) {
    if (want == OPTS_BF16 || want == OPTS_8BIT) {
      *error = ar_printf(ar,
                         "--opt-state %s stores AdamW's moments, and %s trains with SGD (its momentum stays "
                         "fp32); leave out --opt-state or use type: adamw",
                         optprec_name(want), rq->model);
      return (FitResult){0};
    }
    want = OPTS_FP32;
  }
  if (rq->fit.ranks >= 1) { /* sharding (comm.c) splits fp32 moments; coded blocks are not split */
    if (want == OPTS_BF16 || want == OPTS_8BIT) {
      *error = ar_printf(ar,
                         "--opt-state %s with --ranks/--zero: data-parallel plans keep AdamW's moments in fp32 "
                         "(ZeRO-1 and -2 shard them instead); leave out --opt-state",
                         optprec_name(want));
      return (FitResult){0};
    }
    want = OPTS_FP32;
  }
  if (want != OPTS_AUTO) {
    chosen->fit.opt_state = want;
    return levers_fit(ar, src, chosen, g, error);
  }
  Graph *g0 = *g;
  FitResult best = {0};
  int64_t least = 0;
  const char *tried = "";
  for (OptPrec f = OPTS_FP32; f <= OPTS_8BIT; f++) {
    PlanRequest r = *rq;
    r.fit.opt_state = f;
    r.no_least = rq->no_least || f < OPTS_8BIT; /* 8bit's least arena is the least of the three */
    Graph *gf = g0;
    FitResult x = levers_fit(ar, src, &r, &gf, error);
    if (*error) return x;
    const Plan *p = x.plan;
    if (!least || (x.min_arena && x.min_arena < least)) least = x.min_arena;
    if (!p) tried = ar_printf(ar, "%s%s%s does not fit", tried, *tried ? "; " : "", optprec_name(f));
    else if (p->extra_flops || p->accumulation_steps > 1)
      tried = ar_printf(ar, "%s%s%s fits with %.2f%% extra FLOPs%s", tried, *tried ? "; " : "", optprec_name(f),
                        100.0 * (double)p->extra_flops / (double)p->step_flops,
                        p->accumulation_steps > 1 ? ar_printf(ar, ", %d micro-batches", p->accumulation_steps) : "");
    else tried = ar_printf(ar, "%s%s%s fits keeping everything", tried, *tried ? "; " : "", optprec_name(f));
    if (p) {
      best = x;
      *chosen = r;
      *g = gf;
      break;
    }
  }
  if (!best.plan) best.min_arena = least;
  else if (strcmp(best.plan->opt_state, "fp32")) best.plan->opt_state_tried = tried; /* a format lowered: why */
  return best;
}

typedef FitResult FitFn(Arena *ar, ModelSrc *src, const PlanRequest *rq, PlanRequest *chosen, Graph **g,
                        const char **error);

/* The auto loop of a lever that changes the numbers (--base-weights,
 * --param-precision) or the FLOPs (--head-grad): its formats 0 .. n-1 in
 * order, each set by set() and the levers inside it fitted by inner, the
 * first that fits taken (*chosen, *g: inner's). *tried: what auto saw, for
 * the report; NULL when format 0 fits. None fits: the least arena of all.
 * A format's least arena is read only when none fits, so formats before the
 * last are fitted without looking for it (PlanRequest.no_least: nothing
 * over the budget packed for it), and fitted again for it only when the
 * last does not fit either (sd-unet's LoRA compile at 2G packed the least
 * arenas of its fp32, bf16 and int8 base weights before nf4 fit). */
static FitResult fit_formats(Arena *ar, ModelSrc *src, const PlanRequest *rq, PlanRequest *chosen, Graph **g,
                             const char **error, int n, void (*set)(PlanRequest *, int), const char *(*name)(int),
                             FitFn *inner, const char **tried) {
  PlanRequest r = *rq;
  Graph *g0 = *g;
  int64_t least = 0;
  const char *seen = "";
  *tried = NULL;
  for (int f = 0; f < n; f++) {
    set(&r, f);
    r.no_least = rq->no_least || f < n - 1;
    Graph *gf = g0;
    PlanRequest rc;
    FitResult x = inner(ar, src, &r, &rc, &gf, error);
    if (*error) return x;
    if (!least || (x.min_arena && x.min_arena < least)) least = x.min_arena;
    seen = ar_printf(ar, "%s%s%s %s", seen, *seen ? "; " : "", name(f), x.plan ? "fits" : "does not fit");
    if (x.plan) {
      *chosen = rc, *g = gf;
      if (f) *tried = seen;
      return x;
    }
  }
  for (int f = 0; f < n - 1 && !rq->no_least; f++) { /* none fits: the least arenas skipped above */
    set(&r, f);
    r.no_least = false;
    Graph *gf = g0;
    PlanRequest rc;
    FitResult x = inner(ar, src, &r, &rc, &gf, error);
    if (*error) return x;
    if (!least || (x.min_arena && x.min_arena < least)) least = x.min_arena;
  }
  return (FitResult){.min_arena = least};
}

static void set_base(PlanRequest *r, int f) { r->fit.base_weights = (BaseFmt)f; }
static const char *base_name(int f) { return basew_name((BaseFmt)f); }
static void set_params(PlanRequest *r, int f) { r->fit.param_prec = (ParamPrec)f; }
static const char *params_name(int f) { return paramprec_name((ParamPrec)f); }
static void set_head(PlanRequest *r, int f) { r->fit.head_grad = (HeadGrad)f; }
static const char *head_name(int f) { return headgrad_name((HeadGrad)f); }

/* --base-weights: a format given is fitted as asked (frozen weights only);
 * auto fits fp32, bf16, int8 and nf4 in that order (each with --opt-state's
 * own choice) and takes the first that fits: like the moments' format it
 * changes the numbers, so it is pulled only when nothing fits without it,
 * in any of the moments' formats. */
static FitResult fit_base(Arena *ar, ModelSrc *src, const PlanRequest *rq, PlanRequest *chosen, Graph **g,
                          const char **error) {
  BaseFmt want = rq->fit.base_weights;
  PlanRequest r = *rq;
  if (!basew_any(*g)) {
    if (want != BW_AUTO && want != BW_FP32) {
      *error = ar_printf(ar,
                         "--base-weights %s: %s has no frozen weight, and only frozen weights can be stored as "
                         "%s; freeze them (trainable: false, freeze: or --freeze) or use --precision for "
                         "activations",
                         basew_name(want), rq->model, basew_name(want));
      return (FitResult){0};
    }
    want = BW_FP32;
  }
  if (want != BW_AUTO) {
    r.fit.base_weights = want;
    return fit_opt_state(ar, src, &r, chosen, g, error);
  }
  const char *tried;
  FitResult x = fit_formats(ar, src, &r, chosen, g, error, BW_NF4 + 1, set_base, base_name, fit_opt_state, &tried);
  if (x.plan) x.plan->base_weights_tried = tried; /* a format lowered: why */
  return x;
}

/* --param-precision: bf16 given is fitted as asked (trainable weights of at
 * least BW_PARAM_MIN elements, one process); auto fits fp32 and then bf16,
 * each with --base-weights' and --opt-state's own choice, and takes the
 * first that fits: the last lever pulled, only when nothing fits at fp32 in
 * any format of the frozen weights and the moments. */
static FitResult fit_params(Arena *ar, ModelSrc *src, const PlanRequest *rq, PlanRequest *chosen, Graph **g,
                            const char **error) {
  ParamPrec want = rq->fit.param_prec;
  PlanRequest r = *rq;
  if (!paramprec_any(*g) || rq->fit.ranks >= 1) {
    if (want == PP_BF16) {
      *error = rq->fit.ranks >= 1 ? "--param-precision bf16 with --ranks/--zero: data-parallel plans keep "
                                    "parameters in fp32; leave out --param-precision"
                                  : ar_printf(ar,
                                              "--param-precision bf16: %s has no trainable weight of %d "
                                              "elements or more (smaller ones stay fp32); leave out "
                                              "--param-precision",
                                              rq->model, BW_PARAM_MIN);
      return (FitResult){0};
    }
    want = PP_FP32;
  }
  if (want != PP_AUTO) {
    r.fit.param_prec = want;
    return fit_base(ar, src, &r, chosen, g, error);
  }
  const char *tried;
  FitResult x = fit_formats(ar, src, &r, chosen, g, error, PP_BF16 + 1, set_params, params_name, fit_base, &tried);
  if (x.plan) x.plan->param_precision_tried = tried;
  return x;
}

/* --head-grad: deferred given is planned as asked (headgrad.h: a step it
 * does not apply to is unchanged); auto plans the tied classifier's gradient
 * kept, with every format's own auto, and defers it only when nothing fits
 * so: the outermost lever, pulled last, so that a plan that fits without it
 * stays as it was. Deferral changes no number, only FLOPs (a recompute). */
static FitResult fit_heads(Arena *ar, ModelSrc *src, const PlanRequest *rq, PlanRequest *chosen, Graph **g,
                           const char **error) {
  PlanRequest r = *rq;
  bool tied = rq->fit.loss_chunk != LOSS_UNFUSED && rq->fit.ranks < 1 && headgrad_tied(ar, *g);
  if (rq->fit.head_grad == HG_DEFERRED && !tied) {
    *error = ar_printf(ar,
                       "--head-grad deferred: %s has no fused classifier loss whose weight another layer shares "
                       "(a head tied to the embedding: weight: emb.weight)%s; leave out --head-grad",
                       rq->model,
                       rq->fit.ranks >= 1                   ? ", or plans for --ranks/--zero"
                       : rq->fit.loss_chunk == LOSS_UNFUSED ? " with --fused-loss off"
                                                            : "");
    return (FitResult){0};
  }
  if (rq->fit.head_grad != HG_AUTO || !tied) {
    if (rq->fit.head_grad == HG_AUTO) r.fit.head_grad = HG_KEPT;
    return fit_params(ar, src, &r, chosen, g, error);
  }
  const char *tried;
  FitResult x = fit_formats(ar, src, &r, chosen, g, error, HG_DEFERRED + 1, set_head, head_name, fit_params, &tried);
  if (x.plan) x.plan->head_grad_tried = tried;
  return x;
}

PlanOutcome plan_model(Arena *ar, const PlanRequest *rq) {
  PlanOutcome out = {0};
  double t0 = mp_now();
  /* load: the YAML is read and parsed once; the levers build it again at
   * each micro-batch size they try */
  ModelSrc *src = load_parse(ar, rq->model);
  load_set_tune(src, &rq->tune);
  Graph *g = load_build(src, rq->ov, rq->nov);
  out.graph = g;
  if (rq->graph_only) {
    load_free(src);
    return out;
  }
  /* every fit below shares one memo of packings: the levers' tries pack the same schedule more than once */
  PlanRequest withm = *rq;
  if (!withm.fit.memo) withm.fit.memo = pack_memo_new(ar);
  if (!withm.graphs) withm.graphs = levers_graphs_new(ar); /* (a test gives its own, to read) */
  rq = &withm;
  /* generation's caches sit above the arena: the levers fit the arena into what they leave of the budget */
  int64_t kv = rq->gen_context ? decode_graph_bytes(g, rq->gen_context) + rq->fit.align : 0;
  PlanRequest lessk = *rq;
  if (kv && rq->budget) {
    if (rq->budget <= kv) {
      char a[32], b[32];
      out.status = PLAN_BAD_REQUEST;
      out.message = ar_printf(ar,
                              "--gen-context %lld: the KV cache alone (%s) fills the budget of %s: give a "
                              "smaller --gen-context or a larger --budget",
                              (long long)rq->gen_context, mp_fmt_bytes(a, sizeof a, kv - rq->fit.align),
                              mp_fmt_bytes(b, sizeof b, rq->budget));
      load_free(src);
      return out;
    }
    lessk.budget -= kv, rq = &lessk;
  }
  /* levers: keep everything, recompute, micro-batches (one fit each, the
   * checkpointing DP solved once per fit); g becomes the chosen plan's graph */
  PlanRequest chosen = *rq;
  FitResult fit = {0};
  int64_t zero_arena[3] = {0, 0, 0};
  if (rq->fit.ranks >= 1 && rq->fit.precision == PREC_FP16) {
    out.message =
        "--ranks with --precision fp16: loss scaling's skipped steps are decided per rank, so the "
        "ranks would diverge; use bf16 or fp32";
  } else if (rq->fit.ranks >= 1 && g->opt.clip_grad_norm > 0) {
    out.message =
        "--ranks with clip_grad_norm: the norm over sharded gradients is not planned yet; remove "
        "clip_grad_norm from the optimizer or plan one process";
  } else if ((rq->fit.loss_chunk == LOSS_FUSED || rq->fit.loss_chunk > 0) && !gb_fuse_loss(ar, g, 0)) {
    out.message = ar_printf(ar,
                            "--fused-loss: %s has no classifier + cross_entropy pair to fuse (its loss must be a "
                            "cross_entropy of a linear layer's output that nothing else reads); drop --fused-loss "
                            "or give --fused-loss off",
                            g->model);
  } else if (rq->fit.ranks >= 1 && rq->fit.zero < 0) {
    /* --zero auto: each level shards more (and adds an all_gather per
     * parameter); the least that fits keeping everything in one pass, else
     * the one whose plan recomputes least (no micro-batches before more
     * FLOPs, the less sharding on a tie) */
    PlanRequest r = *rq;
    FitResult best = {0};
    Graph *bg = g;
    int bz = -1;
    for (int z = 0; z <= 2 && !out.message; z++) {
      r.fit.zero = z;
      Graph *gz = g;
      PlanRequest rc;
      FitResult f = fit_heads(ar, src, &r, &rc, &gz, &out.message);
      if (out.message) break;
      zero_arena[z] = f.plan ? f.plan->arena_bytes : f.min_arena;
      if (!f.plan) {
        if (bz < 0) best = f; /* none fits yet: keep the least min_arena for the error */
        else continue;
        best.min_arena = f.min_arena < best.min_arena || !best.min_arena ? f.min_arena : best.min_arena;
        continue;
      }
      bool better =
          bz < 0 || f.plan->accumulation_steps < best.plan->accumulation_steps ||
          (f.plan->accumulation_steps == best.plan->accumulation_steps && f.plan->extra_flops < best.plan->extra_flops);
      if (better) best = f, bg = gz, bz = z, chosen = rc;
      if (!f.plan->extra_flops && f.plan->accumulation_steps == 1) break; /* keeps everything: done */
    }
    fit = best, g = bg;
  } else fit = fit_heads(ar, src, rq, &chosen, &g, &out.message);
  /* gradient clipping's price: the same request planned without it (the
   * updates fused into backward again); about the compile time of the first.
   * None under --no-fuse: that plan keeps every gradient anyway */
  FitResult nc = {0};
  if (!out.message && g->opt.clip_grad_norm > 0 && rq->fit.fuse) {
    PlanRequest q = *rq, qc;
    q.fit.ignore_clip = true;
    if (q.fit.zero < 0) q.fit.zero = chosen.fit.zero < 0 ? 0 : chosen.fit.zero;
    Graph *g0 = load_build(src, rq->ov, rq->nov);
    const char *msg = NULL;
    q.fit.base_weights = chosen.fit.base_weights;
    q.fit.param_prec = chosen.fit.param_prec;
    q.fit.head_grad = chosen.fit.head_grad;
    nc = fit_heads(ar, src, &q, &qc, &g0, &msg);
    out.noclip_min_arena = nc.plan ? nc.plan->arena_bytes : nc.min_arena;
    out.noclip_fits = nc.plan != NULL;
  }
  load_free(src);
  if (out.message) {
    out.status = PLAN_BAD_REQUEST;
    return out;
  }
  if (!fit.plan) {
    out.status = PLAN_OVER_BUDGET;
    out.min_arena = fit.min_arena ? fit.min_arena + kv : 0; /* the smallest budget with the caches */
    return out;
  }
  /* the plan's last fields: the budget, what fusing the updates saved, the
   * time the passes above took (verification, below, is not counted) */
  Plan *p = fit.plan;
  if (rq->fit.head_grad == HG_DEFERRED && strcmp(p->head_grad, "deferred")) {
    /* deferral needs updates fused into backward (headgrad.h): a forced
     * --head-grad deferred the plan could not apply is refused, not kept */
    out.status = PLAN_BAD_REQUEST;
    out.message =
        ar_printf(ar,
                  "--head-grad deferred: the plan that fits %s %s, so its updates wait for the whole backward and "
                  "the tied classifier's gradient cannot be deferred; %s, or leave out --head-grad",
                  rq->model,
                  p->accumulation_steps > 1   ? ar_printf(ar, "runs %d micro-batches", p->accumulation_steps)
                  : p->loss_scaling           ? "scales the loss (--precision fp16)"
                  : g->opt.clip_grad_norm > 0 ? "clips the gradient norm (clip_grad_norm)"
                                              : "does not fuse the updates (--no-fuse)",
                  p->accumulation_steps > 1
                      ? "plan the batch in one pass (--no-micro-batch, no --micro-batch, and the budget that needs)"
                  : p->loss_scaling           ? "give --precision bf16 or fp32"
                  : g->opt.clip_grad_norm > 0 ? "remove clip_grad_norm from the optimizer"
                                              : "plan it without --no-fuse");
    return out;
  }
  p->budget_bytes = rq->budget ? rq->budget + (rq == &lessk ? kv : 0) : 0;
  /* with collectives, updates run per bucket: the unfused bound does not compare */
  p->unfused_lower_bound =
      p->data_parallel ? 0 : fit_unfused_lower_bound(ar, fit.graph ? fit.graph : g, &chosen.fit, fit.step, p);
  p->zero_auto = p->data_parallel && rq->fit.zero < 0;
  for (int z = 0; p->zero_auto && z < 3; z++) p->zero_arena[z] = zero_arena[z];
  if (out.noclip_min_arena) {
    p->noclip_fits = out.noclip_fits;
    p->noclip_arena = out.noclip_min_arena;
    p->noclip_lower_bound = nc.plan ? nc.plan->lower_bound_bytes : 0;
    p->noclip_extra_flops = nc.plan ? nc.plan->extra_flops : 0;
    p->noclip_accumulation = nc.plan ? nc.plan->accumulation_steps : 1;
  }
  p->compile_seconds = mp_now() - t0;
  if (rq->gen_context && (out.message = plan_decode(ar, p, rq->gen_context))) {
    out.status = PLAN_BAD_REQUEST;
    return out;
  }
  /* verify: the last pass; the plan is complete and nothing edits it after */
  out.message = verify_plan(p);
  out.status = out.message ? PLAN_UNVERIFIED : PLAN_OK;
  out.step = fit.step;
  out.plan = out.message ? NULL : p;
  return out;
}
