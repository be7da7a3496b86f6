/* levers.h: the budget's levers, pulled in order: keep everything;
 * recompute (fit_budget: under --precision auto the DP also chooses, stage
 * by stage, between fp32 and bf16 storage of what it keeps, paying the
 * casts); then the largest micro-batch dividing the batch that fits, with
 * both at that size too. --micro-batch forces one size. */
#ifndef MEMPLAN_LEVERS_H
#define MEMPLAN_LEVERS_H

#include "driver.h"

/* Fits the model under rq's budget. *g is the graph src gave at the
 * request's dims; on return, the graph of the plan returned (a micro-batch
 * builds src again with its batch dim). Every configuration tried is
 * recorded in the plan (Plan.levers, in order), the chosen one marked; with
 * no plan, min_arena is the least any reached. A --micro-batch that does
 * not divide the batch sets *error instead. */
FitResult levers_fit(Arena *ar, ModelSrc *src, const PlanRequest *rq, Graph **g, const char **error);

#endif
