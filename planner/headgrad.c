/* headgrad.c: the fused loss's tied weight gradient deferred (headgrad.h). */
#include "headgrad.h"

#include <string.h>

#include "build.h"
#include "ops.h"

const char *headgrad_name(HeadGrad h) {
  static const char *const n[] = {"kept", "deferred", "auto"};
  MP_ASSERT(h >= 0 && h < HG_COUNT);
  return n[h];
}

/* The instructions deferral moves: the fused loss's run that writes the dW
 * statistic (*f), its backward (*b), and the other writer of the weight's
 * gradient after it (*e, which accumulates). false where it does not apply. */
static bool find(const Step *s, int *f, int *b, int *e) {
  if (!s->fused || s->data_parallel || s->accumulation > 1) return false;
  *b = -1;
  for (int i = 0; i < s->ntrain && *b < 0; i++)
    if (s->train[i].kind == OP_LINEAR_CROSS_ENTROPY && s->train[i].phase == PHASE_BACKWARD && s->train[i].in[1] >= 0 &&
        s->train[i].out[1] >= 0 && !s->train[i].acc[1])
      *b = i;
  if (*b < 0) return false;
  int sdw = s->train[*b].in[1], gw = s->train[*b].out[1];
  *f = -1;
  for (int i = 0; i < *b; i++)
    if (s->train[i].kind == OP_LINEAR_CROSS_ENTROPY && s->train[i].out[2] == sdw) *f = i;
  *e = -1;
  bool seen = false; /* the gradient's next writer: e when a backward accumulating (not the update) */
  for (int i = *b + 1; i < s->ntrain && !seen; i++)
    for (int k = 0; k < s->train[i].nout && !seen; k++)
      if (s->train[i].out[k] == gw) {
        seen = true;
        if (s->train[i].phase == PHASE_BACKWARD && s->train[i].acc[k]) *e = i;
      }
  int later = 0; /* more writers after e: not the one other reader deferral is for */
  for (int i = *e + 1; *e >= 0 && i < s->ntrain; i++)
    for (int k = 0; k < s->train[i].nout; k++) later += s->train[i].out[k] == gw && s->train[i].phase != PHASE_UPDATE;
  return *f >= 0 && *e >= 0 && !later;
}

bool headgrad_tied(Arena *ar, const Graph *g) {
  const Graph *f = gb_fuse_loss(ar, g, 0);
  int w = -1, readers = 0;
  for (int i = 0; f && i < f->nops; i++)
    if (f->ops[i].kind == OP_LINEAR_CROSS_ENTROPY) w = f->ops[i].in[1];
  for (int i = 0; w >= 0 && i < f->nops; i++)
    for (int k = 0; k < f->ops[i].nin; k++) readers += f->ops[i].in[k] == w;
  return readers > 1 && !f->t[w].frozen;
}

bool headgrad_applies(const Step *s) {
  int f, b, e;
  return find(s, &f, &b, &e);
}

bool headgrad_deferred(const Step *s) {
  for (int i = 0; i < s->ntrain; i++)
    if (s->train[i].kind == OP_LINEAR_CROSS_ENTROPY && s->train[i].phase == PHASE_RECOMPUTE && s->train[i].out[0] < 0 &&
        s->train[i].out[2] >= 0)
      return true;
  return false;
}

Step *headgrad_defer(Arena *ar, const Graph *g, const Step *s) {
  int f, b, e;
  if (!find(s, &f, &b, &e)) return (Step *)s;
  Step *out = ar_alloc(ar, sizeof(Step));
  *out = *s;
  const Instr *F = &s->train[f];
  int sdw = F->out[2], gw = s->train[b].out[1];
  /* tensors: s's, plus the recompute's own scratch (a temp is one instruction's) */
  out->nt = s->nt + (F->scratch >= 0);
  out->t = ar_alloc(ar, sizeof(STensor) * (size_t)out->nt);
  memcpy(out->t, s->t, sizeof(STensor) * (size_t)s->nt);
  out->saved = ar_alloc(ar, sizeof(bool) * (size_t)out->nt);
  memcpy(out->saved, s->saved, sizeof(bool) * (size_t)s->nt);
  Instr D = *F; /* the recompute: the classifier's chunks again, dW its only output */
  D.phase = PHASE_RECOMPUTE;
  for (int k = 0; k < PLAN_MAX_IO; k++) D.out[k] = -1, D.acc[k] = false;
  D.out[2] = gw;
  if (F->scratch >= 0) {
    out->t[s->nt] = s->t[F->scratch];
    out->t[s->nt].name = ar_printf(ar, "%s@deferred", s->t[F->scratch].name);
    D.scratch = s->nt;
  }
  out->saved[sdw] = false;
  out->saved[F->in[0]] = true; /* x: read again at the end of backward */
  out->ntrain = s->ntrain + 1;
  out->train = ar_alloc(ar, sizeof(Instr) * (size_t)out->ntrain);
  int n = 0;
  for (int i = 0; i < s->ntrain; i++) {
    Instr x = s->train[i];
    if (i == f) x.out[2] = -1;           /* no dW statistic */
    if (i == b) x.in[1] = x.out[1] = -1; /* nor its scaling into the gradient */
    if (i == e) out->train[n++] = D;     /* the gradient's first write, then e's accumulation */
    out->train[n++] = x;
  }
  out->recompute_flops += op_run_flops(g, &g->ops[F->op], false, D.out);
  return out;
}
