/* ckpt.c: the Rotor dynamic program and the schedule it implies. */
#include "ckpt.h"

#include <math.h>

#define AT(T, s, t, m) (((size_t)(s) * (size_t)(T)->c->n + (size_t)(t)) * (size_t)((T)->M + 1) + (size_t)(m))

/* Bytes to units, rounded to nearest: the DP ranks schedules and the real
 * arena of each candidate is checked after offsets, so unbiased rounding
 * beats a pessimistic ceiling that adds up over many stages. */
static int units(const CkptTable *T, int64_t bytes) {
  int64_t u = (bytes + T->unit / 2) / T->unit;
  return u > T->M ? T->M + 1 : (int)u;
}

int64_t ckpt_unit(const Chain *c, int M) {
  int64_t total = 0, work = 0;
  for (int i = 0; i < c->n; i++) {
    total += c->s[i].opt[0].keep_bytes;
    if (c->s[i].work > work) work = c->s[i].work;
  }
  int64_t u = (total + work + M - 1) / M;
  return u > 0 ? u : 1;
}

/* A stage's options in units: kept, and kept plus the stage's work. */
static void option_units(const CkptTable *T, const Stage *st, int *keep, int *need) {
  for (int k = 0; k < st->nopt; k++) {
    keep[k] = units(T, st->opt[k].keep_bytes);
    need[k] = units(T, st->opt[k].keep_bytes + st->work);
  }
}

/* s == t: keep the stage with its cheapest option that fits; with its
 * output held (H), its backward alone. */
static void solve_one(CkptTable *T, int s, const int *worku) {
  const Stage *st = &T->c->s[s];
  int keep[STAGE_MAX_OPTIONS], need[STAGE_MAX_OPTIONS];
  option_units(T, st, keep, need);
  for (int m = 0; m <= T->M; m++) {
    float best = INFINITY;
    int16_t ch = 0;
    for (int k = 0; k < st->nopt; k++) {
      float c = (float)(st->f + st->opt[k].b);
      if (need[k] <= m && c < best) {
        best = c;
        ch = (int16_t)(-1 - k);
      }
    }
    T->cost[AT(T, s, s, m)] = best, T->choice[AT(T, s, s, m)] = ch;
    if (T->hcost) T->hcost[AT(T, s, s, m)] = st->out_only && worku[s] <= m ? (float)st->opt[0].b : INFINITY;
  }
}

/* A held variant replaces Rotor's choice only where it is faster by more
 * than the floats' rounding: plans that gain nothing stay as they were. */
static bool faster(float c, float best) { return c < best - 1e-6f * best; }

/* C(s, t) and, where stage t is out_only, H(s, t). Every unit count the
 * loops over m need is computed before them (the divisions were most of
 * the table's time); the arithmetic is the same. */
static void solve_range(CkptTable *T, int s, int t, const double *fsum, const int *worku, const int *xu, int *segx) {
  const Stage *st = &T->c->s[s];
  const int n = T->c->n;
  const bool held = T->hcost && T->c->s[t].out_only;
  int keep[STAGE_MAX_OPTIONS], need[STAGE_MAX_OPTIONS];
  option_units(T, st, keep, need);
  for (int j = s + 1, segwork = worku[s]; j <= t; j++) { /* checkpoint at j: x_j + the segment's work */
    if (worku[j - 1] > segwork) segwork = worku[j - 1];
    segx[j] = xu[j] + segwork;
  }
  for (int h = 0; h <= held; h++) {
    float *cost = h ? T->hcost : T->cost; /* the segment ending at t: C, or H */
    for (int m = 0; m <= T->M; m++) {
      float best = INFINITY;
      int16_t ch = 0;
      for (int k = 0; k < st->nopt; k++) {
        if (keep[k] > m || need[k] > m) continue;
        float c = (float)(st->f + st->opt[k].b) + cost[AT(T, s + 1, t, m - keep[k])];
        if (c < best) {
          best = c;
          ch = (int16_t)(-1 - k);
        }
      }
      for (int j = s + 1; j <= t; j++) {
        if (segx[j] > m) continue;
        float c = (float)(fsum[j] - fsum[s]) + cost[AT(T, j, t, m - xu[j])] + T->cost[AT(T, s, j - 1, m)];
        if (c < best) {
          best = c;
          ch = (int16_t)j;
        }
        if (!T->hcost || !T->c->s[j - 1].out_only) continue;
        c = (float)(fsum[j] - fsum[s]) + cost[AT(T, j, t, m - xu[j])] + T->hcost[AT(T, s, j - 1, m - xu[j])];
        if (faster(c, best)) {
          best = c;
          ch = (int16_t)(n + j);
        }
      }
      cost[AT(T, s, t, m)] = best, (h ? T->hchoice : T->choice)[AT(T, s, t, m)] = ch;
    }
  }
}

CkptTable *ckpt_solve(Arena *ar, const Chain *c, int M, int64_t unit) {
  MP_ASSERT(c->n > 0 && 2 * c->n < INT16_MAX && M > 0);
  CkptTable *T = ar_alloc(ar, sizeof(CkptTable));
  *T = (CkptTable){c, M, unit, NULL, NULL, NULL, NULL};
  size_t cells = (size_t)c->n * (size_t)c->n * (size_t)(M + 1);
  T->cost = ar_alloc(ar, sizeof(float) * cells);
  T->choice = ar_alloc(ar, sizeof(int16_t) * cells);
  bool any = false;
  for (int i = 0; i + 1 < c->n; i++) any |= c->s[i].out_only;
  if (any) {
    T->hcost = ar_alloc(ar, sizeof(float) * cells);
    T->hchoice = ar_alloc(ar, sizeof(int16_t) * cells);
    for (size_t i = 0; i < cells; i++) T->hcost[i] = INFINITY;
  }
  double *fsum = ar_alloc(ar, sizeof(double) * (size_t)(c->n + 1));
  int *worku = ar_alloc(ar, sizeof(int) * (size_t)c->n), *xu = ar_alloc(ar, sizeof(int) * (size_t)c->n);
  int *segx = ar_alloc(ar, sizeof(int) * (size_t)c->n);
  for (int i = 0; i < c->n; i++) {
    fsum[i + 1] = fsum[i] + c->s[i].f;
    worku[i] = units(T, c->s[i].work);
    xu[i] = units(T, c->s[i].x_in);
  }
  for (int s = 0; s < c->n; s++) solve_one(T, s, worku);
  for (int len = 1; len < c->n; len++)
    for (int s = 0; s + len < c->n; s++) solve_range(T, s, s + len, fsum, worku, xu, segx);
  return T;
}

double ckpt_cost(const CkptTable *T, int m) { return T->cost[AT(T, 0, T->c->n - 1, m)]; }

typedef struct {
  Arena *ar;
  const CkptTable *T;
  VEC(Action) a;
} Emit;

/* The actions of C(s, t, m), or of H(s, t, m) (held: stage t's output is
 * still held from the forward that made it, its backward needs no forward). */
static void emit(Emit *e, int s, int t, int m, bool held) {
  const CkptTable *T = e->T;
  const int n = T->c->n;
  MP_ASSERT(isfinite((held ? T->hcost : T->cost)[AT(T, s, t, m)]));
  if (held && s == t) {
    VEC_PUSH(e->ar, e->a, ((Action){ACT_BACKWARD, s, 0}));
    return;
  }
  int ch = (held ? T->hchoice : T->choice)[AT(T, s, t, m)];
  if (ch < 0) {
    int k = -1 - ch;
    VEC_PUSH(e->ar, e->a, ((Action){ACT_KEEP, s, k}));
    if (s < t) emit(e, s + 1, t, m - units(T, T->c->s[s].opt[k].keep_bytes), held);
    VEC_PUSH(e->ar, e->a, ((Action){ACT_BACKWARD, s, k}));
    return;
  }
  int j = ch > n ? ch - n : ch;
  for (int i = s; i < j; i++) VEC_PUSH(e->ar, e->a, ((Action){ACT_FORWARD, i, 0}));
  emit(e, j, t, m - units(T, T->c->s[j].x_in), held);
  if (ch > n) emit(e, s, j - 1, m - units(T, T->c->s[j].x_in), true);
  else emit(e, s, j - 1, m, false);
}

Actions ckpt_actions(Arena *ar, const CkptTable *T, int m) {
  Emit e = {ar, T, {0}};
  emit(&e, 0, T->c->n - 1, m, false);
  return (Actions){e.a.v, e.a.n, chain_stage_first(ar, T->c), T->c->n, chain_keeps_cb, T->c, false};
}
