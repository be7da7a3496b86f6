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

/* The lower_bound_bytes plan_assign will give p (the persistent buffers
 * plus the larger schedule's most live bytes, aligned, guards included),
 * without packing: no offsets go below it, so a plan whose bound is over a
 * budget needs no offset search to know it does not fit (the liveness
 * bound of its step alone leaves out the library workspace, which
 * plan_build adds). */
int64_t plan_lower_bound(const Plan *p);

/* The packings of one compilation, remembered: the levers plan the same
 * schedule more than once (sd-unet's LoRA compile at 2G packed four of its
 * big step's schedules twice, 0.46 of its 2.6 CPU s, each settings' try
 * building the same step), and assign_offsets returns the same offsets for
 * the same items, alignment and limit, so an identical packing is copied.
 * Lives in `ar` (freed with it). */
typedef struct PackMemo PackMemo;
PackMemo *pack_memo_new(Arena *ar);
/* plan_assign, packing each schedule at most once per memo (NULL: none). */
void plan_assign_memo(Plan *p, double time_limit_s, PackMemo *memo);
/* How many packings the memo copied instead of packing (0 for NULL). */
int pack_memo_hits(const PackMemo *memo);
/* How many it packed (0 for NULL). */
int pack_memo_packed(const PackMemo *memo);

/* --dump=plan: a stable text listing of buffers and schedules. */
void plan_dump(const Plan *p, FILE *out);

#endif
