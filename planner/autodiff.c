/* autodiff.c: reverse-mode differentiation over the op table's slot
 * layouts. The first backward write of a gradient assigns (acc = 0), later
 * ones accumulate, so no gradient is ever cleared.
 *
 * With checkpointing actions, a stage may run forward more than once: every
 * run after the first is a recompute whose outputs are new tensors ("h0.fc@2"),
 * and backward reads the newest copy, so liveness sees each copy's own life. */
#include "autodiff.h"

#include <string.h>

#include "ops.h"

typedef struct {
  Arena *ar;
  const Graph *g;
  Step *s;
  VEC(STensor) t;
  VEC(Instr) train, eval;
  VEC(int) saved;
  bool *live_op; /* the op contributes to the loss */
  int *fwd;      /* the forward list: live graph ops in order */
  int nfwd;
  int *cur;         /* per graph tensor: its newest copy */
  int *runs;        /* per graph op: forward runs so far */
  int *last_writer; /* per param: the graph op whose backward completes its gradient */
  int *fscratch;    /* per graph op: the scratch of its first forward run (shared with eval), -1 */
  bool fuse;
  bool unnamed; /* Actions.unnamed: new tensors take their source's name, shapes no symbols */
} Ad;

static Role role_of(TensorKind k) {
  return k == TK_INPUT ? ROLE_INPUT : k == TK_PARAM ? ROLE_PARAM : k == TK_STATE ? ROLE_STATE : ROLE_ACTIVATION;
}

static int new_tensor(Ad *a, const char *name, Role r, int of) {
  const Tensor *src = &a->g->t[of];
  STensor t = {name, r, src->dtype, src->shape, of, {INIT_NONE, 0}};
  VEC_PUSH(a->ar, a->t, t);
  return a->t.n - 1;
}

static Instr instr(OpKind k, Phase ph, int op, const char *name, int nin, int nout) {
  Instr x = {k, ph, op, name, nin, nout, {0}, {0}, {0}, -1, 0};
  for (int i = 0; i < PLAN_MAX_IO; i++) x.in[i] = x.out[i] = -1;
  return x;
}

/* Op-local scratch (OpInfo.scratch) of graph op i's forward or backward: a
 * new temp tensor "<layer>.<suffix>" of the bytes the op asks for (rounded up
 * to whole floats), or -1 when it needs none. */
static int scratch_tensor(Ad *a, int i, bool backward, const char *suffix) {
  const Op *o = &a->g->ops[i];
  const OpInfo *oi = op_info(o->kind);
  if (!oi->scratch) return -1;
  int64_t dim[MAX_KDIM];
  int nd;
  oi->dims(a->g, o, dim, &nd);
  int64_t bytes = oi->scratch(dim, backward);
  if (bytes <= 0) return -1;
  int64_t n = (bytes + 3) / 4;
  const char *sym = a->unnamed ? "?" : ar_printf(a->ar, "%lld", (long long)n);
  STensor t = {a->unnamed ? o->name : ar_printf(a->ar, "%s.%s", o->name, suffix),
               ROLE_TEMP,
               DT_F32,
               {.rank = 1, .d = {n}, .sym = {sym}},
               o->out[0],
               {INIT_NONE, 0}};
  VEC_PUSH(a->ar, a->t, t);
  return a->t.n - 1;
}

/* Ops that reach the loss, walking back from it, and their forward order. */
static void mark_live_ops(Ad *a) {
  const Graph *g = a->g;
  bool *needed = ar_alloc(a->ar, sizeof(bool) * (size_t)g->nt);
  a->live_op = ar_alloc(a->ar, sizeof(bool) * (size_t)g->nops);
  a->fwd = ar_alloc(a->ar, sizeof(int) * (size_t)g->nops);
  needed[g->loss] = true;
  for (int i = g->nops - 1; i >= 0; i--) {
    const Op *o = &g->ops[i];
    if (!needed[o->out[0]]) continue;
    a->live_op[i] = true;
    for (int k = 0; k < o->nin; k++)
      if (o->in[k] >= 0) needed[o->in[k]] = true;
  }
  for (int i = 0; i < g->nops; i++)
    if (a->live_op[i]) a->fwd[a->nfwd++] = i;
}

/* Gradient tensors: for every tensor that depends on a parameter and feeds a
 * live op through a differentiable slot. */
static void make_grads(Ad *a) {
  const Graph *g = a->g;
  bool *dep = ar_alloc(a->ar, sizeof(bool) * (size_t)g->nt);
  int *grad = ar_alloc(a->ar, sizeof(int) * (size_t)g->nt);
  for (int i = 0; i < g->nt; i++) {
    dep[i] = g->t[i].kind == TK_PARAM && !g->t[i].frozen;
    grad[i] = -1;
  }
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
      grad[t] = new_tensor(a, a->unnamed ? g->t[t].name : ar_printf(a->ar, "%s.grad", g->t[t].name), r, t);
    }
  }
  a->s->grad = grad;
}

/* The eval list: forward once, saving nothing. */
static void eval_list(Ad *a) {
  for (int i = 0; i < a->nfwd; i++) {
    const Op *o = &a->g->ops[a->fwd[i]];
    const OpInfo *oi = op_info(o->kind);
    Instr f = instr(o->kind, PHASE_FORWARD, a->fwd[i], o->name, oi->nin, oi->nout);
    for (int k = 0; k < oi->nin; k++) f.in[k] = o->in[k];
    for (int k = 0; k < oi->nout - oi->nstats; k++) f.out[k] = o->out[k];
    f.scratch = a->fscratch[a->fwd[i]] = scratch_tensor(a, a->fwd[i], false, "scratch");
    VEC_PUSH(a->ar, a->eval, f);
  }
}

/* One forward run of graph op i: the first run writes the graph's tensors,
 * later runs write fresh copies. */
static void run_forward(Ad *a, int i) {
  const Op *o = &a->g->ops[i];
  const OpInfo *oi = op_info(o->kind);
  bool again = a->runs[i]++ > 0;
  Instr f = instr(o->kind, again ? PHASE_RECOMPUTE : PHASE_FORWARD, i, o->name, oi->nin, oi->nout);
  for (int k = 0; k < oi->nin; k++) f.in[k] = o->in[k] >= 0 ? a->cur[o->in[k]] : -1;
  for (int k = 0; k < oi->nout; k++) {
    int t = o->out[k];
    if (k >= oi->nout - oi->nstats && !oi->mode_arg && !a->s->saved[t])
      continue; /* statistics no backward reads
                 * (frozen): not written, as in eval */
    const char *name = a->g->t[t].name;
    if (again)
      a->cur[t] = new_tensor(a, a->unnamed ? name : ar_printf(a->ar, "%s@%d", name, a->runs[i]), ROLE_ACTIVATION, t);
    f.out[k] = a->cur[t];
  }
  if (again) a->s->recompute_flops += oi->flops(a->g, o, false);
  const char *scratch = again && !a->unnamed ? ar_printf(a->ar, "scratch@%d", a->runs[i]) : "scratch";
  f.scratch = again ? scratch_tensor(a, i, false, scratch) : a->fscratch[i];
  VEC_PUSH(a->ar, a->train, f);
}

static int resolve_ref(Ad *a, const Op *o, int ref) {
  int slot = REF_SLOT(ref);
  switch (REF_KIND(ref)) {
  case 0: return ref == REF_DOUT ? a->s->grad[o->out[0]] : -1;
  case REF_IN(0): return o->in[slot] >= 0 ? a->cur[o->in[slot]] : -1;
  case REF_OUT(0): return a->cur[o->out[slot]];
  case REF_GIN(0): return o->in[slot] >= 0 && op_info(o->kind)->grad_to[slot] ? a->s->grad[o->in[slot]] : -1;
  }
  MP_ASSERT(0);
}

/* Does graph op o's backward read its input slot k: some backward output
 * that reads it (OpInfo.bin_for) is wanted. */
static bool bin_needed(Ad *a, const Op *o, int k) {
  const OpInfo *oi = op_info(o->kind);
  for (int j = 0; j < oi->nbout; j++)
    if ((!oi->bin_for[k] || oi->bin_for[k] & SLOT(j)) && resolve_ref(a, o, oi->bout[j]) >= 0) return true;
  return false;
}

static void update(Ad *a, int p) {
  const Optimizer *opt = &a->g->opt;
  const char *pn = a->g->t[p].name;
  Instr u = instr(opt->kind == OPT_ADAMW ? OP_ADAMW : OP_SGD, PHASE_UPDATE, p, pn, 1, 0);
  u.in[0] = a->s->grad[p];
  u.out[u.nout++] = p;
  if (opt->kind == OPT_ADAMW) {
    u.out[u.nout++] = new_tensor(a, a->unnamed ? pn : ar_printf(a->ar, "%s.adam_m", pn), ROLE_OPT_STATE, p);
    u.out[u.nout++] = new_tensor(a, a->unnamed ? pn : ar_printf(a->ar, "%s.adam_v", pn), ROLE_OPT_STATE, p);
  } else {
    u.out[u.nout++] = opt->momentum != 0
                          ? new_tensor(a, a->unnamed ? pn : ar_printf(a->ar, "%s.momentum", pn), ROLE_OPT_STATE, p)
                          : -1;
  }
  VEC_PUSH(a->ar, a->train, u);
}

/* The backward of graph op i, then (fused) the updates its gradients complete. */
static void run_backward(Ad *a, int i, bool *written) {
  const Op *o = &a->g->ops[i];
  const OpInfo *oi = op_info(o->kind);
  Instr b = instr(o->kind, PHASE_BACKWARD, i, o->name, oi->nbin, oi->nbout);
  bool any = false;
  for (int k = 0; k < oi->nbin; k++) b.in[k] = bin_needed(a, o, k) ? resolve_ref(a, o, oi->bin[k]) : -1;
  for (int k = 0; k < oi->nbout; k++) {
    int t = resolve_ref(a, o, oi->bout[k]);
    b.out[k] = t;
    if (t < 0) continue;
    any = true;
    b.acc[k] = written[t];
    written[t] = true;
  }
  if (!any) return;
  b.scratch = scratch_tensor(a, i, true, "bwd_scratch");
  for (int k = 0; k < oi->nbin; k++)
    if (b.in[k] >= 0 && REF_KIND(oi->bin[k]) != 0) VEC_PUSH(a->ar, a->saved, b.in[k]);
  VEC_PUSH(a->ar, a->train, b);
  for (int k = 0; a->fuse && k < o->nin; k++) {
    int t = o->in[k];
    bool dup = false; /* a parameter used twice by this op updates once */
    for (int j = 0; j < k; j++) dup |= o->in[j] == t;
    if (t >= 0 && !dup && a->g->t[t].kind == TK_PARAM && a->last_writer[t] == i) update(a, t);
  }
}

static void find_last_writers(Ad *a) {
  const Graph *g = a->g;
  a->last_writer = ar_alloc(a->ar, sizeof(int) * (size_t)g->nt);
  for (int i = 0; i < g->nt; i++) a->last_writer[i] = -1;
  for (int j = 0; j < a->nfwd; j++) /* backward runs in reverse: the first op writes last */
    for (int k = 0; k < g->ops[a->fwd[j]].nin; k++) {
      int t = g->ops[a->fwd[j]].in[k];
      if (t >= 0 && g->t[t].kind == TK_PARAM && a->s->grad[t] >= 0 && a->last_writer[t] < 0)
        a->last_writer[t] = a->fwd[j];
    }
}

/* Runs the actions; with none, one stage keeping everything. */
static void run_actions(Ad *a, const Actions *acts, bool *written) {
  if (!acts) {
    for (int j = 0; j < a->nfwd; j++) run_forward(a, a->fwd[j]);
    for (int j = a->nfwd - 1; j >= 0; j--) run_backward(a, a->fwd[j], written);
    return;
  }
  int *option = ar_alloc(a->ar, sizeof(int) * (size_t)acts->nstages);
  for (int x = 0; x < acts->n; x++) {
    const Action *ac = &acts->a[x];
    int lo = acts->stage_first[ac->stage], hi = acts->stage_first[ac->stage + 1];
    if (ac->kind != ACT_BACKWARD) {
      option[ac->stage] = ac->option;
      for (int j = lo; j < hi; j++) run_forward(a, a->fwd[j]);
      continue;
    }
    /* recompute, in forward order, the ops whose dropped outputs backward reads */
    for (int j = lo; j < hi; j++) {
      const Op *o = &a->g->ops[a->fwd[j]];
      bool redo = false;
      for (int k = 0; k < o->nout; k++)
        redo |= a->s->saved[o->out[k]] && !acts->keeps(acts->ctx, ac->stage, option[ac->stage], o->out[k]);
      if (redo) run_forward(a, a->fwd[j]);
    }
    for (int j = hi - 1; j >= lo; j--) run_backward(a, a->fwd[j], written);
  }
}

/* Which graph tensors backward reads, from a plain run (the checkpointing
 * actions consult it to know what a stage's backward needs). */
static bool *plain_saved(Ad *a) {
  const Graph *g = a->g;
  bool *saved = ar_alloc(a->ar, sizeof(bool) * (size_t)g->nt);
  for (int j = 0; j < a->nfwd; j++) {
    const Op *o = &g->ops[a->fwd[j]];
    const OpInfo *oi = op_info(o->kind);
    for (int k = 0; k < oi->nbin; k++) {
      if (!bin_needed(a, o, k)) continue;
      int r = oi->bin[k], t = REF_KIND(r) == REF_IN(0)    ? o->in[REF_SLOT(r)]
                              : REF_KIND(r) == REF_OUT(0) ? o->out[REF_SLOT(r)]
                                                          : -1;
      if (t >= 0) saved[t] = true;
    }
  }
  return saved;
}

static Step *build(Arena *ar, const Graph *g, bool fuse_updates, const Actions *acts);

/* The step keeping everything is built once per graph and kept in its memo
 * (graph.h), in the graph's arena; each caller gets its own copy of the
 * Step (build_step sets its accumulation), the tables shared: no pass
 * writes into a step's tables, each lowering copies what it changes. */
Step *ad_build(Arena *ar, const Graph *g, bool fuse_updates, const Actions *acts) {
  if (acts || !g->memo) return build(ar, g, fuse_updates, acts);
  const Step **kept = (const Step **)&g->memo->keep_step[fuse_updates];
  if (*kept) g->memo->hits++;
  else *kept = build(g->memo->ar, g, fuse_updates, NULL);
  Step *s = ar_alloc(ar, sizeof(Step));
  *s = **kept;
  return s;
}

static Step *build(Arena *ar, const Graph *g, bool fuse_updates, const Actions *acts) {
  Ad a = {.ar = ar, .g = g, .s = ar_alloc(ar, sizeof(Step)), .fuse = fuse_updates, .unnamed = acts && acts->unnamed};
  for (int i = 0; i < g->nt; i++) {
    STensor t = {g->t[i].name, role_of(g->t[i].kind), g->t[i].dtype, g->t[i].shape, i, g->t[i].init};
    VEC_PUSH(ar, a.t, t);
  }
  mark_live_ops(&a);
  make_grads(&a);
  find_last_writers(&a);
  a.cur = ar_alloc(ar, sizeof(int) * (size_t)g->nt);
  a.runs = ar_alloc(ar, sizeof(int) * (size_t)g->nops);
  a.fscratch = ar_alloc(ar, sizeof(int) * (size_t)(g->nops + 1));
  for (int t = 0; t < g->nt; t++) a.cur[t] = t;
  a.s->saved = plain_saved(&a); /* graph-sized for now: run_actions reads it */
  eval_list(&a);
  bool *written = ar_alloc(ar, sizeof(bool) * (size_t)(a.t.n + 1));
  run_actions(&a, acts, written);
  for (int t = 0; !fuse_updates && t < g->nt; t++) /* unfused: every update after backward */
    if (g->t[t].kind == TK_PARAM && a.s->grad[t] >= 0) update(&a, t);
  Step *s = a.s;
  s->saved = ar_alloc(ar, sizeof(bool) * (size_t)a.t.n);
  for (int i = 0; i < a.saved.n; i++) s->saved[a.saved.v[i]] = true;
  s->t = a.t.v, s->nt = a.t.n;
  s->train = a.train.v, s->ntrain = a.train.n;
  s->eval = a.eval.v, s->neval = a.eval.n;
  s->loss = g->loss;
  s->fused = fuse_updates;
  s->accumulation = 1;
  s->ranks = 1;
  return s;
}

bool ad_has_regen(const Graph *g) {
  for (int i = 0; i < g->nops; i++)
    if (op_info(g->ops[i].kind)->regen_stats) return true;
  return false;
}

Step *ad_regen_stats(Arena *ar, const Step *s) {
  Step *out = ar_alloc(ar, sizeof(Step));
  *out = *s;
  out->train = ar_alloc(ar, sizeof(Instr) * (size_t)(s->ntrain + 1));
  out->saved = ar_alloc(ar, sizeof(bool) * (size_t)(s->nt + 1));
  memcpy(out->train, s->train, sizeof(Instr) * (size_t)s->ntrain);
  memcpy(out->saved, s->saved, sizeof(bool) * (size_t)s->nt);
  bool *dropped = ar_alloc(ar, sizeof(bool) * (size_t)(s->nt + 1));
  for (int i = 0; i < s->ntrain; i++) { /* forward runs: their statistics are not written */
    Instr *x = &out->train[i];
    const OpInfo *oi = op_info(x->kind);
    if (!oi->regen_stats || (x->phase != PHASE_FORWARD && x->phase != PHASE_RECOMPUTE)) continue;
    for (int k = oi->nout - oi->nstats; k < oi->nout; k++)
      if (x->out[k] >= 0) {
        dropped[x->out[k]] = true;
        out->saved[x->out[k]] = false;
        x->out[k] = -1;
      }
  }
  for (int i = 0; i < s->ntrain; i++) /* nor read */
    for (int k = 0; k < out->train[i].nin; k++)
      if (out->train[i].in[k] >= 0 && dropped[out->train[i].in[k]]) out->train[i].in[k] = -1;
  return out;
}

void ad_dump(const Step *s, FILE *out) {
  static const char *const ph[] = {"fwd", "bwd", "upd", "rec"};
  for (int i = 0; i < s->ntrain; i++) {
    const Instr *x = &s->train[i];
    fprintf(out, "%d %s %s %s in", i, ph[x->phase], op_info(x->kind)->name, x->name);
    for (int k = 0; k < x->nin; k++) fprintf(out, " %s", x->in[k] < 0 ? "-" : s->t[x->in[k]].name);
    fprintf(out, " out");
    for (int k = 0; k < x->nout; k++)
      fprintf(out, " %s%s", x->acc[k] ? "+=" : "", x->out[k] < 0 ? "-" : s->t[x->out[k]].name);
    if (x->scratch >= 0) fprintf(out, " scratch %s", s->t[x->scratch].name);
    fputc('\n', out);
  }
  fprintf(out, "saved for backward:");
  for (int t = 0; t < s->nt; t++)
    if (s->saved[t]) fprintf(out, " %s", s->t[t].name);
  fputc('\n', out);
}
