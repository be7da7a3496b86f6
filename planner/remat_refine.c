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

/* One descent per order, chained over the targets (ascending): each target's
 * schedule is the next one's start. */
static void descend(Arena *ar, const RematCand *most, const double *fcost, RematPeak peak, void *ctx,
                    const int64_t *targets, int ntargets, int *trials, const int *pts, int np, RematCand *out) {
  const Actions *m = &most->a;
  bool *del = ar_alloc(ar, sizeof(bool) * (size_t)(m->n + 1));
  Action *buf = ar_alloc(ar, sizeof(Action) * (size_t)(m->n + 1));
  int64_t pk = most->peak;
  for (int t = 0; t < ntargets; t++) {
    for (bool again = targets[t] >= most->peak; again;) {
      again = false;
      for (int i = 0; i<np && * trials> 0; i++) {
        if (del[pts[i]]) continue;
        del[pts[i]] = true;
        double rec, area;
        int64_t p;
        Actions a = without(m, del, fcost, buf, &rec);
        peak(ctx, &a, &p, &area);
        --*trials;
        if (p <= targets[t]) pk = p > pk ? p : pk, again = true;
        else del[pts[i]] = false;
      }
    }
    RematCand c = {.peak = pk};
    Action *v = ar_alloc(ar, sizeof(Action) * (size_t)(m->n + 1));
    c.a = without(m, del, fcost, v, &c.recompute);
    if (!out[t].a.a || c.recompute < out[t].recompute) out[t] = c;
  }
}

void remat_refine(Arena *ar, const RematCand *most, const double *fcost, RematPeak peak, void *ctx,
                  const int64_t *targets, int ntargets, int trials, RematCand *out, int *n) {
  const Actions *m = &most->a;
  int *pts = ar_alloc(ar, sizeof(int) * (size_t)(m->n + 1)), np = 0;
  for (int x = 0; x < m->n; x++)
    if (m->a[x].kind == ACT_FORWARD) pts[np++] = x;
  for (int t = 0; t < ntargets; t++) out[t] = (RematCand){0};
  /* two orders, the most expensive first: among equals the earlier point
   * first (a copy made early serves later reads), then the later first */
  for (int late = 0; late < 2; late++) {
    for (int i = 1; i < np; i++)
      for (int j = i; j > 0; j--) {
        double c = fcost[m->a[pts[j]].stage], d = fcost[m->a[pts[j - 1]].stage];
        if (c < d || (c == d && (pts[j] > pts[j - 1]) != late)) break;
        int t = pts[j];
        pts[j] = pts[j - 1], pts[j - 1] = t;
      }
    descend(ar, most, fcost, peak, ctx, targets, ntargets, &trials, pts, np, out);
  }
  *n = ntargets;
}
