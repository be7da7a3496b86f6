/* plan_build.h: assembling the Plan from the passes' tables (plan.c). */
#ifndef MEMPLAN_PLAN_BUILD_H
#define MEMPLAN_PLAN_BUILD_H

#include <stdio.h>

#include "live.h"
#include "plan.h"

/* Buffers and both schedules from the step and its two liveness tables;
 * offsets are not assigned yet. */
Plan *plan_build(Arena *ar, const Graph *g, const Step *s, const Live *train, const Live *eval, int64_t align);

/* The offsets pass: persistent buffers stacked at the bottom (optimal, as
 * each is live throughout), then each schedule's transient buffers packed
 * above them by assign_offsets; fills the totals. */
void plan_assign(Plan *p, double time_limit_s);

/* --dump=plan: a stable text listing of buffers and schedules. */
void plan_dump(const Plan *p, FILE *out);

#endif
