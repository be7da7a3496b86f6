/* autodiff.c: reverse-mode differentiation over the op table's slot
 * layouts. The first backward write of a gradient assigns (acc = 0), later
 * ones accumulate, so no gradient is ever cleared. */
#include "autodiff.h"

#include <string.h>

#include "ops.h"

typedef struct {
  Arena *ar;
  const Graph *g;
  Step *s;
  VEC(STensor) t;
  VEC(Instr) train, eval;
  bool *live_op; /* the op contributes to the loss */
} Ad;

static Role role_of(TensorKind k) {
  return k == TK_INPUT ? ROLE_INPUT : k == TK_PARAM ? ROLE_PARAM : ROLE_ACTIVATION;
}

static int new_tensor(Ad *a, const char *name, Role r, int of) {
  const Tensor *src = &a->g->t[of];
  STensor t = {name, r, DT_F32, src->shape, of, {INIT_NONE, 0}};
  VEC_PUSH(a->ar, a->t, t);
  return a->t.n - 1;
}

/* Graph tensors, at most one gradient each, at most two optimizer states
 * per parameter: bounds the step's tensor count, so per-tensor tables can be
 * sized once. */
static int max_tensors(const Graph *g) { return 4 * g->nt + 1; }

/* Ops that reach the loss, walking back from it. */
static void mark_live_ops(Ad *a) {
  const Graph *g = a->g;
  bool *needed = ar_alloc(a->ar, sizeof(bool) * (size_t)g->nt);
  a->live_op = ar_alloc(a->ar, sizeof(bool) * (size_t)g->nops);
  needed[g->loss] = true;
  for (int i = g->nops - 1; i >= 0; i--) {
    const Op *o = &g->ops[i];
    if (!needed[o->out[0]]) continue;
    a->live_op[i] = true;
    for (int k = 0; k < o->nin; k++)
      if (o->in[k] >= 0) needed[o->in[k]] = true;
  }
}

/* Gradient tensors: for every tensor that depends on a parameter and feeds a
 * live op through a differentiable slot. */
static void make_grads(Ad *a) {
  const Graph *g = a->g;
  bool *dep = ar_alloc(a->ar, sizeof(bool) * (size_t)g->nt);
  int cap = max_tensors(g);
  int *grad = ar_alloc(a->ar, sizeof(int) * (size_t)cap);
  for (int i = 0; i < cap; i++) grad[i] = -1;
  for (int i = 0; i < g->nt; i++) dep[i] = g->t[i].kind == TK_PARAM;
  for (int i = 0; i < g->nops; i++) {
    const Op *o = &g->ops[i];
    const OpInfo *oi = op_info(o->kind);
    bool d = false;
    for (int k = 0; k < o->nin; k++) d |= o->in[k] >= 0 && oi->grad_to[k] && dep[o->in[k]];
    dep[o->out[0]] = d;
  }
  for (int i = 0; i < g->nops; i++) {
    const Op *o = &g->ops[i];
    if (!a->live_op[i]) continue;
    for (int k = 0; k < o->nin; k++) {
      int t = o->in[k];
      if (t < 0 || !op_info(o->kind)->grad_to[k] || !dep[t] || grad[t] >= 0) continue;
      Role r = g->t[t].kind == TK_PARAM ? ROLE_GRAD : ROLE_ACTIVATION;
      grad[t] = new_tensor(a, ar_printf(a->ar, "%s.grad", g->t[t].name), r, t);
    }
  }
  a->s->grad = grad;
}

static void forward(Ad *a) {
  const Graph *g = a->g;
  for (int i = 0; i < g->nops; i++) {
    if (!a->live_op[i]) continue;
    const Op *o = &g->ops[i];
    const OpInfo *oi = op_info(o->kind);
    Instr f = {o->kind, PHASE_FORWARD, i, o->name, oi->nin, oi->nout, {0}, {0}, {0}};
    for (int k = 0; k < PLAN_MAX_IO; k++) f.in[k] = f.out[k] = -1;
    for (int k = 0; k < oi->nin; k++) f.in[k] = o->in[k];
    for (int k = 0; k < oi->nout; k++) f.out[k] = o->out[k];
    VEC_PUSH(a->ar, a->train, f);
    for (int k = oi->nout - oi->nstats; k < oi->nout; k++) f.out[k] = -1; /* eval saves nothing */
    VEC_PUSH(a->ar, a->eval, f);
  }
}

static int resolve_ref(Ad *a, const Op *o, int ref) {
  int slot = REF_SLOT(ref);
  switch (REF_KIND(ref)) {
  case 0: return ref == REF_DOUT ? a->s->grad[o->out[0]] : -1;
  case REF_IN(0): return o->in[slot];
  case REF_OUT(0): return o->out[slot];
  case REF_GIN(0): return o->in[slot] >= 0 && op_info(o->kind)->grad_to[slot] ? a->s->grad[o->in[slot]] : -1;
  }
  MP_ASSERT(0);
}

static void update(Ad *a, int p) {
  const Optimizer *opt = &a->g->opt;
  const char *pn = a->g->t[p].name;
  Instr u = {opt->kind == OPT_ADAMW ? OP_ADAMW : OP_SGD, PHASE_UPDATE, p, pn, 1, 0, {0}, {0}, {0}};
  for (int k = 0; k < PLAN_MAX_IO; k++) u.in[k] = u.out[k] = -1;
  u.in[0] = a->s->grad[p];
  u.out[u.nout++] = p;
  if (opt->kind == OPT_ADAMW) {
    u.out[u.nout++] = new_tensor(a, ar_printf(a->ar, "%s.adam_m", pn), ROLE_OPT_STATE, p);
    u.out[u.nout++] = new_tensor(a, ar_printf(a->ar, "%s.adam_v", pn), ROLE_OPT_STATE, p);
  } else {
    u.out[u.nout++] = opt->momentum != 0 ? new_tensor(a, ar_printf(a->ar, "%s.momentum", pn), ROLE_OPT_STATE, p) : -1;
  }
  VEC_PUSH(a->ar, a->train, u);
}

/* Backward in reverse op order; each parameter's update right after the
 * last backward instruction that writes its gradient (when fused). */
static void backward(Ad *a, bool fuse) {
  const Graph *g = a->g;
  int nt = a->t.n;
  bool *written = ar_alloc(a->ar, sizeof(bool) * (size_t)nt);
  int *last_writer = ar_alloc(a->ar, sizeof(int) * (size_t)g->nt);
  for (int i = 0; i < g->nt; i++) last_writer[i] = -1;
  for (int i = 0; i < g->nops; i++) /* reverse order: the lowest op index writes last */
    for (int k = 0; a->live_op[i] && k < g->ops[i].nin; k++) {
      int t = g->ops[i].in[k];
      if (t >= 0 && g->t[t].kind == TK_PARAM && a->s->grad[t] >= 0 && last_writer[t] < 0) last_writer[t] = i;
    }
  for (int i = g->nops - 1; i >= 0; i--) {
    if (!a->live_op[i]) continue;
    const Op *o = &g->ops[i];
    const OpInfo *oi = op_info(o->kind);
    Instr b = {o->kind, PHASE_BACKWARD, i, o->name, oi->nbin, oi->nbout, {0}, {0}, {0}};
    bool any = false;
    for (int k = 0; k < oi->nbin; k++) b.in[k] = resolve_ref(a, o, oi->bin[k]);
    for (int k = 0; k < oi->nbout; k++) {
      int t = resolve_ref(a, o, oi->bout[k]);
      b.out[k] = t;
      if (t < 0) continue;
      any = true;
      b.acc[k] = written[t];
      written[t] = true;
    }
    if (!any) continue;
    for (int k = 0; k < oi->nbin; k++)
      if (b.in[k] >= 0 && a->t.v[b.in[k]].of == b.in[k]) a->s->saved[b.in[k]] = true;
    VEC_PUSH(a->ar, a->train, b);
    for (int k = 0; fuse && k < o->nin; k++) {
      int t = o->in[k];
      bool dup = false; /* a parameter used twice by this op updates once */
      for (int j = 0; j < k; j++) dup |= o->in[j] == t;
      if (t >= 0 && !dup && last_writer[t] == i) update(a, t);
    }
  }
  for (int t = 0; !fuse && t < g->nt; t++)
    if (g->t[t].kind == TK_PARAM && a->s->grad[t] >= 0) update(a, t);
}

Step *ad_build(Arena *ar, const Graph *g, bool fuse_updates) {
  Ad a = {ar, g, ar_alloc(ar, sizeof(Step)), {0}, {0}, {0}, NULL};
  for (int i = 0; i < g->nt; i++) {
    STensor t = {g->t[i].name, role_of(g->t[i].kind), g->t[i].dtype, g->t[i].shape, i, g->t[i].init};
    VEC_PUSH(ar, a.t, t);
  }
  mark_live_ops(&a);
  make_grads(&a);
  a.s->saved = ar_alloc(ar, sizeof(bool) * (size_t)max_tensors(g));
  forward(&a);
  backward(&a, fuse_updates);
  Step *s = a.s;
  s->t = a.t.v, s->nt = a.t.n;
  s->train = a.train.v, s->ntrain = a.train.n;
  s->eval = a.eval.v, s->neval = a.eval.n;
  s->loss = g->loss;
  s->fused = fuse_updates;
  return s;
}

void ad_dump(const Step *s, FILE *out) {
  static const char *const ph[] = {"fwd", "bwd", "upd", "rec"};
  for (int i = 0; i < s->ntrain; i++) {
    const Instr *x = &s->train[i];
    fprintf(out, "%d %s %s %s in", i, ph[x->phase], x->kind == OP_ADAMW ? "adamw" : x->kind == OP_SGD ? "sgd" : op_info(x->kind)->name, x->name);
    for (int k = 0; k < x->nin; k++) fprintf(out, " %s", x->in[k] < 0 ? "-" : s->t[x->in[k]].name);
    fprintf(out, " out");
    for (int k = 0; k < x->nout; k++) fprintf(out, " %s%s", x->acc[k] ? "+=" : "", x->out[k] < 0 ? "-" : s->t[x->out[k]].name);
    fputc('\n', out);
  }
  fprintf(out, "saved for backward:");
  for (int t = 0; t < s->nt; t++)
    if (s->saved[t]) fprintf(out, " %s", s->t[t].name);
  fputc('\n', out);
}
