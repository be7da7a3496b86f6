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
 * read from the graph's inputs: nothing kept, gap 0) and deletes recompute
 * points, the most expensive first, each with the points it leaves unread,
 * where the step's liveness peak stays at or under the target, until a pass
 * deletes none. The targets come in ascending order and each one's schedule
 * starts the next (it is under that target too). A descent stops in a local
 * optimum (on the U-Net at 50% of keep-all, it holds the decoder's forward
 * copies and recomputes the encoder from the input for every read, 1.09x
 * the optimum's step); then kicks: for a stage s (the most expensive first),
 * the points of every position where s's recompute was deleted come back,
 * a descent runs with s's points held there, then a free one, and the
 * result replaces the schedule when it recomputes less. A kick bringing
 * back the same positions as one tried on the same schedule is skipped,
 * and a descent retries no point refused since its last deletion. The
 * trials left after the descents go to the targets' kicks in ascending
 * order, each taking what it needs (the least budgets are where descents
 * stop farthest from the optimum). Each target's descent schedule stays a
 * candidate beside its kicks' (the same liveness peak may pack smaller). */
#ifndef MEMPLAN_REMAT_REFINE_H
#define MEMPLAN_REMAT_REFINE_H

#include "remat.h"

/* The trials: 2000 in the points' own order, then 1000 in their closure's
 * (a second search from the same start: random-1 at 12.47 MiB, +46.54% of
 * the step's seconds in the first order alone, +45.29% with both, the best
 * CBC found +39.30%; random-2 and -3 gain at four budgets, none loses,
 * bench_remat --objective seconds). 3000 in the one order had let
 * random-3's least target finish the kick that brings it within 5% of the
 * optimum; the two orders keep that (+50.77%). The third order (per byte)
 * gets twice the first two's together (remat.c): random-2 at 14.76 MiB
 * plans +20.52% with 3000 in it, and the first two's +26.89% with 2500 or
 * fewer; it costs random-1's least budget 2.3 -> 4.0 CPU s to compile
 * (Release). */
enum { REMAT_REFINE_TRIALS = 2000, REMAT_CLOSURE_TRIALS = 1000 };
/* The refinements under a graph's budget (remat_candidates): by liveness
 * peak, and by the arena packed (each trial within the budget packed). */
enum { REMAT_BUDGET_TRIALS = 1000, REMAT_BUDGET_CLOSURE_TRIALS = 500 };
/* Under the arena the third order gets as many as the first two together,
 * not twice as many: each of its trials is packed. random-1 at 13.59 MiB
 * plans the optimum (+23.88% of the step's seconds) with 600 to 1800 in
 * it, +29.55% with 300, +30.60% with none; 900 instead of 1800 saves
 * 0.3-0.55 CPU s a search (one run each), and no bench budget plans worse
 * than before it ran there (random-1 at 14.24 MiB +27.76%, +27.42% with
 * 1800, +28.92% before; random-3 at 19.68 MiB +15.66%, +15.15% with
 * 1800, +15.66% before). */
enum { REMAT_PACKED_TRIALS = 600, REMAT_PACKED_CLOSURE_TRIALS = 300, REMAT_PACKED_PER_BYTE_TRIALS = 900 };
#define REMAT_TRIAL_PACK_LIMIT 0.005 /* seconds of offset search a packed trial may take */

/* What the search reads of the step: which tensors each action reads. */
typedef struct {
  const Graph *g;
  const int *op;         /* per stage: its forward op */
  const int *need_first; /* per backward position: its activations in need[need_first[b] .. need_first[b + 1]) */
  const int *need;
  const double *fcost; /* per stage: seconds of one run */
} RematReads;

/* The order a descent tries the points in, the most first: by their
 * seconds; by those with the points deleting one alone leaves unread (a
 * copy of a value far from the graph's inputs: deleting it spares its whole
 * chain of recomputes); by their seconds per byte of their outputs (the
 * copies dearest to make and cheapest to hold: random-2 at 14.76 MiB, where
 * the other two plan +26.89% of the step's seconds, this one +20.52%, the
 * optimum +19.33%, proven by CBC). */
typedef enum { REMAT_ORDER_SECONDS, REMAT_ORDER_CLOSURE, REMAT_ORDER_PER_BYTE } RematOrder;

/* Schedules from `most` (its forward recomputes are the points), per
 * target peak (ascending; a target under most's peak gets most itself) the
 * descent's and, where its kicks found a cheaper one, that one too, written
 * to out[0 .. *n), at most 2 * ntargets. At most `trials` peak evaluations
 * in all (then the search stops where it is); the descents try the points
 * in `order`. */
void remat_refine(Arena *ar, const RematCand *most, const RematReads *rd, RematPeak peak, void *ctx,
                  const int64_t *targets, int ntargets, int trials, RematOrder order, RematCand *out, int *n);

#endif
