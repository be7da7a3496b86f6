/* driver.h: the planner in one call, for `memplan compile`: a model file
 * and the user's choices in, a complete and verified Plan out. */
#ifndef MEMPLAN_DRIVER_H
#define MEMPLAN_DRIVER_H

#include "fit.h"
#include "load.h"

typedef struct LeverGraphs LeverGraphs; /* levers.h */

typedef struct {
  const char *model;     /* the YAML file */
  const DimOverride *ov; /* --set: dims replaced by name */
  int nov;
  Tune tune;           /* --freeze */
  int64_t budget;      /* bytes the arena must fit; 0: no budget */
  int64_t micro_batch; /* --micro-batch: micro-batches of this many rows; 0: the levers decide */
  bool no_micro_batch; /* --no-micro-batch: the whole batch in one pass (unless micro_batch forces one) */
  FitOptions fit;      /* for every plan the levers try (they set the accumulation) */
  int64_t gen_context; /* --gen-context: generation's KV cache positions (planner/decode.h); 0: none */
  bool graph_only;     /* stop once the model is loaded (--dump=graph) */
  bool no_least;       /* when nothing fits, skip the search for the smallest budget that would (min_arena 0):
                        * the driver tries a lower optimizer-state precision next */
  LeverGraphs *graphs; /* the micro-batch graphs built so far (levers.h); NULL: plan_model makes one */
} PlanRequest;

typedef enum {
  PLAN_OK,          /* the plan, complete and verified (with graph_only: the graph) */
  PLAN_OVER_BUDGET, /* nothing fits the budget; min_arena would */
  PLAN_BAD_REQUEST, /* message: an option the model does not match (a --micro-batch not dividing the batch) */
  PLAN_UNVERIFIED,  /* message: the plan failed verification, a bug in memplan */
} PlanStatus;

typedef struct {
  PlanStatus status;
  const Graph *graph; /* the model at the request's dims */
  const Step *step;   /* the plan's step (--dump=step, --dump=live) */
  const Plan *plan;   /* PLAN_OK: verified, and nothing edits it afterwards */
  int64_t min_arena;  /* PLAN_OVER_BUDGET: the smallest arena any lever reached */
  /* PLAN_OVER_BUDGET with gradient clipping: without clipping, the least
   * arena (0: not tried), and whether that fits the budget */
  int64_t noclip_min_arena;
  bool noclip_fits;
  const char *message;
} PlanOutcome;

/* The passes in order: load (the YAML parsed once), the levers (fit per
 * configuration), the plan's last fields, verification. User errors in the
 * model go through diag_error; everything the planner allocates is in ar. */
PlanOutcome plan_model(Arena *ar, const PlanRequest *rq);

#endif
