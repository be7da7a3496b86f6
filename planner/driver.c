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
  FitResult fit = {0};
  int64_t zero_arena[3] = {0, 0, 0};
  if (rq->fit.ranks >= 1 && rq->fit.precision == PREC_FP16) {
    out.message =
        "--ranks with --precision fp16: loss scaling's skipped steps are decided per rank, so the "
        "ranks would diverge; use bf16 or fp32";
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
      FitResult f = levers_fit(ar, src, &r, &gz, &out.message);
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
      if (better) best = f, bg = gz, bz = z;
      if (!f.plan->extra_flops && f.plan->accumulation_steps == 1) break; /* keeps everything: done */
    }
    fit = best, g = bg;
  } else fit = levers_fit(ar, src, rq, &g, &out.message);
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
  /* with collectives, updates run per bucket: the unfused bound does not compare */
  p->unfused_lower_bound = p->data_parallel ? 0 : fit_unfused_lower_bound(ar, g, &rq->fit, fit.step, p);
  p->zero_auto = p->data_parallel && rq->fit.zero < 0;
  for (int z = 0; p->zero_auto && z < 3; z++) p->zero_arena[z] = zero_arena[z];
  p->compile_seconds = mp_now() - t0;
  /* verify: the last pass; the plan is complete and nothing edits it after */
  out.message = verify_plan(p);
  out.status = out.message ? PLAN_UNVERIFIED : PLAN_OK;
  out.step = fit.step;
  out.plan = out.message ? NULL : p;
  return out;
}
