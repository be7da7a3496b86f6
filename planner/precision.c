/* precision.c: lowering saved activations to half-precision storage. */
#include "precision.h"

#include <string.h>

#include "ops.h"

const char *prec_name(Precision p) {
  static const char *const n[] = {"fp32", "bf16", "fp16", "auto"};
  return n[p];
}

DType prec_dtype(Precision p) { return p == PREC_FP16 ? DT_F16 : p == PREC_BF16 ? DT_BF16 : DT_F32; }

bool *prec_candidates(Arena *ar, const Graph *g, const Step *plain) {
  bool *ok = ar_alloc(ar, sizeof(bool) * (size_t)g->nt), *bad = ar_alloc(ar, sizeof(bool) * (size_t)g->nt);
  for (int i = 0; i < plain->ntrain; i++) {
    const Instr *x = &plain->train[i];
    if (x->phase != PHASE_BACKWARD) continue;
    for (int k = 0; k < x->nin; k++) {
      int t = x->in[k];
      if (t < 0 || t >= g->nt || g->t[t].kind != TK_ACT || g->t[t].dtype != DT_F32) continue;
      if (op_info(x->kind)->half_bin & SLOT(k)) ok[t] = true; /* backward slots that may read a half copy */
      else bad[t] = true;
    }
  }
  for (int t = 0; t < g->nt; t++) ok[t] = ok[t] && !bad[t];
  return ok;
}

typedef struct {
  Arena *ar;
  const Step *s;
  VEC(STensor) t;
  VEC(Instr) ins;
} Lower;

static int add_tensor(Lower *L, int like, DType dt, const char *suffix) {
  STensor t = L->s->t[like];
  t.name = ar_printf(L->ar, "%s@%s", t.name, suffix);
  t.dtype = dt;
  VEC_PUSH(L->ar, L->t, t);
  return L->t.n - 1;
}

static Instr cast(int from, int to, const char *name, Phase ph) {
  Instr c = {OP_CAST, ph, -1, name, 1, 1, {0}, {0}, {0}, -1, 0};
  for (int k = 0; k < PLAN_MAX_IO; k++) c.in[k] = c.out[k] = -1;
  c.in[0] = from, c.out[0] = to;
  return c;
}

Step *prec_lower(Arena *ar, const Step *s, const bool *lower, DType dt) {
  Lower L = {ar, s, {0}, {0}};
  for (int t = 0; t < s->nt; t++) VEC_PUSH(ar, L.t, s->t[t]);
  /* the forward copy of each lowered tensor: made by a forward op, and the
   * position of its last forward-phase use */
  int *last_fwd = ar_alloc(ar, sizeof(int) * (size_t)s->nt), *half = ar_alloc(ar, sizeof(int) * (size_t)s->nt);
  for (int t = 0; t < s->nt; t++) {
    last_fwd[t] = -1;
    half[t] = -1;
  }
  for (int i = 0; i < s->ntrain; i++) {
    const Instr *x = &s->train[i];
    if (x->phase != PHASE_FORWARD) continue;
    for (int k = 0; k < x->nin + x->nout; k++) {
      int t = k < x->nin ? x->in[k] : x->out[k - x->nin];
      if (t >= 0 && s->t[t].of == t && lower[t]) last_fwd[t] = i;
    }
  }
  for (int i = 0; i < s->ntrain; i++) {
    Instr x = s->train[i];
    if (x.phase == PHASE_BACKWARD || x.phase == PHASE_RECOMPUTE) /* read half copies back */
      for (int k = 0; k < x.nin; k++) {
        int t = x.in[k];
        if (t < 0 || half[t] < 0) continue;
        int back = add_tensor(&L, t, s->t[t].dtype, "f32");
        VEC_PUSH(ar, L.ins, cast(half[t], back, x.name, x.phase));
        x.in[k] = back;
      }
    VEC_PUSH(ar, L.ins, x);
    for (int t = 0; x.phase == PHASE_FORWARD && t < s->nt; t++) /* after the last forward use: store half */
      if (last_fwd[t] == i) {
        half[t] = add_tensor(&L, t, dt, dt == DT_BF16 ? "bf16" : "f16");
        VEC_PUSH(ar, L.ins, cast(t, half[t], s->t[t].name, PHASE_FORWARD));
      }
  }
  Step *out = ar_alloc(ar, sizeof(Step));
  *out = *s;
  out->t = L.t.v, out->nt = L.t.n;
  out->train = L.ins.v, out->ntrain = L.ins.n;
  out->saved = ar_alloc(ar, sizeof(bool) * (size_t)L.t.n);
  memcpy(out->saved, s->saved, sizeof(bool) * (size_t)s->nt);
  for (int t = 0; t < s->nt; t++)
    if (half[t] >= 0) {
      out->saved[half[t]] = true;
      out->saved[t] = false;
    }
  return out;
}
