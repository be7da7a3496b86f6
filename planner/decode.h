/* decode.h: generation's plan (memplan compile --gen-context N), the pass
 * after the levers. A causal language model's eval schedule, run on the
 * prompt's rows in one pass (prefill) and then on one row per token (decode),
 * in the first rows of the eval buffers it already has in the arena; what it
 * adds is one KV cache per attention op: K and V of every position so far,
 * [N, kv_heads * head_dim] f32 each, above the training plan's arena. The
 * trainer allocates the arena and the caches in one block
 * (plan_alloc_bytes), counted against --budget. */
#ifndef MEMPLAN_DECODE_H
#define MEMPLAN_DECODE_H

#include "base.h"
#include "plan.h"

/* The cache of one eval attention op at context ctx: K and V, ctx x kv_heads x head_dim f32 each. */
int64_t decode_layer_bytes(const PlanOp *attn, int64_t ctx);

/* The same summed over a model's attention ops, before it is planned: what
 * --budget leaves the levers is the budget less this (and one alignment). */
int64_t decode_graph_bytes(const Graph *g, int64_t ctx);

/* Plans the caches for context ctx (p->gen_context, kv_cache_offset,
 * kv_cache_bytes); NULL, or the user's error when the model cannot decode
 * (an op without a decode kernel, not causal, ctx over its positions or its
 * eval rows, caches over the budget). */
const char *plan_decode(Arena *ar, Plan *p, int64_t ctx);

/* What the trainer allocates: the arena, and with a cache, up to its end. */
int64_t plan_alloc_bytes(const Plan *p);

#endif
