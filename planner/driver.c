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
  p->unfused_lower_bound = fit_unfused_lower_bound(ar, fit.graph ? fit.graph : g, &rq->fit, fit.step, p);
  p->compile_seconds = mp_now() - t0;
  /* verify: the last pass; the plan is complete and nothing edits it after */
  out.message = verify_plan(p);
  out.status = out.message ? PLAN_UNVERIFIED : PLAN_OK;
  out.step = fit.step;
  out.plan = out.message ? NULL : p;
  return out;
}
