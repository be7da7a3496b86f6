/* levers.c: the budget's levers in order, every configuration recorded. */
#include "levers.h"

#include <string.h>

#include "ops.h"

/* The dim that sizes the batch: the inputs' leading dim, when every input
 * starts with the same plain dim name (B). NULL: no micro-batching. */
static const char *batch_dim(const Graph *g) {
  const char *name = NULL;
  for (int t = 0; t < g->nt; t++) {
    if (g->t[t].kind != TK_INPUT) continue;
    const char *d = g->t[t].shape.rank ? g->t[t].shape.sym[0] : NULL;
    if (!d || (name && strcmp(name, d))) return NULL;
    name = d;
  }
  for (int i = 0; name && i < g->ndims; i++)
    if (!strcmp(g->dims[i].name, name)) return name;
  return NULL;
}

static int64_t dim_value(const Graph *g, const char *name) {
  for (int i = 0; i < g->ndims; i++)
    if (!strcmp(g->dims[i].name, name)) return g->dims[i].value;
  return 0;
}

/* The model again with the batch dim set to mb (after the user's --set). */
static Graph *with_micro_batch(Arena *ar, ModelSrc *src, const PlanRequest *rq, const char *bdim, int64_t mb) {
  int n = rq->nov, i = 0;
  DimOverride *ov = ar_alloc(ar, sizeof(DimOverride) * (size_t)(n + 1));
  for (int k = 0; k < n; k++) ov[k] = rq->ov[k];
  while (i < n && strcmp(ov[i].name, bdim)) i++;
  ov[i] = (DimOverride){bdim, mb};
  Graph *g = load_build(src, ov, i == n ? n + 1 : n);
  for (int d = 0; d < g->ndims; d++) /* a micro-batch is the planner's choice, not a --set */
    if (!strcmp(g->dims[d].name, bdim)) g->dims[d].overridden = i < n;
  return g;
}

/* Does an op compute batch statistics (OpInfo.batch_stats)? Then the
 * budget never splits the batch on its own: that would change the model. */
static bool batch_coupled(const Graph *g) {
  for (int i = 0; i < g->nops; i++)
    if (op_info(g->ops[i].kind)->batch_stats) return true;
  return false;
}

/* What the levers tried, in order (Plan.levers). */
typedef VEC(PlanLever) Levers;

static FitResult fit_noted(Arena *ar, Levers *L, const Graph *g, int64_t budget, const FitOptions *fo) {
  FitResult r = fit_budget(ar, g, budget, fo);
  const char *bdim = batch_dim(g);
  int mb = bdim ? (int)dim_value(g, bdim) : 0;
  PlanLever l = {.precision = prec_name(fo->precision),
                 .micro_batch = mb,
                 .accumulation_steps = fo->accumulation,
                 .keep_arena = r.keep_arena,
                 .arena = r.min_arena,
                 .dropout_masks = r.masks,
                 .loss_chunk = r.loss_chunk};
  if (r.plan) { /* auto names what it chose */
    l.precision = r.plan->precision;
    l.arena = r.plan->arena_bytes;
    l.extra_flops = r.plan->extra_flops;
    l.step_flops = r.plan->step_flops;
    l.fits = true;
  }
  VEC_PUSH(ar, *L, l);
  return r;
}

FitResult levers_fit(Arena *ar, ModelSrc *src, const PlanRequest *rq, Graph **g, const char **error) {
  Levers L = {0};
  FitOptions fo = rq->fit;
  fo.accumulation = 1;
  const char *bdim = batch_dim(*g);
  int64_t B = bdim ? dim_value(*g, bdim) : 0;
  FitResult r = {0};
  if (rq->micro_batch) {
    if (!bdim || B % rq->micro_batch) {
      *error = ar_printf(ar, "--micro-batch %lld must divide the batch %s = %lld", (long long)rq->micro_batch,
                         bdim ? bdim : "(the inputs have no common leading dim)", (long long)B);
      return r;
    }
    fo.accumulation = (int)(B / rq->micro_batch);
    *g = with_micro_batch(ar, src, rq, bdim, rq->micro_batch);
    r = fit_noted(ar, &L, *g, rq->budget, &fo);
  } else {
    r = fit_noted(ar, &L, *g, rq->budget, &fo);
    int64_t least = r.min_arena;
    for (int64_t mb = B - 1; !r.plan && mb >= 1 && !batch_coupled(*g); mb--) {
      if (B % mb) continue;
      fo.accumulation = (int)(B / mb);
      *g = with_micro_batch(ar, src, rq, bdim, mb);
      r = fit_noted(ar, &L, *g, rq->budget, &fo);
      if (r.min_arena < least) least = r.min_arena;
    }
    r.min_arena = least;
  }
  if (r.plan) {
    for (int i = L.n - 1; i >= 0; i--) /* the chosen one: the last whose plan is the one returned */
      if (L.v[i].fits && L.v[i].arena == r.plan->arena_bytes && L.v[i].extra_flops == r.plan->extra_flops) {
        L.v[i].chosen = true;
        break;
      }
    r.plan->levers = L.v;
    r.plan->nlevers = L.n;
  }
  return r;
}
