/* optstate.c: AdamW's moments stored in bf16 or 8 bits (optstate.h). */
#include "optstate.h"

#include <string.h>

const char *optprec_name(OptPrec p) {
  static const char *const n[OPTS_COUNT] = {"fp32", "bf16", "8bit", "auto"};
  return p < OPTS_COUNT ? n[p] : "?";
}

/* Does a parameter of numel elements get 8-bit moments? */
static bool quantized(int64_t numel) { return numel >= OPT_8BIT_MIN; }

/* One moment's scale tensor: [ceil(numel / OPT_QBLOCK)] f32. */
static STensor scale_of(Arena *ar, const STensor *moment) {
  STensor t = *moment;
  int64_t numel = shape_numel(&moment->shape);
  const char *sym = moment->shape.rank ? moment->shape.sym[0] : "1";
  for (int k = 1; k < moment->shape.rank; k++) sym = ar_printf(ar, "%s*%s", sym, moment->shape.sym[k]);
  t.name = ar_printf(ar, "%s.scale", moment->name);
  t.dtype = DT_F32;
  t.shape = (Shape){.rank = 1};
  t.shape.d[0] = (numel + OPT_QBLOCK - 1) / OPT_QBLOCK;
  t.shape.sym[0] = ar_printf(ar, "ceil(%s/%d)", sym, OPT_QBLOCK);
  return t;
}

Step *opt_state_lower(Arena *ar, Step *s, OptPrec p) {
  if (p == OPTS_FP32 || p == OPTS_AUTO) return s;
  int scales = 0; /* the tables in one allocation each, not grown a tensor at a time */
  for (int i = 0; p == OPTS_8BIT && i < s->ntrain; i++)
    scales += 2 * (s->train[i].kind == OP_ADAMW && quantized(shape_numel(&s->t[s->train[i].out[1]].shape)));
  VEC(STensor) t = {ar_alloc(ar, sizeof(STensor) * (size_t)(s->nt + scales + 1)), s->nt, s->nt + scales + 1};
  memcpy(t.v, s->t, sizeof(STensor) * (size_t)s->nt);
  Instr *train = ar_alloc(ar, sizeof(Instr) * (size_t)(s->ntrain + 1));
  memcpy(train, s->train, sizeof(Instr) * (size_t)s->ntrain);
  for (int i = 0; i < s->ntrain; i++) {
    Instr *x = &train[i];
    if (x->kind != OP_ADAMW) continue;
    if (p == OPTS_BF16) {
      t.v[x->out[1]].dtype = t.v[x->out[2]].dtype = DT_BF16;
      continue;
    }
    if (!quantized(shape_numel(&s->t[x->out[1]].shape))) continue;
    for (int k = 1; k <= 2; k++) {
      STensor sc = scale_of(ar, &t.v[x->out[k]]);
      t.v[x->out[k]].dtype = DT_U8;
      VEC_PUSH(ar, t, sc);
      x->out[2 + k] = t.n - 1; /* out: p, m, v, m.scale, v.scale */
    }
    x->nout = 5;
  }
  Step *out = ar_alloc(ar, sizeof(Step));
  *out = *s;
  out->t = t.v, out->nt = t.n;
  out->train = train;
  out->saved = ar_alloc(ar, sizeof(bool) * (size_t)t.n);
  memcpy(out->saved, s->saved, sizeof(bool) * (size_t)s->nt);
  return out;
}

int64_t opt_state_bytes(const Graph *g, OptPrec p) {
  int64_t b = 0;
  for (int i = 0; i < g->nt; i++) {
    if (g->t[i].kind != TK_PARAM) continue;
    int64_t n = shape_numel(&g->t[i].shape);
    if (g->opt.kind == OPT_SGD) b += g->opt.momentum != 0 ? 4 * n : 0;
    else if (p == OPTS_BF16) b += 2 * 2 * n;
    else if (p == OPTS_8BIT && quantized(n)) b += 2 * (n + 4 * ((n + OPT_QBLOCK - 1) / OPT_QBLOCK));
    else b += 2 * 4 * n;
  }
  return b;
}
