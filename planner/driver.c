/* driver.c: the planner's passes in order, for `memplan compile`. */
#include "driver.h"

#include "levers.h"
#include "verify.h"

PlanOutcome plan_model(Arena *ar, const PlanRequest *rq) {
  PlanOutcome out = {0};
  double t0 = mp_now();
  /* load: the YAML is read and parsed once; the levers build it again at
   * each micro-batch size they try */
  ModelSrc *src = load_parse(ar, rq->model);
  Graph *g = load_build(src, rq->ov, rq->nov);
  out.graph = g;
  if (rq->graph_only) {
    load_free(src);
    return out;
  }
  /* levers: keep everything, recompute, micro-batches (one fit each, the
   * checkpointing DP solved once per fit); g becomes the chosen plan's graph */
  FitResult fit = levers_fit(ar, src, rq, &g, &out.message);
  /* gradient clipping's price: the same request planned without it (the
   * updates fused into backward again); about the compile time of the first.
   * None under --no-fuse: that plan keeps every gradient anyway */
  FitResult nc = {0};
  if (!out.message && g->opt.clip_grad_norm > 0 && rq->fit.fuse) {
    PlanRequest q = *rq;
    q.fit.ignore_clip = true;
    Graph *g0 = load_build(src, rq->ov, rq->nov);
    const char *msg = NULL;
    nc = levers_fit(ar, src, &q, &g0, &msg);
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
    out.min_arena = fit.min_arena;
    return out;
  }
  /* the plan's last fields: the budget, what fusing the updates saved, the
   * time the passes above took (verification, below, is not counted) */
  Plan *p = fit.plan;
  p->budget_bytes = rq->budget;
  p->unfused_lower_bound = fit_unfused_lower_bound(ar, g, &rq->fit, fit.step, p);
  if (out.noclip_min_arena) {
    p->noclip_fits = out.noclip_fits;
    p->noclip_arena = out.noclip_min_arena;
    p->noclip_lower_bound = nc.plan ? nc.plan->lower_bound_bytes : 0;
    p->noclip_extra_flops = nc.plan ? nc.plan->extra_flops : 0;
    p->noclip_accumulation = nc.plan ? nc.plan->accumulation_steps : 1;
  }
  p->compile_seconds = mp_now() - t0;
  /* verify: the last pass; the plan is complete and nothing edits it after */
  out.message = verify_plan(p);
  out.status = out.message ? PLAN_UNVERIFIED : PLAN_OK;
  out.step = fit.step;
  out.plan = out.message ? NULL : p;
  return out;
}
