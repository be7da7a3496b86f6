/* remat.c: keep sets and recompute schedules over the whole graph. */
#include "remat.h"

#include <math.h>
#include <stdlib.h>

#include "ops.h"
#include "remat_refine.h"

typedef struct {
  Arena *ar;
  const Graph *g;
  int nf;          /* forward ops: stage i is forward op i */
  int *fidx;       /* per graph op: its forward index, -1 */
  int nb;          /* backward instructions, in the step's order */
  int *bstage;     /* per backward position: its stage */
  int *need_first; /* per backward position: its reads in need[need_first[b] .. need_first[b + 1]) */
  int *need;       /* graph activations the backward reads */
  double *fcost;   /* per stage: seconds of one forward run */
  int *first;      /* Actions.stage_first */
  /* one schedule being built */
  const bool *keep;
  int gap;
  int *used; /* per tensor: the backward position its newest recomputed copy was last read at, -1 none */
  VEC(Action) a;
  double rec;
} Rm;

static bool keeps_all(const void *ctx, int s, int k, int t) {
  (void)ctx, (void)s, (void)k, (void)t;
  return true; /* every recompute is an action of its own (ACT_FORWARD) */
}

static bool is_act(const Graph *g, int t) { return t >= 0 && t < g->nt && g->t[t].kind == TK_ACT; }

/* A copy of t readable at backward position now: kept, reused, or recomputed
 * (its dropped inputs first). */
static void ensure(Rm *r, int t, int now) {
  const Graph *g = r->g;
  int op = g->t[t].producer, s = op >= 0 ? r->fidx[op] : -1;
  if (s < 0 || r->keep[t]) return;
  if (r->used[t] >= 0 && now - r->used[t] <= r->gap) {
    r->used[t] = now;
    return;
  }
  const Op *o = &g->ops[op];
  for (int k = 0; k < o->nin; k++)
    if (is_act(g, o->in[k])) ensure(r, o->in[k], now);
  VEC_PUSH(r->ar, r->a, ((Action){ACT_FORWARD, s, 0}));
  r->rec += r->fcost[s];
  for (int k = 0; k < o->nout; k++) r->used[o->out[k]] = now;
}

/* The schedule of keep set keep and reuse gap gap, for a trial build (its
 * step's tensors unnamed: cand() copies it out named). */
static Actions schedule(Rm *r, const bool *keep, int gap, double *rec) {
  r->keep = keep, r->gap = gap, r->rec = 0;
  r->a.n = 0;
  for (int t = 0; t < r->g->nt; t++) r->used[t] = -1;
  for (int i = 0; i < r->nf; i++) VEC_PUSH(r->ar, r->a, ((Action){ACT_KEEP, i, 0}));
  for (int b = 0; b < r->nb; b++) {
    for (int j = r->need_first[b]; j < r->need_first[b + 1]; j++) ensure(r, r->need[j], b);
    VEC_PUSH(r->ar, r->a, ((Action){ACT_BACKWARD, r->bstage[b], 0}));
  }
  *rec = r->rec;
  return (Actions){r->a.v, r->a.n, r->first, r->nf, keeps_all, NULL, .unnamed = true};
}

/* The schedule as a candidate: its actions copied out of the one being built. */
static RematCand cand(Rm *r, const bool *keep, int gap, int64_t peak) {
  RematCand c = {.peak = peak};
  c.a = schedule(r, keep, gap, &c.recompute);
  Action *v = ar_alloc(r->ar, sizeof(Action) * (size_t)c.a.n);
  for (int x = 0; x < c.a.n; x++) v[x] = c.a.a[x];
  c.a.a = v, c.a.unnamed = false;
  return c;
}

static int saved_count(const Step *plain) {
  int saved = 0;
  for (int t = 0; t < plain->nt; t++) saved += plain->saved[t];
  return saved;
}

RematUse remat_wanted(const Step *plain, int nforward, int largest_stage) {
  if (nforward < 4) return REMAT_NONE;
  if (largest_stage * 4 > nforward) return REMAT_GRAPH;
  return saved_count(plain) <= REMAT_CHAIN_SAVED ? REMAT_CHAIN : REMAT_NONE;
}

static void rm_init(Rm *r, Arena *ar, const Graph *g, const Step *plain, const CostModel *cm) {
  *r = (Rm){.ar = ar, .g = g};
  r->fidx = ar_alloc(ar, sizeof(int) * (size_t)(g->nops + 1));
  for (int i = 0; i < g->nops; i++) r->fidx[i] = -1;
  while (r->nf < plain->ntrain && plain->train[r->nf].phase == PHASE_FORWARD) r->nf++;
  r->fcost = ar_alloc(ar, sizeof(double) * (size_t)(r->nf + 1));
  r->first = ar_alloc(ar, sizeof(int) * (size_t)(r->nf + 1));
  for (int i = 0; i <= r->nf; i++) r->first[i] = i;
  for (int i = 0; i < r->nf; i++) {
    r->fidx[plain->train[i].op] = i;
    r->fcost[i] = cost_op(cm, g, &g->ops[plain->train[i].op], false);
  }
  r->bstage = ar_alloc(ar, sizeof(int) * (size_t)(plain->ntrain + 1));
  r->need_first = ar_alloc(ar, sizeof(int) * (size_t)(plain->ntrain + 2));
  VEC(int) need = {0};
  for (int i = r->nf; i < plain->ntrain; i++) {
    const Instr *x = &plain->train[i];
    if (x->phase != PHASE_BACKWARD) continue;
    r->bstage[r->nb] = r->fidx[x->op];
    r->need_first[r->nb++] = need.n;
    for (int k = 0; k < x->nin; k++)
      if (is_act(g, x->in[k]) && plain->saved[x->in[k]]) VEC_PUSH(ar, need, x->in[k]);
  }
  r->need_first[r->nb] = need.n;
  r->need = need.v;
  r->used = ar_alloc(ar, sizeof(int) * (size_t)(g->nt + 1));
}

/* Greedy rounds for one gap, every schedule passed pushed to out. */
typedef VEC(RematCand) Cands;

static void greedy(Rm *r, const Step *plain, int gap, RematPeak peak, void *ctx, Cands *out) {
  const Graph *g = r->g;
  bool *keep = ar_alloc(r->ar, sizeof(bool) * (size_t)(g->nt + 1));
  int nk = 0;
  for (int t = 0; t < g->nt; t++) {
    keep[t] = is_act(g, t) && plain->saved[t] && g->t[t].producer >= 0 && r->fidx[g->t[t].producer] >= 0;
    nk += keep[t];
  }
  double area, rec = 0;
  int64_t pk;
  Actions a = schedule(r, keep, gap, &rec);
  peak(ctx, &a, &pk, &area);
  RematCand cur = cand(r, keep, gap, pk);
  if (gap == 0) VEC_PUSH(r->ar, *out, cur); /* keep-all: the same for every gap */
  while (nk > 0) {
    int best = -1;
    bool best_lower = false;
    double best_score = -INFINITY, best_area = 0;
    int64_t best_peak = 0;
    for (int t = 0; t < g->nt; t++) {
      if (!keep[t]) continue;
      keep[t] = false;
      double ar2;
      a = schedule(r, keep, gap, &rec);
      peak(ctx, &a, &pk, &ar2);
      keep[t] = true;
      double dt = fmax(rec - cur.recompute, 1e-12);
      bool lower = pk < cur.peak;
      double score = lower ? (double)(cur.peak - pk) / dt : (area - ar2) / dt;
      if ((lower && !best_lower) || (lower == best_lower && score > best_score)) {
        best = t, best_lower = lower, best_score = score;
        best_peak = pk, best_area = ar2;
      }
    }
    keep[best] = false;
    nk--;
    cur = cand(r, keep, gap, best_peak);
    area = best_area;
    VEC_PUSH(r->ar, *out, cur);
  }
}

/* Big steps: the saved tensors by recomputation seconds per byte, cheapest
 * first (a tie: the larger first, then the older), and the schedule keeping
 * all but each prefix whose bytes pass the next of REMAT_STEPS equal shares
 * of the saved bytes: a handful of schedules, none built here. */
typedef struct {
  double rate;
  int64_t bytes;
  int t;
} Ranked;

/* Is every forward activation t's producer reads kept (so recomputing t
 * reruns that op alone)? */
static bool inputs_kept(const Rm *r, const bool *keep, int t) {
  const Op *o = &r->g->ops[r->g->t[t].producer];
  for (int k = 0; k < o->nin; k++) {
    int u = o->in[k], p = is_act(r->g, u) ? r->g->t[u].producer : -1;
    if (p >= 0 && r->fidx[p] >= 0 && !keep[u]) return false;
  }
  return true;
}

static int by_rate(const void *a, const void *b) {
  const Ranked *x = a, *y = b;
  if (x->rate != y->rate) return (x->rate > y->rate) - (x->rate < y->rate);
  if (x->bytes != y->bytes) return (x->bytes < y->bytes) - (x->bytes > y->bytes);
  return (x->t > y->t) - (x->t < y->t);
}

static void ranked(Rm *r, const Step *plain, int gap, Cands *out) {
  const Graph *g = r->g;
  bool *keep = ar_alloc(r->ar, sizeof(bool) * (size_t)(g->nt + 1));
  Ranked *v = ar_alloc(r->ar, sizeof(Ranked) * (size_t)(g->nt + 1));
  int n = 0;
  int64_t total = 0;
  for (int t = 0; t < g->nt; t++) {
    keep[t] = is_act(g, t) && plain->saved[t] && g->t[t].producer >= 0 && r->fidx[g->t[t].producer] >= 0;
    if (!keep[t]) continue;
    int64_t bytes = shape_numel(&g->t[t].shape) * dtype_size(g->t[t].dtype);
    v[n++] = (Ranked){r->fcost[r->fidx[g->t[t].producer]] / (double)(bytes > 0 ? bytes : 1), bytes, t};
    total += bytes;
  }
  qsort(v, (size_t)n, sizeof(Ranked), by_rate);
  VEC_PUSH(r->ar, *out, cand(r, keep, gap, -1));
  int64_t dropped = 0;
  for (int i = 0, step = 1; i < n; i++) {
    if (!inputs_kept(r, keep, v[i].t)) continue;
    keep[v[i].t] = false;
    dropped += v[i].bytes;
    if (dropped * REMAT_STEPS < total * step && i + 1 < n) continue;
    VEC_PUSH(r->ar, *out, cand(r, keep, gap, -1));
    while (dropped * REMAT_STEPS >= total * step) step++;
  }
}

static bool same(const Actions *a, const Actions *b) {
  if (a->n != b->n) return false;
  for (int x = 0; x < a->n; x++)
    if (a->a[x].kind != b->a[x].kind || a->a[x].stage != b->a[x].stage) return false;
  return true;
}

/* remat_refine.c's schedules, one or two per greedy candidate's peak, from
 * the schedule that recomputes every read (nothing kept, gap 0); trials,
 * closure, per_byte: each order's (the second and third run only with
 * closure > 0). */
static void refine(Rm *r, RematPeak peak, void *ctx, int trials, int closure, int per_byte, int64_t target, int64_t cap,
                   Cands *all) {
  bool *none = ar_alloc(r->ar, sizeof(bool) * (size_t)(r->g->nt + 1));
  double rec, area;
  int64_t pk;
  Actions a = schedule(r, none, 0, &rec);
  peak(ctx, &a, &pk, &area);
  RematCand most = cand(r, none, 0, pk);
  /* the targets: the greedy's peaks, distinct, ascending */
  int64_t *targets = ar_alloc(r->ar, sizeof(int64_t) * (size_t)(all->n + 1));
  int nt = 0;
  for (int i = 0; i < all->n; i++) {
    int j = nt;
    for (; j > 0 && targets[j - 1] > all->v[i].peak; j--) targets[j] = targets[j - 1];
    if (j > 0 && targets[j - 1] == all->v[i].peak) {
      for (; j < nt; j++) targets[j] = targets[j + 1];
      continue;
    }
    targets[j] = all->v[i].peak, nt++;
  }
  /* the peaks over cap dropped (a plan within cap packs no schedule over it) */
  while (cap > 0 && nt > 1 && targets[nt - 1] > cap) nt--;
  if (target > 0) /* every trial spent under the one peak wanted */
    targets[0] = target, nt = 1;
  RematCand *out = ar_alloc(r->ar, sizeof(RematCand) * (size_t)(6 * nt + 1));
  int n = 0;
  int *op = ar_alloc(r->ar, sizeof(int) * (size_t)(r->nf + 1));
  for (int i = 0; i < r->g->nops; i++)
    if (r->fidx[i] >= 0) op[r->fidx[i]] = i;
  RematReads rd = {r->g, op, r->need_first, r->need, r->fcost};
  remat_refine(r->ar, &most, &rd, peak, ctx, targets, nt, trials, REMAT_ORDER_SECONDS, out, &n);
  /* the second and third orders: their schedules join the first's */
  for (RematOrder o = REMAT_ORDER_CLOSURE; closure > 0 && o <= REMAT_ORDER_PER_BYTE; o++) {
    int n2 = 0;
    remat_refine(r->ar, &most, &rd, peak, ctx, targets, nt, o == REMAT_ORDER_CLOSURE ? closure : per_byte, o, out + n,
                 &n2);
    n += n2;
  }
  for (int i = 0; i < n; i++) VEC_PUSH(r->ar, *all, out[i]);
}

RematCand *remat_candidates(Arena *ar, const Graph *g, const Step *plain, const CostModel *cm, RematUse use,
                            int64_t target, RematPeak peak, RematPeak packed, void *ctx, int *n) {
  Rm r;
  rm_init(&r, ar, g, plain, cm);
  Cands all = {0};
  if (saved_count(plain) > REMAT_MAX_SAVED) {
    (void)peak, (void)ctx;
    ranked(&r, plain, REMAT_BIG_GAP, &all);
    *n = all.n;
    return all.v;
  }
  bool chain = use == REMAT_CHAIN;
  if (packed) { /* the refinement under the budget's arena alone, beside keeping everything */
    bool *keep = ar_alloc(ar, sizeof(bool) * (size_t)(g->nt + 1));
    for (int t = 0; t < g->nt; t++)
      keep[t] = is_act(g, t) && plain->saved[t] && g->t[t].producer >= 0 && r.fidx[g->t[t].producer] >= 0;
    VEC_PUSH(ar, all, cand(&r, keep, 0, 0));
    refine(&r, packed, ctx, REMAT_PACKED_TRIALS, REMAT_PACKED_CLOSURE_TRIALS, REMAT_PACKED_PER_BYTE_TRIALS, target, 0,
           &all);
  } else {
    static const int gaps[] = {0, 2, 8, 1 << 30};
    for (size_t i = 0; i < sizeof gaps / sizeof gaps[0]; i++) greedy(&r, plain, gaps[i], peak, ctx, &all);
    int n0 = all.n;
    bool budget_too = !chain && target > 0; /* the trials shared with the refinement under the budget */
    /* the third order gets twice the first two's trials (random-2 at 14.76 MiB needs 3000) */
    int t1 = chain ? REMAT_CHAIN_TRIALS : REMAT_REFINE_TRIALS - (budget_too ? REMAT_BUDGET_TRIALS : 0),
        t2 = chain ? 0 : REMAT_CLOSURE_TRIALS - (budget_too ? REMAT_BUDGET_CLOSURE_TRIALS : 0);
    refine(&r, peak, ctx, t1, t2, 2 * (t1 + t2), chain ? target : 0, target, &all);
    if (budget_too) { /* and under the budget alone, beside the greedy's peaks */
      Cands budget = {all.v, n0, n0};
      refine(&r, peak, ctx, REMAT_BUDGET_TRIALS, REMAT_BUDGET_CLOSURE_TRIALS,
             2 * (REMAT_BUDGET_TRIALS + REMAT_BUDGET_CLOSURE_TRIALS), target, 0, &budget);
      for (int i = n0; i < budget.n; i++) VEC_PUSH(ar, all, budget.v[i]);
    }
  }
  /* fastest first; every one stays, also where a faster one peaks as low:
   * a liveness peak is not the arena its plan packs into (random-1 at
   * 12.47 MiB packs a schedule of a 12.02 MiB liveness peak, not the
   * faster ones of 12.95 MiB; random-1's 16.47 MiB and random-2's 15.02
   * MiB lost 6-8% of the step to the pruning, with two search orders) */
  for (int i = 1; i < all.n; i++)
    for (int j = i; j > 0 && all.v[j].recompute < all.v[j - 1].recompute; j--) {
      RematCand t = all.v[j];
      all.v[j] = all.v[j - 1], all.v[j - 1] = t;
    }
  int m = 0;
  for (int i = 0; i < all.n; i++) {
    int j = m - 1; /* the same schedule as one kept (found again by another target or order): once */
    while (j >= 0 && all.v[j].recompute == all.v[i].recompute && !same(&all.v[j].a, &all.v[i].a)) j--;
    if (j < 0 || all.v[j].recompute != all.v[i].recompute) all.v[m++] = all.v[i];
  }
  *n = m;
  return all.v;
}
