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

/* s == t: keep the stage with its cheapest option that fits. */
static void solve_one(CkptTable *T, int s) {
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
  }
}

/* Every unit count the loops over m need is computed before them (the
 * divisions were most of the table's time); the arithmetic is the same. */
static void solve_range(CkptTable *T, int s, int t, const double *fsum, const int *worku, const int *xu, int *segx) {
  const Stage *st = &T->c->s[s];
  int keep[STAGE_MAX_OPTIONS], need[STAGE_MAX_OPTIONS];
  option_units(T, st, keep, need);
  for (int j = s + 1, segwork = worku[s]; j <= t; j++) { /* checkpoint at j: x_j + the segment's work */
    if (worku[j - 1] > segwork) segwork = worku[j - 1];
    segx[j] = xu[j] + segwork;
  }
  for (int m = 0; m <= T->M; m++) {
    float best = INFINITY;
    int16_t ch = 0;
    for (int k = 0; k < st->nopt; k++) {
      if (keep[k] > m || need[k] > m) continue;
      float c = (float)(st->f + st->opt[k].b) + T->cost[AT(T, s + 1, t, m - keep[k])];
      if (c < best) {
        best = c;
        ch = (int16_t)(-1 - k);
      }
    }
    for (int j = s + 1; j <= t; j++) {
      if (segx[j] > m) continue;
      float c = (float)(fsum[j] - fsum[s]) + T->cost[AT(T, j, t, m - xu[j])] + T->cost[AT(T, s, j - 1, m)];
      if (c < best) {
        best = c;
        ch = (int16_t)j;
      }
    }
    T->cost[AT(T, s, t, m)] = best, T->choice[AT(T, s, t, m)] = ch;
  }
}

CkptTable *ckpt_solve(Arena *ar, const Chain *c, int M, int64_t unit) {
  MP_ASSERT(c->n > 0 && c->n < INT16_MAX && M > 0);
  CkptTable *T = ar_alloc(ar, sizeof(CkptTable));
  *T = (CkptTable){c, M, unit, NULL, NULL};
  size_t cells = (size_t)c->n * (size_t)c->n * (size_t)(M + 1);
  T->cost = ar_alloc(ar, sizeof(float) * cells);
  T->choice = ar_alloc(ar, sizeof(int16_t) * cells);
  double *fsum = ar_alloc(ar, sizeof(double) * (size_t)(c->n + 1));
  int *worku = ar_alloc(ar, sizeof(int) * (size_t)c->n), *xu = ar_alloc(ar, sizeof(int) * (size_t)c->n);
  int *segx = ar_alloc(ar, sizeof(int) * (size_t)c->n);
  for (int i = 0; i < c->n; i++) {
    fsum[i + 1] = fsum[i] + c->s[i].f;
    worku[i] = units(T, c->s[i].work);
    xu[i] = units(T, c->s[i].x_in);
  }
  for (int s = 0; s < c->n; s++) solve_one(T, s);
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

static void emit(Emit *e, int s, int t, int m) {
  const CkptTable *T = e->T;
  MP_ASSERT(isfinite(T->cost[AT(T, s, t, m)]));
  int ch = T->choice[AT(T, s, t, m)];
  if (ch < 0) {
    int k = -1 - ch;
    VEC_PUSH(e->ar, e->a, ((Action){ACT_KEEP, s, k}));
    if (s < t) emit(e, s + 1, t, m - units(T, T->c->s[s].opt[k].keep_bytes));
    VEC_PUSH(e->ar, e->a, ((Action){ACT_BACKWARD, s, k}));
    return;
  }
  for (int i = s; i < ch; i++) VEC_PUSH(e->ar, e->a, ((Action){ACT_FORWARD, i, 0}));
  emit(e, ch, t, m - units(T, T->c->s[ch].x_in));
  emit(e, s, ch - 1, m);
}

Actions ckpt_actions(Arena *ar, const CkptTable *T, int m) {
  Emit e = {ar, T, {0}};
  emit(&e, 0, T->c->n - 1, m);
  return (Actions){e.a.v, e.a.n, chain_stage_first(ar, T->c), T->c->n, chain_keeps_cb, T->c, false};
}
