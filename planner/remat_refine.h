/* remat_refine.h: a local search over whole-graph recompute schedules
 * (remat.h), below the greedy's keep set and reuse gap.
 *
 * A schedule is its recompute points: which forward ops run again right
 * before which backward op (every backward read takes the newest copy, and
 * a copy lives until its last reader). The greedy's schedules recompute a
 * dropped tensor for every read or hold one copy G positions; the optimum
 * often mixes: the forward copy serves the first backward reads, then is
 * freed and recomputed from a copy made for another read. For each target
 * peak, the search starts from the schedule that recomputes the most (every
 * read from the graph's inputs, the greedy's last schedule at gap 0) and
 * deletes recompute points, the most expensive first, while the step's
 * liveness peak stays at or under the target, until a pass deletes none. */
#ifndef MEMPLAN_REMAT_REFINE_H
#define MEMPLAN_REMAT_REFINE_H

#include "remat.h"

enum { REMAT_REFINE_TRIALS = 4000 };

/* Schedules from `most` (its forward recomputes are the points; fcost: per
 * stage, seconds of one run), one per target peak not under most's, each
 * pushed to out[*n] (out holds ntargets more). At most `trials` peak
 * evaluations in all. */
void remat_refine(Arena *ar, const RematCand *most, const double *fcost, RematPeak peak, void *ctx,
                  const int64_t *targets, int ntargets, int trials, RematCand *out, int *n);

#endif
