/* verify.c: the independent plan checker. It deliberately shares no code
 * with assign.c or live.c: overlaps are found by its own sweep and liveness
 * is re-derived from the schedules. */
#include "verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
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

/* The live set, ordered by offset: a treap (arrays indexed by buffer, keys
 * the offsets, priorities a hash of the index, so the same plan always
 * builds the same tree). Its members are pairwise disjoint (checked on every
 * insertion), so their offsets are distinct and checking a new buffer
 * against its two neighbours is enough. O(log n) expected per operation:
 * a sorted array with memmove was O(n) per insertion, and quadratic on
 * steps with 100k buffers. */
typedef struct {
  int *l, *r;
  uint32_t *pri;
  const int64_t *off;
  bool lost;
} Treap;

static int t_insert(Treap *T, int x, int i) {
  if (x < 0) return i;
  if (T->off[i] < T->off[x]) {
    T->l[x] = t_insert(T, T->l[x], i);
    int y = T->l[x];
    if (T->pri[y] > T->pri[x]) { /* rotate right */
      T->l[x] = T->r[y];
      T->r[y] = x;
      x = y;
    }
  } else {
    T->r[x] = t_insert(T, T->r[x], i);
    int y = T->r[x];
    if (T->pri[y] > T->pri[x]) { /* rotate left */
      T->r[x] = T->l[y];
      T->l[y] = x;
      x = y;
    }
  }
  return x;
}

static int t_merge(Treap *T, int a, int b) { /* every key of a below every key of b */
  if (a < 0) return b;
  if (b < 0) return a;
  if (T->pri[a] > T->pri[b]) {
    T->r[a] = t_merge(T, T->r[a], b);
    return a;
  }
  T->l[b] = t_merge(T, a, T->l[b]);
  return b;
}

static int t_erase(Treap *T, int x, int i) {
  if (x < 0) {
    T->lost = true;
    return -1;
  }
  if (x == i) return t_merge(T, T->l[i], T->r[i]);
  if (T->off[i] < T->off[x]) T->l[x] = t_erase(T, T->l[x], i);
  else T->r[x] = t_erase(T, T->r[x], i);
  return x;
}

/* The member with the greatest offset <= off (below: true), or the least
 * offset > off (below: false); -1 if none. */
static int t_neighbour(const Treap *T, int x, int64_t off, bool below) {
  int best = -1;
  while (x >= 0) {
    bool le = T->off[x] <= off;
    if (le == below) best = x;
    x = le ? T->r[x] : T->l[x];
  }
  return best;
}

static const char *check_one(int i, const int64_t *lo, const int64_t *hi, const int64_t *size, const int64_t *offset,
                             int64_t align, int64_t capacity) {
  if (lo[i] >= hi[i]) {
    snprintf(msg, sizeof msg, "buffer %d: empty lifetime [%lld, %lld)", i, (long long)lo[i], (long long)hi[i]);
    return msg;
  }
  if (size[i] < 0) {
    snprintf(msg, sizeof msg, "buffer %d: size %lld", i, (long long)size[i]);
    return msg;
  }
  if (offset[i] < 0 || (align > 0 && offset[i] % align != 0)) {
    snprintf(msg, sizeof msg, "buffer %d: offset %lld not a non-negative multiple of %lld", i, (long long)offset[i],
             (long long)align);
    return msg;
  }
  if (offset[i] > capacity || size[i] > capacity - offset[i]) {
    snprintf(msg, sizeof msg, "buffer %d: [%lld, %lld) exceeds the arena of %lld bytes", i, (long long)offset[i],
             (long long)(offset[i] + size[i]), (long long)capacity);
    return msg;
  }
  return NULL;
}

const char *verify_packing(int n, const int64_t *lo, const int64_t *hi, const int64_t *size, const int64_t *offset,
                           int64_t align, int64_t capacity) {
  for (int i = 0; i < n; i++) {
    const char *e = check_one(i, lo, hi, size, offset, align, capacity);
    if (e) return e;
  }
  Event *ev = malloc(sizeof(Event) * (size_t)(2 * n + 1));
  int *lr = malloc(sizeof(int) * (size_t)(2 * n + 2));
  uint32_t *pri = malloc(sizeof(uint32_t) * (size_t)(n + 1));
  if (!ev || !lr || !pri) {
    free(ev), free(lr), free(pri);
    return "verifier out of memory";
  }
  Treap T = {lr, lr + n + 1, pri, offset, false};
  for (int i = 0; i < n; i++) {
    uint32_t h = (uint32_t)i * 2654435761u;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    T.l[i] = T.r[i] = -1, T.pri[i] = h;
  }
  int nev = 0; /* zero-size buffers occupy no bytes: nothing to overlap */
  for (int i = 0; i < n; i++)
    if (size[i] > 0) {
      ev[nev++] = (Event){lo[i], 1, i};
      ev[nev++] = (Event){hi[i], 0, i};
    }
  qsort(ev, (size_t)nev, sizeof(Event), event_cmp);
  const char *err = NULL;
  int root = -1;
  for (int k = 0; k < nev && !err; k++) {
    int i = ev[k].i;
    if (ev[k].kind == 0) {
      root = t_erase(&T, root, i);
      if (T.lost) err = "verifier lost a buffer (internal)";
      continue;
    }
    int prev = t_neighbour(&T, root, offset[i], true), next = t_neighbour(&T, root, offset[i], false);
    int clash = -1;
    if (prev >= 0 && offset[prev] + size[prev] > offset[i]) clash = prev;
    if (next >= 0 && offset[i] + size[i] > offset[next]) clash = next;
    if (clash >= 0) {
      snprintf(msg, sizeof msg,
               "buffers %d [%lld, %lld) live [%lld, %lld) and %d [%lld, %lld) live [%lld, %lld) overlap", clash,
               (long long)offset[clash], (long long)(offset[clash] + size[clash]), (long long)lo[clash],
               (long long)hi[clash], i, (long long)offset[i], (long long)(offset[i] + size[i]), (long long)lo[i],
               (long long)hi[i]);
      err = msg;
      break;
    }
    root = t_insert(&T, root, i);
  }
  free(ev), free(lr), free(pri);
  return err;
}

/* ---- whole plans ---- */

/* first[k]: 1 + the first of the buffers whose live range starts at op k
 * (activations and scratch of this schedule), next[b]: 1 + the one after b;
 * so each op looks at its own, not at every buffer (a 30,000-layer chain:
 * 25 s of nops x nbuf otherwise) */
static const char *check_schedule_at(const Plan *p, const PlanOp *ops, int nops, SchedSet which, const int *first,
                                     const int *next) {
  for (int k = 0; k < nops; k++) {
    const PlanOp *op = &ops[k];
    if (op->id != k) {
      snprintf(msg, sizeof msg, "%s op %d has id %d", which == SCHED_EVAL ? "eval" : "train", k, op->id);
      return msg;
    }
    for (int j = 0; j < op->nin + op->nout; j++) {
      int b = j < op->nin ? op->in[j] : op->out[j - op->nin];
      if (b < 0) continue;
      if (b >= p->nbuf) {
        snprintf(msg, sizeof msg, "op %d names buffer %d of %d", k, b, p->nbuf);
        return msg;
      }
      const PlanBuffer *pb = &p->buf[b];
      if (pb->role == ROLE_STATE && j >= op->nin) { /* only its op's forward updates it, read as an input */
        snprintf(msg, sizeof msg, "op %d (%s) writes state buffer %s as an output", k, op->layer, pb->name);
        return msg;
      }
      if (pb->sched != SCHED_BOTH && pb->sched != which) {
        snprintf(msg, sizeof msg, "op %d (%s) uses buffer %s of the other schedule", k, op->layer, pb->name);
        return msg;
      }
      if (pb->sched != SCHED_BOTH && !(pb->first <= k && k < pb->last)) {
        snprintf(msg, sizeof msg, "op %d (%s) uses buffer %s outside its live range [%d, %d)", k, op->layer, pb->name,
                 pb->first, pb->last);
        return msg;
      }
    }
    /* an output in the place of an input: only where the op table lets that
     * output overwrite that input slot (ops.h: inplace_fwd, inplace_bwd);
     * collectives and updates work in place by design */
    const OpInfo *oi = op_info(op->op);
    for (int o = 0; o < op->nout && op->phase != PHASE_UPDATE && !op_is_comm(op->op); o++)
      for (int j = 0; j < op->nin; j++) {
        if (op->out[o] < 0 || op->out[o] != op->in[j]) continue;
        unsigned may = op->phase == PHASE_BACKWARD ? (o < MAX_BOUT && !op->acc[o] ? oi->inplace_bwd[o] : 0)
                                                   : (o == 0 ? oi->inplace_fwd : 0);
        if (!(may & SLOT(j))) {
          snprintf(msg, sizeof msg,
                   "op %d (%s): output %d writes into its input %d (buffer %s), which this op cannot "
                   "do in place",
                   k, op->layer, o, j, p->buf[op->out[o]].name);
          return msg;
        }
      }
    /* what a schedule computes (activations, scratch) is written, not
     * read, by the op at the start of its live range; inputs, parameters,
     * gradients and state come from outside the schedule */
    for (int b1 = first[k]; b1; b1 = next[b1 - 1]) {
      int b = b1 - 1;
      const PlanBuffer *pb = &p->buf[b];
      bool wr = op->scratch == b, rd = false;
      for (int o = 0; o < op->nout; o++) wr = wr || (op->out[o] == b && !op->acc[o]);
      for (int j = 0; j < op->nin; j++) rd = rd || op->in[j] == b;
      if (!wr || rd) {
        snprintf(msg, sizeof msg, "buffer %s is read before any op writes it: op %d (%s), the first to use it, %s",
                 pb->name, k, op->layer, wr ? "reads it too" : "does not write it");
        return msg;
      }
    }
    int sb = op->scratch;
    if (sb >= 0) { /* op-local scratch: a temp buffer of this schedule, live here only */
      const PlanBuffer *pb = sb < p->nbuf ? &p->buf[sb] : NULL;
      if (!pb || pb->role != ROLE_TEMP || pb->sched != which || pb->first != k || pb->last != k + 1) {
        snprintf(msg, sizeof msg, "op %d (%s): scratch buffer %d is not a temp buffer of its schedule live at [%d, %d)",
                 k, op->layer, sb, k, k + 1);
        return msg;
      }
      for (int j = 0; j < op->nin + op->nout; j++)
        if ((j < op->nin ? op->in[j] : op->out[j - op->nin]) == sb) {
          snprintf(msg, sizeof msg, "op %d (%s): scratch buffer %s is also one of its inputs or outputs", k, op->layer,
                   pb->name);
          return msg;
        }
    }
  }
  return NULL;
}

static const char *check_schedule(const Plan *p, const PlanOp *ops, int nops, SchedSet which) {
  int *first = calloc((size_t)nops + 1, sizeof(int)), *next = calloc((size_t)p->nbuf + 1, sizeof(int));
  if (!first || !next) {
    free(first), free(next);
    return "out of memory verifying the plan";
  }
  for (int b = p->nbuf - 1; b >= 0; b--) {
    const PlanBuffer *pb = &p->buf[b];
    if (pb->sched != which || pb->first < 0 || pb->first >= nops ||
        (pb->role != ROLE_ACTIVATION && pb->role != ROLE_TEMP))
      continue;
    next[b] = first[pb->first], first[pb->first] = b + 1;
  }
  const char *why = check_schedule_at(p, ops, nops, which, first, next);
  free(first), free(next);
  return why;
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
    if (pb->id != b) {
      snprintf(msg, sizeof msg, "buffer %d has id %d", b, pb->id);
      return msg;
    }
    int64_t numel = 1;
    for (int d = 0; d < pb->shape.rank; d++) numel *= pb->shape.d[d];
    if (dtype_numel_bytes(pb->dtype, numel) != pb->bytes) {
      snprintf(msg, sizeof msg, "buffer %s: %lld bytes for %lld elements of %s", pb->name, (long long)pb->bytes,
               (long long)numel, dtype_name(pb->dtype));
      return msg;
    }
    bool persistent =
        pb->role == ROLE_PARAM || pb->role == ROLE_STATE || pb->role == ROLE_OPT_STATE || pb->role == ROLE_WORKSPACE;
    if (persistent != (pb->sched == SCHED_BOTH)) {
      snprintf(msg, sizeof msg, "buffer %s: persistent iff in both schedules", pb->name);
      return msg;
    }
    if (pb->role == ROLE_STATE && *pb->aliases) { /* running statistics outlive every step */
      snprintf(msg, sizeof msg, "state buffer %s hosts tensors computed in place (%s)", pb->name, pb->aliases);
      return msg;
    }
    if (persistent && pb->offset + pb->bytes > p->persistent_bytes) {
      snprintf(msg, sizeof msg, "buffer %s: persistent but above the persistent region", pb->name);
      return msg;
    }
  }
  return NULL;
}

/* ---- values ---- */

/* Every read sees the value the forward computed. Values are numbered as
 * the training schedule runs: each buffer starts with one of its own, an
 * op's outputs get new ones (a cast passes its input's on: precision is not
 * a value here). A recompute of layer L must read exactly the values L's
 * forward read (running statistics aside: no output depends on them in
 * training) and then gives its outputs the forward's numbers; a backward
 * of L must find in each forward input or output slot it reads (OpInfo.bin)
 * the value of that slot in L's forward. So a tensor recomputed any number
 * of times, or read by consumers far apart, is followed through every copy
 * and every buffer a copy shares; a parameter updated before a recompute
 * that reads it, or a buffer overwritten before a read, is a new value. */
typedef struct {
  const Plan *p;
  int *slot; /* hash of layer names -> forward op index + 1 */
  int nslot;
  int *val;  /* per buffer: the value it holds now */
  int *fval; /* per op: PLAN_MAX_IO input values, then PLAN_MAX_IO output values of its forward run */
  int next;
} Values;

static unsigned name_hash(const char *s) {
  unsigned h = 2166136261u;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

/* The forward op of layer name (-1: none), or with add, op k registered as it. */
static int forward_of(Values *v, const char *name, int add) {
  unsigned i = name_hash(name) & (unsigned)(v->nslot - 1);
  for (; v->slot[i]; i = (i + 1) & (unsigned)(v->nslot - 1))
    if (!strcmp(v->p->sched[v->slot[i] - 1].layer, name)) return v->slot[i] - 1;
  if (add >= 0) v->slot[i] = add + 1;
  return -1;
}

static const char *value_error(const Values *v, int k, int j, const char *what) {
  const PlanOp *op = &v->p->sched[k];
  snprintf(msg, sizeof msg,
           "op %d (%s %s) reads buffer %s (input %d), which does not hold the value %s: a recompute or a read "
           "out of order",
           k, op->layer, op->phase == PHASE_BACKWARD ? "backward" : "recompute", v->p->buf[op->in[j]].name, j, what);
  return msg;
}

/* Op k's reads against its layer's forward f (its outputs' values set). */
static const char *check_reads(Values *v, int k, int f) {
  const PlanOp *op = &v->p->sched[k];
  const int *fin = &v->fval[(size_t)f * 2 * PLAN_MAX_IO], *fout = fin + PLAN_MAX_IO;
  const OpInfo *oi = op_info(op->op);
  for (int j = 0; j < op->nin; j++) {
    if (op->in[j] < 0 || v->p->buf[op->in[j]].role == ROLE_STATE) continue;
    int want = 0, r = op->phase == PHASE_BACKWARD ? (j < MAX_BIN ? oi->bin[j] : 0) : REF_IN(j);
    if (REF_KIND(r) == REF_IN(0)) want = fin[REF_SLOT(r)];
    else if (REF_KIND(r) == REF_OUT(0)) want = fout[REF_SLOT(r)];
    if (want && v->val[op->in[j]] != want)
      return value_error(v, k, j, REF_KIND(r) == REF_IN(0) ? "its forward read" : "its forward computed");
  }
  for (int o = 0; o < op->nout; o++)
    if (op->out[o] >= 0) v->val[op->out[o]] = op->phase == PHASE_RECOMPUTE ? fout[o] : v->next++;
  return NULL;
}

static const char *check_values_in(Values *v) {
  const Plan *p = v->p;
  for (int b = 0; b < p->nbuf; b++) v->val[b] = v->next++;
  for (int k = 0; k < p->nsched; k++) {
    const PlanOp *op = &p->sched[k];
    if (op->phase == PHASE_FORWARD && op->op != OP_CAST && !op_is_comm(op->op) && forward_of(v, op->layer, k) < 0) {
      int *fin = &v->fval[(size_t)k * 2 * PLAN_MAX_IO];
      for (int j = 0; j < op->nin; j++)
        fin[j] = op->in[j] < 0 || p->buf[op->in[j]].role == ROLE_STATE ? 0 : v->val[op->in[j]];
      for (int o = 0; o < op->nout; o++)
        if (op->out[o] >= 0) fin[PLAN_MAX_IO + o] = v->val[op->out[o]] = v->next++;
      continue;
    }
    if (op->op == OP_CAST) {
      v->val[op->out[0]] = v->val[op->in[0]];
      continue;
    }
    int f = op->phase == PHASE_RECOMPUTE || op->phase == PHASE_BACKWARD ? forward_of(v, op->layer, -1) : -1;
    if (op->phase == PHASE_RECOMPUTE && f < 0) {
      snprintf(msg, sizeof msg, "op %d (%s) recomputes a layer with no forward run before it", k, op->layer);
      return msg;
    }
    if (f >= 0) {
      const char *e = check_reads(v, k, f);
      if (e) return e;
      continue;
    }
    for (int o = 0; o < op->nout; o++)
      if (op->out[o] >= 0) v->val[op->out[o]] = v->next++;
  }
  return NULL;
}

static const char *check_values(const Plan *p) {
  Values v = {.p = p, .nslot = 16, .next = 1};
  while (v.nslot < 2 * p->nsched) v.nslot *= 2;
  v.slot = calloc((size_t)v.nslot, sizeof(int));
  v.val = calloc((size_t)p->nbuf + 1, sizeof(int));
  v.fval = calloc((size_t)p->nsched * 2 * PLAN_MAX_IO + 1, sizeof(int));
  const char *e = v.slot && v.val && v.fval ? check_values_in(&v) : "verifier out of memory";
  free(v.slot), free(v.val), free(v.fval);
  return e;
}

static bool is_comm(OpKind k) { return k == OP_ALLREDUCE || k == OP_REDUCE_SCATTER || k == OP_ALL_GATHER; }

/* The collectives of a plan for N ranks (plan.h): each update reads a
 * gradient that a collective of its sharding reduced after the last write
 * of the gradient; a sharded update's optimizer state holds one shard; at
 * ZeRO >= 1 an all_gather of its parameter follows it. One process: no
 * collectives at all. */
static const char *check_comm(const Plan *p) {
  int n = p->nsched;
  for (int k = 0; k < n; k++) {
    const PlanOp *o = &p->sched[k];
    bool per_pass = o->op == OP_REDUCE_SCATTER && p->zero == 2 && o->phase == PHASE_BACKWARD; /* comm.h */
    if (is_comm(o->op) &&
        (!p->data_parallel || o->ndim != 3 || o->dim[1] != p->ranks || (o->phase != PHASE_UPDATE && !per_pass))) {
      snprintf(msg, sizeof msg, "op %d (%s): a collective of %lld ranks in a plan for %d", k, o->layer,
               (long long)(o->ndim > 1 ? o->dim[1] : 0), p->ranks);
      return msg;
    }
    if (!p->data_parallel || o->phase != PHASE_UPDATE || is_comm(o->op)) continue;
    int64_t numel = o->dim[0], shard = (numel + p->ranks - 1) / p->ranks;
    bool sharded = p->zero >= 1;
    if (sharded != (o->ndim == 2 && o->dim[1] == p->ranks)) {
      snprintf(msg, sizeof msg, "update %d (%s) is %ssharded in a ZeRO-%d plan", k, o->layer, sharded ? "not " : "",
               p->zero);
      return msg;
    }
    for (int j = 1; sharded && j < o->nout; j++)
      if (o->out[j] >= 0 && p->buf[o->out[j]].bytes != shard * 4) {
        snprintf(msg, sizeof msg, "update %d (%s): optimizer state %s holds %lld bytes, not one shard (%lld)", k,
                 o->layer, p->buf[o->out[j]].name, (long long)p->buf[o->out[j]].bytes, (long long)(shard * 4));
        return msg;
      }
    int g = o->in[0], c = -1;
    for (int j = k - 1; j >= 0 && c < 0; j--)
      if (is_comm(p->sched[j].op) && p->sched[j].op != OP_ALL_GATHER && p->sched[j].out[0] == g) c = j;
    OpKind want = p->zero == 0 ? OP_ALLREDUCE : OP_REDUCE_SCATTER;
    if (c < 0 || p->sched[c].op != want || p->sched[c].dim[0] != numel) {
      snprintf(msg, sizeof msg, "update %d (%s): no %s of its gradient before it", k, o->layer,
               p->zero == 0 ? "allreduce" : "reduce_scatter");
      return msg;
    }
    int full = p->sched[c].in[0];
    if ((p->zero == 2) != (full != g) || (p->zero == 2 && p->buf[g].bytes != shard * 4)) {
      snprintf(msg, sizeof msg, "update %d (%s): its gradient is %s a shard in a ZeRO-%d plan", k, o->layer,
               full != g ? "" : "not", p->zero);
      return msg;
    }
    for (int j = c + 1; j < n; j++) /* the gradient was complete when reduced */
      for (int x = 0; !is_comm(p->sched[j].op) && p->sched[j].phase != PHASE_UPDATE && x < p->sched[j].nout; x++)
        if (p->sched[j].out[x] == full) {
          snprintf(msg, sizeof msg, "op %d (%s) writes gradient %s after its collective (op %d)", j, p->sched[j].layer,
                   p->buf[full].name, c);
          return msg;
        }
    int ag = -1;
    for (int j = k + 1; sharded && j < n && ag < 0; j++)
      if (p->sched[j].op == OP_ALL_GATHER && p->sched[j].out[0] == o->out[0]) ag = j;
    if (sharded && ag < 0) {
      snprintf(msg, sizeof msg, "update %d (%s): no all_gather of its parameter after it", k, o->layer);
      return msg;
    }
  }
  return NULL;
}

const char *verify_plan(const Plan *p) {
  const char *e;
  if (p->align <= 0 || (p->align & (p->align - 1))) {
    snprintf(msg, sizeof msg, "alignment %lld is not a power of two", (long long)p->align);
    return msg;
  }
  if ((e = check_buffers(p))) return e;
  if ((e = check_schedule(p, p->sched, p->nsched, SCHED_TRAIN))) return e;
  if ((e = check_schedule(p, p->eval, p->neval, SCHED_EVAL))) return e;
  if ((e = check_values(p))) return e;
  if ((e = check_comm(p))) return e;
  if ((e = check_packing(p, SCHED_TRAIN, p->nsched))) return e;
  if ((e = check_packing(p, SCHED_EVAL, p->neval))) return e;
  if (p->budget_bytes > 0 && p->arena_bytes > p->budget_bytes) {
    snprintf(msg, sizeof msg, "arena %lld exceeds the budget %lld", (long long)p->arena_bytes,
             (long long)p->budget_bytes);
    return msg;
  }
  if (p->gen_context) { /* generation's caches (decode.h): above the arena, one per eval attention op */
    int64_t kv = 0;
    for (int i = 0; i < p->neval; i++)
      if (p->eval[i].op == OP_ATTENTION)
        kv += 2 * p->eval[i].dim[4] * (p->eval[i].dim[2] / p->eval[i].dim[3]) * p->gen_context * 4;
    if (kv != p->kv_cache_bytes || p->kv_cache_offset < p->arena_bytes || p->kv_cache_offset % p->align ||
        (p->budget_bytes > 0 && p->kv_cache_offset + kv > p->budget_bytes)) {
      snprintf(msg, sizeof msg, "KV cache of %lld bytes at %lld: %lld expected, above the arena, aligned, in budget",
               (long long)p->kv_cache_bytes, (long long)p->kv_cache_offset, (long long)kv);
      return msg;
    }
  }
  if (p->lower_bound_bytes > p->arena_bytes) {
    snprintf(msg, sizeof msg, "arena %lld below the lower bound %lld (impossible)", (long long)p->arena_bytes,
             (long long)p->lower_bound_bytes);
    return msg;
  }
  return NULL;
}
