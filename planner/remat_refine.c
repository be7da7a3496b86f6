/* remat_refine.c: deleting recompute points under a target peak. */
#include "remat_refine.h"

/* The schedule without the deleted points, in buf; its recompute seconds. */
static Actions without(const Actions *most, const bool *del, const double *fcost, Action *buf, double *rec) {
  Actions a = *most;
  int m = 0;
  *rec = 0;
  for (int x = 0; x < most->n; x++) {
    if (del[x]) continue;
    buf[m++] = most->a[x];
    if (most->a[x].kind == ACT_FORWARD) *rec += fcost[most->a[x].stage];
  }
  a.a = buf, a.n = m;
  return a;
}

/* Deletes the recompute points whose copies nothing reads (after the
 * deletions in del, the reads take older copies). */
static void drop_dead(const Actions *m, const RematReads *rd, bool *del, int *prod, bool *read) {
  const Graph *g = rd->g;
  for (bool again = true; again;) {
    again = false;
    for (int t = 0; t < g->nt; t++) prod[t] = -1;
    for (int x = 0, b = 0; x < m->n; x++) {
      read[x] = false;
      if (del[x]) continue;
      if (m->a[x].kind == ACT_BACKWARD) {
        for (int j = rd->need_first[b]; j < rd->need_first[b + 1]; j++)
          if (prod[rd->need[j]] >= 0) read[prod[rd->need[j]]] = true;
        b++;
        continue;
      }
      const Op *o = &g->ops[rd->op[m->a[x].stage]];
      for (int k = 0; k < o->nin; k++)
        if (o->in[k] >= 0 && prod[o->in[k]] >= 0) read[prod[o->in[k]]] = true;
      for (int k = 0; k < o->nout; k++)
        if (o->out[k] >= 0) prod[o->out[k]] = x;
    }
    for (int x = 0; x < m->n; x++)
      if (!del[x] && !read[x] && m->a[x].kind == ACT_FORWARD) del[x] = again = true;
  }
}

/* The search: the starting schedule's points in the order tried, and the
 * state of one descent. */
typedef struct {
  const Actions *m;
  const RematReads *rd;
  RematPeak peak;
  void *ctx;
  int *pts, np; /* the recompute points of m, the most expensive first */
  int *pos;     /* per action of m: its backward position */
  bool *was, *read, *tabu;
  int *prod;
  Action *buf;
  int trials; /* peak evaluations left */
} Search;

/* Passes over the points in order, deleting each that is not tabu (with
 * the points it leaves dead) where the peak stays at or under target, until
 * a pass deletes none. Returns the last peak accepted, or `pk`. */
static int64_t descend(Search *S, bool *del, int64_t target, int64_t pk) {
  const Actions *m = S->m;
  for (bool again = true; again;) {
    again = false;
    for (int i = 0; S->trials > 0 && i < S->np; i++) {
      int x0 = S->pts[i];
      if (del[x0] || S->tabu[x0]) continue;
      for (int x = 0; x < m->n; x++) S->was[x] = del[x];
      del[x0] = true;
      drop_dead(m, S->rd, del, S->prod, S->read);
      double rec, area;
      int64_t p;
      Actions a = without(m, del, S->rd->fcost, S->buf, &rec);
      S->peak(S->ctx, &a, &p, &area);
      S->trials--;
      if (p <= target) pk = p, again = true; /* the last accepted is the schedule */
      else
        for (int x = 0; x < m->n; x++) del[x] = S->was[x];
    }
  }
  return pk;
}

static double cost(const Search *S, const bool *del) {
  double c = 0;
  for (int x = 0; x < S->m->n; x++)
    if (!del[x] && S->m->a[x].kind == ACT_FORWARD) c += S->rd->fcost[S->m->a[x].stage];
  return c;
}

/* A kick on stage s: every point at each position where s's recompute was
 * deleted comes back (the copies read there are made there again, the
 * forward copy s's reads held is freed), and a descent runs with s's
 * points there held, then a free one. Returns whether the schedule got
 * cheaper (del, *pk updated) or not (unchanged). */
static bool kick(Search *S, bool *del, int s, int64_t target, int64_t *pk, bool *trial) {
  const Actions *m = S->m;
  bool any = false;
  for (int x = 0; x < m->n; x++) trial[x] = del[x], S->tabu[x] = false;
  for (int x = 0; x < m->n; x++)
    if (m->a[x].kind == ACT_FORWARD && m->a[x].stage == s && del[x]) {
      any = true;
      S->tabu[x] = true;
      for (int y = 0; y < m->n; y++)
        if (S->pos[y] == S->pos[x]) trial[y] = false;
    }
  if (!any) return false;
  int64_t p = descend(S, trial, target, *pk);
  for (int x = 0; x < m->n; x++) S->tabu[x] = false;
  p = descend(S, trial, target, p);
  if (cost(S, trial) >= cost(S, del)) return false;
  for (int x = 0; x < m->n; x++) del[x] = trial[x];
  *pk = p;
  return true;
}

void remat_refine(Arena *ar, const RematCand *most, const RematReads *rd, RematPeak peak, void *ctx,
                  const int64_t *targets, int ntargets, int trials, RematCand *out, int *n) {
  const Actions *m = &most->a;
  size_t nb = sizeof(bool) * (size_t)(m->n + 1);
  Search S = {m, rd, peak, ctx, .trials = trials};
  S.pts = ar_alloc(ar, sizeof(int) * (size_t)(m->n + 1));
  S.pos = ar_alloc(ar, sizeof(int) * (size_t)(m->n + 1));
  S.was = ar_alloc(ar, nb), S.read = ar_alloc(ar, nb), S.tabu = ar_alloc(ar, nb);
  S.prod = ar_alloc(ar, sizeof(int) * (size_t)(rd->g->nt + 1));
  S.buf = ar_alloc(ar, sizeof(Action) * (size_t)(m->n + 1));
  for (int x = 0, b = 0; x < m->n; x++) {
    S.pos[x] = b;
    if (m->a[x].kind == ACT_BACKWARD) b++;
    if (m->a[x].kind == ACT_FORWARD) S.pts[S.np++] = x;
  }
  /* the most expensive first; among equals the earlier (a copy made early
   * serves more reads after it) */
  for (int i = 1; i < S.np; i++)
    for (int j = i; j > 0 && rd->fcost[m->a[S.pts[j]].stage] > rd->fcost[m->a[S.pts[j - 1]].stage]; j--) {
      int t = S.pts[j];
      S.pts[j] = S.pts[j - 1], S.pts[j - 1] = t;
    }
  /* the stages to kick, the most expensive first; among equals the earlier */
  int *ks = ar_alloc(ar, sizeof(int) * (size_t)(m->nstages + 1));
  for (int i = 0; i < m->nstages; i++) {
    int j = i;
    for (; j > 0 && rd->fcost[i] > rd->fcost[ks[j - 1]]; j--) ks[j] = ks[j - 1];
    ks[j] = i;
  }
  /* the descents, chained; then the kicks, each target's from its descent,
   * the trials left shared equally among the targets left */
  bool **del = ar_alloc(ar, sizeof(bool *) * (size_t)(ntargets + 1)), *trial = ar_alloc(ar, nb),
       *cur = ar_alloc(ar, nb);
  int64_t *pk = ar_alloc(ar, sizeof(int64_t) * (size_t)(ntargets + 1)), p = most->peak;
  for (int t = 0; t < ntargets; t++) {
    if (targets[t] >= most->peak) p = descend(&S, cur, targets[t], p);
    del[t] = ar_alloc(ar, nb);
    for (int x = 0; x < m->n; x++) del[t][x] = cur[x];
    pk[t] = p;
  }
  for (int t = 0; t < ntargets; t++) {
    int left = S.trials, share = left / (ntargets - t);
    S.trials = share;
    for (int i = 0; i < m->nstages && S.trials > 0 && targets[t] >= most->peak; i++)
      kick(&S, del[t], ks[i], targets[t], &pk[t], trial);
    S.trials = left - share + S.trials;
    RematCand c = {.peak = pk[t]};
    Action *v = ar_alloc(ar, sizeof(Action) * (size_t)(m->n + 1));
    c.a = without(m, del[t], rd->fcost, v, &c.recompute);
    out[t] = c;
  }
  *n = ntargets;
}
