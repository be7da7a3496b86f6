/* decode.c: generation's KV caches (decode.h). Reads the eval schedule of a
 * finished plan and sets the plan's generation fields; edits nothing else. */
#include "decode.h"

#include "ops.h"

#define DECODE_MAX_CONTEXT 16384 /* the attention kernels' scores row (RT_ATT_MAX_T) */

int64_t decode_layer_bytes(const PlanOp *attn, int64_t ctx) {
  int64_t C = attn->dim[2], NH = attn->dim[3], KVH = attn->dim[4];
  return 2 * KVH * (C / NH) * ctx * (int64_t)sizeof(float);
}

int64_t decode_graph_bytes(const Graph *g, int64_t ctx) {
  int64_t bytes = 0;
  for (int i = 0; i < g->nops; i++) {
    const Op *o = &g->ops[i];
    if (o->kind != OP_ATTENTION) continue;
    const Shape *out = &g->t[o->out[0]].shape;
    int64_t NH = o->attr[0].i, KVH = o->attr[1].i ? o->attr[1].i : NH; /* heads, kv_heads: the table's order */
    bytes += 2 * KVH * (out->d[out->rank - 1] / NH) * ctx * (int64_t)sizeof(float);
  }
  return bytes;
}

int64_t plan_alloc_bytes(const Plan *p) {
  return p->gen_context ? p->kv_cache_offset + p->kv_cache_bytes : p->arena_bytes;
}

/* Whether the runtime's decode (runtime/cpu_generate.c) runs op o on any rows. */
static bool decodes(OpKind k) {
  switch (k) {
  case OP_EMBEDDING:
  case OP_POS_EMBEDDING:
  case OP_ADD:
  case OP_MUL:
  case OP_GELU:
  case OP_SILU:
  case OP_LAYERNORM:
  case OP_RMSNORM:
  case OP_LINEAR:
  case OP_ROPE:
  case OP_ATTENTION: return true;
  default: return false;
  }
}

const char *plan_decode(Arena *ar, Plan *p, int64_t ctx) {
  const char *m = p->model;
  const PlanOp *last = p->neval ? &p->eval[p->neval - 1] : NULL;
  bool lm = false;
  for (int i = 0; i < p->neval; i++) lm |= p->eval[i].op == OP_EMBEDDING || p->eval[i].op == OP_ATTENTION;
  if (!lm)
    return ar_printf(ar,
                     "--gen-context: %s is not a language model (no token embedding or attention): compile "
                     "without --gen-context",
                     m);
  if (last && last->op == OP_LINEAR_CROSS_ENTROPY)
    return ar_printf(ar,
                     "--gen-context: %s's loss is fused (linear_cross_entropy, --fused-loss), which keeps no "
                     "logits to sample from: give --fused-loss off",
                     m);
  if (!last || last->op != OP_CROSS_ENTROPY || last->in[0] < 0)
    return ar_printf(ar,
                     "--gen-context: %s's eval plan does not end in cross_entropy on its logits, which "
                     "generation samples from",
                     m);
  if (ctx > DECODE_MAX_CONTEXT)
    return ar_printf(ar, "--gen-context %lld: at most %d positions (the attention kernels' row)", (long long)ctx,
                     DECODE_MAX_CONTEXT);
  int64_t cache = 0, rows = 0;
  bool attn = false, logits = false;
  for (int i = 0; i < p->neval - 1; i++) {
    const PlanOp *o = &p->eval[i];
    if (!decodes(o->op))
      return ar_printf(ar,
                       "--gen-context: layer '%s' of %s is a %s, which has no decode kernel (generation decodes "
                       "embedding, position_embedding, add, mul, gelu, silu, layernorm, rmsnorm, linear, rope "
                       "and attention): compile without --gen-context",
                       o->layer, m, op_info(o->op)->name);
    for (int s = 0; s < o->nin + o->nout; s++) {
      int b = s < o->nin ? o->in[s] : o->out[s - o->nin];
      if (b >= 0 && p->buf[b].dtype != DT_F32 && p->buf[b].dtype != DT_I32)
        return ar_printf(ar,
                         "--gen-context: '%s' of layer '%s' is stored as %s; generation decodes f32 only "
                         "(compile without --precision, --base-weights or --param-precision below fp32)",
                         p->buf[b].name, o->layer, dtype_name(p->buf[b].dtype));
    }
    if (o->op == OP_EMBEDDING && !rows) { /* the tokens [B, T]: T positions a window */
      const Shape *t = &p->buf[o->in[0]].shape;
      rows = t->d[t->rank - 1];
    }
    if (o->op == OP_POS_EMBEDDING && ctx > p->buf[o->in[0]].shape.d[0])
      return ar_printf(ar,
                       "--gen-context %lld is larger than the %lld positions of %s's learned position "
                       "embedding '%s' (layer '%s'): give --gen-context %lld or less",
                       (long long)ctx, (long long)p->buf[o->in[0]].shape.d[0], m, p->buf[o->in[0]].name, o->layer,
                       (long long)p->buf[o->in[0]].shape.d[0]);
    if (o->op == OP_ATTENTION) {
      if (!o->dim[5])
        return ar_printf(ar,
                         "--gen-context: attention '%s' of %s is not causal; a KV cache needs every position "
                         "to see only earlier ones",
                         o->layer, m);
      attn = true, cache += decode_layer_bytes(o, ctx);
    }
    logits |= o->op == OP_LINEAR && o->out[0] == last->in[0];
  }
  if (!attn || !logits || !rows)
    return ar_printf(ar, "--gen-context: %s has no token embedding, causal attention and linear logits to decode", m);
  if (ctx > rows)
    return ar_printf(ar,
                     "--gen-context %lld is more than the T = %lld positions of %s's eval plan (its window: the "
                     "prefill runs in its rows, and --kv-check's recompute over it): give --gen-context %lld or less, "
                     "or a larger --set T=...",
                     (long long)ctx, (long long)rows, m, (long long)rows);
  int64_t off = mp_align_up(p->arena_bytes, p->align);
  if (p->budget_bytes && off + cache > p->budget_bytes) {
    char a[32], b[32], c[32];
    return ar_printf(ar,
                     "--gen-context %lld: the KV cache (%s) beside the training plan's arena (%s) is over the "
                     "budget of %s: give a smaller --gen-context or a larger --budget",
                     (long long)ctx, mp_fmt_bytes(a, sizeof a, cache), mp_fmt_bytes(b, sizeof b, p->arena_bytes),
                     mp_fmt_bytes(c, sizeof c, p->budget_bytes));
  }
  p->gen_context = ctx, p->kv_cache_offset = off, p->kv_cache_bytes = cache;
  return NULL;
}
