/* remat.h: recomputation decided on the whole graph, for steps the chain
 * DP (ckpt.c) cannot cut: long skip connections (U-Nets, DenseNets) make
 * one stage of many ops, since every cut has several activations live.
 *
 * Every forward op is its own stage. A schedule is a keep set K (forward
 * tensors held from forward to their last backward read) and a reuse gap
 * G: backward walks the ops in reverse; before op i's backward, each
 * tensor it reads that is not in K is taken from a recomputed copy last
 * read at most G backward ops earlier (G: 0, 2, 8, unbounded), or else recomputed,
 * after its own dropped inputs, from the nearest kept or fresh tensors. So
 * a skip read by far-apart consumers (a U-Net's ei, read by di's backward
 * and again by ei's own) is recomputed once for each, not held between. A
 * greedy per G drops from K, one tensor a round, the one whose schedule's
 * liveness peak (the real step's, from a callback) falls most per second
 * of recomputation (when none lowers the peak: the live bytes summed over
 * the schedule), down to K empty; every schedule it passes is a candidate,
 * as is, for each peak the greedy reached, remat_refine.c's schedule (its
 * recompute points searched one by one), and the candidates none beats in
 * both time and peak are returned. */
#ifndef MEMPLAN_REMAT_H
#define MEMPLAN_REMAT_H

#include "autodiff.h"
#include "cost.h"

typedef struct {
  Actions a;
  double recompute; /* seconds of recomputation under the cost model */
  int64_t peak;     /* the peak the callback gave */
} RematCand;

/* The liveness peak and the live bytes summed over positions of the step
 * that actions build: fit.c's, so the greedy ranks with the real step. */
typedef void (*RematPeak)(void *ctx, const Actions *a, int64_t *peak, double *area);

/* Should the graph's step be planned with remat_candidates: the chain
 * (chain.c) has a stage of more than a quarter of the forward ops and the
 * step saves at most REMAT_MAX_SAVED tensors (the greedy evaluates their
 * square; chains of transformer blocks never come here). */
enum { REMAT_MAX_SAVED = 48 };
bool remat_wanted(const Step *plain, int nforward, int largest_stage);

/* The Pareto candidates, fastest first (the first keeps everything). */
RematCand *remat_candidates(Arena *ar, const Graph *g, const Step *plain, const CostModel *cm, RematPeak peak,
                            void *ctx, int *n);

#endif
