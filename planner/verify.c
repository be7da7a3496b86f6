/* verify.c: the independent plan checker. It deliberately shares no code
 * with assign.c or live.c: overlaps are found by its own sweep and liveness
 * is re-derived from the schedules. */
#include "verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

static char msg[512];

typedef struct {
  int64_t t;
  int kind; /* 0 = end, 1 = start: ends first at equal times (half-open) */
  int i;
} Event;

static int event_cmp(const void *a, const void *b) {
  const Event *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  if (x->kind != y->kind) return x->kind - y->kind;
  return x->i - y->i;
}

/* The live set is kept sorted by offset. Its members are pairwise disjoint
 * (checked on every insertion), so checking the two neighbours of a new
 * buffer is enough; members have distinct offsets since sizes are > 0. */
static int find_slot(const int *live, int nlive, const int64_t *offset, int64_t off) {
  int lo = 0, hi = nlive;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (offset[live[mid]] < off) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static const char *check_one(int i, const int64_t *lo, const int64_t *hi,
                             const int64_t *size, const int64_t *offset, int64_t align,
                             int64_t capacity) {
  if (lo[i] >= hi[i])
    return snprintf(msg, sizeof msg, "buffer %d: empty lifetime [%lld, %lld)", i,
                    (long long)lo[i], (long long)hi[i]), msg;
  if (size[i] < 0)
    return snprintf(msg, sizeof msg, "buffer %d: size %lld", i, (long long)size[i]), msg;
  if (offset[i] < 0 || (align > 0 && offset[i] % align != 0))
    return snprintf(msg, sizeof msg, "buffer %d: offset %lld not a non-negative multiple of %lld",
                    i, (long long)offset[i], (long long)align), msg;
  if (offset[i] > capacity || size[i] > capacity - offset[i])
    return snprintf(msg, sizeof msg, "buffer %d: [%lld, %lld) exceeds the arena of %lld bytes", i,
                    (long long)offset[i], (long long)(offset[i] + size[i]), (long long)capacity), msg;
  return NULL;
}

const char *verify_packing(int n, const int64_t *lo, const int64_t *hi,
                           const int64_t *size, const int64_t *offset, int64_t align,
                           int64_t capacity) {
  for (int i = 0; i < n; i++) {
    const char *e = check_one(i, lo, hi, size, offset, align, capacity);
    if (e) return e;
  }
  Event *ev = malloc(sizeof(Event) * (size_t)(2 * n + 1));
  int *live = malloc(sizeof(int) * (size_t)(n + 1));
  if (!ev || !live) {
    free(ev), free(live);
    return "verifier out of memory";
  }
  int nev = 0; /* zero-size buffers occupy no bytes: nothing to overlap */
  for (int i = 0; i < n; i++)
    if (size[i] > 0) ev[nev++] = (Event){lo[i], 1, i}, ev[nev++] = (Event){hi[i], 0, i};
  qsort(ev, (size_t)nev, sizeof(Event), event_cmp);
  const char *err = NULL;
  int nlive = 0;
  for (int k = 0; k < nev && !err; k++) {
    int i = ev[k].i;
    int s = find_slot(live, nlive, offset, offset[i]);
    if (ev[k].kind == 0) {
      while (s < nlive && live[s] != i) s++; /* equal offsets cannot coexist */
      if (s == nlive) { err = "verifier lost a buffer (internal)"; break; }
      memmove(live + s, live + s + 1, sizeof(int) * (size_t)(nlive - s - 1));
      nlive--;
      continue;
    }
    int prev = s > 0 ? live[s - 1] : -1, next = s < nlive ? live[s] : -1;
    int clash = -1;
    if (prev >= 0 && offset[prev] + size[prev] > offset[i]) clash = prev;
    if (next >= 0 && offset[i] + size[i] > offset[next]) clash = next;
    if (clash >= 0) {
      snprintf(msg, sizeof msg,
               "buffers %d [%lld, %lld) live [%lld, %lld) and %d [%lld, %lld) live [%lld, %lld) overlap",
               clash, (long long)offset[clash], (long long)(offset[clash] + size[clash]),
               (long long)lo[clash], (long long)hi[clash], i, (long long)offset[i],
               (long long)(offset[i] + size[i]), (long long)lo[i], (long long)hi[i]);
      err = msg;
      break;
    }
    memmove(live + s + 1, live + s, sizeof(int) * (size_t)(nlive - s));
    live[s] = i;
    nlive++;
  }
  free(ev);
  free(live);
  return err;
}

/* ---- whole plans ---- */

static const char *check_schedule(const Plan *p, const PlanOp *ops, int nops, SchedSet which) {
  for (int k = 0; k < nops; k++) {
    const PlanOp *op = &ops[k];
    if (op->id != k)
      return snprintf(msg, sizeof msg, "%s op %d has id %d", which == SCHED_EVAL ? "eval" : "train", k, op->id), msg;
    for (int j = 0; j < op->nin + op->nout; j++) {
      int b = j < op->nin ? op->in[j] : op->out[j - op->nin];
      if (b < 0) continue;
      if (b >= p->nbuf) return snprintf(msg, sizeof msg, "op %d names buffer %d of %d", k, b, p->nbuf), msg;
      const PlanBuffer *pb = &p->buf[b];
      if (pb->sched != SCHED_BOTH && pb->sched != which)
        return snprintf(msg, sizeof msg, "op %d (%s) uses buffer %s of the other schedule", k, op->layer, pb->name), msg;
      if (pb->sched != SCHED_BOTH && !(pb->first <= k && k < pb->last))
        return snprintf(msg, sizeof msg, "op %d (%s) uses buffer %s outside its live range [%d, %d)",
                        k, op->layer, pb->name, pb->first, pb->last), msg;
    }
  }
  return NULL;
}

/* Packs one schedule's buffers (persistent ones included, live throughout). */
static const char *check_packing(const Plan *p, SchedSet which, int nops) {
  int64_t *lo = calloc((size_t)p->nbuf + 1, sizeof(int64_t) * 4);
  if (!lo) return "verifier out of memory";
  int64_t *hi = lo + p->nbuf + 1, *sz = hi + p->nbuf + 1, *off = sz + p->nbuf + 1;
  int n = 0;
  for (int b = 0; b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    if (pb->sched != SCHED_BOTH && pb->sched != which) continue;
    bool whole = pb->sched == SCHED_BOTH;
    lo[n] = whole ? 0 : pb->first;
    hi[n] = whole ? (nops > 0 ? nops : 1) : pb->last;
    sz[n] = pb->bytes + p->guard_bytes; /* a buffer's canary zone is its own */
    off[n] = pb->offset;
    n++;
  }
  const char *e = verify_packing(n, lo, hi, sz, off, p->align, p->arena_bytes);
  free(lo);
  return e;
}

static const char *check_buffers(const Plan *p) {
  for (int b = 0; b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    if (pb->id != b) return snprintf(msg, sizeof msg, "buffer %d has id %d", b, pb->id), msg;
    int64_t numel = 1;
    for (int d = 0; d < pb->shape.rank; d++) numel *= pb->shape.d[d];
    if (numel * dtype_size(pb->dtype) != pb->bytes)
      return snprintf(msg, sizeof msg, "buffer %s: %lld bytes for %lld elements of %s", pb->name,
                      (long long)pb->bytes, (long long)numel, dtype_name(pb->dtype)), msg;
    bool persistent = pb->role == ROLE_PARAM || pb->role == ROLE_OPT_STATE || pb->role == ROLE_WORKSPACE;
    if (persistent != (pb->sched == SCHED_BOTH))
      return snprintf(msg, sizeof msg, "buffer %s: persistent iff in both schedules", pb->name), msg;
    if (persistent && pb->offset + pb->bytes > p->persistent_bytes)
      return snprintf(msg, sizeof msg, "buffer %s: persistent but above the persistent region", pb->name), msg;
  }
  return NULL;
}

const char *verify_plan(const Plan *p) {
  const char *e;
  if (p->align <= 0 || (p->align & (p->align - 1)))
    return snprintf(msg, sizeof msg, "alignment %lld is not a power of two", (long long)p->align), msg;
  if ((e = check_buffers(p))) return e;
  if ((e = check_schedule(p, p->sched, p->nsched, SCHED_TRAIN))) return e;
  if ((e = check_schedule(p, p->eval, p->neval, SCHED_EVAL))) return e;
  if ((e = check_packing(p, SCHED_TRAIN, p->nsched))) return e;
  if ((e = check_packing(p, SCHED_EVAL, p->neval))) return e;
  if (p->budget_bytes > 0 && p->arena_bytes > p->budget_bytes)
    return snprintf(msg, sizeof msg, "arena %lld exceeds the budget %lld", (long long)p->arena_bytes,
                    (long long)p->budget_bytes), msg;
  if (p->lower_bound_bytes > p->arena_bytes)
    return snprintf(msg, sizeof msg, "arena %lld below the lower bound %lld (impossible)",
                    (long long)p->arena_bytes, (long long)p->lower_bound_bytes), msg;
  return NULL;
}
