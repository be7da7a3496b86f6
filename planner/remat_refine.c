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

/* Under each target (ascending), passes over the points in order, deleting
 * each (with the points left dead) where the peak stays under the target,
 * until a pass deletes none; each target's schedule is the next one's start. */
static void descend(Arena *ar, const RematCand *most, const RematReads *rd, RematPeak peak, void *ctx,
                    const int64_t *targets, int ntargets, int *trials, const int *pts, int np, RematCand *out) {
  const Actions *m = &most->a;
  const double *fcost = rd->fcost;
  bool *del = ar_alloc(ar, sizeof(bool) * (size_t)(m->n + 1)), *was = ar_alloc(ar, sizeof(bool) * (size_t)(m->n + 1));
  bool *read = ar_alloc(ar, sizeof(bool) * (size_t)(m->n + 1));
  int *prod = ar_alloc(ar, sizeof(int) * (size_t)(rd->g->nt + 1));
  Action *buf = ar_alloc(ar, sizeof(Action) * (size_t)(m->n + 1));
  int64_t pk = most->peak;
  for (int t = 0; t < ntargets; t++) {
    for (bool again = targets[t] >= most->peak; again;) {
      again = false;
      for (int i = 0; *trials > 0 && i < np; i++) {
        if (del[pts[i]]) continue;
        for (int x = 0; x < m->n; x++) was[x] = del[x];
        del[pts[i]] = true;
        drop_dead(m, rd, del, prod, read);
        double rec, area;
        int64_t p;
        Actions a = without(m, del, fcost, buf, &rec);
        peak(ctx, &a, &p, &area);
        --*trials;
        if (p <= targets[t]) pk = p, again = true; /* the last accepted is the schedule */
        else
          for (int x = 0; x < m->n; x++) del[x] = was[x];
      }
    }
    RematCand c = {.peak = pk};
    Action *v = ar_alloc(ar, sizeof(Action) * (size_t)(m->n + 1));
    c.a = without(m, del, fcost, v, &c.recompute);
    out[t] = c;
  }
}

void remat_refine(Arena *ar, const RematCand *most, const RematReads *rd, RematPeak peak, void *ctx,
                  const int64_t *targets, int ntargets, int trials, RematCand *out, int *n) {
  const Actions *m = &most->a;
  int *pts = ar_alloc(ar, sizeof(int) * (size_t)(m->n + 1)), np = 0;
  for (int x = 0; x < m->n; x++)
    if (m->a[x].kind == ACT_FORWARD) pts[np++] = x;
  /* the most expensive first; among equals the earlier (a copy made early
   * serves more reads after it) */
  for (int i = 1; i < np; i++)
    for (int j = i; j > 0 && rd->fcost[m->a[pts[j]].stage] > rd->fcost[m->a[pts[j - 1]].stage]; j--) {
      int t = pts[j];
      pts[j] = pts[j - 1], pts[j - 1] = t;
    }
  descend(ar, most, rd, peak, ctx, targets, ntargets, &trials, pts, np, out);
  *n = ntargets;
}
