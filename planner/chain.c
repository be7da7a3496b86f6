/* chain.c: stages and their keep options. */
#include "chain.h"

#include "ops.h"

static int64_t tbytes(const Graph *g, int t) { return shape_numel(&g->t[t].shape) * dtype_size(g->t[t].dtype); }

/* Bytes a tensor takes while kept for backward (half-precision storage). */
static int64_t kept_bytes(const Graph *g, const bool *half, int t) {
  return half && half[t] ? shape_numel(&g->t[t].shape) * 2 : tbytes(g, t);
}

bool chain_keeps(const Graph *g, const Step *plain, const Stage *s, KeepOption k, int t) {
  if (t == s->out) return true;
  if (!plain->saved[t]) return false;
  /* the selective option drops what cheap ops (OpInfo.cheap: element-wise
   * and normalization) make, as Megatron-LM's selective recompute and
   * PyTorch's default partitioner do; except where recomputing it would hold
   * more than it takes: inputs that backward does not read otherwise stay
   * live for the recompute (a LoRA sum y = x W^T + s x A^T B^T: both terms,
   * twice the sum's bytes) */
  const Op *o = &g->ops[g->t[t].producer];
  if (k == KEEP_ALL || !op_info(o->kind)->cheap) return true;
  int64_t held = 0;
  for (int i = 0; i < o->nin; i++)
    if (o->in[i] >= 0 && g->t[o->in[i]].kind == TK_ACT && !plain->saved[o->in[i]]) held += tbytes(g, o->in[i]);
  return held > tbytes(g, t);
}

/* Positions after which exactly one activation is live into later ops. */
static bool *cuts(Arena *ar, const Graph *g, const Step *s, int nf, int *crossing) {
  int *pos = ar_alloc(ar, sizeof(int) * (size_t)g->nops), *delta = ar_alloc(ar, sizeof(int) * (size_t)(nf + 1));
  int *lastuse = ar_alloc(ar, sizeof(int) * (size_t)g->nt);
  for (int t = 0; t < g->nt; t++) lastuse[t] = -1;
  for (int i = 0; i < nf; i++) {
    pos[s->train[i].op] = i;
    for (int k = 0; k < s->train[i].nin; k++)
      if (s->train[i].in[k] >= 0) lastuse[s->train[i].in[k]] = i;
  }
  for (int t = 0; t < g->nt; t++) {
    if (g->t[t].kind != TK_ACT || lastuse[t] < 0) continue;
    int p = pos[g->t[t].producer];
    delta[p]++, delta[lastuse[t]]--; /* crosses the cuts after p .. lastuse-1 */
  }
  bool *cut = ar_alloc(ar, sizeof(bool) * (size_t)nf);
  for (int i = 0, live = 0; i + 1 < nf; i++) {
    live += delta[i];
    cut[i] = live == 1;
  }
  for (int t = 0; t < g->nt; t++) /* remember which tensor crosses each cut */
    if (g->t[t].kind == TK_ACT && lastuse[t] >= 0)
      for (int i = pos[g->t[t].producer]; i < lastuse[t]; i++)
        if (cut[i]) crossing[i] = t;
  /* no cut between a matrix product and the next op writing in place over
   * its output (a relu after its conv): the two are one buffer, which two
   * stages would count twice. Only after a matrix product: elsewhere (a
   * ResNet's relu over its residual add, a ViT's patch reshapes) the cut
   * stays one more place the DP may checkpoint, and the arena check keeps
   * it honest (ResNet-50 at 1G: 5.47 s estimated without that cut, 5.37 s
   * with it) */
  for (int i = 0; i + 1 < nf; i++) {
    if (!cut[i] || !op_info(g->ops[s->train[i].op].kind)->gemm) continue;
    const Op *o = &g->ops[s->train[i + 1].op];
    int t = crossing[i];
    for (int k = 0; k < o->nin; k++)
      if ((op_info(o->kind)->inplace_fwd & SLOT(k)) && o->in[k] == t && lastuse[t] == i + 1 &&
          tbytes(g, o->out[0]) == tbytes(g, t))
        cut[i] = false;
  }
  return cut;
}

/* Working memory of one op beyond what the stage keeps: the gradients its
 * backward writes fresh (in-place ones reuse a dying buffer), or the largest
 * output forward makes that is not the stage's output; plus its scratch. */
static int64_t op_work(const Graph *g, const Op *o, int stage_out) {
  const OpInfo *oi = op_info(o->kind);
  int64_t grads = 0, outs = 0;
  for (int k = 0; k < o->nin; k++) {
    bool inplace = false;
    for (int j = 0; j < oi->nbout; j++) inplace |= oi->inplace_bwd[j] && REF_SLOT(oi->bout[j]) == k;
    if (o->in[k] >= 0 && oi->grad_to[k] && g->t[o->in[k]].kind != TK_INPUT && !inplace) grads += tbytes(g, o->in[k]);
  }
  for (int k = 0; k < o->nout; k++)
    if (o->out[k] != stage_out && tbytes(g, o->out[k]) > outs) outs = tbytes(g, o->out[k]);
  int64_t w = grads > outs ? grads : outs;
  if (oi->scratch) { /* op-local scratch is live while the kernel runs, next to the above */
    int64_t d[MAX_KDIM], f, b;
    int nd;
    oi->dims(g, o, d, &nd);
    f = oi->scratch(d, false), b = oi->scratch(d, true);
    w += f > b ? f : b;
  }
  return w;
}

/* Is option a at least as fast with at most as much memory as b? */
static bool dominates(const StageOption *a, const StageOption *b) {
  return a->keep_bytes <= b->keep_bytes && a->b <= b->b;
}

static void stage_costs(const Graph *g, const Step *plain, const CostModel *cm, const bool *half, bool choose,
                        Stage *st) {
  double bwd = 0;
  for (int i = st->first; i < st->last; i++) {
    const Op *o = &g->ops[plain->train[i].op];
    st->f += cost_op(cm, g, o, false);
    st->f_flops += op_info(o->kind)->flops(g, o, false);
    bwd += cost_op(cm, g, o, true);
    int64_t w = op_work(g, o, st->out);
    if (w > st->work) st->work = w;
  }
  st->nopt = 0;
  for (int v = 0; v < (choose ? 2 : 1) * KEEP_COUNT; v++) {
    KeepOption k = (KeepOption)(v % KEEP_COUNT);
    bool h = choose ? v >= KEEP_COUNT : half != NULL;
    StageOption so = {k, h, bwd, 0, 0, 0};
    for (int i = st->first; i < st->last; i++) {
      const Op *o = &g->ops[plain->train[i].op];
      bool redo = false;
      for (int j = 0; j < o->nout; j++) {
        int t = o->out[j];
        if (chain_keeps(g, plain, st, k, t)) {
          so.keep_bytes += kept_bytes(g, h ? half : NULL, t);
          if (choose && h && half[t]) /* cast down after forward, up before backward: 12 bytes an element */
            so.b += 12.0 * (double)shape_numel(&g->t[t].shape) / cm->bandwidth;
        } else {
          redo |= plain->saved[t];
        }
      }
      if (redo) {
        so.recompute += cost_op(cm, g, o, false);
        so.recompute_flops += op_info(o->kind)->flops(g, o, false);
      }
    }
    so.b += so.recompute;
    /* keep only options no other beats in both time and memory (the
     * first of equals: fp32 keep-all stays option 0) */
    bool beaten = false;
    for (int x = 0; x < st->nopt; x++) beaten |= dominates(&st->opt[x], &so);
    if (beaten) continue;
    int n = 0;
    for (int x = 0; x < st->nopt; x++)
      if (!dominates(&so, &st->opt[x])) st->opt[n++] = st->opt[x];
    st->opt[n++] = so;
    st->nopt = n;
  }
}

int chain_option(const Stage *s, KeepOption k, bool h) {
  for (int x = 0; x < s->nopt; x++)
    if (s->opt[x].keep == k && s->opt[x].half == h) return x;
  return 0;
}

int chain_lightest(const Stage *s) {
  int best = 0;
  for (int x = 1; x < s->nopt; x++)
    if (s->opt[x].keep_bytes < s->opt[best].keep_bytes ||
        (s->opt[x].keep_bytes == s->opt[best].keep_bytes && s->opt[x].b < s->opt[best].b))
      best = x;
  return best;
}

Chain *chain_build(Arena *ar, const Graph *g, const Step *plain, const CostModel *cm, const bool *half, bool choose) {
  int nf = 0;
  while (nf < plain->ntrain && plain->train[nf].phase == PHASE_FORWARD) nf++;
  int *crossing = ar_alloc(ar, sizeof(int) * (size_t)(nf + 1));
  bool *cut = cuts(ar, g, plain, nf, crossing);
  Chain *c = ar_alloc(ar, sizeof(Chain));
  c->g = g, c->plain = plain, c->choose_half = choose;
  c->s = ar_alloc(ar, sizeof(Stage) * (size_t)(nf + 1));
  int start = 0, in = -1;
  for (int i = 0; i < nf; i++) {
    if (i + 1 < nf && !cut[i]) continue;
    Stage *st = &c->s[c->n++];
    *st = (Stage){.first = start, .last = i + 1, .in = in, .out = i + 1 < nf ? crossing[i] : plain->loss};
    st->x_in = in >= 0 ? tbytes(g, in) : 0;
    stage_costs(g, plain, cm, half, choose, st);
    bool reads_out = false, reads_other = false, gemm = false;
    for (int j = st->first; j < st->last; j++) {
      const Op *o = &g->ops[plain->train[j].op];
      const OpInfo *oi = op_info(o->kind);
      gemm |= oi->gemm;
      for (int k = 0; k < oi->nbin; k++)
        if (REF_KIND(oi->bin[k]) == REF_OUT(0)) reads_out |= o->out[REF_SLOT(oi->bin[k])] == st->out;
      for (int k = 0; k < o->nout; k++) reads_other |= o->out[k] != st->out && plain->saved[o->out[k]];
    }
    st->out_only = gemm && reads_out && !reads_other && !st->opt[0].half && st->opt[0].keep == KEEP_ALL;
    start = i + 1, in = st->out;
  }
  return c;
}

bool chain_keeps_cb(const void *chain, int s, int k, int t) {
  const Chain *c = chain;
  /* what the plain step does not save needs no recompute: a statistic the
   * plan regenerates in backward (dropout's mask, ad_regen_stats) */
  return !c->plain->saved[t] || chain_keeps(c->g, c->plain, &c->s[s], c->s[s].opt[k].keep, t);
}

int *chain_stage_first(Arena *ar, const Chain *c) {
  int *first = ar_alloc(ar, sizeof(int) * (size_t)(c->n + 1));
  for (int i = 0; i < c->n; i++) first[i] = c->s[i].first;
  first[c->n] = c->n ? c->s[c->n - 1].last : 0;
  return first;
}
