/* fit.h: the budget pass. Plans the step keeping everything; when that
 * arena exceeds the budget, walks the checkpointing schedules of ckpt.c from
 * the cheapest down and keeps the first whose final arena (after offsets and
 * verification, not a liveness estimate) fits. A schedule whose liveness
 * lower bound already exceeds the budget cannot fit and is not packed; when
 * none fits, the skipped ones are packed in the order of their bounds until
 * no bound is below the least arena found, so that arena is exact. The plan
 * keeping everything is packed whatever its bound (the report shows its
 * arena), unless FitOptions.pack_below defers it (the levers: fit_complete
 * packs it once its arena is wanted). */
#ifndef MEMPLAN_FIT_H
#define MEMPLAN_FIT_H

#include "ckpt.h"
#include "plan.h"
#include "basew.h"
#include "headgrad.h"
#include "optstate.h"
#include "precision.h"

/* Dropout's masks (ops with OpInfo.regen_stats): auto stores them when the
 * plan keeping everything fits (backward then reads a bit per element) and
 * regenerates them otherwise, before recomputing anything (no bytes; a hash
 * per element in backward, cheaper than rerunning any op); store and regen
 * force one (--dropout-masks). */
typedef enum { MASKS_AUTO, MASKS_STORE, MASKS_REGEN } Masks;

/* FitOptions.loss_chunk besides a number of rows: the fused classifier loss
 * (gb_fuse_loss, ops.c's linear_cross_entropy) with its chunk chosen by the
 * budget pass (LOSS_FUSED), or only when the unfused plan keeping every
 * activation does not fit the budget (LOSS_AUTO; the levers turn auto into
 * two configurations, unfused and LOSS_FUSED). The chunk: the larger of N/8
 * and N/64 rows (none below 64; N the loss's rows) whose plan keeps
 * everything within the budget; when neither does, recomputation is planned
 * with the smaller (the most room for activations; the cost model charges
 * every chunk size the same FLOPs, none extra: see ops.c). */
enum { LOSS_UNFUSED = 0, LOSS_FUSED = -1, LOSS_AUTO = -2 };

typedef struct {
  bool fuse; /* fused optimizer updates */
  int64_t align;
  double time_limit;    /* offset search, per plan */
  Backend backend;      /* cost model */
  int units;            /* DP memory units (default 500) */
  int accumulation;     /* micro-batches per step; > 1 keeps gradients across them (updates unfused) */
  Precision precision;  /* storage of saved activations: fp32, bf16, fp16 (not auto: the driver picks) */
  int64_t guard;        /* canary bytes after every buffer (--guard), 0: none */
  Masks masks;          /* dropout's masks: stored or regenerated */
  int64_t loss_chunk;   /* the classifier loss: LOSS_UNFUSED (0), rows per chunk fused, LOSS_FUSED or LOSS_AUTO */
  OptPrec opt_state;    /* AdamW's moments: fp32, bf16 or 8bit (not auto: the driver picks) */
  BaseFmt base_weights; /* frozen weights' storage: fp32, bf16, int8 or nf4 (not auto: the driver picks) */
  ParamPrec param_prec; /* trainable weights' storage: fp32 or bf16 (not auto: the driver picks) */
  HeadGrad head_grad;   /* the fused loss's tied weight gradient: kept or deferred (not auto: the driver picks) */
  bool no_recompute;    /* --no-recompute: keep every activation, never checkpoint */
  bool ignore_clip;     /* plan as if the optimizer did not clip gradients (clipping's price, driver.c) */
  bool bound_least;     /* nothing fitting: a whole-graph schedule's liveness bound stands for its arena (none
                           packed; the driver's tries whose least arena no one reads, PlanRequest.no_least) */
  int ranks, zero;      /* data parallelism (planner/comm.c): ranks >= 1 adds collectives at sharding zero
                           (-1: the driver's auto); 0: one process, no collectives */
  int64_t pack_below;   /* > 0: a plan keeping everything whose liveness lower bound is this or more (and over
                           the budget) is not packed but deferred (FitResult.deferred); 0: every plan is packed */
  /* the compilation's packings (plan_build.h's PackMemo), NULL: none */
  struct PackMemo *memo;
} FitOptions;

/* A plan keeping everything that pack_below left unpacked: its graph, its
 * options and its liveness bound; keep: its arena is FitResult.keep_arena. */
typedef struct FitDeferred {
  const Graph *g;
  FitOptions o;
  int64_t lb;
  bool keep;
  const struct FitDeferred *next;
} FitDeferred;

typedef struct {
  Plan *plan;                  /* the chosen plan (NULL when nothing fits) */
  Step *step;                  /* its step */
  int64_t min_arena;           /* the smallest arena any candidate reached */
  int64_t keep_arena;          /* the arena keeping every activation */
  int candidates;              /* plans built and checked (offsets assigned) */
  int bounded;                 /* schedules skipped unpacked: their liveness lower bound exceeds the budget */
  const FitDeferred *deferred; /* plans left unpacked (fit_complete packs them); NULL: min_arena and
                                * keep_arena are what packing every plan gives */
  const char *masks;           /* "stored" or "regenerated": the plan's masks, or those tried when none fit (NULL: no
                                * dropout, or auto tried both) */
  const Graph *graph;          /* the plan's graph: the one given, or its copy with the loss fused (gb_fuse_loss) */
  int64_t loss_chunk; /* the fused loss' rows per chunk in that graph (or the last tried, when none fit); 0: unfused */
} FitResult;

/* A verified-ready plan for one step: liveness, buffers, offsets. */
Plan *fit_plan(Arena *ar, const Graph *g, const Step *s, const FitOptions *o);

/* The step keeping every activation under o, before any plan: what the
 * levers' bounds read (levers.c). Masks auto regenerates dropout's masks
 * (the fewest bytes any policy keeps). */
Step *fit_keep_step(Arena *ar, const Graph *g, const FitOptions *o);

/* The graph fit_budget plans under a loss_chunk: g unfused (or with no
 * classifier loss to fuse), else g with the loss fused at that chunk, or
 * for LOSS_FUSED at the smallest chunk tried (the least memory: the levers'
 * bounds). */
const Graph *fit_loss_graph(Arena *ar, const Graph *g, int64_t loss_chunk);

/* The lower bound of the plain step with every update after backward: what
 * fusing the updates saves, for the report. The workspace (sized by the
 * ops, the same either way) is taken from `fused`, the plan of `step`. 0
 * where the two do not compare: a step whose updates are not fused, or one
 * that recomputes, has guard bytes, or under auto stores anything in bf16. */
int64_t fit_unfused_lower_bound(Arena *ar, const Graph *g, const FitOptions *o, const Step *step, const Plan *fused);

/* The fastest plan within budget (0: no budget, keep everything). The
 * checkpointing DP is solved once; the plan returned is the candidate that
 * was checked against the budget (not a rebuild). */
FitResult fit_budget(Arena *ar, const Graph *g, int64_t budget, const FitOptions *o);

/* Packs r's deferred plans whose bound is below `below` (0: all), adding
 * their arenas to r's min_arena and keep_arena as if packed in the first
 * place; time_limit >= 0 caps their offset search (a negative: their own). */
void fit_complete(Arena *ar, FitResult *r, int64_t below, double time_limit);

/* Seconds of offset search for an arena only the report shows (the levers'
 * configurations over the budget once one fits, a big step's schedules
 * over it): the default 0.5 s spent 2 of sd-unet's 2.5 CPU s at 8G there,
 * for the same arenas. */
#define FIT_SHOW_TIME_LIMIT 0.05

/* memplan sweep: one line per Pareto-optimal schedule, from keeping
 * everything down to the least memory. */
void fit_sweep(Arena *ar, const Graph *g, const FitOptions *o, FILE *out);

#endif
