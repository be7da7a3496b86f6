/* levers.c: one choice over all the budget's levers. Every configuration
 * (micro-batch size, the loss fused or not, with the storage precision
 * policy and the optimizer state's format of the request) gets two bounds
 * before any plan; the survivors are planned in the order of
 * their time bounds, and the plan with the least estimated step time that
 * fits wins. Every configuration is recorded, planned or pruned. */
#include "levers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "live.h"
#include "ops.h"
#include "optstate.h"

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

/* The models built at a micro-batch size, for the compilation (levers.h). */
typedef struct MbGraph {
  const DimOverride *ov;
  int nov;
  int64_t mb;
  Graph *g;
  struct MbGraph *next;
} MbGraph;

struct LeverGraphs {
  MbGraph *head;
  int hits; /* graphs reused (tests read it) */
};

LeverGraphs *levers_graphs_new(Arena *ar) { return ar_alloc(ar, sizeof(LeverGraphs)); }

int levers_graphs_hits(const LeverGraphs *m) { return m ? m->hits : 0; }

/* The model again with the batch dim set to mb (after the user's --set):
 * built once per compilation (rq->graphs; NULL: every time) for the same
 * overrides, since a graph is never changed once built. */
static Graph *with_micro_batch(Arena *ar, ModelSrc *src, const PlanRequest *rq, const char *bdim, int64_t mb) {
  for (MbGraph *e = rq->graphs ? rq->graphs->head : NULL; e; e = e->next)
    if (e->ov == rq->ov && e->nov == rq->nov && e->mb == mb) {
      rq->graphs->hits++;
      return e->g;
    }
  int n = rq->nov, i = 0;
  DimOverride *ov = ar_alloc(ar, sizeof(DimOverride) * (size_t)(n + 1));
  for (int k = 0; k < n; k++) ov[k] = rq->ov[k];
  while (i < n && strcmp(ov[i].name, bdim)) i++;
  ov[i] = (DimOverride){bdim, mb};
  Graph *g = load_build(src, ov, i == n ? n + 1 : n);
  for (int d = 0; d < g->ndims; d++) /* a micro-batch is the planner's choice, not a --set */
    if (!strcmp(g->dims[d].name, bdim)) g->dims[d].overridden = i < n;
  if (rq->graphs) {
    MbGraph *e = ar_alloc(ar, sizeof *e);
    *e = (MbGraph){rq->ov, rq->nov, mb, g, rq->graphs->head};
    rq->graphs->head = e;
  }
  return g;
}

/* Does an op compute batch statistics (OpInfo.batch_stats)? Then the
 * budget never splits the batch on its own: that would change the model. */
static bool batch_coupled(const Graph *g) {
  for (int i = 0; i < g->nops; i++)
    if (op_info(g->ops[i].kind)->batch_stats) return true;
  return false;
}

/* ------------------------------------------------------------------------
 * The estimate and the bounds. */

static int64_t st_bytes(const Step *s, int t) {
  return t < 0 ? 0 : dtype_numel_bytes(s->t[t].dtype, shape_numel(&s->t[t].shape));
}

/* Estimated seconds of one training step of s (the estimate the levers
 * minimize). Every instruction the step runs costs its roofline under the
 * cost model, max(FLOPs / rate, bytes / bandwidth), its bytes being every
 * tensor it reads or writes once (an accumulated output twice), plus the
 * model's op_overhead; forward, recompute and backward run once per
 * micro-batch, the updates once per step, and with micro-batches each
 * gradient is read again to accumulate in every pass after the first. So
 * recomputation costs its FLOPs, casts to and from half precision their
 * memory traffic, and micro-batches their extra op runs and weight and
 * gradient traffic. casts = false leaves the casts out (the time bound). */
static double step_seconds(const CostModel *cm, const Graph *g, const Step *s, bool casts) {
  double t = 0;
  int k = s->accumulation > 1 ? s->accumulation : 1;
  for (int i = 0; i < s->ntrain; i++) {
    const Instr *x = &s->train[i];
    if (x->kind == OP_CAST && !casts) continue;
    double flops = 0, bytes = 0;
    bool gemm = false;
    for (int j = 0; j < x->nin; j++) bytes += (double)st_bytes(s, x->in[j]);
    for (int j = 0; j < x->nout; j++) bytes += (double)st_bytes(s, x->out[j]) * (x->acc[j] ? 2 : 1);
    if (op_is_comm(x->kind) || x->kind == OP_CAST) { /* a collective (comm.c), a cast: bytes (no network
                                                        model); a cast has no op, also an update's (basew.h) */
    } else if (x->phase == PHASE_UPDATE) flops = 10.0 * (double)shape_numel(&s->t[x->op].shape);
    else {
      const Op *o = &g->ops[x->op];
      flops = (double)op_run_flops(g, o, x->phase == PHASE_BACKWARD, x->out);
      gemm = op_info(o->kind)->gemm;
    }
    double tc = flops / (gemm ? cm->matmul_flops : cm->other_flops), tm = bytes / cm->bandwidth;
    int runs = x->phase == PHASE_UPDATE ? 1 : k;
    t += runs * ((tc > tm ? tc : tm) + cm->op_overhead);
    if (k > 1 && x->phase == PHASE_BACKWARD) /* accumulating into the gradients of parameters */
      for (int j = 0; j < x->nout; j++)
        if (x->out[j] >= 0 && s->t[x->out[j]].role == ROLE_GRAD)
          t += (k - 1) * (double)st_bytes(s, x->out[j]) / cm->bandwidth;
  }
  return t;
}

/* Bytes no plan of the step's configuration goes below, whatever it
 * recomputes or lowers: every persistent buffer, plus, at the instruction
 * that needs most, its scratch and the larger of its inputs and its outputs
 * (distinct tensors live at once take distinct buffers; an in-place output
 * shares an input's, so inputs and outputs are not added). Recomputation
 * runs the same instructions on copies of the same size, and half storage
 * is cast back to fp32 before every backward read, so both have them too. */
static int64_t memory_bound(Arena *ar, const Step *s, int64_t align) {
  Live *l = live_build(ar, s, s->train, s->ntrain);
  int64_t pers = 0, most = 0;
  for (int b = 0; b < l->nb; b++)
    if (l->b[b].persistent) pers += mp_align_up(l->b[b].bytes, align);
  for (int i = 0; i < s->ntrain; i++) {
    const Instr *x = &s->train[i];
    int64_t io[2] = {0, 0};
    for (int side = 0; side < 2; side++) {
      int n = side ? x->nout : x->nin;
      const int *t = side ? x->out : x->in;
      for (int j = 0; j < n; j++) {
        if (t[j] < 0 || l->buf_of[t[j]] < 0 || l->b[l->buf_of[t[j]]].persistent) continue;
        bool seen = false; /* the same tensor twice (x * x) */
        for (int q = 0; q < j; q++) seen |= t[q] == t[j];
        if (!seen) io[side] += mp_align_up(st_bytes(s, t[j]), align);
      }
    }
    int64_t need =
        (io[0] > io[1] ? io[0] : io[1]) + (x->scratch >= 0 ? mp_align_up(st_bytes(s, x->scratch), align) : 0);
    if (need > most) most = need;
  }
  return pers + most;
}

/* ------------------------------------------------------------------------
 * Configurations. */

/* One configuration of the levers: the options of every plan fit_budget
 * makes for it (precision policy, dropout masks, recomputation allowed;
 * the fused loss's chunk and the optimizer state's precision will be
 * FitOptions fields too) and the model at its micro-batch. */
typedef struct Config {
  FitOptions fo;
  int64_t mb; /* rows per micro-batch (fo.accumulation of them per step) */
  Graph *g;
  double tbound;  /* no plan's estimate is lower */
  int64_t mbound; /* no plan's arena is lower */
  FitResult r;
  const struct Config *twin; /* the unfused configuration, where the model has no loss to fuse: fit_budget
                                plans both alike, so this one takes its result instead of planning it again */
  bool planned;
  double est; /* of r.plan */
  const char *pruned;
} Config;

/* The values the non-batch levers take, one FitOptions each, from the
 * request's: each lever a user left free adds its alternatives here (a
 * forced or forbidden one keeps the request's value). Storage precision and
 * dropout's masks are chosen inside fit_budget (under --precision auto the
 * checkpointing DP picks fp32 or bf16 per stage; auto masks try both). The
 * fused loss, free under a budget (--fused-loss auto), is planned both ways:
 * unfused, and fused with fit_budget choosing its chunk. The optimizer
 * state's precision is not a variant: it changes the numbers, so the driver
 * lowers it only when no configuration fits at a higher one (driver.c). */
static int option_variants(const PlanRequest *rq, FitOptions *v, int cap) {
  (void)cap;
  v[0] = rq->fit;
  if (rq->fit.loss_chunk != LOSS_AUTO) return 1;
  v[0].loss_chunk = LOSS_UNFUSED;
  if (!rq->budget) return 1;
  v[1] = v[0];
  v[1].loss_chunk = LOSS_FUSED;
  return 2;
}
enum { MAX_VARIANTS = 16 };

static PlanLever record(const Config *c) {
  PlanLever l = {
      .precision = prec_name(c->fo.precision),
      .micro_batch = (int)c->mb,
      .accumulation_steps = c->fo.accumulation,
      .time_bound = c->tbound,
      .memory_bound = c->mbound,
      .pruned = c->pruned,
      .loss_chunk = c->fo.loss_chunk == LOSS_UNFUSED ? 0 : -1,
      .opt_state = c->fo.opt_state == OPTS_BF16 || c->fo.opt_state == OPTS_8BIT ? optprec_name(c->fo.opt_state) : NULL};
  if (!c->planned) return l;
  if (c->r.loss_chunk) l.loss_chunk = c->r.loss_chunk;
  l.keep_arena = c->r.keep_arena;
  l.arena = c->r.min_arena;
  l.dropout_masks = c->r.masks;
  if (c->r.plan) { /* auto names what it chose */
    l.precision = c->r.plan->precision;
    l.arena = c->r.plan->arena_bytes;
    l.extra_flops = c->r.plan->extra_flops;
    l.step_flops = c->r.plan->step_flops;
    l.est_seconds = c->est;
    l.fits = true;
  }
  return l;
}

/* Orders by a bound, ties in the order enumerated (qsort is not stable). */
static int by_tbound(const void *a, const void *b) {
  const Config *x = *(Config *const *)a, *y = *(Config *const *)b;
  int c = (x->tbound > y->tbound) - (x->tbound < y->tbound);
  return c ? c : (x > y) - (x < y);
}
static int by_mbound(const void *a, const void *b) {
  const Config *x = *(Config *const *)a, *y = *(Config *const *)b;
  int c = (x->mbound > y->mbound) - (x->mbound < y->mbound);
  return c ? c : (x > y) - (x < y);
}

/* Plans c; pack_below as FitOptions' (0: every plan packed, the figures
 * the report shows exact). */
static void plan_config(Arena *ar, Config *c, int64_t budget, int64_t pack_below) {
  if (c->twin) { /* planned before it: the same tbound and mbound, enumerated first */
    MP_ASSERT(c->twin->planned);
    c->r = c->twin->r, c->est = c->twin->est, c->planned = true, c->pruned = NULL;
    return;
  }
  c->fo.pack_below = pack_below;
  c->r = fit_budget(ar, c->g, budget, &c->fo);
  c->planned = true;
  c->pruned = NULL;
  if (c->r.plan) c->est = step_seconds(cost_model(c->fo.backend), c->r.graph ? c->r.graph : c->g, c->r.step, true);
  /* the bounds that pruned other configurations hold for this one's plans */
  MP_ASSERT(c->r.plan ? c->r.plan->arena_bytes >= c->mbound && c->est >= c->tbound * (1 - 1e-9)
                      : !c->r.min_arena || c->r.min_arena >= c->mbound);
}

FitResult levers_fit(Arena *ar, ModelSrc *src, const PlanRequest *rq, Graph **g, const char **error) {
  const char *bdim = batch_dim(*g);
  int64_t B = bdim ? dim_value(*g, bdim) : 0;
  FitResult none = {0};
  if (rq->micro_batch && (!bdim || B % rq->micro_batch)) {
    *error = ar_printf(ar, "--micro-batch %lld must divide the batch %s = %lld", (long long)rq->micro_batch,
                       bdim ? bdim : "(the inputs have no common leading dim)", (long long)B);
    return none;
  }
  /* micro-batch sizes: the forced one; else the batch, and with a budget
   * every divisor below it, largest first, unless forbidden or the model
   * has batch statistics */
  VEC(int64_t) sizes = {0};
  if (rq->micro_batch) VEC_PUSH(ar, sizes, rq->micro_batch);
  else {
    VEC_PUSH(ar, sizes, B);
    bool split = rq->budget && bdim && !rq->no_micro_batch && !batch_coupled(*g);
    for (int64_t mb = B - 1; split && mb >= 1; mb--)
      if (B % mb == 0) VEC_PUSH(ar, sizes, mb);
  }
  FitOptions var[MAX_VARIANTS];
  int nv = option_variants(rq, var, MAX_VARIANTS);
  int n = sizes.n * nv;
  Config *cfg = ar_alloc(ar, sizeof(Config) * (size_t)n);
  Config **order = ar_alloc(ar, sizeof(Config *) * (size_t)n);
  for (int i = 0; i < sizes.n; i++) {
    int64_t mb = sizes.v[i];
    Graph *gm = !bdim || mb == B ? *g : with_micro_batch(ar, src, rq, bdim, mb);
    for (int v = 0; v < nv; v++) {
      Config *c = &cfg[i * nv + v];
      *c = (Config){.fo = var[v], .mb = bdim ? mb : 0, .g = gm};
      c->fo.accumulation = bdim ? (int)(B / mb) : 1;
      c->fo.bound_least = rq->no_least;
      Arena tmp = {0};
      const Graph *gl = fit_loss_graph(&tmp, gm, c->fo.loss_chunk);
      if (v && c->fo.loss_chunk == LOSS_FUSED && gl == gm) c->twin = &cfg[i * nv];
      if (c->twin) { /* the same step: its twin's bounds */
        c->tbound = c->twin->tbound, c->mbound = c->twin->mbound;
      } else {
        Step *keep = fit_keep_step(&tmp, gl, &c->fo);
        c->tbound = step_seconds(cost_model(c->fo.backend), gl, keep, false);
        c->mbound = memory_bound(&tmp, keep, c->fo.align);
      }
      ar_free(&tmp);
      order[i * nv + v] = c;
    }
  }
  /* the least time bound first: once a plan fits, a configuration whose
   * bound is no lower cannot beat it and is not planned */
  qsort(order, (size_t)n, sizeof(Config *), by_tbound);
  /* first only what could fit: no plan whose liveness bound is over the
   * budget is packed (the offset search of one that cannot fit would run to
   * its time limit for nothing) */
  Config *best = NULL;
  for (int i = 0; i < n; i++) {
    Config *c = order[i];
    if (rq->budget && c->mbound > rq->budget) c->pruned = "memory";
    else if (best && c->tbound >= best->est) c->pruned = "time";
    else {
      plan_config(ar, c, rq->budget, rq->budget ? rq->budget + 1 : 0);
      if (c->r.plan && (!best || c->est < best->est)) best = c;
    }
  }
  /* one fits: the report shows every planned configuration's arenas, so
   * the plans left unpacked (each over the budget: no choice reads them) are
   * packed now, their offset search cut to FIT_SHOW_TIME_LIMIT */
  for (int i = 0; best && i < n; i++)
    if (cfg[i].planned && !cfg[i].twin) fit_complete(ar, &cfg[i].r, 0, FIT_SHOW_TIME_LIMIT);
  for (int i = 0; best && i < n; i++)
    if (cfg[i].planned && cfg[i].twin) cfg[i].r = cfg[i].twin->r;
  /* nothing fits: the smallest budget that would. Configurations pruned by
   * memory are planned too while their bound is below the least arena, and
   * a plan left unpacked is packed when its bound is below the least found
   * so far (else it cannot lower it). */
  int64_t least = 0;
  if (!best && !rq->no_least) {
    qsort(order, (size_t)n, sizeof(Config *), by_mbound);
    for (int i = 0; i < n; i++) {
      Config *c = order[i];
      if (least && c->mbound >= least) break;
      if (!c->planned || c->twin) plan_config(ar, c, rq->budget, least);
      else fit_complete(ar, &c->r, least, -1);
      if (c->r.min_arena && (!least || c->r.min_arena < least)) least = c->r.min_arena;
    }
  }
  PlanLever *lv = ar_alloc(ar, sizeof(PlanLever) * (size_t)n);
  for (int i = 0; i < n; i++) {
    lv[i] = record(&cfg[i]);
    lv[i].chosen = &cfg[i] == best;
  }
  if (!best) {
    none.min_arena = least;
    return none;
  }
  FitResult r = best->r;
  r.plan->levers = lv;
  r.plan->nlevers = n;
  *g = best->g;
  return r;
}
