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
 * both time and peak are returned.
 *
 * That greedy builds the real step (saved^2) times per G: past
 * REMAT_MAX_SAVED saved tensors (a U-Net of many blocks: unet-mnist saves
 * 111, Stable Diffusion's 1030, each real build some milliseconds) a big
 * step is ranked instead, with no step built: the saved tensors by the
 * seconds of their producer's forward per byte, cheapest first (norms,
 * activations, adds, concats before convolutions and matrix products), each
 * dropped only while its producer's inputs are all kept, so every
 * recompute reruns one op from kept tensors, never a chain (dropping chains
 * planned sd-unet at 8G with 2571% extra FLOPs). G is REMAT_BIG_GAP. The
 * candidates keep all but the prefixes of that order whose bytes pass each
 * of REMAT_STEPS equal shares of the saved bytes; their peaks are unknown
 * (-1): fit.c's walk builds them as it tries them, by bisection (their
 * bounds fall as the prefix grows), so a budgeted compile builds about
 * log2(REMAT_STEPS) + 1 steps, and packs only the ones within budget
 * (remat_refine.c does not run on them: each of its trials builds a step). */
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

/* Should the graph's step be planned with remat_candidates: REMAT_GRAPH
 * where the chain (chain.c) has a stage of more than a quarter of the
 * forward ops (steps saving more than REMAT_MAX_SAVED tensors are ranked,
 * not searched: above); REMAT_CHAIN where the chain is cut finely but the
 * step saves at most REMAT_CHAIN_SAVED tensors: its schedules join the
 * DP's, which counts a buffer two stages share (a conv's output, and the
 * relu written in place over it) twice and so plans against a memory that
 * is not the plan's (bench_remat's conv chain: the DP paid up to 1.17x the
 * exact optimum's step, the two together at most 1.04x). Its refinement
 * runs REMAT_CHAIN_TRIALS trials (the chain's figures are those of 2000
 * at a quarter of the time), and fit.c searches them only where a DP
 * schedule fits. The greedy's cost grows with the saved tensors squared,
 * per configuration the levers walk, so larger chains (gpt2-mini saves
 * 48: 21 s of CPU at 30% of its keep-all arena, 0.6 s before) and
 * transformers stay the DP's alone. */
enum { REMAT_MAX_SAVED = 48, REMAT_STEPS = 16, REMAT_BIG_GAP = 2, REMAT_CHAIN_SAVED = 32, REMAT_CHAIN_TRIALS = 500 };
typedef enum { REMAT_NONE, REMAT_GRAPH, REMAT_CHAIN } RematUse;
RematUse remat_wanted(const Step *plain, int nforward, int largest_stage);

/* The Pareto candidates, fastest first (the first keeps everything); a big
 * step's, unbuilt (peak -1), in the order of their prefixes. use: what
 * remat_wanted said (not REMAT_NONE). target > 0 is a budget: for a chain
 * (REMAT_CHAIN) the refinement searches under that peak alone instead of
 * each of the greedy's peaks (the chain at 6.75 MiB: +56.42% extra FLOPs
 * instead of +76.94%, in the same trials); for a graph (REMAT_GRAPH) under
 * the greedy's peaks within it (at least one) and, with
 * REMAT_BUDGET_TRIALS of the trials, under the budget itself (random-1 at
 * 12.59 MiB: +33.43% of the step's seconds instead of +43.99%). packed
 * (NULL: none) is fit.c's second call where the plan the walk found is far
 * slower than a schedule whose live bytes fit but whose arena did not: then
 * only keeping everything and the refinement under target, each trial's
 * peak being the arena its plan packs into (random-1 at 11.59 MiB: +45.92%
 * instead of the greedy's +83.89%; the refined schedules of 11.50 MiB of
 * live bytes pack into 11.72 to 12.59 MiB). */
RematCand *remat_candidates(Arena *ar, const Graph *g, const Step *plain, const CostModel *cm, RematUse use,
                            int64_t target, RematPeak peak, RematPeak packed, void *ctx, int *n);

#endif
