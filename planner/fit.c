/* fit.c: budget-driven choice among checkpointing schedules. */
#include "fit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build.h"
#include "comm.h"
#include "fit_describe.h"
#include "live.h"
#include "ops.h"
#include "plan_build.h"
#include "remat.h"
#include "remat_refine.h"

/* Saved activations that the precision policy may store in half (NULL:
 * none). bf16 and fp16 store all of them so; auto chooses per stage. */
static bool *half_set(Arena *ar, const Graph *g, const FitOptions *o) {
  return o->precision == PREC_FP32 ? NULL : prec_candidates(ar, g, ad_build(ar, g, true, NULL));
}

/* What the step keeping everything lowers: under auto, nothing (fp32 first;
 * half storage is a lever the DP pulls per stage). */
static bool *plain_half(Arena *ar, const Graph *g, const FitOptions *o) {
  return o->precision == PREC_AUTO ? NULL : half_set(ar, g, o);
}

/* The step for actions (NULL: keep everything) under the options: with
 * micro-batches, gradients accumulate across the loop, so updates wait for
 * the last pass, as they do under fp16's loss scaling, which must see every
 * gradient before any update, and as gradient clipping, which needs the norm
 * over all of them; half lists tensors stored in half precision. */
static Step *build_step(Arena *ar, const Graph *g, const FitOptions *o, const Actions *a, const bool *half) {
  bool accum = o->accumulation > 1, scaled = o->precision == PREC_FP16;
  bool clip = g->opt.clip_grad_norm > 0 && !o->ignore_clip;
  Step *s = ad_build(ar, g, o->fuse && !accum && !scaled && !clip, a);
  if (o->masks == MASKS_REGEN) s = ad_regen_stats(ar, s);
  if (o->head_grad == HG_DEFERRED) s = headgrad_defer(ar, g, s);
  s = opt_state_lower(ar, s, o->opt_state);
  s = basew_lower(ar, g, s, o->base_weights, o->param_prec);
  s->accumulation = accum ? o->accumulation : 1;
  DType dt = o->precision == PREC_AUTO ? DT_BF16 : prec_dtype(o->precision);
  if (half) s = prec_lower(ar, s, half, dt); /* the copy keeps accumulation */
  return o->ranks >= 1 ? comm_step(ar, s, o->ranks, o->zero, COMM_BUCKET_BYTES) : s;
}

/* What a plan does with dropout's masks (NULL: the model has none). */
static const char *masks_name(const Graph *g, Masks m) {
  return !ad_has_regen(g) ? NULL : m == MASKS_REGEN ? "regenerated" : "stored";
}

/* Step s's plan before offsets (its train liveness lt built already). */
static Plan *plan_unpacked(Arena *ar, const Graph *g, const Step *s, Live *lt, const FitOptions *o) {
  Plan *p = plan_build(ar, g, s, lt, live_build(ar, s, s->eval, s->neval), o->align);
  p->guard_bytes = o->guard;
  return p;
}

/* p (plan_unpacked's, of s) with its offsets and the options' figures. */
static Plan *plan_packed(Plan *p, const Graph *g, const Step *s, const FitOptions *o) {
  plan_assign_memo(p, o->time_limit, o->memo);
  p->extra_flops = s->recompute_flops;
  p->precision = prec_name(o->precision);
  if (o->precision == PREC_AUTO) { /* what auto chose: bf16 where anything was lowered */
    p->precision = "fp32";
    for (int b = 0; b < p->nbuf; b++) /* saved activations only (plan_buf_half_saved) */
      if (p->buf[b].dtype == DT_BF16 && plan_buf_half_saved(&p->buf[b])) p->precision = "bf16";
  }
  p->loss_scaling = o->precision == PREC_FP16;
  p->opt_state = g->opt.kind == OPT_ADAMW ? optprec_name(o->opt_state) : "fp32";
  p->base_weights = basew_name(basew_any(g) ? o->base_weights : BW_FP32);
  p->param_precision = paramprec_name(paramprec_any(g) && o->param_prec == PP_BF16 ? PP_BF16 : PP_FP32);
  p->head_grad = headgrad_name(headgrad_deferred(s) ? HG_DEFERRED : HG_KEPT);
  p->dropout_masks = masks_name(g, o->masks);
  for (int i = 0; i < g->nops; i++) /* the fused loss: its chunk (dims N V K R) */
    if (g->ops[i].kind == OP_LINEAR_CROSS_ENTROPY) {
      int64_t d[MAX_KDIM];
      int nd;
      op_info(g->ops[i].kind)->dims(g, &g->ops[i], d, &nd);
      p->loss_chunk = d[3];
    }
  return p;
}

Plan *fit_plan(Arena *ar, const Graph *g, const Step *s, const FitOptions *o) {
  return plan_packed(plan_unpacked(ar, g, s, live_build(ar, s, s->train, s->ntrain), o), g, s, o);
}

Step *fit_keep_step(Arena *ar, const Graph *g, const FitOptions *o) {
  FitOptions k = *o;
  if (k.masks == MASKS_AUTO) k.masks = ad_has_regen(g) ? MASKS_REGEN : MASKS_STORE;
  return build_step(ar, g, &k, NULL, plain_half(ar, g, o));
}

int64_t fit_unfused_lower_bound(Arena *ar, const Graph *g, const FitOptions *o, const Step *step, const Plan *fused) {
  if (!step->fused || fused->extra_flops || o->guard || (o->precision == PREC_AUTO && strcmp(fused->precision, "fp32")))
    return 0;
  FitOptions u = *o;
  u.fuse = false;
  u.masks = fused->dropout_masks && !strcmp(fused->dropout_masks, "regenerated") ? MASKS_REGEN : MASKS_STORE;
  Step *s = build_step(ar, g, &u, NULL, plain_half(ar, g, o));
  int at;
  int64_t lb = live_peak(live_build(ar, s, s->train, s->ntrain), o->align, &at);
  for (int b = 0; b < fused->nbuf; b++) /* the step's tensors do not include the library workspace */
    if (fused->buf[b].role == ROLE_WORKSPACE) lb += mp_align_up(fused->buf[b].bytes, o->align);
  return lb;
}

/* A whole-graph schedule as the walk tries it: remat candidate rc with
 * its kept tensors in fp32 (half NULL) or, under auto, the half candidates
 * among them stored in bf16 (half: that set), time its seconds under the
 * chain's cost model (casts included, as chain.c charges them). */
typedef struct {
  int rc;
  const bool *half;
  double time;
} Whole;

typedef struct {
  const Graph *g;
  const FitOptions *o;
  Step *plain;
  Chain *chain;
  CkptTable *T;
  bool *half;
  RematCand *rc; /* whole-graph schedules (remat.h), fastest first; NULL where remat_wanted says REMAT_NONE */
  int nrc;
  Whole *w; /* the walk's whole-graph schedules, fastest first: rc 1.. in fp32, under auto each rc also in bf16 */
  int nw;
  double base;     /* seconds of the step keeping everything, under the chain's cost model */
  Arena trial;     /* the greedy's trial steps */
  bool trial_half; /* trial_peak stores the half candidates the schedule keeps in bf16 (auto's second greedy) */
  bool big;        /* rc is remat.c's ranking of a big step: peaks unknown (-1), bounds falling with the index */
  RematUse use;    /* what remat_wanted said of the step */
  int64_t target;  /* the peak remat.c's refinement searched under (0: the greedy's) */
  bool packed;     /* solver_whole searches under the budget's arena alone (trial_arena) */
  PackMemo *memo;  /* trial_arena's packings (the eval schedule's is every trial's) */
  double missed;   /* the fastest whole-graph schedule the walk packed over the budget (INFINITY: none) */
} Solver;

/* The half candidates among the tensors a whole-graph schedule's step s
 * (built without half storage) keeps for backward; casts: their casts'
 * seconds (12 bytes an element, as chain.c charges them). */
static bool *kept_half(Arena *ar, const Solver *S, const Step *s, double *casts) {
  const CostModel *cm = cost_model(S->o->backend);
  bool *h = ar_alloc(ar, sizeof(bool) * (size_t)(S->g->nt + 1));
  *casts = 0;
  for (int t = 0; t < S->g->nt; t++)
    if ((h[t] = S->half[t] && s->saved[t])) *casts += 12.0 * (double)shape_numel(&S->g->t[t].shape) / cm->bandwidth;
  return h;
}

/* RematPeak: the liveness peak of a whole-graph schedule's real step and
 * its live bytes summed over positions. Under auto in fp32 (the first
 * greedy) or, with trial_half, with what it keeps in bf16 (the second). */
static Live *trial_live(Solver *S, const Actions *a, Step **step, int64_t *peak, double *area) {
  ar_reset(&S->trial);
  const bool *half = S->o->precision == PREC_AUTO ? NULL : S->half;
  if (S->trial_half) {
    double casts;
    half = kept_half(&S->trial, S, ad_build(&S->trial, S->g, true, a), &casts);
  }
  Step *s = *step = build_step(&S->trial, S->g, S->o, a, half);
  Live *l = live_build(&S->trial, s, s->train, s->ntrain);
  int at;
  *peak = live_peak(l, S->o->align, &at);
  *area = 0;
  for (int b = 0; b < l->nb; b++)
    if (!l->b[b].persistent) *area += (double)l->b[b].bytes * (double)(l->b[b].last - l->b[b].first);
  return l;
}

static void trial_peak(void *ctx, const Actions *a, int64_t *peak, double *area) {
  Step *s;
  trial_live(ctx, a, &s, peak, area);
}

/* RematPeak under the budget's arena (S->target): the plan's arena, packed
 * with REMAT_TRIAL_PACK_LIMIT, where the step's and then the plan's bound
 * are within it (else that bound: the arena is over it too). The walk packs
 * what it finds with its own limit, which starts from the same passes. */
static void trial_arena(void *ctx, const Actions *a, int64_t *peak, double *area) {
  Solver *S = ctx;
  Step *s;
  Live *l = trial_live(S, a, &s, peak, area);
  if (*peak > S->target) return;
  FitOptions o = *S->o;
  o.time_limit = REMAT_TRIAL_PACK_LIMIT, o.memo = S->memo;
  Plan *p = plan_unpacked(&S->trial, S->g, s, l, &o);
  if ((*peak = plan_lower_bound(p)) > S->target) return;
  *peak = plan_packed(p, S->g, s, &o)->arena_bytes;
}

/* S->w: every whole-graph candidate but the first (it keeps everything:
 * the plan keeping everything) in fp32 and, under auto, every one with the
 * half candidates (prec_candidates) among the tensors its step keeps for
 * backward stored in bf16, paying its casts' time as the chain's bf16
 * options do; under auto a second greedy ranks its schedules with that
 * storage (it keeps what bf16 makes cheap to keep, and drops the rest),
 * its candidates joining in bf16. Fastest first, so the walk's first fit
 * is the fastest of both levers together. */
static void whole_variants(Arena *ar, Solver *S) {
  /* a big step's candidates (peak < 0: ranked without building a step)
   * stay fp32: each variant would cost a step build */
  bool choose = S->o->precision == PREC_AUTO && S->half && S->nrc > 1 && !S->big;
  int n32 = S->nrc, nh = 0;
  RematCand *hc = NULL;
  if (choose) {
    S->trial_half = true;
    hc = remat_candidates(ar, S->g, S->plain, cost_model(S->o->backend), S->use, S->target, trial_peak,
                          S->packed ? trial_arena : NULL, S, &nh);
    S->trial_half = false;
    RematCand *all = ar_alloc(ar, sizeof(RematCand) * (size_t)(n32 + nh));
    for (int i = 0; i < n32 + nh; i++) all[i] = i < n32 ? S->rc[i] : hc[i - n32];
    S->rc = all, S->nrc = n32 + nh;
  }
  S->w = ar_alloc(ar, sizeof(Whole) * (size_t)(2 * S->nrc + 1));
  S->nw = 0;
  for (int i = 0; i < S->nrc; i++) {
    if (i && i < n32) S->w[S->nw++] = (Whole){i, NULL, S->base + S->rc[i].recompute};
    if (!choose) continue;
    ar_reset(&S->trial);
    double casts;
    bool *h = kept_half(ar, S, ad_build(&S->trial, S->g, true, &S->rc[i].a), &casts);
    if (casts > 0) S->w[S->nw++] = (Whole){i, h, S->base + S->rc[i].recompute + casts};
  }
  ar_free(&S->trial);
  for (int i = 1; i < S->nw; i++) /* fastest first (stable: fp32 before bf16 on a tie) */
    for (int j = i; j > 0 && S->w[j].time < S->w[j - 1].time; j--) {
      Whole t = S->w[j];
      S->w[j] = S->w[j - 1], S->w[j - 1] = t;
    }
}

/* The whole-graph schedules (remat_candidates) and the walk's variants of
 * them; target > 0: the one peak the refinement searches under. */
static void solver_whole(Arena *ar, Solver *S, int64_t target) {
  S->target = target;
  S->memo = S->packed ? pack_memo_new(ar) : NULL;
  S->rc = remat_candidates(ar, S->g, S->plain, cost_model(S->o->backend), S->use, target, trial_peak,
                           S->packed ? trial_arena : NULL, S, &S->nrc);
  S->big = S->nrc > 1 && S->rc[1].peak < 0;
  ar_free(&S->trial);
  whole_variants(ar, S);
}

/* The chain and its DP table: solved once per fit, every candidate read from
 * it; the whole-graph schedules too where the chain has a large stage
 * (REMAT_GRAPH). A small chain's (REMAT_CHAIN) are searched by the caller:
 * the walk only where a DP schedule fits (they can make its plan faster;
 * searched for every configuration the levers walk, where nothing fits
 * too, they cost dropout-mlp 0.9 s of CPU at 40% of keep-all instead of
 * 0.06 s), refined under the budget; the sweep always, under each of the
 * greedy's peaks. */
static void solver_init(Arena *ar, Solver *S, const Graph *g, const FitOptions *o, int64_t budget) {
  *S = (Solver){.g = g, .o = o, .missed = INFINITY};
  S->plain = ad_build(ar, g, true, NULL); /* the chain and keep sets read the plain step */
  if (o->masks == MASKS_REGEN) S->plain = ad_regen_stats(ar, S->plain);
  S->half = o->precision == PREC_FP32 ? NULL : prec_candidates(ar, g, S->plain);
  S->chain = chain_build(ar, g, S->plain, cost_model(o->backend), S->half, o->precision == PREC_AUTO);
  /* the table has stages^2 (M + 1) cells: fewer units for long chains, and
   * no checkpointing where even 8 units would not fit in 2^26 cells */
  int64_t n = S->chain->n, M = o->units > 0 ? o->units : 500, cap = ((int64_t)1 << 26) / (n * n) - 1;
  if (M > cap) M = cap;
  S->T = n > 1 && M >= 8 ? ckpt_solve(ar, S->chain, (int)M, ckpt_unit(S->chain, (int)M)) : NULL;
  int nf = 0, largest = 0;
  S->base = 0;
  for (int i = 0; i < S->chain->n; i++) {
    const Stage *st = &S->chain->s[i];
    nf += st->last - st->first;
    if (st->last - st->first > largest) largest = st->last - st->first;
    S->base += st->f + st->opt[0].b;
  }
  S->rc = NULL, S->nrc = 0, S->w = NULL, S->nw = 0;
  S->use = remat_wanted(S->plain, nf, largest);
  if (S->use == REMAT_GRAPH) solver_whole(ar, S, budget);
}

/* The tensors a schedule stores in half: all candidates under a fixed
 * policy; under auto, for the chain's schedules, the candidates of the
 * stages whose kept run chose a half option; for a whole-graph one, its
 * variant's (w, Whole.half). */
static const bool *half_of(Arena *ar, const Solver *S, const Actions *a, const Whole *w) {
  if (S->o->precision != PREC_AUTO || !S->half) return S->half;
  if (w) return w->half;
  const Graph *g = S->g;
  bool *h = ar_alloc(ar, sizeof(bool) * (size_t)(g->nt + 1));
  for (int x = 0; x < a->n; x++) {
    const Stage *st = &S->chain->s[a->a[x].stage];
    if (a->a[x].kind != ACT_KEEP || !st->opt[a->a[x].option].half) continue;
    for (int i = st->first; i < st->last; i++) {
      const Op *o = &g->ops[S->plain->train[i].op];
      for (int j = 0; j < o->nout; j++) h[o->out[j]] = S->half[o->out[j]];
    }
  }
  return h;
}

/* Seconds a schedule takes under the chain's cost model. */
static double schedule_time(const Chain *c, const Actions *a) {
  double t = 0;
  for (int x = 0; x < a->n; x++) {
    const Stage *st = &c->s[a->a[x].stage];
    t += a->a[x].kind == ACT_BACKWARD ? st->opt[a->a[x].option].b : st->f;
  }
  return t;
}

/* The same schedule with every kept stage on its lightest option: the DP's
 * memory units cannot see a few megabytes, the arena check can. */
static Actions lightest(Arena *ar, const Chain *c, Actions a) {
  Action *v = ar_alloc(ar, sizeof(Action) * (size_t)(a.n ? a.n : 1));
  int *last = ar_alloc(ar, sizeof(int) * (size_t)(c->n + 1)); /* the option of each stage's latest forward */
  for (int x = 0; x < a.n; x++) {
    v[x] = a.a[x];
    if (v[x].kind == ACT_KEEP) v[x].option = chain_lightest(&c->s[v[x].stage]);
    if (v[x].kind == ACT_BACKWARD) v[x].option = last[v[x].stage]; /* a held output's backward: option 0 */
    else last[v[x].stage] = v[x].option;
  }
  a.a = v;
  return a;
}

/* The DP's schedule at m units (light: its lightest variant) as a step,
 * before offsets: its time under the cost model and the liveness lower
 * bound of its training schedule (persistent buffers included), which no
 * packing goes below. Offsets cost far more than this, so a candidate whose
 * bound exceeds the budget is never packed. */
typedef struct {
  Actions a;
  const bool *half; /* the tensors stored in half (NULL: none) */
  Step *step;
  Live *lt;
  double time;
  int64_t lb;
} Cand;

/* m >= 0: the DP's schedule at m units (light: its lightest variant);
 * m < 0: whole-graph schedule -1 - m (S->w). */
static Cand cand_step(Arena *ar, const Solver *S, int m, bool light) {
  Cand c;
  const Whole *w = m < 0 ? &S->w[-1 - m] : NULL;
  if (w) {
    c.a = S->rc[w->rc].a;
    c.time = w->time;
  } else {
    c.a = ckpt_actions(ar, S->T, m);
    if (light) c.a = lightest(ar, S->chain, c.a);
    c.time = schedule_time(S->chain, &c.a);
  }
  c.half = half_of(ar, S, &c.a, w);
  c.step = build_step(ar, S->g, S->o, &c.a, c.half);
  c.lt = live_build(ar, c.step, c.step->train, c.step->ntrain);
  int at;
  c.lb = live_peak(c.lt, S->o->align, &at);
  return c;
}

/* The candidate's plan (p: plan_unpacked's, or NULL), offsets assigned. */
static Plan *cand_plan(Arena *ar, const Solver *S, const Cand *c, Plan *p) {
  p = plan_packed(p ? p : plan_unpacked(ar, S->g, c->step, c->lt, S->o), S->g, c->step, S->o);
  MP_ASSERT(p->lower_bound_bytes >= c->lb && p->lower_bound_bytes == plan_lower_bound(p)); /* else the skips err */
  if (c->a.ctx == S->chain) fit_describe(ar, p, S->g, S->plain, S->chain, &c->a);
  else fit_describe_dag(ar, p, S->g, S->plain, &c->a, c->half);
  return p;
}

/* The plan of the DP's schedule at m units (light: its lightest variant),
 * built in ar, with its step and its time under the cost model. */
static Plan *candidate(Arena *ar, const Solver *S, int m, bool light, Step **step, double *time) {
  Cand c = cand_step(ar, S, m, light);
  *step = c.step;
  *time = c.time;
  return cand_plan(ar, S, &c, NULL);
}

/* Candidates a bound kept from being packed: when nothing fits, their least arena is still wanted (the
 * budget that would fit); planned: by its plan's bound alone (packed as the walk's were). */
typedef struct {
  int64_t lb;
  int m;
  bool light, planned;
} Unpacked;
typedef VEC(Unpacked) Unpackeds;

/* Trades the contents of two arenas. */
static void ar_swap(Arena *a, Arena *b) {
  Arena t = *a;
  *a = *b;
  *b = t;
}

/* Candidate m (or its lightest variant) built in tmp (reset first) and
 * checked: when its arena fits the budget and it runs in less than `limit`,
 * it becomes r's plan, tmp and *best trading places (the last winner's
 * memory becomes the next candidates'). */
static bool try_fit(Solver *S, int m, bool light, int64_t budget, double limit, FitResult *r, Arena *tmp, Arena *best,
                    double *best_time, Arena *scratch, Unpackeds *skipped) {
  ar_reset(tmp);
  Cand c = cand_step(tmp, S, m, light);
  if (c.time >= limit) return false; /* slower than the plan already found */
  if (c.lb > budget) {               /* cannot fit: remembered for the least arena */
    r->bounded++;
    VEC_PUSH(scratch, *skipped, ((Unpacked){c.lb, m, light, false}));
    return false;
  }
  /* The plan's bound (the step's lacks the library workspace) over the
   * budget: no offset search (it ran to its limit, 0.3 CPU s on the random
   * DAGs), every figure as if packed: missed, its arena wanted for the
   * least where a packing joined it (min_arena set). */
  Plan *p = plan_unpacked(tmp, S->g, c.step, c.lt, S->o);
  if (plan_lower_bound(p) > budget) {
    r->bounded++;
    if (r->min_arena) VEC_PUSH(scratch, *skipped, ((Unpacked){plan_lower_bound(p), m, light, true}));
    if (m < 0 && c.time < S->missed) S->missed = c.time;
    return false;
  }
  p = cand_plan(tmp, S, &c, p);
  r->candidates++;
  if (p->arena_bytes < r->min_arena) r->min_arena = p->arena_bytes;
  if (p->arena_bytes > budget) {
    if (m < 0 && c.time < S->missed) S->missed = c.time;
    return false;
  }
  ar_swap(tmp, best);
  r->plan = p;
  r->step = c.step;
  *best_time = c.time;
  return true;
}

static int by_lb(const void *a, const void *b) {
  const Unpacked *x = a, *y = b;
  return (x->lb > y->lb) - (x->lb < y->lb);
}

/* The least arena among the candidates the bound skipped, when nothing fit:
 * packed in the order of their bounds until the next bound is no lower
 * than the least arena found, so r->min_arena is what packing every
 * candidate would have found. */
static void least_skipped(const Solver *S, Unpackeds *u, FitResult *r, Arena *tmp) {
  if (u->n) qsort(u->v, (size_t)u->n, sizeof(Unpacked), by_lb); /* (NULL with none: qsort takes no NULL) */
  for (int i = 0; i < u->n && (!r->min_arena || u->v[i].lb < r->min_arena); i++) {
    if (u->v[i].m < 0 && S->o->bound_least && !u->v[i].planned) { /* (the big steps' schedules pack slowly) */
      r->min_arena = u->v[i].lb;
      continue;
    }
    ar_reset(tmp);
    Cand c = cand_step(tmp, S, u->v[i].m, u->v[i].light);
    /* under the levers (pack_below), a big step's schedule over the budget
     * is packed for its arena alone, with a short offset search: sd-unet
     * spent 0.4 CPU s of its 8G compile here at 0.5 s a search */
    FitOptions o = *S->o;
    if (u->v[i].m < 0 && S->big && o.pack_below && o.time_limit > FIT_SHOW_TIME_LIMIT && !u->v[i].planned)
      o.time_limit = FIT_SHOW_TIME_LIMIT;
    Plan *p = plan_packed(plan_unpacked(tmp, S->g, c.step, c.lt, &o), S->g, c.step, &o);
    r->candidates++;
    if (!r->min_arena || p->arena_bytes < r->min_arena) r->min_arena = p->arena_bytes;
  }
}

/* The first whole-graph schedule worth trying. A big step's (peak < 0:
 * remat.c ranked them without building any) drop more with each index, so
 * their bounds fall with it: the last one's is built first, and when it
 * exceeds the budget none is tried (it alone is remembered for the least
 * arena); else a bisection builds log2(n) of them and the walk starts at
 * the first whose bound is within budget. */
static int rc_first(const Solver *S, int64_t budget, Arena *tmp, Arena *scratch, Unpackeds *skipped, FitResult *r) {
  if (S->nw < 2 || !S->big) return 0;
  int lo = 0, hi = S->nw - 1; /* the first within budget is in [lo, hi] */
  ar_reset(tmp);
  Cand c = cand_step(tmp, S, -1 - hi, false);
  if (c.lb > budget) { /* the least bound of all: nothing is within budget */
    r->bounded++;
    VEC_PUSH(scratch, *skipped, ((Unpacked){c.lb, -1 - hi, false, false}));
    return S->nw;
  }
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    ar_reset(tmp);
    c = cand_step(tmp, S, -1 - mid, false);
    if (c.lb <= budget) hi = mid;
    else lo = mid + 1, r->bounded++;
  }
  return lo;
}

/* The DP's fastest schedule whose verified arena fits the budget, under o,
 * into r (plan, step; candidates and min_arena accumulate). Returns its time
 * under the cost model, INFINITY when none fits. The DP is solved once;
 * walking its schedules from the cheapest, a schedule that misses may fit
 * with lighter options, which is kept while nothing cheaper fits. The plan
 * that wins is the one checked: its arena joins the caller's. */
static double walk(Arena *ar, const Graph *g, int64_t budget, const FitOptions *o, FitResult *r) {
  Arena scratch = {0}, tmp = {0}, best = {0};
  Solver S;
  solver_init(&scratch, &S, g, o, budget);
  double best_time = INFINITY, last = NAN;
  Unpackeds skipped = {0};
  for (int m = S.T ? S.T->M : -1; m >= 0; m--) {
    double c = ckpt_cost(S.T, m);
    if (!isfinite(c) || c >= best_time) break;
    if (c == last) continue; /* the same schedule as the previous m */
    last = c;
    if (try_fit(&S, m, false, budget, INFINITY, r, &tmp, &best, &best_time, &scratch, &skipped)) break;
    try_fit(&S, m, true, budget, best_time, r, &tmp, &best, &best_time, &scratch, &skipped);
  }
  if (S.use == REMAT_CHAIN && isfinite(best_time)) solver_whole(&scratch, &S, budget);
  /* the whole-graph schedules, fastest first (rc 0 keeps everything: planned already) */
  for (int i = rc_first(&S, budget, &tmp, &scratch, &skipped, r); i < S.nw && S.w[i].time < best_time; i++)
    if (try_fit(&S, -1 - i, false, budget, best_time, r, &tmp, &best, &best_time, &scratch, &skipped)) break;
  /* a faster schedule fit by its live bytes, not its arena (random-1 at 11.59 MiB: refined ones of 11.50 MiB live
   * pack into 11.72-12.59, the greedy's +83.89% fits): refined under the arena, whenever one missed (at 13.59 MiB:
   * missed +25.18% of the step's seconds, plan +30.60%, the optimum +23.88%) */
  if (S.use == REMAT_GRAPH && !S.big && S.missed < best_time) {
    S.packed = true;
    solver_whole(&scratch, &S, budget);
    for (int i = 0; i < S.nw && S.w[i].time < best_time; i++)
      if (try_fit(&S, -1 - i, false, budget, best_time, r, &tmp, &best, &best_time, &scratch, &skipped)) break;
  }
  if (!isfinite(best_time)) least_skipped(&S, &skipped, r, &tmp);
  ar_adopt(ar, &best);
  ar_free(&tmp);
  ar_free(&scratch);
  return best_time;
}

/* A packed plan keeping everything, into r's figures (keep: the first of
 * its fit_graph, whose arena is keep_arena). */
static void keep_packed(FitResult *r, const Plan *p, bool keep) {
  r->candidates++;
  if (keep) r->keep_arena = p->arena_bytes;
  if (!r->min_arena || p->arena_bytes < r->min_arena) r->min_arena = p->arena_bytes;
}

/* The plan keeping everything under o, into r when it fits. When its
 * liveness bound reaches pack_below it cannot fit, and it is deferred
 * unpacked: its offset search (to the time limit where the bound is not
 * reached) is wasted unless its arena is wanted (fit_complete). */
static bool keep_all(Arena *ar, const Graph *g, int64_t budget, const FitOptions *o, FitResult *r) {
  Step *plain = build_step(ar, g, o, NULL, plain_half(ar, g, o));
  Live *lt = live_build(ar, plain, plain->train, plain->ntrain);
  int at;
  int64_t lb = o->pack_below ? live_peak(lt, o->align, &at) : 0;
  bool keep = !r->keep_arena && !r->deferred;
  if (o->pack_below && lb >= o->pack_below) {
    MP_ASSERT(budget && lb > budget); /* pack_below is above the budget */
    FitDeferred *d = ar_alloc(ar, sizeof *d);
    *d = (FitDeferred){.g = g, .o = *o, .lb = lb, .keep = keep, .next = r->deferred};
    d->o.pack_below = 0;
    r->deferred = d;
    r->masks = masks_name(g, o->masks);
    return false;
  }
  Plan *p = plan_packed(plan_unpacked(ar, g, plain, lt, o), g, plain, o);
  keep_packed(r, p, keep);
  r->masks = p->dropout_masks;
  if (budget && p->arena_bytes > budget) return false;
  r->plan = p;
  r->step = plain;
  return true;
}

/* The fastest plan of one graph within budget; with keep_only, only plans
 * keeping every activation (r.plan NULL when none fits). */
static FitResult fit_graph(Arena *ar, const Graph *g, int64_t budget, const FitOptions *opt, bool keep_only) {
  FitResult r = {.graph = g};
  FitOptions fo = *opt;
  bool choose = fo.masks == MASKS_AUTO && ad_has_regen(g);
  if (fo.masks == MASKS_AUTO) fo.masks = MASKS_STORE;
  if (keep_all(ar, g, budget, &fo, &r)) return r;
  if (keep_only && choose) {
    FitOptions rg = fo;
    rg.masks = MASKS_REGEN;
    keep_all(ar, g, budget, &rg, &r);
    r.masks = r.plan ? r.plan->dropout_masks : NULL;
  }
  if (keep_only) return r;
  if (!choose) {
    if (!fo.no_recompute) walk(ar, g, budget, &fo, &r);
    return r;
  }
  /* Dropout's masks, when the plan keeping them all did not fit: keeping
   * everything with the masks regenerated costs no recomputation; failing
   * that, the checkpointing DP under each policy (what a stage keeps, and so
   * the DP's choices, change with the masks), the faster plan winning and
   * stored masks on a tie. */
  FitOptions rg = fo;
  rg.masks = MASKS_REGEN;
  if (keep_all(ar, g, budget, &rg, &r)) return r;
  if (fo.no_recompute) {
    r.masks = NULL; /* both were tried */
    return r;
  }
  FitResult rs = r;
  double ts = walk(ar, g, budget, &fo, &rs);
  FitResult rr = rs;
  rr.plan = NULL;
  rr.step = NULL;
  double tr = walk(ar, g, budget, &rg, &rr);
  r = rr; /* the counters of both walks */
  if (rs.plan && (!rr.plan || ts <= tr)) {
    r.plan = rs.plan;
    r.step = rs.step;
  }
  r.masks = r.plan ? r.plan->dropout_masks : NULL; /* none fit: both were tried */
  return r;
}

/* r with its graph's fused-loss chunk. */
static FitResult chunked(FitResult r) {
  for (int i = 0; i < r.graph->nops; i++)
    if (r.graph->ops[i].kind == OP_LINEAR_CROSS_ENTROPY) {
      int64_t d[MAX_KDIM];
      int nd;
      op_info(OP_LINEAR_CROSS_ENTROPY)->dims(r.graph, &r.graph->ops[i], d, &nd);
      r.loss_chunk = d[3];
    }
  return r;
}

void fit_complete(Arena *ar, FitResult *r, int64_t below, double time_limit) {
  const FitDeferred *left = NULL;
  for (const FitDeferred *d = r->deferred; d; d = d->next) {
    if (below && d->lb >= below) { /* still not wanted */
      FitDeferred *k = ar_alloc(ar, sizeof *k);
      *k = *d, k->next = left, left = k;
      continue;
    }
    FitOptions o = d->o;
    if (time_limit >= 0 && time_limit < o.time_limit) o.time_limit = time_limit;
    Step *plain = build_step(ar, d->g, &o, NULL, plain_half(ar, d->g, &o));
    keep_packed(r, fit_plan(ar, d->g, plain, &o), d->keep);
  }
  r->deferred = left;
}

/* Adds the counters of a fit tried before r (its deferred plans too, none
 * of them r's keep-all). */
static FitResult merged(Arena *ar, FitResult r, const FitResult *before) {
  r.candidates += before->candidates;
  for (const FitDeferred *d = before->deferred; d; d = d->next) {
    FitDeferred *k = ar_alloc(ar, sizeof *k);
    *k = *d, k->keep = false, k->next = r.deferred, r.deferred = k;
  }
  if (before->min_arena && (!r.min_arena || before->min_arena < r.min_arena)) r.min_arena = before->min_arena;
  return r;
}

/* A lower bound of the arena keeping every activation under o: the step's
 * peak of live bytes (no offsets, no workspace; dropout's masks, if any,
 * regenerated: the fewer bytes). Cheaper than a plan; when it exceeds the
 * budget, no plan keeping everything fits. */
static int64_t keep_lower_bound(Arena *ar, const Graph *g, const FitOptions *o) {
  FitOptions t = *o;
  t.masks = ad_has_regen(g) ? MASKS_REGEN : MASKS_STORE;
  Step *s = build_step(ar, g, &t, NULL, plain_half(ar, g, &t));
  int at;
  return live_peak(live_build(ar, s, s->train, s->ntrain), o->align, &at);
}

/* The fused loss' chunks tried for N rows: N/8 and N/64 rows, none below
 * 64 (a product of fewer rows runs the classifier's GEMM at a fraction of
 * its rate, and saves at most 64 rows of logits). Not N: a chunk of every
 * row holds all the logits, as the unfused pair does, and the levers plan
 * that pair beside the fused loss anyway. */
static void loss_chunks(int64_t N, int64_t chunk[3]) {
  int64_t floor = N < 64 ? N : 64;
  chunk[0] = (N + 7) / 8 > floor ? (N + 7) / 8 : floor;
  chunk[1] = (N + 7) / 8 > floor ? (N + 7) / 8 : floor;
  chunk[2] = (N + 63) / 64 > floor ? (N + 63) / 64 : floor;
}

static int64_t loss_rows(const Graph *fused) {
  int64_t d[MAX_KDIM];
  int nd;
  for (int i = 0; i < fused->nops; i++)
    if (fused->ops[i].kind == OP_LINEAR_CROSS_ENTROPY) {
      op_info(OP_LINEAR_CROSS_ENTROPY)->dims(fused, &fused->ops[i], d, &nd);
      return d[0];
    }
  return 0;
}

const Graph *fit_loss_graph(Arena *ar, const Graph *g, int64_t loss_chunk) {
  if (loss_chunk == LOSS_UNFUSED || loss_chunk == LOSS_AUTO) return g;
  if (loss_chunk > 0) {
    const Graph *f = gb_fuse_loss(ar, g, loss_chunk);
    return f ? f : g;
  }
  const Graph *whole = gb_fuse_loss(ar, g, 0);
  if (!whole) return g;
  int64_t chunk[3];
  loss_chunks(loss_rows(whole), chunk);
  return chunk[2] == chunk[0] ? whole : gb_fuse_loss(ar, g, chunk[2]);
}

/* Does r's plan keep every activation (no recomputation)? */
static bool keeps_all(const FitResult *r) { return r->plan && !r->plan->extra_flops && !r->plan->nstages; }

FitResult fit_budget(Arena *ar, const Graph *g, int64_t budget, const FitOptions *opt) {
  FitOptions fo = *opt;
  int64_t lc = fo.loss_chunk;
  fo.loss_chunk = LOSS_UNFUSED;
  const Graph *whole = lc == LOSS_UNFUSED ? NULL : gb_fuse_loss(ar, g, 0);
  if (!whole) return fit_graph(ar, g, budget, &fo, false);
  if (lc > 0) return chunked(fit_graph(ar, gb_fuse_loss(ar, g, lc), budget, &fo, false));
  FitResult r = {0};
  /* auto: unfused while that keeps everything (the logits whole, as without
   * the lever); its lower bound first, which rules most budgets out cheaply */
  if (lc == LOSS_AUTO && (!budget || keep_lower_bound(ar, g, &fo) <= budget)) {
    r = fit_graph(ar, g, budget, &fo, true);
    if (r.plan) return r;
  }
  /* the chunk (loss_chunks): the largest that keeps everything in
   * budget. The smallest is planned first, recomputing if it must: when it
   * cannot keep everything, no larger chunk can, and its plan is the one */
  int64_t N = loss_rows(whole), chunk[3];
  loss_chunks(N, chunk);
  const Graph *smallest = chunk[2] == N ? whole : gb_fuse_loss(ar, g, chunk[2]);
  FitResult least = merged(ar, chunked(fit_graph(ar, smallest, budget, &fo, false)), &r);
  if (!keeps_all(&least)) return least;
  for (int c = 0; c < 2; c++) {
    if (chunk[c] == chunk[2] || (c && chunk[c] == chunk[c - 1])) continue;
    const Graph *fg = chunk[c] == N ? whole : gb_fuse_loss(ar, g, chunk[c]);
    if (budget && keep_lower_bound(ar, fg, &fo) > budget) continue;
    FitResult k = chunked(fit_graph(ar, fg, budget, &fo, true));
    if (k.plan) return merged(ar, k, &least);
    least.candidates += k.candidates;
  }
  return least;
}

/* A sweep row: the plan's arena, its time under the cost model, its line. */
typedef struct {
  int64_t arena;
  double time;
  const char *line;
} Row;

static Row sweep_row(Arena *ar, const Plan *p, double time) {
  char buf[32], stages[4096];
  int n = 0;
  for (int i = 0; i < p->nstages && n + 2 < (int)sizeof stages; i++) /* lowercase: kept in bf16 */
    stages[n++] = (char)(p->stages[i].half ? p->stages[i].choice - 'A' + 'a' : p->stages[i].choice);
  stages[n] = '\0';
  const char *line = ar_printf(
      ar, "%-16lld %16s %8.2f%%  %s\n", (long long)p->arena_bytes, mp_fmt_bytes(buf, sizeof buf, p->arena_bytes),
      100.0 * (double)p->extra_flops / (double)p->step_flops, n ? stages : "all kept (no recomputation)");
  return (Row){p->arena_bytes, time, line};
}

static int by_time(const void *a, const void *b) {
  const Row *x = a, *y = b;
  return x->time != y->time ? (x->time > y->time) - (x->time < y->time) : (x->arena > y->arena) - (x->arena < y->arena);
}

/* Every schedule's plan, the DP's and the whole-graph ones, fastest first:
 * prints a Pareto row when it saves at least 1% of the full arena over the
 * last printed one, and always the least-memory row. */
void fit_sweep(Arena *ar, const Graph *g, const FitOptions *o, FILE *out) {
  Solver S;
  solver_init(ar, &S, g, o, 0);
  if (S.use == REMAT_CHAIN) solver_whole(ar, &S, 0);
  Plan *base = fit_plan(ar, g, build_step(ar, g, o, NULL, plain_half(ar, g, o)), o);
  fprintf(out, "%-16s %16s %9s  stages (K keep, S selective, R recompute; k, s, r: kept in bf16)\n", "arena bytes",
          "arena", "extra %");
  VEC(Row) rows = {0};
  VEC_PUSH(ar, rows, sweep_row(ar, base, S.base));
  double last = NAN;
  Arena tmp = {0};
  for (int m = S.T ? S.T->M : -1; m >= -S.nw; m--) {
    if (m >= 0) {
      double c = ckpt_cost(S.T, m);
      if (!isfinite(c) || c == last) continue; /* c == last: the same schedule as the previous m */
      last = c;
    }
    ar_reset(&tmp);
    Step *s;
    double t;
    Plan *p = candidate(&tmp, &S, m, false, &s, &t);
    VEC_PUSH(ar, rows, sweep_row(ar, p, t));
  }
  ar_free(&tmp);
  qsort(rows.v + 1, (size_t)(rows.n - 1), sizeof(Row), by_time);
  int64_t best = base->arena_bytes, printed = best, step = base->arena_bytes / 100;
  fputs(rows.v[0].line, out);
  const Row *pending = NULL;
  for (int i = 1; i < rows.n; i++) {
    if (rows.v[i].arena >= best) continue; /* less memory for more compute, or nothing */
    best = rows.v[i].arena, pending = &rows.v[i];
    if (printed - best >= step) {
      fputs(pending->line, out);
      printed = best, pending = NULL;
    }
  }
  if (pending) fputs(pending->line, out);
}
