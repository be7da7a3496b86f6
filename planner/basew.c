/* basew.c: frozen weights stored in bf16, int8 or NF4 (basew.h). */
#include "basew.h"

#include <string.h>

const char *basew_name(BaseFmt f) {
  static const char *const n[BW_COUNT] = {"fp32", "bf16", "int8", "nf4", "auto"};
  return f < BW_COUNT ? n[f] : "?";
}

const char *paramprec_name(ParamPrec p) {
  static const char *const n[PP_COUNT] = {"fp32", "bf16", "auto"};
  return p < PP_COUNT ? n[p] : "?";
}

static bool pp_lowers(const Graph *g, int t) {
  return g->t[t].kind == TK_PARAM && !g->t[t].frozen && shape_numel(&g->t[t].shape) >= BW_PARAM_MIN;
}

bool paramprec_any(const Graph *g) {
  for (int t = 0; t < g->nt; t++)
    if (pp_lowers(g, t)) return true;
  return false;
}

bool basew_any(const Graph *g) {
  for (int t = 0; t < g->nt; t++)
    if (g->t[t].kind == TK_PARAM && g->t[t].frozen) return true;
  return false;
}

typedef struct {
  Arena *ar;
  VEC(STensor) t;
  int *scale; /* per tensor of the step lowered (n): -2 kept, -1 lowered without absmax, else its absmax */
  int n;
} Lower;

/* The absmax tensor of a weight w: [rows] (int8, rows = numel / last dim) or
 * [ceil(numel / BW_NF4_BLOCK)] (nf4), f32, frozen with it. */
static int absmax_of(Lower *L, int w, BaseFmt f) {
  STensor a = L->t.v[w];
  const Shape *s = &L->t.v[w].shape;
  int64_t numel = shape_numel(s), last = s->rank ? s->d[s->rank - 1] : 1;
  const char *sym = s->rank ? s->sym[0] : "1";
  for (int k = 1; k < s->rank; k++) sym = ar_printf(L->ar, "%s*%s", sym, s->sym[k]);
  a.name = ar_printf(L->ar, "%s.absmax", a.name);
  a.dtype = DT_F32;
  a.shape = (Shape){.rank = 1};
  a.init = (Init){0};
  if (f == BW_INT8) {
    a.shape.d[0] = last ? numel / last : 0;
    a.shape.sym[0] = s->rank > 1 ? ar_printf(L->ar, "%s/%s", sym, s->sym[s->rank - 1]) : "1";
  } else {
    a.shape.d[0] = (numel + BW_NF4_BLOCK - 1) / BW_NF4_BLOCK;
    a.shape.sym[0] = ar_printf(L->ar, "ceil(%s/%d)", sym, BW_NF4_BLOCK);
  }
  VEC_PUSH(L->ar, L->t, a);
  return L->t.n - 1;
}

/* A cast from step tensor in to out for instruction x. */
static Instr cast_of(const Instr *x, int in, int out) {
  Instr c = {OP_CAST, x->phase, -1, x->name, 1, 1, {0}, {0}, {0}, -1, 0};
  for (int j = 0; j < PLAN_MAX_IO; j++) c.in[j] = c.out[j] = -1;
  c.in[0] = in, c.out[0] = out;
  return c;
}

/* ins with a dequantizing cast before every read of a lowered weight; an
 * update of a lowered (trainable) weight runs on its fp32 copy, stored back
 * by a cast into the weight (stochastic rounding) right after. */
static Instr *rewire(Lower *L, const Instr *ins, int n, int *count) {
  VEC(Instr) out = {0};
  int casts = 0; /* one allocation: the casts counted first */
  for (int i = 0; i < n; i++) {
    const Instr *x = &ins[i];
    bool upd =
        (x->kind == OP_ADAMW || x->kind == OP_SGD) && x->out[0] >= 0 && x->out[0] < L->n && L->scale[x->out[0]] != -2;
    casts += 2 * upd;
    for (int k = 0; k < x->nin; k++) casts += x->in[k] >= 0 && x->in[k] < L->n && L->scale[x->in[k]] != -2;
  }
  out.cap = n + casts + 1;
  out.v = ar_alloc(L->ar, sizeof(Instr) * (size_t)out.cap);
  for (int i = 0; i < n; i++) {
    Instr x = ins[i];
    bool upd = (x.kind == OP_ADAMW || x.kind == OP_SGD) && x.out[0] >= 0 && x.out[0] < L->n;
    int w0 = upd ? x.out[0] : -1;
    if (upd && L->scale[w0] == -2) upd = false;
    if (upd) x.in[x.nin++] = w0; /* read through the cast below, written back after */
    for (int k = 0; k < x.nin; k++) {
      int w = x.in[k];
      if (w < 0 || w >= L->n || L->scale[w] == -2) continue;
      STensor f = L->t.v[w];
      f.name = ar_printf(L->ar, "%s@f32", f.name);
      f.dtype = DT_F32;
      f.role = ROLE_ACTIVATION;
      VEC_PUSH(L->ar, L->t, f);
      Instr c = cast_of(&x, w, L->t.n - 1);
      if (L->scale[w] >= 0) c.in[1] = L->scale[w], c.nin = 2;
      VEC_PUSH(L->ar, out, c);
      x.in[k] = c.out[0];
    }
    if (upd) x.out[0] = x.in[--x.nin], x.in[x.nin] = -1;
    VEC_PUSH(L->ar, out, x);
    if (upd) VEC_PUSH(L->ar, out, cast_of(&x, x.out[0], w0));
  }
  *count = out.n;
  return out.v;
}

Step *basew_lower(Arena *ar, const Graph *g, const Step *s, BaseFmt f, ParamPrec pp) {
  if (f == BW_AUTO) f = BW_FP32;
  if ((f == BW_FP32 || !basew_any(g)) && (pp != PP_BF16 || !paramprec_any(g))) return (Step *)s;
  static const DType dt[] = {DT_F32, DT_BF16, DT_I8, DT_NF4};
  Lower L = {ar, {0}, NULL, s->nt};
  L.scale = ar_alloc(ar, sizeof(int) * (size_t)(s->nt + 1));
  for (int t = 0; t < s->nt; t++) L.scale[t] = -2;
  /* the tensor table in one allocation, not grown a tensor at a time: s's,
   * an absmax per quantized weight, an fp32 copy per read of a lowered one
   * (the loop below marks the lowered, then sets them) */
  int extra = 1;
  for (int t = 0; t < g->nt && t < s->nt; t++) {
    bool pl = pp == PP_BF16 && pp_lowers(g, t) && s->t[t].role == ROLE_PARAM;
    bool fz = f != BW_FP32 && g->t[t].kind == TK_PARAM && g->t[t].frozen && s->t[t].role == ROLE_PARAM;
    if (pl || fz) L.scale[t] = -1;
    extra += fz && f != BW_BF16;
  }
  for (int set = 0; set < 2; set++)
    for (int i = 0; i < (set ? s->neval : s->ntrain); i++) {
      const Instr *x = set ? &s->eval[i] : &s->train[i];
      extra +=
          (x->kind == OP_ADAMW || x->kind == OP_SGD) && x->out[0] >= 0 && x->out[0] < s->nt && L.scale[x->out[0]] != -2;
      for (int k = 0; k < x->nin; k++) extra += x->in[k] >= 0 && x->in[k] < s->nt && L.scale[x->in[k]] != -2;
    }
  for (int t = 0; t < s->nt; t++) L.scale[t] = -2;
  L.t.cap = s->nt + extra;
  L.t.v = ar_alloc(ar, sizeof(STensor) * (size_t)L.t.cap);
  memcpy(L.t.v, s->t, sizeof(STensor) * (size_t)s->nt);
  L.t.n = s->nt;
  for (int t = 0; t < g->nt && t < s->nt; t++) {
    if (pp == PP_BF16 && pp_lowers(g, t) && s->t[t].role == ROLE_PARAM) L.t.v[t].dtype = DT_BF16, L.scale[t] = -1;
    if (f == BW_FP32 || g->t[t].kind != TK_PARAM || !g->t[t].frozen || s->t[t].role != ROLE_PARAM) continue;
    L.t.v[t].dtype = dt[f];
    L.scale[t] = f == BW_BF16 ? -1 : absmax_of(&L, t, f);
  }
  Step *out = ar_alloc(ar, sizeof(Step));
  *out = *s;
  out->train = rewire(&L, s->train, s->ntrain, &out->ntrain);
  out->eval = rewire(&L, s->eval, s->neval, &out->neval);
  out->t = L.t.v, out->nt = L.t.n;
  out->saved = ar_alloc(ar, sizeof(bool) * (size_t)L.t.n);
  memcpy(out->saved, s->saved, sizeof(bool) * (size_t)s->nt);
  return out;
}
