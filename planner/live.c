/* live.c: one pass over a schedule computing each tensor's [def, last use]
 * and merging element-wise outputs into their input's buffer where the
 * input dies at that op (the op table says which slots are alias-safe). */
#include "live.h"

#include <stdlib.h>

#include "ops.h"

/* Params, running state and optimizer state live across steps: never
 * reused, never a host or a guest of an in-place op. */
static bool transient(const STensor *t) {
  return t->role != ROLE_PARAM && t->role != ROLE_OPT_STATE && t->role != ROLE_STATE;
}

/* first/last use of every tensor; inputs are filled before the step (def 0)
 * and the loss is read after it (live to the end). With micro-batches,
 * a parameter's gradient accumulates over every pass of the loop, so it
 * lives from the loop's start to its update. */
static void uses(const Step *s, const Instr *ins, int n, int *first, int *last) {
  for (int t = 0; t < s->nt; t++) {
    first[t] = -1;
    last[t] = -1;
  }
  for (int p = 0; p < n; p++) {
    const Instr *x = &ins[p];
    for (int k = 0; k < x->nin + x->nout; k++) {
      int t = k < x->nin ? x->in[k] : x->out[k - x->nin];
      if (t < 0) continue;
      if (first[t] < 0) first[t] = p;
      last[t] = p;
    }
    if (x->scratch >= 0) { /* op-local: used here only, even when eval and train share it */
      first[x->scratch] = p;
      last[x->scratch] = p;
    }
  }
  for (int t = 0; t < s->nt; t++) {
    if (first[t] < 0) continue;
    if (s->t[t].role == ROLE_INPUT || !transient(&s->t[t])) first[t] = 0;
    if (s->accumulation > 1 && s->t[t].role == ROLE_GRAD && !(s->per_pass && s->per_pass[t])) first[t] = 0;
    if (t == s->loss || !transient(&s->t[t])) last[t] = n - 1;
  }
}

/* Can out (written fresh at p) take the buffer of in, which dies at p? */
static bool can_alias(const Step *s, Live *l, const int *first, int p, int tin, int tout) {
  if (tin < 0 || tout < 0 || l->buf_of[tout] != tout || first[tout] != p) return false;
  const STensor *a = &s->t[tin], *b = &s->t[tout];
  if (!transient(a) || !transient(b) || a->role == ROLE_INPUT || tin == s->loss || tout == s->loss) return false;
  if (a->dtype != b->dtype || shape_numel(&a->shape) != shape_numel(&b->shape)) return false;
  return l->b[l->buf_of[tin]].last == p + 1;
}

static void merge(Live *l, const int *last, int tin, int tout) {
  LiveBuf *b = &l->b[l->buf_of[tin]];
  l->buf_of[tout] = l->buf_of[tin];
  if (last[tout] + 1 > b->last) b->last = last[tout] + 1;
  b->nalias++;
  l->inplace_saved += b->bytes;
}

static void inplace(const Step *s, Live *l, const Instr *ins, int n, const int *first, const int *last) {
  for (int p = 0; p < n; p++) {
    const Instr *x = &ins[p];
    if (x->phase == PHASE_UPDATE) continue;
    const OpInfo *oi = op_info(x->kind);
    if (x->phase == PHASE_FORWARD) {
      for (int slot = 0; slot < x->nin; slot++)
        if ((oi->inplace_fwd & SLOT(slot)) && can_alias(s, l, first, p, x->in[slot], x->out[0])) {
          merge(l, last, x->in[slot], x->out[0]);
          break;
        }
      continue;
    }
    for (int o = 0; o < x->nout; o++)
      for (int i = 0; i < x->nin; i++)
        if ((oi->inplace_bwd[o] & SLOT(i)) && !x->acc[o] && can_alias(s, l, first, p, x->in[i], x->out[o])) {
          merge(l, last, x->in[i], x->out[o]);
          break;
        }
  }
}

Live *live_build(Arena *ar, const Step *s, const Instr *ins, int n) {
  Live *l = ar_alloc(ar, sizeof(Live));
  int *first = ar_alloc(ar, sizeof(int) * (size_t)s->nt), *last = ar_alloc(ar, sizeof(int) * (size_t)s->nt);
  uses(s, ins, n, first, last);
  /* one buffer per used tensor to start with, indexed by tensor id; merged
   * tensors point at their host, and the table is compacted at the end */
  l->n = n;
  l->buf_of = ar_alloc(ar, sizeof(int) * (size_t)s->nt);
  l->b = ar_alloc(ar, sizeof(LiveBuf) * (size_t)s->nt);
  for (int t = 0; t < s->nt; t++) {
    l->buf_of[t] = first[t] < 0 ? -1 : t;
    l->b[t] = (LiveBuf){
        t, first[t], last[t] + 1, dtype_numel_bytes(s->t[t].dtype, shape_numel(&s->t[t].shape)), !transient(&s->t[t]),
        0};
  }
  inplace(s, l, ins, n, first, last);
  int *newid = ar_alloc(ar, sizeof(int) * (size_t)s->nt);
  for (int t = 0; t < s->nt; t++) {
    newid[t] = -1;
    if (l->buf_of[t] == t) {
      newid[t] = l->nb;
      l->b[l->nb++] = l->b[t];
    }
  }
  for (int t = 0; t < s->nt; t++)
    if (l->buf_of[t] >= 0) l->buf_of[t] = newid[l->buf_of[t]];
  return l;
}

int64_t live_peak(const Live *l, int64_t align, int *at) {
  int64_t *delta = calloc((size_t)l->n + 2, sizeof(int64_t));
  MP_ASSERT(delta);
  for (int i = 0; i < l->nb; i++) {
    int64_t b = mp_align_up(l->b[i].bytes, align);
    delta[l->b[i].first] += b;
    delta[l->b[i].last] -= b;
  }
  int64_t cur = 0, best = 0;
  *at = 0;
  for (int p = 0; p <= l->n; p++) {
    cur += delta[p];
    if (cur > best) {
      best = cur;
      *at = p;
    }
  }
  free(delta);
  return best;
}

void live_dump(const Step *s, const Live *l, FILE *out) {
  for (int i = 0; i < l->nb; i++) {
    const LiveBuf *b = &l->b[i];
    fprintf(out, "b%d %s %lld [%d, %d)%s", i, s->t[b->tensor].name, (long long)b->bytes, b->first, b->last,
            b->persistent ? " persistent" : "");
    for (int t = 0; t < s->nt; t++)
      if (l->buf_of[t] == i && t != b->tensor) fprintf(out, " +%s", s->t[t].name);
    fputc('\n', out);
  }
}
