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
  Instr *ins;
  int n;
  int nbuckets;
} Comm;

static Instr collective(OpKind k, int param, const char *name, int in, int out, int bucket) {
  Instr c = {k, PHASE_UPDATE, param, name, 1, 1, {0}, {0}, {0}, -1, bucket};
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

/* The pending updates u[0..n) as one bucket: collectives, updates, gathers. */
static void flush(Comm *C, const int *u, int n) {
  if (!n) return;
  int b = C->nbuckets++;
  int *src = ar_alloc(C->ar, sizeof(int) * (size_t)n);
  for (int k = 0; k < n; k++) {
    const Instr *x = &C->s->train[u[k]];
    int p = x->out[0], g = x->in[0];
    src[k] = g;
    if (C->zero == 0) C->ins[C->n++] = collective(OP_ALLREDUCE, p, x->name, g, g, b);
    else if (C->zero == 1) C->ins[C->n++] = collective(OP_REDUCE_SCATTER, p, x->name, g, g, b);
    else {
      STensor gs = C->t[g];
      gs.name = ar_printf(C->ar, "%s.grad_shard", C->t[p].name);
      gs.shape = shard_shape(C, &C->t[g]);
      C->t[C->nt] = gs;
      src[k] = C->nt++;
      C->ins[C->n++] = collective(OP_REDUCE_SCATTER, p, x->name, g, src[k], b);
    }
  }
  for (int k = 0; k < n; k++) {
    Instr x = C->s->train[u[k]];
    if (C->zero >= 1) { /* the optimizer state of one shard */
      x.in[0] = src[k];
      for (int j = 1; j < x.nout; j++)
        if (x.out[j] >= 0) C->t[x.out[j]].shape = shard_shape(C, &C->t[x.out[j]]);
    }
    C->ins[C->n++] = x;
  }
  for (int k = 0; C->zero >= 1 && k < n; k++) {
    const Instr *x = &C->s->train[u[k]];
    C->ins[C->n++] = collective(OP_ALL_GATHER, x->out[0], x->name, x->out[0], x->out[0], b);
  }
}

Step *comm_step(Arena *ar, const Step *s, int ranks, int zero, int64_t bucket_bytes) {
  MP_ASSERT(ranks > 1 && zero >= 0 && zero <= 2);
  int nu = 0;
  for (int i = 0; i < s->ntrain; i++) nu += s->train[i].phase == PHASE_UPDATE;
  Comm C = {.ar = ar, .s = s, .ranks = ranks, .zero = zero, .nt = s->nt};
  C.t = ar_alloc(ar, sizeof(STensor) * (size_t)(s->nt + nu + 1));
  memcpy(C.t, s->t, sizeof(STensor) * (size_t)s->nt);
  C.ins = ar_alloc(ar, sizeof(Instr) * (size_t)(s->ntrain + 2 * nu + 1));
  int *pend = ar_alloc(ar, sizeof(int) * (size_t)(nu + 1)), np = 0;
  int64_t bytes = 0;
  for (int i = 0; i < s->ntrain; i++) {
    const Instr *x = &s->train[i];
    if (x->phase != PHASE_UPDATE) {
      C.ins[C.n++] = *x;
      continue;
    }
    pend[np++] = i;
    bytes += shape_numel(&s->t[x->in[0]].shape) * dtype_size(s->t[x->in[0]].dtype);
    if (bytes >= bucket_bytes) {
      flush(&C, pend, np);
      np = 0, bytes = 0;
    }
  }
  flush(&C, pend, np);
  Step *out = ar_alloc(ar, sizeof(Step));
  *out = *s;
  out->t = C.t, out->nt = C.nt;
  out->train = C.ins, out->ntrain = C.n;
  out->saved = ar_alloc(ar, sizeof(bool) * (size_t)(C.nt + 1));
  memcpy(out->saved, s->saved, sizeof(bool) * (size_t)s->nt);
  out->ranks = ranks, out->zero = zero, out->nbuckets = C.nbuckets;
  return out;
}
