/* fit_describe.h: a schedule's stages as the plan reports them (fit.c):
 * per stage its first and last layer, how often it runs, what it keeps. */
#ifndef MEMPLAN_FIT_DESCRIBE_H
#define MEMPLAN_FIT_DESCRIBE_H

#include "autodiff.h"
#include "chain.h"
#include "plan.h"

/* A chain schedule's (ckpt.c) stages: K keep, S selective, R recompute. */
void fit_describe(Arena *ar, Plan *p, const Graph *g, const Step *plain, const Chain *c, const Actions *a);

/* A whole-graph schedule's (remat.c) stages, one per forward op: R where
 * the op runs again, K where it runs once (half: the tensors stored in
 * bf16, NULL none). */
void fit_describe_dag(Arena *ar, Plan *p, const Graph *g, const Step *plain, const Actions *a, const bool *half);

#endif
