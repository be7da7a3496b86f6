/* remat_refine.c: deleting recompute points under a target peak. */
#include "remat_refine.h"

/* The schedule without the deleted points, in buf, for a trial build
 * (unnamed: schedule_of names what is kept); its recompute seconds. */
static Actions without(const Actions *most, const bool *del, const double *fcost, Action *buf, double *rec) {
  Actions a = *most;
  int m = 0;
  *rec = 0;
  for (int x = 0; x < most->n; x++) {
    if (del[x]) continue;
    buf[m++] = most->a[x];
    if (most->a[x].kind == ACT_FORWARD) *rec += fcost[most->a[x].stage];
  }
  a.a = buf, a.n = m, a.unnamed = true;
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
  bool *refused; /* per point: its deletion was tried in the schedule as it is now and went over the target */
  int *prod;
  Action *buf;
  int trials;  /* peak evaluations left */
  int npos;    /* backward positions */
  bool *tried; /* the kicks tried on the schedule as it is now: their positions, npos flags each */
  int ntried;
} Search;

/* Passes over the points in order, deleting each that is not tabu (with
 * the points it leaves dead) where the peak stays at or under target, until
 * a pass deletes none. A point refused since the last deletion is not tried
 * again (the same schedule, the same peak: the confirming pass costs only
 * the points not tried since). Returns the last peak accepted, or `pk`. */
static int64_t descend(Search *S, bool *del, int64_t target, int64_t pk) {
  const Actions *m = S->m;
  for (bool again = true; again;) {
    again = false;
    for (int i = 0; S->trials > 0 && i < S->np; i++) {
      int x0 = S->pts[i];
      if (del[x0] || S->tabu[x0] || S->refused[x0]) continue;
      for (int x = 0; x < m->n; x++) S->was[x] = del[x];
      del[x0] = true;
      drop_dead(m, S->rd, del, S->prod, S->read);
      double rec, area;
      int64_t p;
      Actions a = without(m, del, S->rd->fcost, S->buf, &rec);
      S->peak(S->ctx, &a, &p, &area);
      S->trials--;
      if (p <= target) {
        pk = p, again = true; /* the last accepted is the schedule */
        for (int x = 0; x < m->n; x++) S->refused[x] = false;
      } else {
        for (int x = 0; x < m->n; x++) del[x] = S->was[x];
        S->refused[x0] = true;
      }
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

/* Has a kick on these positions (npos flags) been tried on the schedule as
 * it is? Else it is recorded. */
static bool tried(Search *S, const bool *at) {
  for (int k = 0; k < S->ntried; k++) {
    const bool *v = S->tried + (size_t)k * (size_t)S->npos;
    int b = 0;
    while (b < S->npos && v[b] == at[b]) b++;
    if (b == S->npos) return true;
  }
  bool *v = S->tried + (size_t)S->ntried++ * (size_t)S->npos;
  for (int b = 0; b < S->npos; b++) v[b] = at[b];
  return false;
}

/* A kick on stage s: every point at each position where s's recompute was
 * deleted comes back (the copies read there are made there again, the
 * forward copy s's reads held is freed), and a descent runs with s's
 * points there held, then a free one. Two stages' kicks that bring back
 * the same positions are one perturbation: the second is not run. The free
 * descent runs only where deleting the held points could make the
 * schedule cheaper than it was (the points the held descent refused stay
 * refused until one is deleted). Returns whether the schedule got cheaper
 * (del, *pk updated) or not (unchanged). */
static bool kick(Search *S, bool *del, int s, int64_t target, int64_t *pk, bool *trial, bool *at) {
  const Actions *m = S->m;
  bool any = false;
  for (int b = 0; b < S->npos; b++) at[b] = false;
  for (int x = 0; x < m->n; x++) trial[x] = del[x], S->tabu[x] = false;
  for (int x = 0; x < m->n; x++)
    if (m->a[x].kind == ACT_FORWARD && m->a[x].stage == s && del[x]) {
      any = true;
      S->tabu[x] = true;
      at[S->pos[x]] = true;
      for (int y = 0; y < m->n; y++)
        if (S->pos[y] == S->pos[x]) trial[y] = false;
    }
  if (!any || tried(S, at)) return false;
  for (int x = 0; x < m->n; x++) S->refused[x] = false;
  int64_t p = descend(S, trial, target, *pk);
  double held = 0, now = cost(S, del);
  for (int x = 0; x < m->n; x++)
    if (S->tabu[x] && !trial[x]) held += S->rd->fcost[m->a[x].stage];
  for (int x = 0; x < m->n; x++) S->tabu[x] = false;
  if (cost(S, trial) - held < now) p = descend(S, trial, target, p);
  if (cost(S, trial) >= now) return false;
  for (int x = 0; x < m->n; x++) del[x] = trial[x];
  S->ntried = 0;
  *pk = p;
  return true;
}

static RematCand schedule_of(Arena *ar, const Actions *m, const bool *del, const double *fcost, int64_t peak) {
  RematCand c = {.peak = peak};
  Action *v = ar_alloc(ar, sizeof(Action) * (size_t)(m->n + 1));
  c.a = without(m, del, fcost, v, &c.recompute);
  c.a.unnamed = false;
  return c;
}

void remat_refine(Arena *ar, const RematCand *most, const RematReads *rd, RematPeak peak, void *ctx,
                  const int64_t *targets, int ntargets, int trials, RematOrder order, RematCand *out, int *n) {
  const Actions *m = &most->a;
  size_t nb = sizeof(bool) * (size_t)(m->n + 1);
  Search S = {m, rd, peak, ctx, .trials = trials};
  S.pts = ar_alloc(ar, sizeof(int) * (size_t)(m->n + 1));
  S.pos = ar_alloc(ar, sizeof(int) * (size_t)(m->n + 1));
  S.was = ar_alloc(ar, nb), S.read = ar_alloc(ar, nb), S.tabu = ar_alloc(ar, nb), S.refused = ar_alloc(ar, nb);
  S.prod = ar_alloc(ar, sizeof(int) * (size_t)(rd->g->nt + 1));
  S.buf = ar_alloc(ar, sizeof(Action) * (size_t)(m->n + 1));
  for (int x = 0; x < m->n; x++) {
    S.pos[x] = S.npos;
    if (m->a[x].kind == ACT_BACKWARD) S.npos++;
    if (m->a[x].kind == ACT_FORWARD) S.pts[S.np++] = x;
  }
  S.tried = ar_alloc(ar, sizeof(bool) * (size_t)(S.npos + 1) * (size_t)(m->nstages + 1));
  bool *at = ar_alloc(ar, sizeof(bool) * (size_t)(S.npos + 1));
  /* the most expensive first (closure: with the points deleting it alone
   * leaves unread; per byte: its seconds over the bytes its outputs hold);
   * among equals the earlier (a copy made early serves more reads after it) */
  double *gain = ar_alloc(ar, sizeof(double) * (size_t)(m->n + 1));
  for (int i = 0; i < S.np; i++) {
    int x0 = S.pts[i];
    for (int x = 0; x < m->n; x++) S.was[x] = x == x0;
    if (order == REMAT_ORDER_CLOSURE) drop_dead(m, rd, S.was, S.prod, S.read);
    for (int x = 0; x < m->n; x++)
      if (S.was[x]) gain[x0] += rd->fcost[m->a[x].stage];
    if (order == REMAT_ORDER_PER_BYTE) {
      const Graph *g = rd->g;
      const Op *o = &g->ops[rd->op[m->a[x0].stage]];
      int64_t bytes = 0;
      for (int k = 0; k < o->nout; k++)
        if (o->out[k] >= 0) bytes += shape_numel(&g->t[o->out[k]].shape) * dtype_size(g->t[o->out[k]].dtype);
      gain[x0] /= (double)(bytes > 0 ? bytes : 1);
    }
  }
  for (int i = 1; i < S.np; i++)
    for (int j = i; j > 0 && gain[S.pts[j]] > gain[S.pts[j - 1]]; j--) {
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
   * the least target first, each taking the trials it needs of those left
   * (the least budgets are where the descent stops farthest from the
   * optimum: bench_remat's worst ratio on every graph) */
  bool **del = ar_alloc(ar, sizeof(bool *) * (size_t)(ntargets + 1)), *trial = ar_alloc(ar, nb),
       *cur = ar_alloc(ar, nb);
  int64_t *pk = ar_alloc(ar, sizeof(int64_t) * (size_t)(ntargets + 1)), p = most->peak;
  for (int t = 0; t < ntargets; t++) {
    for (int x = 0; x < m->n; x++) S.refused[x] = false; /* a higher target: refused points may pass */
    if (targets[t] >= most->peak) p = descend(&S, cur, targets[t], p);
    del[t] = ar_alloc(ar, nb);
    for (int x = 0; x < m->n; x++) del[t][x] = cur[x];
    pk[t] = p;
  }
  *n = 0;
  for (int t = 0; t < ntargets; t++) {
    /* the descent's schedule stays a candidate beside its kicks' (it may
     * peak lower, or pack into a smaller arena) */
    out[(*n)++] = schedule_of(ar, m, del[t], rd->fcost, pk[t]);
    S.ntried = 0;
    bool better = false;
    int left = S.trials, share = left; /* all that are left: the higher targets get the rest */
    S.trials = share;
    for (int i = 0; i < m->nstages && S.trials > 0 && targets[t] >= most->peak; i++)
      better |= kick(&S, del[t], ks[i], targets[t], &pk[t], trial, at);
    S.trials += left - share;
    if (better) out[(*n)++] = schedule_of(ar, m, del[t], rd->fcost, pk[t]);
  }
}
