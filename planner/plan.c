/* plan.c: the Plan from the step, its liveness and the offsets. */
#include <stdlib.h>
#include <string.h>

#include "assign.h"
#include "comm.h"
#include "ops.h"
#include "plan_build.h"

const char *plan_role_name(Role r) {
  static const char *const n[ROLE_COUNT] = {"param", "grad",      "optimizer_state", "activation",
                                            "input", "temporary", "workspace",       "state"};
  return r < ROLE_COUNT ? n[r] : "?";
}

bool plan_buf_half_saved(const PlanBuffer *b) {
  return (b->dtype == DT_BF16 || b->dtype == DT_F16) && b->role != ROLE_OPT_STATE && b->role != ROLE_PARAM;
}

const char *plan_phase_name(Phase p) {
  static const char *const n[PHASE_COUNT] = {"forward", "backward", "update", "recompute"};
  return p < PHASE_COUNT ? n[p] : "?";
}

typedef struct {
  Arena *ar;
  const Step *s;
  VEC(PlanBuffer) buf;
  int *pers; /* per step tensor: its persistent buffer, -1 */
} Builder;

static int add_buffer(Builder *B, int tensor, SchedSet set, const LiveBuf *lb, const char *aliases) {
  const STensor *t = &B->s->t[tensor];
  PlanBuffer pb = {.id = B->buf.n,
                   .name = t->name,
                   .role = t->role,
                   .dtype = t->dtype,
                   .shape = t->shape,
                   .bytes = dtype_numel_bytes(t->dtype, shape_numel(&t->shape)),
                   .sched = set,
                   .tensor = tensor,
                   .aliases = aliases,
                   .init = t->init,
                   .decay = t->role == ROLE_PARAM && t->shape.rank >= 2};
  if (lb) {
    pb.first = lb->first;
    pb.last = lb->last;
  }
  VEC_PUSH(B->ar, B->buf, pb);
  return pb.id;
}

/* Per live buffer, the names of the other tensors computed in place in it,
 * space-separated in tensor order ("" if none). Two passes over the
 * tensors, lengths then names: linear in the step (a chain of in-place ops
 * puts thousands of names into one buffer). */
static const char **alias_names(Builder *B, const Live *l) {
  size_t *len = ar_alloc(B->ar, sizeof(size_t) * (size_t)(l->nb + 1));
  for (int u = 0; u < B->s->nt; u++)
    if (l->buf_of[u] >= 0 && l->b[l->buf_of[u]].tensor != u) len[l->buf_of[u]] += strlen(B->s->t[u].name) + 1;
  const char **names = ar_alloc(B->ar, sizeof(char *) * (size_t)(l->nb + 1));
  char **end = ar_alloc(B->ar, sizeof(char *) * (size_t)(l->nb + 1));
  for (int b = 0; b < l->nb; b++) names[b] = end[b] = len[b] ? ar_alloc(B->ar, len[b]) : "";
  for (int u = 0; u < B->s->nt; u++) {
    int b = l->buf_of[u];
    if (b < 0 || l->b[b].tensor == u) continue;
    if (end[b] != names[b]) *end[b]++ = ' ';
    size_t n = strlen(B->s->t[u].name);
    memcpy(end[b], B->s->t[u].name, n + 1);
    end[b] += n;
  }
  return names;
}

/* Plan buffer ids for one schedule's tensors. */
static int *schedule_buffers(Builder *B, const Live *l, SchedSet set) {
  int *map = ar_alloc(B->ar, sizeof(int) * (size_t)l->nb);
  const char **aliases = alias_names(B, l);
  for (int i = 0; i < l->nb; i++)
    map[i] = l->b[i].persistent ? B->pers[l->b[i].tensor] : add_buffer(B, l->b[i].tensor, set, &l->b[i], aliases[i]);
  int *of = ar_alloc(B->ar, sizeof(int) * (size_t)B->s->nt);
  for (int t = 0; t < B->s->nt; t++) of[t] = l->buf_of[t] < 0 ? -1 : map[l->buf_of[t]];
  return of;
}

static PlanOp *schedule_ops(Builder *B, const Graph *g, const Instr *ins, int n, const int *of) {
  PlanOp *ops = ar_alloc(B->ar, sizeof(PlanOp) * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) {
    const Instr *x = &ins[i];
    PlanOp *o = &ops[i];
    *o = (PlanOp){.id = i, .op = x->kind, .phase = x->phase, .layer = x->name, .nin = x->nin, .nout = x->nout};
    for (int k = 0; k < PLAN_MAX_IO; k++) {
      o->in[k] = k < x->nin && x->in[k] >= 0 ? of[x->in[k]] : -1;
      o->out[k] = k < x->nout && x->out[k] >= 0 ? of[x->out[k]] : -1;
      o->acc[k] = x->acc[k];
    }
    o->scratch = x->scratch >= 0 ? of[x->scratch] : -1;
    if (op_is_comm(x->kind)) { /* numel, ranks, bucket (plan.h); communication, no FLOPs */
      o->dim[0] = shape_numel(&B->s->t[x->op].shape), o->dim[1] = B->s->ranks, o->dim[2] = x->bucket, o->ndim = 3;
      continue;
    }
    if (x->kind == OP_CAST) { /* a storage precision change: memory traffic, no model FLOPs (also an
                                 update's, planner/basew.h) */
      const Shape *sh = &B->s->t[x->in[0]].shape;
      o->dim[0] = shape_numel(sh), o->ndim = 1;
      if (x->nin > 1) o->dim[1] = sh->rank ? sh->d[sh->rank - 1] : 1, o->ndim = 2; /* dequantizing: the row */
      continue;
    }
    if (x->phase == PHASE_UPDATE) {
      o->dim[0] = shape_numel(&B->s->t[x->op].shape), o->ndim = 1;
      o->flops = 10 * o->dim[0];
      if (B->s->zero >= 1 && B->s->data_parallel) { /* one shard of it (plan.h) */
        o->dim[1] = B->s->ranks, o->ndim = 2;
        o->flops = 10 * comm_shard(o->dim[0], B->s->ranks);
      }
      continue;
    }
    const Op *fo = &g->ops[x->op];
    const OpInfo *oi = op_info(fo->kind);
    o->loc = fo->loc;
    oi->dims(g, fo, o->dim, &o->ndim);
    MP_ASSERT(o->ndim <= MAX_KDIM); /* an op table entry with more kernel dims than PlanOp holds */
    o->nfarg = op_float_args(fo, o->farg);
    o->flops = op_run_flops(g, fo, x->phase == PHASE_BACKWARD, x->out);
  }
  return ops;
}

/* The library workspace (ROLE_WORKSPACE): device scratch the CUDA trainer
 * hands cuBLAS and cuBLASLt, so neither allocates its own (and a CUDA graph
 * can capture them), and that its kernels borrow between matrix products
 * (cross-entropy without saved row statistics, in eval: 4 bytes a row).
 * cuBLAS's split-K partial sums are on the order of a product's output, so:
 * the largest matrix-product output, at least what cross-entropy borrows,
 * between 64 KiB and 32 MiB (cuBLAS's recommendation on Hopper). Persistent,
 * at the bottom with the parameters; the CPU trainer never touches it. */
#define WORKSPACE_MIN ((int64_t)64 << 10)
#define WORKSPACE_MAX ((int64_t)32 << 20)

/* Each op says what it uses (OpInfo.workspace): a matrix product's
 * split-K sums are capped, a floor (cross-entropy's) is not. */
static void size_workspace(Plan *p, int b) {
  int64_t ws = WORKSPACE_MIN, floor = 0;
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < (s ? p->neval : p->nsched); i++) {
      const PlanOp *o = s ? &p->eval[i] : &p->sched[i];
      const OpInfo *oi = op_info(o->op);
      int64_t need = o->phase == PHASE_UPDATE || !oi->workspace ? 0 : oi->workspace(o->dim);
      if (oi->workspace_floor) floor = need > floor ? need : floor;
      else ws = need > ws ? need : ws;
    }
  ws = ws < WORKSPACE_MAX ? ws : WORKSPACE_MAX;
  ws = mp_align_up(floor > ws ? floor : ws, 256);
  PlanBuffer *pb = &p->buf[b];
  pb->bytes = ws;
  pb->shape = (Shape){.rank = 1, .d = {ws / 4}, .sym = {"workspace"}};
}

Plan *plan_build(Arena *ar, const Graph *g, const Step *s, const Live *train, const Live *eval, int64_t align) {
  Builder B = {ar, s, {0}, ar_alloc(ar, sizeof(int) * (size_t)s->nt)};
  Plan *p = ar_alloc(ar, sizeof(Plan));
  *p = (Plan){.version = PLAN_FORMAT_VERSION,
              .model = g->model,
              .source = g->path,
              .tokenizer = g->tokenizer,
              .dims = g->dims,
              .ndims = g->ndims,
              .opt = g->opt,
              .align = align,
              .micro_batch = 0,
              .accumulation_steps = 1,
              .precision = "fp32"};
  for (int t = 0; t < s->nt; t++) B.pers[t] = -1;
  /* params first, then running state, then optimizer state */
  static const Role persistent[] = {ROLE_PARAM, ROLE_STATE, ROLE_OPT_STATE};
  for (int r = 0; r < 3; r++)
    for (int t = 0; t < s->nt; t++)
      if (s->t[t].role == persistent[r] && train->buf_of[t] >= 0) B.pers[t] = add_buffer(&B, t, SCHED_BOTH, NULL, "");
  int ws = B.buf.n; /* sized below, from the schedules' matrix products */
  VEC_PUSH(ar, B.buf,
           ((PlanBuffer){.id = ws,
                         .name = "workspace",
                         .role = ROLE_WORKSPACE,
                         .dtype = DT_F32,
                         .sched = SCHED_BOTH,
                         .tensor = -1,
                         .aliases = ""}));
  int *tof = schedule_buffers(&B, train, SCHED_TRAIN);
  int *eof = schedule_buffers(&B, eval, SCHED_EVAL);
  p->sched = schedule_ops(&B, g, s->train, s->ntrain, tof), p->nsched = s->ntrain;
  p->eval = schedule_ops(&B, g, s->eval, s->neval, eof), p->neval = s->neval;
  p->buf = B.buf.v, p->nbuf = B.buf.n;
  size_workspace(p, ws);
  p->loss_buf = tof[s->loss], p->eval_loss_buf = eof[s->loss];
  p->lora_rank = g->lora_rank, p->lora_alpha = g->lora_alpha, p->lora_dropout = g->lora_dropout;
  for (int t = 0; t < g->nt; t++)
    if (g->t[t].kind == TK_PARAM) {
      p->param_count += shape_numel(&g->t[t].shape);
      if (g->t[t].frozen) p->frozen_count += shape_numel(&g->t[t].shape);
    }
  for (int b = 0; b < p->nbuf; b++) /* a frozen weight: no update, so no decay either */
    if (p->buf[b].role == ROLE_PARAM && g->t[s->t[p->buf[b].tensor].of].frozen)
      p->buf[b].frozen = true, p->buf[b].decay = false;
  for (int i = 0; i < p->nsched; i++) /* recomputation is counted apart, as extra */
    if (p->sched[i].phase != PHASE_RECOMPUTE) p->step_flops += p->sched[i].flops;
  for (int t = 0; t < g->nt; t++) /* the batch dim is the inputs' leading dim */
    if (g->t[t].kind == TK_INPUT && g->t[t].shape.rank > 0)
      p->micro_batch = (int)g->t[t].shape.d[0], p->batch_dim = g->t[t].shape.sym[0];
  p->accumulation_steps = s->accumulation;
  p->batch = (int64_t)p->micro_batch * s->accumulation;
  p->data_parallel = s->data_parallel;
  p->ranks = s->data_parallel ? s->ranks : 1, p->zero = s->zero, p->nbuckets = s->nbuckets;
  if (p->data_parallel) p->bucket_bytes = COMM_BUCKET_BYTES;
  for (int i = 0; i < p->nsched; i++)
    if (op_is_comm(p->sched[i].op)) {
      int64_t bytes = p->buf[p->sched[i].in[0]].bytes;
      if (p->sched[i].op == OP_ALL_GATHER) bytes = p->buf[p->sched[i].out[0]].bytes;
      p->comm_bytes += bytes;
      p->comm_wire_bytes += comm_wire_bytes(p->sched[i].op, bytes, p->ranks);
    }
  return p;
}

/* One remembered packing: its input (items, alignment, limit) and what
 * assign_offsets gave for it. */
typedef struct PackEntry {
  uint64_t hash;
  int n;
  int64_t align;
  double tl;
  AsgItem *items;
  int64_t *off;
  AsgResult r;
  struct PackEntry *next;
} PackEntry;

/* At most PACK_MEMO_MAX_BYTES of items and offsets are kept (sd-unet's
 * packings: 3,355 items, 107 KB each). */
enum { PACK_MEMO_MAX_BYTES = 64 << 20 };

struct PackMemo {
  Arena *ar;
  PackEntry *head;
  size_t bytes;
  int hits;   /* packings copied (tests read it) */
  int packed; /* packings made */
};

PackMemo *pack_memo_new(Arena *ar) {
  PackMemo *m = ar_alloc(ar, sizeof *m);
  m->ar = ar;
  return m;
}

int pack_memo_hits(const PackMemo *m) { return m ? m->hits : 0; }

int pack_memo_packed(const PackMemo *m) { return m ? m->packed : 0; }

static uint64_t items_hash(const AsgItem *it, int n, int64_t align, double tl) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)n ^ ((uint64_t)align << 32) ^ (uint64_t)(tl * 1e6);
  for (int i = 0; i < n; i++) {
    uint64_t v[3] = {(uint64_t)it[i].lo, (uint64_t)it[i].hi, (uint64_t)it[i].size};
    for (int k = 0; k < 3; k++) h = (h ^ v[k]) * 1099511628211ull;
  }
  return h;
}

/* assign_offsets through the memo. */
static AsgResult assign_memo(PackMemo *m, const AsgItem *it, int n, int64_t align, double tl, int64_t *off) {
  if (!m) return assign_offsets(it, n, align, tl, off);
  uint64_t h = items_hash(it, n, align, tl);
  for (PackEntry *e = m->head; e; e = e->next)
    if (e->hash == h && e->n == n && e->align == align && e->tl == tl &&
        !memcmp(e->items, it, sizeof(AsgItem) * (size_t)n)) {
      memcpy(off, e->off, sizeof(int64_t) * (size_t)n);
      m->hits++;
      return e->r;
    }
  AsgResult r = assign_offsets(it, n, align, tl, off);
  m->packed++;
  size_t bytes = (sizeof(AsgItem) + sizeof(int64_t)) * (size_t)n;
  if (m->bytes + bytes <= PACK_MEMO_MAX_BYTES) {
    PackEntry *e = ar_alloc(m->ar, sizeof *e);
    *e = (PackEntry){.hash = h, .n = n, .align = align, .tl = tl, .r = r, .next = m->head};
    e->items = ar_alloc(m->ar, sizeof(AsgItem) * (size_t)n);
    e->off = ar_alloc(m->ar, sizeof(int64_t) * (size_t)n);
    memcpy(e->items, it, sizeof(AsgItem) * (size_t)n);
    memcpy(e->off, off, sizeof(int64_t) * (size_t)n);
    m->head = e, m->bytes += bytes;
  }
  return r;
}

/* The transient buffers of one schedule as the offset search's items, in
 * it (id: each one's buffer); returns how many. */
static int items_of(const Plan *p, SchedSet set, AsgItem *it, int *id) {
  int n = 0;
  for (int b = 0; b < p->nbuf; b++)
    if (p->buf[b].sched == set) {
      it[n] = (AsgItem){p->buf[b].first, p->buf[b].last, p->buf[b].bytes + p->guard_bytes};
      id[n++] = b;
    }
  return n;
}

/* The persistent buffers' bytes, stacked at the bottom. */
static int64_t persistent_of(const Plan *p) {
  int64_t base = 0;
  for (int b = 0; b < p->nbuf; b++)
    if (p->buf[b].sched == SCHED_BOTH) base += mp_align_up(p->buf[b].bytes + p->guard_bytes, p->align);
  return base;
}

int64_t plan_lower_bound(const Plan *p) {
  AsgItem *it = calloc((size_t)p->nbuf + 1, sizeof(AsgItem));
  int *id = calloc((size_t)p->nbuf + 1, sizeof(int));
  MP_ASSERT(it && id);
  int64_t lb = 0;
  for (int s = 0; s < 2; s++) {
    int64_t l = assign_lower_bound(it, items_of(p, s ? SCHED_EVAL : SCHED_TRAIN, it, id), p->align);
    lb = l > lb ? l : lb;
  }
  free(it), free(id);
  return persistent_of(p) + lb;
}

/* Packs the transient buffers of one schedule above `base`; returns the
 * packing's height (without base) and its lower bound. */
static int64_t pack(Plan *p, SchedSet set, int64_t base, double tl, PackMemo *memo, int64_t *lb) {
  AsgItem *it = calloc((size_t)p->nbuf + 1, sizeof(AsgItem));
  int64_t *off = calloc((size_t)p->nbuf + 1, sizeof(int64_t));
  int *id = calloc((size_t)p->nbuf + 1, sizeof(int));
  MP_ASSERT(it && off && id);
  int n = items_of(p, set, it, id);
  AsgResult r = assign_memo(memo, it, n, p->align, tl, off);
  for (int i = 0; i < n; i++) p->buf[id[i]].offset = base + off[i];
  if (set == SCHED_TRAIN) {
    p->assign_method = r.method;
    p->assign_optimal = r.optimal;
  } else p->assign_optimal = p->assign_optimal && r.optimal;
  *lb = r.lower_bound;
  free(it), free(off), free(id);
  return r.height;
}

/* Live bytes by role at the training schedule's peak (sizes aligned): one
 * sweep over start and end events per role, linear in buffers + positions. */
static void peak_by_role(Plan *p) {
  int n = p->nsched > 0 ? p->nsched : 1;
  int64_t *delta = calloc((size_t)(n + 1) * ROLE_COUNT, sizeof(int64_t)), always[ROLE_COUNT] = {0};
  MP_ASSERT(delta);
  for (int b = 0; b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    int64_t bytes = mp_align_up(pb->bytes, p->align);
    if (pb->sched == SCHED_BOTH) always[pb->role] += bytes;
    else if (pb->sched == SCHED_TRAIN && pb->first < pb->last) {
      delta[(size_t)pb->first * ROLE_COUNT + pb->role] += bytes;
      delta[(size_t)pb->last * ROLE_COUNT + pb->role] -= bytes;
    }
  }
  int64_t role[ROLE_COUNT], best = -1;
  memcpy(role, always, sizeof role);
  for (int pos = 0; pos < n; pos++) {
    int64_t tot = 0;
    for (int r = 0; r < ROLE_COUNT; r++) {
      role[r] += delta[(size_t)pos * ROLE_COUNT + r];
      tot += role[r];
    }
    if (tot > best) {
      best = tot;
      p->peak_position = pos;
      memcpy(p->peak_by_role, role, sizeof role);
    }
  }
  free(delta);
}

void plan_assign(Plan *p, double time_limit_s) { plan_assign_memo(p, time_limit_s, NULL); }

void plan_assign_memo(Plan *p, double time_limit_s, PackMemo *memo) {
  int64_t base = 0;
  for (int b = 0; b < p->nbuf; b++)
    if (p->buf[b].sched == SCHED_BOTH) {
      p->buf[b].offset = base;
      base += mp_align_up(p->buf[b].bytes + p->guard_bytes, p->align);
    }
  MP_ASSERT(base == persistent_of(p)); /* plan_lower_bound's, which fit.c skips plans by */
  p->persistent_bytes = base;
  int64_t lbt, lbe;
  int64_t ht = pack(p, SCHED_TRAIN, base, time_limit_s, memo, &lbt);
  int64_t he = pack(p, SCHED_EVAL, base, time_limit_s, memo, &lbe);
  p->train_peak_bytes = base + ht;
  p->eval_peak_bytes = base + he;
  p->arena_bytes = base + (ht > he ? ht : he);
  p->lower_bound_bytes = base + (lbt > lbe ? lbt : lbe);
  if (p->arena_bytes == 0) p->arena_bytes = p->align; /* never allocate zero bytes */
  peak_by_role(p);
}

void plan_dump(const Plan *p, FILE *out) {
  Arena tmp = {0};
  static const char *const set[] = {"train", "eval", "both"};
  fprintf(out, "arena %lld lower_bound %lld persistent %lld\n", (long long)p->arena_bytes,
          (long long)p->lower_bound_bytes, (long long)p->persistent_bytes);
  for (int b = 0; b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    fprintf(out, "buf %d %s %s %s %s %lld @%lld %s [%d, %d)%s%s\n", b, pb->name, plan_role_name(pb->role),
            dtype_name(pb->dtype), shape_sym_str(&tmp, &pb->shape), (long long)pb->bytes, (long long)pb->offset,
            set[pb->sched], pb->first, pb->last, *pb->aliases ? " in-place: " : "", pb->aliases);
  }
  for (int s = 0; s < 2; s++) {
    const PlanOp *ops = s ? p->eval : p->sched;
    int n = s ? p->neval : p->nsched;
    for (int i = 0; i < n; i++) {
      const PlanOp *o = &ops[i];
      fprintf(out, "%s %d %s %s %s in", s ? "eval" : "step", i, plan_phase_name(o->phase), op_info(o->op)->name,
              o->layer);
      for (int k = 0; k < o->nin; k++) fprintf(out, " %d", o->in[k]);
      fprintf(out, " out");
      for (int k = 0; k < o->nout; k++) fprintf(out, " %s%d", o->acc[k] ? "+" : "", o->out[k]);
      fprintf(out, " dims");
      for (int k = 0; k < o->ndim; k++) fprintf(out, " %lld", (long long)o->dim[k]);
      if (o->scratch >= 0) fprintf(out, " scratch %d", o->scratch);
      fputc('\n', out);
    }
  }
  ar_free(&tmp);
}
