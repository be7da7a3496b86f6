/* assign.c: offsets in one arena (dynamic storage allocation).
 *
 * Four layers, cheapest first:
 *   1. the liveness lower bound (a sweep over start/end events);
 *   2. a best-fit portfolio: six orderings (XLA's spatial and temporal, by
 *      area, start, end, TFLite's), each placing buffers one by one in the
 *      smallest gap among already-placed, time-overlapping buffers, on the
 *      whole instance and on the leaves of an exact decomposition into
 *      independent time windows, so the result is never above any of them;
 *   3. iterated greedy on leaves too large for the exact search;
 *   4. when the portfolio misses the bound, an exact branch and bound in the
 *      style of MiniMalloc (Moffitt, ASPLOS 2024) over capacities between the
 *      bound and the best height found, then iterated greedy again on what it
 *      left.
 * Everything is deterministic: ties break by item index, random numbers come
 * from fixed seeds, and the search and the passes count their work (the
 * portfolio's threads do not change what is counted); the wall clock is only
 * a safety net. No global mutable state. */
#include "assign.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

__extension__ typedef __int128 i128;

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "memplan: error: out of memory in assign (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static void *xcalloc(size_t n, size_t sz) {
  void *p = calloc(n ? n : 1, sz ? sz : 1);
  if (!p) {
    fprintf(stderr, "memplan: error: out of memory in assign (%zu x %zu bytes)\n", n, sz);
    exit(1);
  }
  return p;
}

static void *xrealloc(void *p, size_t n) {
  p = realloc(p, n ? n : 1);
  if (!p) {
    fprintf(stderr, "memplan: error: out of memory in assign (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* a - 1 first: x + a overflows for sizes near INT64_MAX even when a is 1 */
static int64_t align_up(int64_t x, int64_t a) { return (x + (a - 1)) / a * a; }

/* ------------------------------------------------------------------------
 * The working instance: aligned sizes, one array per field. */

typedef struct {
  int n;
  int64_t *lo, *hi;     /* copies of the caller's lifetimes */
  int64_t *size;        /* aligned up */
  int64_t t_min, t_max; /* the earliest start and the latest end */
} Inst;

/* The earliest start and latest end; 0 and 0 for no items. The extremes
 * start from the int64 limits, not from item 0, so no read of lo[0] or hi[0]
 * happens when n is 0 (gcc 12 -O3 warned that it might, inlined into
 * inst_make, whose arrays are empty then). */
static void inst_span(Inst *in) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (int i = 0; i < in->n; i++) {
    if (in->lo[i] < lo) lo = in->lo[i];
    if (in->hi[i] > hi) hi = in->hi[i];
  }
  in->t_min = in->n ? lo : 0;
  in->t_max = in->n ? hi : 0;
}

static Inst inst_make(const AsgItem *items, int n, int64_t align) {
  Inst in = {.n = n};
  in.lo = xmalloc(sizeof(int64_t) * (size_t)n);
  in.hi = xmalloc(sizeof(int64_t) * (size_t)n);
  in.size = xmalloc(sizeof(int64_t) * (size_t)n);
  for (int i = 0; i < n; i++) {
    in.lo[i] = items[i].lo;
    in.hi[i] = items[i].hi;
    in.size[i] = align_up(items[i].size, align);
  }
  inst_span(&in);
  return in;
}

static void inst_free(Inst *in) {
  free(in->lo);
  free(in->hi);
  free(in->size);
}

/* ------------------------------------------------------------------------
 * Lower bound: max over time of live bytes. Ends sort before starts at the
 * same time because lifetimes are half-open. */

typedef struct {
  int64_t t, delta;
} Event;

static int event_cmp(const void *a, const void *b) {
  const Event *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return (x->delta > 0) - (y->delta > 0); /* negative deltas first */
}

static int64_t lower_bound(const Inst *in) {
  Event *ev = xmalloc(sizeof(Event) * 2 * (size_t)in->n);
  for (int i = 0; i < in->n; i++) {
    ev[2 * i] = (Event){in->lo[i], in->size[i]};
    ev[2 * i + 1] = (Event){in->hi[i], -in->size[i]};
  }
  qsort(ev, 2 * (size_t)in->n, sizeof(Event), event_cmp);
  int64_t live = 0, best = 0;
  for (int i = 0; i < 2 * in->n; i++) {
    live += ev[i].delta;
    if (live > best) best = live;
  }
  free(ev);
  return best;
}

int64_t assign_lower_bound(const AsgItem *items, int n, int64_t align) {
  if (n <= 0) return 0;
  if (align < 1) align = 1;
  Inst in = inst_make(items, n, align);
  int64_t lb = lower_bound(&in);
  inst_free(&in);
  return lb;
}

/* ------------------------------------------------------------------------
 * Sorting and compressed time. */

/* qsort has no context argument in C17; a small merge sort keeps the sorting
 * reentrant and stable (ties keep index order, which makes it deterministic). */
typedef int (*CmpFn)(const void *ctx, int a, int b);

static void msort_rec(int *a, int *tmp, int n, CmpFn cmp, const void *ctx) {
  if (n < 2) return;
  if (n <= 16) { /* insertion sort: stable */
    for (int i = 1; i < n; i++) {
      int x = a[i], j = i;
      while (j > 0 && cmp(ctx, a[j - 1], x) > 0) {
        a[j] = a[j - 1];
        j--;
      }
      a[j] = x;
    }
    return;
  }
  int h = n / 2;
  msort_rec(a, tmp, h, cmp, ctx);
  msort_rec(a + h, tmp, n - h, cmp, ctx);
  if (cmp(ctx, a[h - 1], a[h]) <= 0) return;
  memcpy(tmp, a, sizeof(int) * (size_t)h);
  int i = 0, j = h, k = 0;
  while (i < h && j < n) a[k++] = cmp(ctx, a[j], tmp[i]) < 0 ? a[j++] : tmp[i++];
  while (i < h) a[k++] = tmp[i++];
}

static void msort(int *a, int n, CmpFn cmp, const void *ctx) {
  int *tmp = xmalloc(sizeof(int) * (size_t)(n / 2 + 1));
  msort_rec(a, tmp, n, cmp, ctx);
  free(tmp);
}

static int cmp_i64(int64_t a, int64_t b) { return (a > b) - (a < b); }

static int by_lo_cmp(const void *ctx, int a, int b) {
  const Inst *in = ctx;
  int c = cmp_i64(in->lo[a], in->lo[b]);
  return c ? c : (a > b) - (a < b);
}

static int mid(int l, int r) { return l + (r - l) / 2; }

static int find_time(const int64_t *t, int n, int64_t x) {
  int l = 0, r = n;
  while (l < r) {
    int m = mid(l, r);
    if (t[m] < x) l = m + 1;
    else r = m;
  }
  return l;
}

static int i64_cmp(const void *a, const void *b) { return cmp_i64(*(const int64_t *)a, *(const int64_t *)b); }

/* Sections are the intervals between consecutive distinct endpoints; item i
 * lives in sections [s_lo[i], s_hi[i]). Returns the number of sections. */
static int sections_of(const Inst *in, int *s_lo, int *s_hi) {
  int64_t *t = xmalloc(sizeof(int64_t) * 2 * (size_t)in->n);
  for (int i = 0; i < in->n; i++) {
    t[2 * i] = in->lo[i];
    t[2 * i + 1] = in->hi[i];
  }
  qsort(t, 2 * (size_t)in->n, sizeof(int64_t), i64_cmp);
  int nt = 0;
  for (int i = 0; i < 2 * in->n; i++)
    if (nt == 0 || t[nt - 1] != t[i]) t[nt++] = t[i];
  for (int i = 0; i < in->n; i++) {
    s_lo[i] = find_time(t, nt, in->lo[i]);
    s_hi[i] = find_time(t, nt, in->hi[i]);
  }
  free(t);
  return nt > 0 ? nt - 1 : 0;
}

/* ------------------------------------------------------------------------
 * Occupancy index for best fit.
 *
 * Best fit needs, for a new buffer, the union of the offset ranges of the
 * placed buffers that overlap it in time. Collecting and sorting all of them
 * costs O(k log k) per placement, and in a training step k is in the
 * thousands (every saved activation is live in the middle of the step). But
 * best fit packs tightly, so such a union has few runs (maximal occupied
 * ranges). A segment tree over sections keeps unions instead of buffers:
 *   C[x]: runs of the buffers whose section range has x as a canonical node;
 *   U[x]: runs of the buffers stored at x or below it.
 * A buffer overlapping a window is stored either at or below a canonical node
 * of the window (in its U) or at a strict ancestor of one, which reaches past
 * the window and contains its first or last section (in C along those two
 * leaf-to-root paths). So a query merges O(log T) run lists and an insertion
 * touches O(log T) lists. */

typedef struct {
  int64_t off, end;
} Span;

typedef struct {
  Span *v; /* runs [off, end): sorted, disjoint, not touching */
  int n, cap;
} Runs;

/* Adds [a, b) to the runs, merging every run it overlaps or touches;
 * returns the number of runs moved (the cost). */
static int runs_add(Runs *r, int64_t a, int64_t b) {
  int l = 0, h = r->n; /* first run with end >= a */
  while (l < h) {
    int m = mid(l, h);
    if (r->v[m].end < a) l = m + 1;
    else h = m;
  }
  int j = l;
  while (j < r->n && r->v[j].off <= b) j++;
  if (j > l) { /* runs l .. j-1 merge into one */
    if (r->v[l].off < a) a = r->v[l].off;
    if (r->v[j - 1].end > b) b = r->v[j - 1].end;
  } else if (r->n == r->cap) {
    r->cap = r->cap ? 2 * r->cap : 4;
    r->v = xrealloc(r->v, sizeof(Span) * (size_t)r->cap);
  }
  int removed = j > l ? j - l - 1 : -1; /* -1: one inserted */
  memmove(r->v + l + 1, r->v + j, sizeof(Span) * (size_t)(r->n - j));
  r->n -= removed;
  r->v[l] = (Span){a, b};
  return r->n - l;
}

enum { MAX_LISTS = 4 * 32 };

typedef struct {
  int p;       /* leaves: sections padded to a power of two */
  Runs *c, *u; /* per node, 1 .. 2p-1 */
  /* A query's lists: pointers into c and u, then into the merge scratch. */
  const Span *list[MAX_LISTS];
  int len[MAX_LISTS], nlist, total;
  Span *tmp; /* merge scratch */
  size_t captmp;
  int64_t moved; /* runs moved by insertions, the cost of occ_add */
} Occ;

static Occ occ_make(int ns) {
  Occ o = {.p = 1};
  while (o.p < ns) o.p *= 2;
  o.c = xcalloc(2 * (size_t)o.p, sizeof(Runs));
  o.u = xcalloc(2 * (size_t)o.p, sizeof(Runs));
  return o;
}

static void occ_reset(Occ *o) {
  for (int x = 0; x < 2 * o->p; x++) o->c[x].n = o->u[x].n = 0;
}

static void occ_free(Occ *o) {
  for (int x = 0; x < 2 * o->p; x++) {
    free(o->c[x].v);
    free(o->u[x].v);
  }
  free(o->c), free(o->u), free(o->tmp);
}

/* Whether node x, h levels above the leaves, reaches outside [l, r): the
 * strict ancestors of canonical nodes are exactly the path nodes that do. */
static bool partial(const Occ *o, int x, int h, int l, int r) {
  return (x << h) - o->p < l || ((x + 1) << h) - o->p > r;
}

/* Inserts [a, b) over sections [l, r): into C and U of the canonical nodes,
 * into U of their strict ancestors. */
static void occ_add(Occ *o, int l, int r, int64_t a, int64_t b) {
  for (int x = l + o->p, y = r + o->p; x < y; x >>= 1, y >>= 1) {
    if (x & 1) {
      o->moved += runs_add(&o->c[x], a, b);
      o->moved += runs_add(&o->u[x], a, b);
      x++;
    }
    if (y & 1) {
      --y;
      o->moved += runs_add(&o->c[y], a, b);
      o->moved += runs_add(&o->u[y], a, b);
    }
  }
  int x = l + o->p, y = r - 1 + o->p, h = 0;
  for (; x != y; x >>= 1, y >>= 1, h++) {
    if (partial(o, x, h, l, r)) o->moved += runs_add(&o->u[x], a, b);
    if (partial(o, y, h, l, r)) o->moved += runs_add(&o->u[y], a, b);
  }
  for (; x >= 1; x >>= 1, h++)
    if (partial(o, x, h, l, r)) o->moved += runs_add(&o->u[x], a, b);
}

static void gather(Occ *o, const Runs *r) {
  if (r->n == 0) return;
  o->list[o->nlist] = r->v, o->len[o->nlist++] = r->n;
  o->total += r->n;
}

/* Union of two sorted run lists into out, coalescing overlapping and
 * touching runs; returns the length. (Galloping through stretches of one
 * list measured slower here: the lists interleave finely.) */
static int union_runs(const Span *a, int na, const Span *b, int nb, Span *out) {
  int i = 0, j = 0, k = 0;
  while (i < na || j < nb) {
    Span x = j == nb || (i < na && a[i].off <= b[j].off) ? a[i++] : b[j++];
    if (k > 0 && x.off <= out[k - 1].end) {
      if (x.end > out[k - 1].end) out[k - 1].end = x.end;
    } else out[k++] = x;
  }
  return k;
}

/* Merges the gathered lists (each sorted) down to at most two. Always the
 * two shortest first, as in Huffman coding: the long lists (a high node's
 * union) are copied once or twice, not once per level of a balanced merge,
 * and the scratch written stays under total * (log2(lists) + 1). The last
 * two are left to best_gap, which scans their union without writing it. */
static void occ_merge(Occ *o) {
  size_t need = (size_t)o->total * 8 + 1; /* log2(MAX_LISTS) + 1 */
  if (need > o->captmp) {
    o->captmp = 2 * need;
    o->tmp = xrealloc(o->tmp, sizeof(Span) * o->captmp);
  }
  Span *out = o->tmp;
  int n = o->nlist;
  while (n > 2) {
    int a = 0, b = 1; /* the two shortest, a shorter */
    if (o->len[b] < o->len[a]) {
      a = 1;
      b = 0;
    }
    for (int i = 2; i < n; i++)
      if (o->len[i] < o->len[a]) {
        b = a;
        a = i;
      } else if (o->len[i] < o->len[b]) b = i;
    int m = union_runs(o->list[a], o->len[a], o->list[b], o->len[b], out);
    o->list[a] = out, o->len[a] = m, out += m;
    o->list[b] = o->list[n - 1], o->len[b] = o->len[n - 1], n--;
  }
  o->nlist = n;
}

/* Leaves in o->list at most two sorted run lists whose union is that of the
 * offset ranges of the placed buffers overlapping sections [l, r). */
static void occ_query(Occ *o, int l, int r) {
  o->nlist = o->total = 0;
  for (int x = l + o->p, y = r + o->p; x < y; x >>= 1, y >>= 1) {
    if (x & 1) gather(o, &o->u[x++]);
    if (y & 1) gather(o, &o->u[--y]);
  }
  int x = l + o->p, y = r - 1 + o->p, h = 0;
  for (; x != y; x >>= 1, y >>= 1, h++) {
    if (partial(o, x, h, l, r)) gather(o, &o->c[x]);
    if (partial(o, y, h, l, r)) gather(o, &o->c[y]);
  }
  for (; x >= 1; x >>= 1, h++)
    if (partial(o, x, h, l, r)) gather(o, &o->c[x]);
  occ_merge(o);
}

/* ------------------------------------------------------------------------
 * Best fit. */

/* Smallest gap that holds `size` in the union of two sorted run lists, else
 * the top; ties go to the lowest offset. Overlapping runs are merged by the
 * running top. */
static int64_t best_gap(const Span *a, int na, const Span *b, int nb, int64_t size) {
  int64_t top = 0, best = -1, best_gap = INT64_MAX;
  for (int i = 0, j = 0; i < na || j < nb;) {
    Span x = j == nb || (i < na && a[i].off <= b[j].off) ? a[i++] : b[j++];
    if (x.off > top) {
      int64_t gap = x.off - top;
      if (gap == size) return top; /* exact fit: nothing later can beat it */
      if (gap > size && gap < best_gap) {
        best_gap = gap;
        best = top;
      }
    }
    if (x.end > top) top = x.end;
  }
  return best >= 0 ? best : top;
}

typedef struct {
  int *s_lo, *s_hi; /* each item's sections */
  Occ occ;
} Greedy;

static Greedy greedy_make(const Inst *in) {
  Greedy g;
  g.s_lo = xmalloc(sizeof(int) * (size_t)in->n);
  g.s_hi = xmalloc(sizeof(int) * (size_t)in->n);
  g.occ = occ_make(sections_of(in, g.s_lo, g.s_hi));
  return g;
}

static void greedy_free(Greedy *g) {
  free(g->s_lo), free(g->s_hi);
  occ_free(&g->occ);
}

/* Places the items in `ord` order, each in the smallest gap (among the
 * placed items overlapping it in time) that holds it; returns the height.
 * Zero-size items hold no bytes: they go to 0. Stops as soon as the height
 * reaches `cutoff` (a pass that cannot beat the best so far; the offsets are
 * then partial) and returns that height. Adds the work done to *work (when
 * not NULL), in the search's units: 16 per item placed and one per run
 * scanned by a query or moved by an insertion (measured against
 * WORK_PER_SECOND on the generated training steps). */
static int64_t best_fit(Greedy *g, const Inst *in, const int *ord, int64_t *off, int64_t *work, int64_t cutoff) {
  occ_reset(&g->occ);
  g->occ.moved = 0;
  int64_t height = 0, runs = 0;
  int k = 0;
  while (k < in->n && height < cutoff) {
    int id = ord[k++];
    off[id] = 0;
    if (in->size[id] == 0) continue;
    occ_query(&g->occ, g->s_lo[id], g->s_hi[id]);
    const Occ *o = &g->occ;
    runs += o->total;
    off[id] =
        best_gap(o->list[0], o->nlist > 0 ? o->len[0] : 0, o->list[1], o->nlist > 1 ? o->len[1] : 0, in->size[id]);
    if (off[id] + in->size[id] > height) height = off[id] + in->size[id];
    occ_add(&g->occ, g->s_lo[id], g->s_hi[id], off[id], off[id] + in->size[id]);
  }
  if (work) *work += 16 * (int64_t)k + runs + g->occ.moved;
  return height;
}

/* The portfolio's orderings, the production allocators' with their
 * tie-breaks; each breaks its last tie by index (the sort is stable):
 *  - XLA's GlobalDecreasingSizeBestFitHeap, spatial (size, then duration,
 *    both descending: "size") and temporal (duration, then size: "duration");
 *  - by area (size x duration) descending and by start ascending (the order
 *    an online allocator sees);
 *  - TFLite's arena planner (ArenaPlanner::CreateTensorAllocationVector):
 *    buffers live over the whole run first, then size descending, then
 *    first use ascending;
 *  - by end, descending (the by-start greedy run backwards in time), ties
 *    by size descending.
 * (They replace memplan's first two, size and duration with ties by index
 * alone: the same heights on the bundled models, on the corpus's
 * 60,000-buffer generated step 0.012% higher; two passes fewer keep that
 * step under its time.) */
static int by_size(const void *ctx, int a, int b) {
  const Inst *in = ctx;
  return cmp_i64(in->size[b], in->size[a]);
}

static int by_duration(const void *ctx, int a, int b) {
  const Inst *in = ctx;
  return cmp_i64(in->hi[b] - in->lo[b], in->hi[a] - in->lo[a]);
}

static int by_area(const void *ctx, int a, int b) {
  const Inst *in = ctx;
  i128 x = (i128)in->size[a] * (in->hi[a] - in->lo[a]);
  i128 y = (i128)in->size[b] * (in->hi[b] - in->lo[b]);
  return (x < y) - (x > y);
}

static int by_start(const void *ctx, int a, int b) {
  const Inst *in = ctx;
  return cmp_i64(in->lo[a], in->lo[b]);
}

static bool whole_run(const Inst *in, int i) { return in->lo[i] == in->t_min && in->hi[i] == in->t_max; }

static int by_size_start(const void *ctx, int a, int b) { /* TFLite */
  const Inst *in = ctx;
  int c = (int)whole_run(in, b) - (int)whole_run(in, a);
  if (c) return c;
  if (whole_run(in, a)) return 0; /* among themselves: by index */
  c = by_size(ctx, a, b);
  return c ? c : by_start(ctx, a, b);
}

static int by_size_duration(const void *ctx, int a, int b) { /* XLA spatial */
  int c = by_size(ctx, a, b);
  return c ? c : by_duration(ctx, a, b);
}

static int by_duration_size(const void *ctx, int a, int b) { /* XLA temporal */
  int c = by_duration(ctx, a, b);
  return c ? c : by_size(ctx, a, b);
}

static int by_end(const void *ctx, int a, int b) {
  const Inst *in = ctx;
  int c = cmp_i64(in->hi[b], in->hi[a]);
  return c ? c : by_size(ctx, a, b);
}

static const struct {
  CmpFn cmp;
  const char *name;
} ORDERINGS[] = {
    {by_size_duration, "best-fit/size"}, {by_duration_size, "best-fit/duration"}, {by_area, "best-fit/area"},
    {by_start, "best-fit/start"},        {by_size_start, "best-fit/tflite"},      {by_end, "best-fit/end"},
};
enum { N_ORDERINGS = sizeof(ORDERINGS) / sizeof(ORDERINGS[0]) };

/* Runs every ordering (or only `only`, when >= 0), keeps the lowest height
 * in best_off (ties: the lower ordering); stops early at the lower bound.
 * Returns the kept ordering's index. The orderings run in pairs, in
 * SCHEDULE's order (the two that most often win first); from the second pair
 * on, a pass stops once it reaches the best height of the pairs before it,
 * which it could not beat (on the generated training steps the losers reach
 * it after about 55% of their buffers). On PAR_MIN_N items or more a pair
 * runs on two OpenMP threads; what is kept and the work counted do not
 * depend on the threads' timing. */
enum { PAR_MIN_N = 4000 };
static const int SCHEDULE[] = {0, 4, 1, 2, 3, 5};

static int portfolio(const Inst *in, int64_t lb, int only, int64_t *best_off, int64_t *best_h, int64_t *work) {
  _Static_assert(sizeof SCHEDULE / sizeof SCHEDULE[0] == N_ORDERINGS, "SCHEDULE lists every ordering once");
  int n = in->n, kept = -1, par = n >= PAR_MIN_N && only < 0;
  int64_t *offs = xmalloc(sizeof(int64_t) * (size_t)n * 2);
  Greedy g[2];
  int *ord[2];
  for (int t = 0; t < 1 + par; t++) {
    g[t] = greedy_make(in);
    ord[t] = xmalloc(sizeof(int) * (size_t)n);
  }
  *best_h = INT64_MAX;
  for (int r = 0; r<N_ORDERINGS && * best_h> lb; r += 2) {
    int64_t h[2] = {0, 0}, w[2] = {0, 0}, cutoff = *best_h;
    bool ran[2] = {false, false};
#pragma omp parallel for num_threads(2) schedule(static, 1) if (par)
    for (int j = 0; j < 2; j++) {
      int o = SCHEDULE[r + j], t = par ? j : 0;
      if ((only >= 0 && o != only) || (!par && j == 1 && ran[0] && h[0] <= lb)) continue;
      for (int i = 0; i < n; i++) ord[t][i] = i;
      msort(ord[t], n, ORDERINGS[o].cmp, in);
      h[j] = best_fit(&g[t], in, ord[t], offs + (size_t)j * (size_t)n, &w[j], cutoff);
      ran[j] = true;
    }
    *work += w[0] + w[1];
    for (int j = 0; j < 2; j++) {
      int o = SCHEDULE[r + j];
      /* A pass that reached the cutoff stopped there (kept only as the first,
       * when heights saturate at INT64_MAX). */
      if (!ran[j] || (h[j] >= cutoff && kept >= 0)) continue;
      if (kept < 0 || h[j] < *best_h || (h[j] == *best_h && o < kept)) {
        *best_h = h[j], kept = o;
        memcpy(best_off, offs + (size_t)j * (size_t)n, sizeof(int64_t) * (size_t)n);
      }
    }
  }
  for (int t = 0; t < 1 + par; t++) {
    free(ord[t]);
    greedy_free(&g[t]);
  }
  free(offs);
  return kept;
}

const char *assign_ordering_name(int ordering) {
  return ordering >= 0 && ordering < N_ORDERINGS ? ORDERINGS[ordering].name : NULL;
}

/* Plain best fit on the whole instance, no decomposition: the baseline. */
int64_t assign_best_fit(const AsgItem *items, int n, int64_t align, int ordering, int64_t *offsets) {
  if (n <= 0 || ordering < 0 || ordering >= N_ORDERINGS) return 0;
  if (align < 1) align = 1;
  Inst in = inst_make(items, n, align);
  Greedy g = greedy_make(&in);
  int *ord = xmalloc(sizeof(int) * (size_t)n);
  for (int i = 0; i < n; i++) ord[i] = i;
  msort(ord, n, ORDERINGS[ordering].cmp, &in);
  int64_t h = best_fit(&g, &in, ord, offsets, NULL, INT64_MAX);
  free(ord);
  greedy_free(&g);
  inst_free(&in);
  return h;
}

/* ------------------------------------------------------------------------
 * Decomposition. Two exact reductions shrink what the portfolio and the search
 * see:
 *  - items in different components (maximal time ranges that no lifetime
 *    crosses) never conflict, so each component packs from its own base;
 *  - an item live over its whole component conflicts with every other item
 *    there, so it can sit below all of them at no cost (in any packing, lift
 *    everything under it by its size and drop it to the base), and the rest
 *    packs on top of the stack of such items.
 * Repeating both yields leaves. The height is the max over leaves of base +
 * leaf height, and the lower bound decomposes the same way, so a leaf that
 * meets its own bound never needs search. In a training step the parameters
 * and optimizer state span the whole step: this is what keeps best fit fast
 * there. */

enum { MAX_DEPTH = 64 }; /* nesting cap: beyond it a component is one leaf */

typedef struct {
  int a, b;     /* range in the by-start id array */
  int64_t base; /* offset the leaf packs from */
  int depth;
} Leaf;

typedef struct {
  Leaf *v;
  int n, cap;
} LeafVec;

static void leaf_push(LeafVec *lv, Leaf l) {
  if (lv->n == lv->cap) {
    lv->cap = lv->cap ? 2 * lv->cap : 16;
    lv->v = xrealloc(lv->v, sizeof(Leaf) * (size_t)lv->cap);
  }
  lv->v[lv->n++] = l;
}

/* Moves the items of ids[c..d) that span [tlo, thi) to the front, keeping
 * both parts in start order; returns how many span. */
static int split_spanning(const Inst *in, int *ids, int c, int d, int64_t tlo, int64_t thi, int *tmp) {
  int k = 0, m = 0;
  for (int j = c; j < d; j++) {
    int id = ids[j];
    if (in->lo[id] == tlo && in->hi[id] == thi) ids[c + k++] = id;
    else tmp[m++] = id;
  }
  memcpy(ids + c + k, tmp, sizeof(int) * (size_t)m);
  return k;
}

/* One task: split [t.a, t.b) into components; stack each component's
 * spanning items and queue the rest, or make the component a leaf. */
static void decompose_task(const Inst *in, int *ids, Leaf t, int64_t *off, int *tmp, LeafVec *work, LeafVec *leaves) {
  for (int c = t.a; c < t.b;) {
    int64_t tlo = in->lo[ids[c]], thi = in->hi[ids[c]];
    int d = c + 1;
    while (d < t.b && in->lo[ids[d]] < thi) {
      if (in->hi[ids[d]] > thi) thi = in->hi[ids[d]];
      d++;
    }
    int k = t.depth < MAX_DEPTH ? split_spanning(in, ids, c, d, tlo, thi, tmp) : 0;
    int64_t base = t.base;
    for (int j = c; j < c + k; j++) {
      off[ids[j]] = base;
      base += in->size[ids[j]];
    }
    if (k == 0) leaf_push(leaves, (Leaf){c, d, t.base, t.depth});
    else if (c + k < d) leaf_push(work, (Leaf){c + k, d, base, t.depth + 1});
    c = d;
  }
}

static int by_index(const void *ctx, int a, int b) {
  (void)ctx;
  return (a > b) - (a < b);
}

/* Fills ids (each leaf a range, in index order), the offsets of stacked
 * items, and the leaves. */
static LeafVec decompose(const Inst *in, int *ids, int64_t *off) {
  LeafVec work = {0}, leaves = {0};
  int *tmp = xmalloc(sizeof(int) * (size_t)in->n);
  for (int i = 0; i < in->n; i++) ids[i] = i;
  msort(ids, in->n, by_lo_cmp, in);
  leaf_push(&work, (Leaf){0, in->n, 0, 0});
  while (work.n > 0) {
    Leaf t = work.v[--work.n];
    decompose_task(in, ids, t, off, tmp, &work, &leaves);
  }
  /* Within a leaf, index order: orderings then break ties as on the whole
   * instance, so a leaf that is the whole instance packs like plain best fit. */
  for (int L = 0; L < leaves.n; L++) msort(ids + leaves.v[L].a, leaves.v[L].b - leaves.v[L].a, by_index, NULL);
  free(tmp);
  free(work.v);
  return leaves;
}

/* The items of one leaf as an instance of their own (local indices). */
static Inst leaf_inst(const Inst *in, const int *ids, Leaf l) {
  Inst s = {.n = l.b - l.a};
  s.lo = xmalloc(sizeof(int64_t) * (size_t)s.n);
  s.hi = xmalloc(sizeof(int64_t) * (size_t)s.n);
  s.size = xmalloc(sizeof(int64_t) * (size_t)s.n);
  for (int j = 0; j < s.n; j++) {
    int id = ids[l.a + j];
    s.lo[j] = in->lo[id], s.hi[j] = in->hi[id], s.size[j] = in->size[id];
  }
  inst_span(&s);
  return s;
}

/* ------------------------------------------------------------------------
 * Exact search for one leaf at one capacity, in MiniMalloc's style (Moffitt,
 * ASPLOS 2024; this is a reimplementation from the paper's description).
 *
 * Any packing can be normalized so each buffer sits at 0 or on the top of a
 * buffer it overlaps (drop buffers while one can drop); taking those buffers
 * in order of offset, each lands at its lowest offset above what is already
 * placed. So the search chooses only which buffer goes next, never an offset:
 * it goes to its min offset, and offsets never decrease along a branch (equal
 * offsets in preorder rank). Pruning, all sound:
 *  - dominance: a buffer must not start at or above the top that some
 *    unplaced buffer reaches from its own min offset (that one fits below, so
 *    the same packing is found with it first);
 *  - section inference: in a section (elementary time interval) everything
 *    unplaced stacks above the section's floor, so floor + unplaced bytes must
 *    fit; the floor is at least the current offset (monotone), the top of the
 *    last buffer placed there, and the lowest min offset unplaced there. As
 *    offsets only grow, once offset + the fullest section's unplaced bytes
 *    exceeds the capacity no later candidate of the node can fit either;
 *  - hatless buffers: one that no unplaced buffer overlaps has its final
 *    offset, so it must come before the order passes it: after trying it, or
 *    on meeting it already passed, the node is done;
 *  - decomposition: once no unplaced buffer crosses a section boundary the two
 *    sides are independent (placed buffers act only through min offsets and
 *    floors), so each side is searched on its own, with its own preorder
 *    (MiniMalloc recomputes the T key from the bytes still unplaced; keeping
 *    the parent's ranks instead left H and I of its suite unsolved).
 * Every check is incremental: a placement touches only b's overlaps and the
 * section range they span; orderings are merged, not re-sorted. */

typedef struct {
  int n, ns;           /* buffers, sections */
  const int64_t *size; /* aligned */
  int *s_lo, *s_hi;    /* buffer -> its sections [s_lo, s_hi) */
  int *ov_at, *ov;     /* CSR: buffers overlapping each buffer */
  int *sec_at, *sec;   /* CSR: buffers live in each section */
  int64_t *total0;     /* bytes live in each section */
  const Inst *in;      /* lifetimes and sizes, for the preorders */
} BB;

typedef struct {
  int64_t *slot, old;
} Undo;

typedef struct {
  const BB *bb;
  int h;         /* the preorder heuristic in use */
  int *rank;     /* per buffer: its rank in the preorder of its (sub)problem */
  int64_t *tkey; /* per buffer: the preorders' T key, scratch */
  int64_t cap;
  int64_t *off, *min_off, *floor, *total, *sol;
  int *cuts;       /* unplaced buffers crossing boundary s | s+1 */
  int *open_ov;    /* per buffer: unplaced buffers overlapping it */
  int epoch;       /* counts placements (and fresh orderings) */
  int *witness;    /* per section: a buffer last seen at its floor (a hint) */
  int *raised;     /* per buffer: epoch of the placement that last raised it */
  int *tmp, *tmp2; /* scratch for sorting */
  int *aff;        /* affected sections of one placement */
  Undo *undo;      /* min offsets and floors, restored on backtrack */
  int nundo, capundo;
  int *pool; /* the orderings of all open nodes, stacked (buffer ids) */
  int npool, cappool;
  int64_t nodes, node_limit;    /* per preorder run: MiniMalloc's round robin */
  int64_t work, work_limit;     /* the budget's currency, see WORK_PER_SECOND */
  int64_t done_cap, done_limit; /* every preorder ran out of done_limit at done_cap */
  double deadline;
} Search;

enum { BB_NOT_FOUND, BB_FOUND, BB_ABORT };

static int search_node(Search *S, int ord_at, int ord_n, int sa, int sb, int64_t min_offset, int min_rank);

static void bb_sections(BB *bb, const Inst *in) {
  bb->s_lo = xmalloc(sizeof(int) * (size_t)in->n);
  bb->s_hi = xmalloc(sizeof(int) * (size_t)in->n);
  bb->ns = sections_of(in, bb->s_lo, bb->s_hi);
}

static void bb_csr(BB *bb, const Inst *in) {
  int n = in->n, ns = bb->ns;
  bb->sec_at = xcalloc((size_t)ns + 1, sizeof(int));
  bb->total0 = xcalloc((size_t)ns, sizeof(int64_t));
  for (int i = 0; i < n; i++)
    for (int s = bb->s_lo[i]; s < bb->s_hi[i]; s++) {
      bb->sec_at[s + 1]++;
      bb->total0[s] += in->size[i];
    }
  for (int s = 0; s < ns; s++) bb->sec_at[s + 1] += bb->sec_at[s];
  bb->sec = xmalloc(sizeof(int) * (size_t)bb->sec_at[ns]);
  int *fill = xcalloc((size_t)ns, sizeof(int));
  for (int i = 0; i < n; i++)
    for (int s = bb->s_lo[i]; s < bb->s_hi[i]; s++) bb->sec[bb->sec_at[s] + fill[s]++] = i;
  free(fill);
  /* Overlaps: two passes over all pairs (leaves given to search are small). */
  bb->ov_at = xcalloc((size_t)n + 1, sizeof(int));
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < n; i++) {
      int k = 0;
      for (int j = 0; j < n; j++)
        if (j != i && bb->s_lo[i] < bb->s_hi[j] && bb->s_lo[j] < bb->s_hi[i]) {
          if (pass) bb->ov[bb->ov_at[i] + k] = j;
          k++;
        }
      if (!pass) bb->ov_at[i + 1] = bb->ov_at[i] + k;
    }
    if (!pass) bb->ov = xmalloc(sizeof(int) * (size_t)bb->ov_at[n] + 1);
  }
}

/* Preorders, MiniMalloc's "WAT", "TAW", "TWA": W = lifetime width, A = area,
 * T = the largest section total the buffer lives in (unplaced bytes, so a
 * subproblem gets its own preorder); all descending, ties by index. */
typedef struct {
  const Inst *in;
  const int64_t *tmax;
  int h;
} PreCtx;

static int pre_cmp(const void *ctx, int a, int b) {
  const PreCtx *c = ctx;
  static const char *keys[3] = {"WAT", "TAW", "TWA"};
  for (const char *k = keys[c->h]; *k; k++) {
    i128 x, y;
    if (*k == 'W') {
      x = c->in->hi[a] - c->in->lo[a];
      y = c->in->hi[b] - c->in->lo[b];
    } else if (*k == 'A') {
      x = (i128)c->in->size[a] * (c->in->hi[a] - c->in->lo[a]);
      y = (i128)c->in->size[b] * (c->in->hi[b] - c->in->lo[b]);
    } else {
      x = c->tmax[a];
      y = c->tmax[b];
    }
    if (x != y) return x > y ? -1 : 1;
  }
  return 0; /* stable sort keeps index order */
}

static BB bb_make(const Inst *in) {
  BB bb = {.n = in->n, .size = in->size, .in = in};
  bb_sections(&bb, in);
  bb_csr(&bb, in);
  return bb;
}

static void bb_free(BB *bb) {
  free(bb->s_lo), free(bb->s_hi), free(bb->ov_at), free(bb->ov);
  free(bb->sec_at), free(bb->sec), free(bb->total0);
}

static void log_set(Search *S, int64_t *slot, int64_t v) {
  if (S->nundo == S->capundo) {
    S->capundo = S->capundo ? 2 * S->capundo : 1024;
    S->undo = xrealloc(S->undo, sizeof(Undo) * (size_t)S->capundo);
  }
  S->undo[S->nundo++] = (Undo){slot, *slot};
  S->work++;
  *slot = v;
}

static void undo_to(Search *S, int mark) {
  while (S->nundo > mark) {
    Undo u = S->undo[--S->nundo];
    *u.slot = u.old;
  }
}

static int pool_alloc(Search *S, int n) {
  if (S->npool + n > S->cappool) {
    while (S->npool + n > S->cappool) S->cappool = S->cappool ? 2 * S->cappool : 4096;
    S->pool = xrealloc(S->pool, sizeof(int) * (size_t)S->cappool);
  }
  int at = S->npool;
  S->npool += n;
  return at;
}

/* Raises the min offsets of unplaced buffers overlapping b to top and marks
 * the sections whose floor may need raising, for section inference.
 * Refreshing a floor is always sound (it becomes the lowest min offset of the
 * section's unplaced buffers), so rather than the raised buffers' sections
 * one by one, take the range they span: each meets b, so with b's sections
 * it is one contiguous range. Within it, skip a section whose floor is
 * already >= top (a raised buffer caps its new floor at top, and any other
 * section keeps its floor) or where top + total <= cap (it passes the check
 * whatever its floor; its floor stays low, which loses nothing, since every
 * later check of a section refreshes it first). Returns the number marked
 * (in S->aff). */
static int raise_min_offsets(Search *S, int b, int64_t top) {
  const BB *bb = S->bb;
  int lo = bb->s_lo[b], hi = bb->s_hi[b], any = 0;
  S->epoch++;
  for (int k = bb->ov_at[b]; k < bb->ov_at[b + 1]; k++) {
    int o = bb->ov[k];
    S->open_ov[o]--;
    if (S->off[o] >= 0 || S->min_off[o] >= top) continue;
    log_set(S, &S->min_off[o], top);
    S->raised[o] = S->epoch, any = 1;
    if (bb->s_lo[o] < lo) lo = bb->s_lo[o];
    if (bb->s_hi[o] > hi) hi = bb->s_hi[o];
  }
  int na = 0;
  for (int s = lo; any && s < hi; s++)
    if (S->floor[s] < top && top + S->total[s] > S->cap) S->aff[na++] = s;
  return na;
}

/* Raises section s's floor to the lowest min offset among its unplaced
 * buffers. The floor is already a lower bound of that minimum, so one buffer
 * at the floor settles it: first the one that did last time (a hint, checked,
 * so it needs no undo), else a scan that stops at the first such buffer. */
static void raise_floor(Search *S, int s) {
  const BB *bb = S->bb;
  int64_t lowest = INT64_MAX, f = S->floor[s];
  int w = S->witness[s], k = bb->sec_at[s];
  if (S->off[w] < 0 && S->min_off[w] <= f) return;
  for (; k < bb->sec_at[s + 1]; k++) {
    int o = bb->sec[k];
    if (S->off[o] < 0 && S->min_off[o] <= f) break;
    if (S->off[o] < 0 && S->min_off[o] < lowest) {
      lowest = S->min_off[o];
      w = o;
    }
  }
  S->work += (k - bb->sec_at[s]) / 4;
  if (k < bb->sec_at[s + 1]) S->witness[s] = bb->sec[k];
  else if (lowest != INT64_MAX) {
    log_set(S, &S->floor[s], lowest);
    S->witness[s] = w;
  }
}

/* Places b at its min offset and updates floors and section totals; returns
 * the number of affected sections (in S->aff). */
static int place(Search *S, int b) {
  const BB *bb = S->bb;
  int64_t top = S->min_off[b] + bb->size[b];
  S->off[b] = S->sol[b] = S->min_off[b];
  S->work += 20 + (bb->ov_at[b + 1] - bb->ov_at[b]) / 4;
  for (int s = bb->s_lo[b]; s < bb->s_hi[b]; s++) S->total[s] -= bb->size[b];
  int na = raise_min_offsets(S, b, top);
  for (int s = bb->s_lo[b]; s < bb->s_hi[b]; s++) log_set(S, &S->floor[s], top);
  for (int a = 0; a < na; a++) raise_floor(S, S->aff[a]);
  return na;
}

static void unplace(Search *S, int b, int mark) {
  const BB *bb = S->bb;
  for (int k = bb->ov_at[b]; k < bb->ov_at[b + 1]; k++) S->open_ov[bb->ov[k]]++;
  for (int s = bb->s_lo[b]; s < bb->s_hi[b]; s++) S->total[s] += bb->size[b];
  undo_to(S, mark);
  S->off[b] = -1;
}

static bool section_fits(const Search *S, int s, int64_t offset) {
  int64_t f = S->floor[s] > offset ? S->floor[s] : offset;
  return f + S->total[s] <= S->cap;
}

/* Section inference after placing b at `offset`: in every section of the
 * partition the unplaced bytes must fit above max(floor, offset). The caller
 * has checked offset + (largest section total) <= cap, which covers every
 * section through the offset; so only sections whose floor rose can fail:
 * b's own and the affected ones. */
static bool sections_fit(const Search *S, int b, int na, int64_t offset) {
  const BB *bb = S->bb;
  for (int s = bb->s_lo[b]; s < bb->s_hi[b]; s++)
    if (!section_fits(S, s, offset)) return false;
  for (int a = 0; a < na; a++)
    if (!section_fits(S, S->aff[a], offset)) return false;
  return true;
}

static int64_t max_total(const Search *S, int sa, int sb) {
  int64_t m = 0;
  for (int s = sa; s < sb; s++)
    if (S->total[s] > m) m = S->total[s];
  return m;
}

/* Orders buffers by (min offset, rank): the dynamic ordering. */
static int by_key(const void *ctx, int x, int y) {
  const Search *S = ctx;
  int c = cmp_i64(S->min_off[x], S->min_off[y]);
  return c ? c : (S->rank[x] > S->rank[y]) - (S->rank[x] < S->rank[y]);
}

/* Ranks the k buffers ids[] (in index order) by the preorder, with T from
 * the current section totals. */
static void rank_buffers(Search *S, const int *ids, int k) {
  const BB *bb = S->bb;
  int *o = S->tmp2;
  for (int i = 0; i < k; i++) {
    int b = o[i] = ids[i];
    S->tkey[b] = 0;
    for (int s = bb->s_lo[b]; s < bb->s_hi[b]; s++)
      if (S->total[s] > S->tkey[b]) S->tkey[b] = S->total[s];
  }
  PreCtx c = {bb->in, S->tkey, S->h};
  msort_rec(o, S->tmp, k, pre_cmp, &c);
  for (int r = 0; r < k; r++) S->rank[o[r]] = r;
}

/* The unplaced buffers of a parent ordering, sorted by (min offset, rank).
 * The parent's ordering was sorted, and since then only the placement that
 * led here changed keys (raised some min offsets): keep the others in order,
 * sort the raised ones, and merge. O(m) plus the raised ones' sort. */
static int make_ordering(Search *S, int ord_at, int ord_n, int *m) {
  int at = pool_alloc(S, 2 * ord_n), ka = 0, kb = 0;
  int *a = S->pool + at, *b = a + ord_n, *src = S->pool + ord_at;
  for (int i = 0; i < ord_n; i++) {
    int x = src[i];
    if (S->off[x] >= 0) continue;
    if (S->raised[x] == S->epoch) b[kb++] = x;
    else a[ka++] = x;
  }
  msort_rec(b, S->tmp, kb, by_key, S);
  /* Merge b into a, from the back, so a holds the result in place. */
  int i = ka - 1, j = kb - 1;
  for (int k = ka + kb - 1; j >= 0; k--) a[k] = i >= 0 && by_key(S, a[i], b[j]) > 0 ? a[i--] : b[j--];
  S->npool = at + ka + kb;
  *m = ka + kb;
  return at;
}

/* Searches the unplaced buffers of ordering `ord` within [c0, c1) as a fresh
 * subproblem: its own preorder, offsets from 0 again. The buffers' ranks in
 * the parent problem are saved and restored around it. */
static int solve_sub(Search *S, int ord_at, int ord_n, int c0, int c1) {
  int at = pool_alloc(S, 2 * ord_n), k = 0;
  int *o = S->pool + at, *saved = o + ord_n;
  for (int i = 0; i < ord_n; i++) {
    int b = S->pool[ord_at + i];
    if (S->off[b] < 0 && S->bb->s_lo[b] < c1 && c0 < S->bb->s_hi[b]) o[k++] = b;
  }
  int st = BB_FOUND;
  if (k > 0) {
    msort_rec(o, S->tmp, k, by_index, NULL);
    for (int i = 0; i < k; i++) saved[i] = S->rank[o[i]];
    rank_buffers(S, o, k);
    msort_rec(o, S->tmp, k, by_key, S); /* a fresh dynamic ordering, */
    S->epoch++;                         /* which make_ordering keeps */
    st = search_node(S, at, k, c0, c1, 0, -1);
    o = S->pool + at, saved = o + ord_n;     /* the pool may have moved */
    msort_rec(o, S->tmp, k, by_index, NULL); /* back in line with saved[] */
    for (int i = 0; i < k; i++) S->rank[o[i]] = saved[i];
  }
  S->npool = at;
  return st;
}

/* After placing b: splits [sa, sb) where no unplaced buffer crosses any more
 * and solves the pieces, or goes on with the same partition. */
static int descend(Search *S, int b, int ord_at, int ord_n, int sa, int sb) {
  const BB *bb = S->bb;
  int ncut = 0;
  for (int s = bb->s_lo[b]; s + 1 < bb->s_hi[b]; s++)
    if (--S->cuts[s] == 0 && s >= sa && s + 1 < sb) ncut++;
  int st = BB_FOUND;
  if (ncut == 0) {
    st = search_node(S, ord_at, ord_n, sa, sb, S->off[b], S->rank[b]);
  } else {
    int c0 = sa;
    for (int s = sa; s < sb && st == BB_FOUND; s++)
      if (s + 1 == sb || S->cuts[s] == 0) {
        st = solve_sub(S, ord_at, ord_n, c0, s + 1);
        c0 = s + 1;
      }
  }
  for (int s = bb->s_lo[b]; s + 1 < bb->s_hi[b]; s++) S->cuts[s]++;
  return st;
}

static int64_t min_top(const Search *S, const int *o, int m) {
  int64_t t = INT64_MAX;
  for (int i = 0; i < m; i++) {
    int b = o[i];
    if (S->min_off[b] + S->bb->size[b] < t) t = S->min_off[b] + S->bb->size[b];
  }
  return t;
}

static int search_node(Search *S, int ord_at, int ord_n, int sa, int sb, int64_t min_offset, int min_rank) {
  if (S->nodes++ >= S->node_limit || S->work >= S->work_limit) return BB_ABORT;
  if ((S->nodes & 1023) == 0 && now_s() > S->deadline) return BB_ABORT;
  int m, at = make_ordering(S, ord_at, ord_n, &m);
  S->work += 4 + ord_n / 4;
  int st = BB_NOT_FOUND;
  if (m == 0) st = BB_FOUND;
  int64_t lowest_top = m ? min_top(S, S->pool + at, m) : 0;
  int64_t mt = m ? max_total(S, sa, sb) : 0;
  for (int i = 0; i < m && st == BB_NOT_FOUND; i++) {
    int b = S->pool[at + i], r = S->rank[b];
    int64_t o = S->min_off[b];
    bool hatless = S->open_ov[b] == 0;
    if (o < min_offset || (o == min_offset && r < min_rank)) { /* canonical */
      if (hatless) break;                                      /* its offset is final and already passed: dead end */
      continue;
    }
    if (o >= lowest_top) break; /* dominated; later candidates start higher */
    /* Everything unplaced in the fullest section goes at or above o. */
    if (o + mt > S->cap) break;
    int mark = S->nundo;
    int na = place(S, b);
    if (sections_fit(S, b, na, o)) st = descend(S, b, at, m, sa, sb);
    unplace(S, b, mark);
    /* Hatless: nothing unplaced overlaps b, so its offset is final; any
     * later candidate comes after it in (offset, rank) and could never
     * place it. */
    if (hatless) break;
  }
  S->npool = at;
  return st;
}

/* Search state for one leaf; reused across capacities and preorders. */
static Search search_make(const BB *bb) {
  Search S = {.bb = bb};
  int n = bb->n, ns = bb->ns;
  S.off = xmalloc(sizeof(int64_t) * (size_t)n);
  S.min_off = xmalloc(sizeof(int64_t) * (size_t)n);
  S.sol = xmalloc(sizeof(int64_t) * (size_t)n);
  S.floor = xmalloc(sizeof(int64_t) * (size_t)ns);
  S.total = xmalloc(sizeof(int64_t) * (size_t)ns);
  S.cuts = xcalloc((size_t)ns, sizeof(int));
  S.open_ov = xmalloc(sizeof(int) * (size_t)n);
  S.witness = xcalloc((size_t)ns, sizeof(int)); /* any buffer will do */
  S.raised = xcalloc((size_t)n, sizeof(int));
  S.tmp = xmalloc(sizeof(int) * (size_t)n);
  S.tmp2 = xmalloc(sizeof(int) * (size_t)n);
  S.rank = xmalloc(sizeof(int) * (size_t)n);
  S.tkey = xmalloc(sizeof(int64_t) * (size_t)n);
  S.aff = xmalloc(sizeof(int) * (size_t)ns);
  return S;
}

static void search_free(Search *S) {
  free(S->off), free(S->min_off), free(S->sol), free(S->floor), free(S->total);
  free(S->cuts), free(S->open_ov), free(S->witness), free(S->raised), free(S->tmp), free(S->tmp2), free(S->rank),
      free(S->tkey), free(S->aff), free(S->undo), free(S->pool);
}

static void search_reset(Search *S, int h, int64_t cap) {
  const BB *bb = S->bb;
  S->h = h, S->cap = cap;
  for (int i = 0; i < bb->n; i++) {
    S->off[i] = -1;
    S->min_off[i] = 0;
  }
  for (int s = 0; s < bb->ns; s++) {
    S->floor[s] = 0;
    S->total[s] = bb->total0[s];
    S->cuts[s] = 0;
  }
  for (int i = 0; i < bb->n; i++) S->open_ov[i] = bb->ov_at[i + 1] - bb->ov_at[i];
  for (int i = 0; i < bb->n; i++)
    for (int s = bb->s_lo[i]; s + 1 < bb->s_hi[i]; s++) S->cuts[s]++;
  S->nundo = S->npool = 0;
  S->epoch++; /* nothing counts as just raised */
}

/* Whether the leaf fits in cap: 1 (S->sol holds it), 0 (proven not), -1
 * (work budget or deadline ran out). MiniMalloc's round robin: each preorder
 * in turn under a node limit that doubles, so an easy preorder ends early. */
static int bb_fit(Search *S, int64_t cap, int64_t *budget, double deadline) {
  const BB *bb = S->bb;
  S->deadline = deadline;
  /* The search is deterministic: limits that all three preorders ran out of
   * at this capacity before would run out again, so resume above them. */
  int64_t limit = 2 * (int64_t)bb->n;
  if (cap == S->done_cap && S->done_limit >= limit) limit = 2 * S->done_limit;
  for (;; limit *= 2) {
    int spent = 0; /* preorders that used the whole limit */
    for (int h = 0; h < 3; h++) {
      if (*budget <= 0 || now_s() > deadline) return -1;
      search_reset(S, h, cap);
      S->nodes = S->work = 0;
      S->node_limit = limit, S->work_limit = *budget;
      int at = pool_alloc(S, bb->n);
      for (int i = 0; i < bb->n; i++) S->pool[at + i] = i;
      rank_buffers(S, S->pool + at, bb->n);
      msort_rec(S->pool + at, S->tmp, bb->n, by_key, S); /* min offsets all 0 */
      int st = search_node(S, at, bb->n, 0, bb->ns, 0, -1);
      *budget -= S->work;
      if (st != BB_ABORT) return st == BB_FOUND;
      spent += S->nodes > limit;
    }
    if (spent == 3) {
      S->done_cap = cap;
      S->done_limit = limit;
    }
  }
}

/* ------------------------------------------------------------------------
 * Driving the search over leaves and capacities. */

/* The search counts its work so that results do not depend on the machine's
 * speed; the wall clock only backs it up. Work units: one per undo-logged
 * change (min offset or floor), about one per four buffers scanned (section
 * floors, orderings, overlaps), 20 per placement, 4 per node. Per unit the
 * time varies about 2x over the MiniMalloc suite (per node it varies 10x).
 * The rate, a conservative guess of units per second on a loaded machine,
 * turns time_limit_s into the budget. The clock is a backstop only, at
 * BACKSTOP times the limit and never under BACKSTOP_MIN_S seconds: a machine
 * (or a sanitizer build) must be that much slower than the rate for the
 * clock to decide a result, so tests and fuzzing are decided by the work. */
enum { WORK_PER_SECOND = 65000000, EXACT_MAX_N = 4000, LEAF_PORTFOLIO_MAX_N = 5000, BACKSTOP = 20 };
#define BACKSTOP_MIN_S 60.0

typedef struct {
  Leaf l;
  Inst s;        /* the leaf's items, local indices */
  int64_t lb, h; /* the leaf's own bound and current height */
  int64_t *off;  /* current local offsets */
  const char *method;
  int ordering; /* the portfolio's kept ordering, while the solution is best fit's */
  BB bb;        /* built on first search */
  Search S;
  bool built;
} LeafSol;

typedef struct {
  const Inst *in;
  const int *ids;
  LeafSol *v;
  int n;
  int64_t budget;    /* work units left */
  int64_t spent;     /* work units of the portfolio's passes */
  double best_at;    /* when minimize last lowered the height */
  int64_t stack_top; /* top of the stacked (spanning) items */
  double deadline;
  /* Plain best fit on the whole instance, when the decomposition changed
   * anything: rarely, it beats the leaves, and the result must never be
   * worse than it. plain_h is INT64_MAX when not run. */
  int64_t plain_h, *plain_off;
  const char *plain_method;
  int64_t *stack_off; /* the decomposition's offsets (stacked items; leaves 0) */
} Plan;

/* Best fit on every leaf: the portfolio, or the one ordering `only`. */
static void leaves_greedy(Plan *P, const LeafVec *lv, int only) {
  P->n = lv->n;
  P->v = xcalloc((size_t)lv->n, sizeof(LeafSol));
  for (int L = 0; L < lv->n; L++) {
    LeafSol *x = &P->v[L];
    x->l = lv->v[L];
    x->s = leaf_inst(P->in, P->ids, x->l);
    x->lb = lower_bound(&x->s);
    x->off = xmalloc(sizeof(int64_t) * (size_t)x->s.n);
    x->ordering = portfolio(&x->s, x->lb, only, x->off, &x->h, &P->spent);
    x->method = ORDERINGS[x->ordering].name;
  }
}

static void leaves_free(Plan *P) {
  for (int L = 0; L < P->n; L++) {
    LeafSol *x = &P->v[L];
    if (x->built) {
      search_free(&x->S);
      bb_free(&x->bb);
    }
    free(x->off);
    inst_free(&x->s);
  }
  free(P->v);
  free(P->plain_off);
  free(P->stack_off);
}

/* Makes one leaf fit under cap (its own coordinates): 1, 0 proven, -1. */
static int leaf_fit(Plan *P, LeafSol *x, int64_t cap) {
  if (x->h <= cap) return 1;
  if (x->lb > cap) return 0;
  if (x->s.n > EXACT_MAX_N) return -1;
  /* Building the search (bb_make: its overlap lists scan all n^2 pairs twice)
   * is not counted in work units, and costs about n^2 / 2 of them: with less
   * budget than that the search could not pay for its own setup (sd-unet's
   * report-only arenas, FIT_SHOW_TIME_LIMIT: a 3,212-buffer leaf had 0.36M
   * units left after the portfolio, its build took 0.05 s and the search
   * then ran out without lowering anything), so it is not started. */
  if (!x->built && P->budget < (int64_t)x->s.n * x->s.n / 2) return -1;
  if (!x->built) {
    x->bb = bb_make(&x->s);
    x->S = search_make(&x->bb);
    x->built = true;
  }
  int r = bb_fit(&x->S, cap, &P->budget, P->deadline);
  if (r == 1) {
    x->h = 0;
    for (int j = 0; j < x->s.n; j++) {
      x->off[j] = x->S.sol[j];
      if (x->off[j] + x->s.size[j] > x->h) x->h = x->off[j] + x->s.size[j];
    }
    x->method = "search";
    x->ordering = -1;
  }
  return r;
}

/* Whether every leaf fits under a global capacity: 1, 0 (proven), -1. */
static int fit_all(Plan *P, int64_t cap) {
  int res = 1;
  for (int L = 0; L < P->n && res != 0; L++) {
    LeafSol *x = &P->v[L];
    int r = leaf_fit(P, x, cap - x->l.base);
    if (r < res) res = r;
  }
  return res;
}

static int64_t plan_height(const Plan *P, const char **method) {
  int64_t h = P->stack_top;
  *method = "stack";
  for (int L = 0; L < P->n; L++)
    if (P->v[L].l.base + P->v[L].h > h) {
      h = P->v[L].l.base + P->v[L].h;
      *method = P->v[L].method;
    }
  return h;
}

/* The stacked items' offsets are restored too: an earlier plan_result may
 * have put the plain solution's offsets there. */
static void plan_offsets(const Plan *P, int64_t *offsets) {
  memcpy(offsets, P->stack_off, sizeof(int64_t) * (size_t)P->in->n);
  for (int L = 0; L < P->n; L++) {
    const LeafSol *x = &P->v[L];
    for (int j = 0; j < x->s.n; j++) offsets[P->ids[x->l.a + j]] = x->l.base + x->off[j];
  }
}

/* fit_all with at most `allow` work units of the budget. */
static int fit_allowed(Plan *P, int64_t cap, int64_t allow) {
  int64_t total = P->budget, share = allow < total ? allow : total;
  P->budget = share;
  int r = fit_all(P, cap);
  P->budget = total - (share - P->budget);
  return r;
}

/* Minimizes the height by deciding capacities between what is proven
 * infeasible and the best height, in rounds. A round tries the bound with
 * `allow` work units (usually the bound is the optimum, and it can take many),
 * then searches the rest of the gap with allow / 2 per capacity, each a
 * quarter of the gap below the best height (the bound is often weak, so the
 * optimum tends to sit nearer the best height than the bound); an attempt
 * that runs out counts as too low for the rest of its round, and the fourth
 * such ends the round (further ones would only creep up towards the best
 * height). The next
 * round has 4x the work. So easy capacities are settled first, and no
 * undecidable one (often the bound, when the optimum is above it) eats the
 * whole budget. `optimal` is claimed only from the bound or from a proof at
 * best - align. */
static int64_t minimize(Plan *P, int64_t lb, int64_t align, int64_t best, bool *optimal) {
  const char *m;
  int64_t proven = lb; /* every height below it is infeasible */
  for (int64_t allow = 2000 * (int64_t)P->in->n; proven < best; allow *= 4) {
    int unknown = 0;
    for (int64_t lo = proven; lo < best && unknown < 4 && P->budget > 0 && now_s() < P->deadline;) {
      int64_t cap = lo == proven ? lo : best - ((best - lo) / align / 4 + 1) * align;
      int r = fit_allowed(P, cap, lo == proven ? allow : allow / 2);
      if (r == 1) {
        best = plan_height(P, &m);
        P->best_at = now_s();
      } else {
        if (r == 0 && cap + align > proven) proven = cap + align; /* all below fail too */
        unknown += r < 0;
        lo = cap + align;
      }
    }
    if (allow >= P->budget || now_s() >= P->deadline) break;
  }
  *optimal = proven >= best;
  return best;
}

/* ------------------------------------------------------------------------
 * Iterated greedy: the improvement pass for leaves too large for the exact
 * search (over EXACT_MAX_N buffers) or that it did not settle. A pass
 * perturbs the best ordering found so far and runs best fit again: each
 * buffer whose top is above the goal (those that make the height) moves to
 * the front with probability 1/8 (squeaky wheel; the moved keep their order),
 * and a few random neighbours swap; a pass that is not higher is kept. (Moving
 * them by a random fraction of their position, or moving every buffer a
 * random distance, did as well on random and training-like instances.) The random numbers come from a fixed-seed
 * splitmix64 and every pass is paid for in work units, so the result depends only on the input and the limit. A leaf
 * stops at its goal, when the budget runs out, or after IG_STALL passes without a lower height (so a plan already at
 * its best does not spend the whole limit). */

enum { IG_STALL = 64 };

static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int by_ig_key(const void *ctx, int a, int b) {
  const int64_t *k = ctx;
  return cmp_i64(k[a], k[b]);
}

/* Lowers one leaf's height towards `goal` (local); only a best-fit solution
 * (x->ordering >= 0) has an ordering to perturb. */
static void improve_leaf(Plan *P, LeafSol *x, int64_t goal) {
  const Inst *s = &x->s;
  int n = s->n;
  if (x->ordering < 0 || x->h <= goal || n < 2) return;
  Greedy g = greedy_make(s);
  int *best = xmalloc(sizeof(int) * (size_t)n), *cand = xmalloc(sizeof(int) * (size_t)n);
  int64_t *key = xmalloc(sizeof(int64_t) * (size_t)n), *off = xmalloc(sizeof(int64_t) * (size_t)n);
  for (int i = 0; i < n; i++) best[i] = i;
  msort(best, n, ORDERINGS[x->ordering].cmp, s);
  uint64_t rng = 0x6d656d706c616eull ^ (uint64_t)n;
  int64_t h0 = x->h;
  for (int stall = 0; stall < IG_STALL && x->h > goal && P->budget > 0 && now_s() < P->deadline; stall++) {
    for (int k = 0; k < n; k++) {
      int id = best[k];
      key[id] = (int64_t)k << 10;
      if (x->off[id] + s->size[id] > goal && splitmix(&rng) % 8 == 0) key[id] = -1;
    }
    memcpy(cand, best, sizeof(int) * (size_t)n);
    msort(cand, n, by_ig_key, key);
    for (int j = 0; j < 1 + n / 256; j++) {
      int k = (int)(splitmix(&rng) % (uint64_t)(n - 1)), t = cand[k];
      cand[k] = cand[k + 1], cand[k + 1] = t;
    }
    int64_t work = 0, h = best_fit(&g, s, cand, off, &work, x->h + 1); /* higher is never kept */
    P->budget -= work;
    if (h <= x->h) {
      if (h < x->h) {
        stall = -1; /* the loop's increment makes it 0 */
        P->best_at = now_s();
      }
      x->h = h;
      memcpy(x->off, off, sizeof(int64_t) * (size_t)n);
      memcpy(best, cand, sizeof(int) * (size_t)n);
    }
  }
  if (x->h < h0) x->method = "iterated-greedy";
  free(best), free(cand), free(key), free(off);
  greedy_free(&g);
}

static int by_leaf_top(const void *ctx, int a, int b) {
  const Plan *P = ctx;
  return cmp_i64(P->v[b].l.base + P->v[b].h, P->v[a].l.base + P->v[a].h);
}

/* Improves the leaves from the highest down. None needs to go below the
 * floor: `floor0` (the lower bound, or the capacity to fit), the stacked
 * items' top, and the height where each higher leaf stayed. `big`: only the
 * leaves too large for the exact search (the others raise the floor by what
 * the search could at best bring them to, their own bound). */
static void improve(Plan *P, int64_t floor0, bool big) {
  int *order = xmalloc(sizeof(int) * (size_t)P->n);
  for (int L = 0; L < P->n; L++) order[L] = L;
  msort(order, P->n, by_leaf_top, P);
  int64_t floor = floor0 > P->stack_top ? floor0 : P->stack_top;
  for (int k = 0; k < P->n && P->budget > 0; k++) {
    LeafSol *x = &P->v[order[k]];
    if (x->l.base + x->h <= floor) break; /* and so are all after it */
    bool mine = !big || x->s.n > EXACT_MAX_N;
    if (mine) improve_leaf(P, x, floor - x->l.base);
    int64_t top = x->l.base + (mine ? x->h : x->lb);
    if (top > floor) floor = top;
  }
  free(order);
}

/* ------------------------------------------------------------------------
 * Entry points. */

/* Decomposes; runs plain best fit on the whole instance as a fallback (see
 * Plan), then the portfolio on every leaf, and fills offsets. */
static Plan plan_make(const Inst *in, int64_t lb, int *ids, int64_t *offsets, double time_limit_s, double t0) {
  for (int i = 0; i < in->n; i++) offsets[i] = 0;
  LeafVec lv = decompose(in, ids, offsets);
  double backstop = BACKSTOP * time_limit_s;
  Plan P = {.in = in, .ids = ids, .deadline = t0 + (backstop > BACKSTOP_MIN_S ? backstop : BACKSTOP_MIN_S)};
  P.stack_off = xmalloc(sizeof(int64_t) * (size_t)in->n);
  memcpy(P.stack_off, offsets, sizeof(int64_t) * (size_t)in->n);
  /* Stacked items have their offsets now, leaf items 0: a floor for the
   * height that also covers components made only of stacked items. */
  for (int i = 0; i < in->n; i++)
    if (offsets[i] + in->size[i] > P.stack_top) P.stack_top = offsets[i] + in->size[i];
  P.budget = (int64_t)(time_limit_s * WORK_PER_SECOND);
  P.plain_h = INT64_MAX;
  int only = -1;
  if (!(lv.n == 1 && lv.v[0].b - lv.v[0].a == in->n)) { /* not the whole instance */
    P.plain_off = xmalloc(sizeof(int64_t) * (size_t)in->n);
    only = portfolio(in, lb, -1, P.plain_off, &P.plain_h, &P.spent);
    P.plain_method = ORDERINGS[only].name;
    /* On large instances the leaves rarely beat plain best fit by much; the
     * ordering that won there is enough for the leaves' starting points. */
    if (in->n <= LEAF_PORTFOLIO_MAX_N) only = -1;
  }
  leaves_greedy(&P, &lv, only);
  P.budget -= P.spent; /* the limit covers the portfolio too */
  free(lv.v);
  plan_offsets(&P, offsets);
  return P;
}

/* The plan's height, or the plain one's when strictly lower (then its
 * offsets go to `offsets`). */
static int64_t plan_result(const Plan *P, int64_t *offsets, const char **method) {
  int64_t h = plan_height(P, method);
  if (P->plain_h < h) {
    memcpy(offsets, P->plain_off, sizeof(int64_t) * (size_t)P->in->n);
    *method = P->plain_method;
    return P->plain_h;
  }
  plan_offsets(P, offsets);
  return h;
}

AsgResult assign_offsets(const AsgItem *items, int n, int64_t align, double time_limit_s, int64_t *offsets) {
  double t0 = now_s();
  AsgResult r = {.optimal = true, .method = "empty"};
  if (n <= 0) return r;
  if (align < 1) align = 1;
  Inst in = inst_make(items, n, align);
  int *ids = xmalloc(sizeof(int) * (size_t)n);
  r.lower_bound = lower_bound(&in);
  Plan P = plan_make(&in, r.lower_bound, ids, offsets, time_limit_s, t0);
  r.height = plan_result(&P, offsets, &r.method);
  r.best_seconds = now_s() - t0;
  r.optimal = r.height == r.lower_bound;
  if (!r.optimal && time_limit_s > 0) {
    /* Leaves too large for the exact search first, then the search, then
     * iterated greedy again on what the search left (with what it left). */
    int64_t h0 = r.height;
    improve(&P, r.lower_bound, true);
    r.height = plan_result(&P, offsets, &r.method);
    if (r.height > r.lower_bound) minimize(&P, r.lower_bound, align, r.height, &r.optimal);
    r.height = plan_result(&P, offsets, &r.method);
    if (r.height > r.lower_bound && !r.optimal) {
      improve(&P, r.lower_bound, false);
      r.height = plan_result(&P, offsets, &r.method);
    }
    r.optimal = r.optimal || r.height == r.lower_bound;
    if (r.height < h0) r.best_seconds = P.best_at - t0;
  }
  leaves_free(&P);
  free(ids);
  inst_free(&in);
  r.seconds = now_s() - t0;
  return r;
}

int assign_fit(const AsgItem *items, int n, int64_t align, int64_t capacity, double time_limit_s, int64_t *offsets) {
  double t0 = now_s();
  if (n <= 0) return capacity >= 0;
  if (align < 1) align = 1;
  Inst in = inst_make(items, n, align);
  int res = 0;
  if (lower_bound(&in) <= capacity) {
    int *ids = xmalloc(sizeof(int) * (size_t)n);
    Plan P = plan_make(&in, lower_bound(&in), ids, offsets, time_limit_s, t0);
    if (P.plain_h <= capacity) {
      res = 1;
      memcpy(offsets, P.plain_off, sizeof(int64_t) * (size_t)n);
    } else {
      if (time_limit_s > 0) improve(&P, capacity, true);
      if ((res = fit_all(&P, capacity)) == 1) plan_offsets(&P, offsets);
    }
    leaves_free(&P);
    free(ids);
  }
  inst_free(&in);
  return res;
}
