/* levers.h: one choice over the budget's levers. Configurations: the
 * micro-batch sizes dividing the batch (the forced one with --micro-batch;
 * the whole batch alone without a budget, with --no-micro-batch, or when
 * the model has batch statistics) times the values of the other levers a
 * user left free (under a budget, the loss unfused and fused). For each, fit_budget keeps everything when it fits, else
 * recomputes what the checkpointing DP says (not with --no-recompute; under
 * --precision auto it also chooses bf16 storage per stage). The winner is
 * the plan with the least estimated step time (levers.c: each op's roofline
 * under the cost model, per micro-batch, plus a per-op overhead) whose
 * arena fits. Bounds prune before planning: a configuration whose memory
 * bound exceeds the budget cannot fit, and one whose time bound (its
 * estimate keeping everything, without casts) is no less than a plan
 * already found cannot win. */
#ifndef MEMPLAN_LEVERS_H
#define MEMPLAN_LEVERS_H

#include "driver.h"

/* Fits the model under rq's budget. *g is the graph src gave at the
 * request's dims; on return, the graph of the plan returned (a micro-batch
 * builds src again with its batch dim; a fused loss's graph is the
 * result's FitResult.graph). With rq->no_least, nothing fitting returns at
 * once, min_arena 0. Every configuration tried is
 * recorded in the plan (Plan.levers, in order), the chosen one marked; with
 * no plan, min_arena is the least any reached. A --micro-batch that does
 * not divide the batch sets *error instead. */
FitResult levers_fit(Arena *ar, ModelSrc *src, const PlanRequest *rq, Graph **g, const char **error);

/* The graphs levers_fit builds at each micro-batch size, kept for the
 * compilation (PlanRequest.graphs): the driver fits the levers once per
 * format of the weights and the moments it tries (sd-unet at 8G: six
 * times), each at the same micro-batch sizes. In ar (freed with it). */
LeverGraphs *levers_graphs_new(Arena *ar);
/* How many graphs were reused instead of built (0 for NULL). */
int levers_graphs_hits(const LeverGraphs *m);

#endif
