/* comm.c: the collectives of a plan for N ranks (comm.h). */
#include "comm.h"

#include <string.h>

#include "ops.h"

int64_t comm_shard(int64_t n, int ranks) { return (n + ranks - 1) / ranks; }

int64_t comm_wire_bytes(OpKind k, int64_t bytes, int ranks) {
  int64_t part = bytes / ranks * (ranks - 1) + bytes % ranks * (ranks - 1) / ranks;
  return k == OP_ALLREDUCE ? 2 * part : part;
}

typedef struct {
  Arena *ar;
  const Step *s;
  int ranks, zero;
  STensor *t;
  int nt;
  bool *per_pass;
  Instr *ins;
  int n;
  int *upd;   /* the updates (train indices) in the order their gradients complete */
  int *first; /* per bucket: its first entry in upd; [nbuckets] = the end */
  int nbuckets;
  int *src; /* per update entry: the gradient (or shard) it reads */
} Comm;

static Instr collective(OpKind k, Phase ph, int param, const char *name, int in, int out, int bucket) {
  Instr c = {k, ph, param, name, 1, 1, {0}, {0}, {0}, -1, bucket};
  for (int i = 0; i < PLAN_MAX_IO; i++) c.in[i] = c.out[i] = -1;
  c.in[0] = in, c.out[0] = out;
  return c;
}

/* A tensor of one shard of t's elements: the shape [ceil(numel/ranks)], its
 * text "numel/ranks". */
static Shape shard_shape(Comm *C, const STensor *t) {
  int64_t n = shape_numel(&t->shape);
  return (Shape){.rank = 1,
                 .d = {comm_shard(n, C->ranks)},
                 .sym = {ar_printf(C->ar, n % C->ranks ? "ceil(%lld/%d)" : "%lld/%d", (long long)n, C->ranks)}};
}

/* Bucket b's reductions: allreduce or reduce_scatter of each gradient. */
static void reduce(Comm *C, int b, Phase ph) {
  bool acc = ph == PHASE_BACKWARD && C->s->accumulation > 1; /* into the shard, += after the first pass */
  for (int k = C->first[b]; k < C->first[b + 1]; k++) {
    const Instr *x = &C->s->train[C->upd[k]];
    int p = x->out[0], g = x->in[0];
    C->src[k] = g;
    if (C->zero == 0) C->ins[C->n++] = collective(OP_ALLREDUCE, ph, p, x->name, g, g, b);
    else if (C->zero == 1) C->ins[C->n++] = collective(OP_REDUCE_SCATTER, ph, p, x->name, g, g, b);
    else {
      STensor gs = C->t[g];
      gs.name = ar_printf(C->ar, "%s.grad_shard", C->t[p].name);
      gs.shape = shard_shape(C, &C->t[g]);
      C->t[C->nt] = gs;
      C->src[k] = C->nt++;
      C->per_pass[g] = acc;
      Instr c = collective(OP_REDUCE_SCATTER, ph, p, x->name, g, C->src[k], b);
      c.acc[0] = acc;
      C->ins[C->n++] = c;
    }
  }
}

/* Bucket b's updates (of one shard at zero >= 1), then its all_gathers. */
static void update(Comm *C, int b) {
  for (int k = C->first[b]; k < C->first[b + 1]; k++) {
    Instr x = C->s->train[C->upd[k]];
    if (C->zero >= 1) { /* the optimizer state of one shard */
      x.in[0] = C->src[k];
      for (int j = 1; j < x.nout; j++)
        if (x.out[j] >= 0) C->t[x.out[j]].shape = shard_shape(C, &C->t[x.out[j]]);
    }
    C->ins[C->n++] = x;
  }
  for (int k = C->first[b]; C->zero >= 1 && k < C->first[b + 1]; k++) {
    const Instr *x = &C->s->train[C->upd[k]];
    C->ins[C->n++] = collective(OP_ALL_GATHER, PHASE_UPDATE, x->out[0], x->name, x->out[0], x->out[0], b);
  }
}

Step *comm_step(Arena *ar, const Step *s, int ranks, int zero, int64_t bucket_bytes) {
  MP_ASSERT(ranks >= 1 && zero >= 0 && zero <= 2);
  int nu = 0;
  for (int i = 0; i < s->ntrain; i++) nu += s->train[i].phase == PHASE_UPDATE;
  Comm C = {.ar = ar, .s = s, .ranks = ranks, .zero = zero, .nt = s->nt};
  C.t = ar_alloc(ar, sizeof(STensor) * (size_t)(s->nt + nu + 1));
  memcpy(C.t, s->t, sizeof(STensor) * (size_t)s->nt);
  C.per_pass = ar_alloc(ar, sizeof(bool) * (size_t)(s->nt + nu + 1));
  C.ins = ar_alloc(ar, sizeof(Instr) * (size_t)(s->ntrain + 2 * nu + 1));
  C.upd = ar_alloc(ar, sizeof(int) * (size_t)(nu + 1));
  C.src = ar_alloc(ar, sizeof(int) * (size_t)(nu + 1));
  C.first = ar_alloc(ar, sizeof(int) * (size_t)(nu + 2));
  /* where each gradient is complete: its last write outside the updates */
  int *done = ar_alloc(ar, sizeof(int) * (size_t)(s->ntrain + 1)), *last = ar_alloc(ar, sizeof(int) * (size_t)s->nt);
  for (int t = 0; t < s->nt; t++) last[t] = -1;
  for (int i = 0; i < s->ntrain; i++)
    for (int k = 0; s->train[i].phase != PHASE_UPDATE && k < s->train[i].nout; k++)
      if (s->train[i].out[k] >= 0) last[s->train[i].out[k]] = i;
  nu = 0;
  for (int i = 0; i < s->ntrain; i++) /* insertion by completion, stable: fused steps are in order already */
    if (s->train[i].phase == PHASE_UPDATE) {
      done[i] = last[s->train[i].in[0]];
      int k = nu++;
      while (k > 0 && done[C.upd[k - 1]] > done[i]) C.upd[k] = C.upd[k - 1], k--;
      C.upd[k] = i;
    }
  int64_t bytes = 0;
  for (int k = 0; k < nu; k++) {
    if (bytes == 0) C.first[C.nbuckets++] = k;
    const STensor *g = &s->t[s->train[C.upd[k]].in[0]];
    bytes += shape_numel(&g->shape) * dtype_size(g->dtype);
    if (bytes >= bucket_bytes) bytes = 0;
  }
  C.first[C.nbuckets] = nu;
  /* the new list: every instruction but the updates, each bucket's ops after
   * its last gradient's completion (early) or after everything (late) */
  bool early_reduce = s->fused || zero == 2, early_update = s->fused;
  Phase reduce_phase = s->fused ? PHASE_UPDATE : PHASE_BACKWARD;
  int b = 0;
  for (int i = 0; i < s->ntrain; i++) {
    if (s->train[i].phase != PHASE_UPDATE) C.ins[C.n++] = s->train[i];
    for (; b < C.nbuckets && done[C.upd[C.first[b + 1] - 1]] == i; b++) {
      if (early_reduce) reduce(&C, b, reduce_phase);
      if (early_update) update(&C, b);
    }
  }
  MP_ASSERT(b == C.nbuckets);
  for (b = 0; b < C.nbuckets; b++) {
    if (!early_reduce) reduce(&C, b, PHASE_UPDATE);
    if (!early_update) update(&C, b);
  }
  Step *out = ar_alloc(ar, sizeof(Step));
  *out = *s;
  out->t = C.t, out->nt = C.nt;
  out->train = C.ins, out->ntrain = C.n;
  out->saved = ar_alloc(ar, sizeof(bool) * (size_t)(C.nt + 1));
  memcpy(out->saved, s->saved, sizeof(bool) * (size_t)s->nt);
  out->per_pass = C.per_pass;
  out->ranks = ranks, out->zero = zero, out->nbuckets = C.nbuckets, out->data_parallel = true;
  return out;
}
