/* json.c: plan.json, exactly the Plan (format "memplan_plan": 1). Names are
 * stable once published: extend, never rename. */
#include "decode.h"
#include "emit.h"
#include "ops.h"

#include <string.h>

static void ints(Text *t, const int64_t *v, int n) {
  text_printf(t, "[");
  for (int i = 0; i < n; i++) text_printf(t, "%s%lld", i ? ", " : "", (long long)v[i]);
  text_printf(t, "]");
}

static void buffer_ids(Text *t, const int *v, int n) {
  text_printf(t, "[");
  for (int i = 0; i < n; i++) text_printf(t, "%s%d", i ? ", " : "", v[i]);
  text_printf(t, "]");
}

static void header(const Plan *p, Text *t) {
  text_printf(t, "{\n  \"memplan_plan\": %d,\n  \"model\": ", p->version);
  text_json_str(t, p->model);
  text_printf(t, ",\n  \"source\": ");
  text_json_str(t, p->source);
  if (p->tokenizer) {
    text_printf(t, ",\n  \"tokenizer\": ");
    text_json_str(t, p->tokenizer);
  }
  text_printf(t, ",\n  \"dims\": {");
  for (int i = 0; i < p->ndims; i++) {
    text_printf(t, "%s", i ? ", " : "");
    text_json_str(t, p->dims[i].name);
    text_printf(t, ": %lld", (long long)p->dims[i].value);
  }
  text_printf(t, "},\n  \"set\": {");
  for (int i = 0, k = 0; i < p->ndims; i++)
    if (p->dims[i].overridden) {
      text_printf(t, "%s", k++ ? ", " : "");
      text_json_str(t, p->dims[i].name);
      text_printf(t, ": %lld", (long long)p->dims[i].value);
    }
  const Optimizer *o = &p->opt;
  if (o->kind == OPT_ADAMW)
    text_printf(t,
                "},\n  \"optimizer\": {\"type\": \"adamw\", \"lr\": %.9g, \"betas\": [%.9g, %.9g], \"eps\": %.9g, "
                "\"weight_decay\": %.9g",
                o->lr, o->beta1, o->beta2, o->eps, o->weight_decay);
  else
    text_printf(t,
                "},\n  \"optimizer\": {\"type\": \"sgd\", \"lr\": %.9g, \"momentum\": %.9g, \"weight_decay\": %.9g, "
                "\"nesterov\": %s",
                o->lr, o->momentum, o->weight_decay, o->nesterov ? "true" : "false");
  /* the lr schedule (memplan_trainer.h); plans without these keys read as constant */
  text_printf(t, ", \"schedule\": \"%s\", \"warmup\": %lld, \"final_fraction\": %.9g", sched_name(o->schedule),
              (long long)o->warmup, o->final_fraction);
  if (o->clip_grad_norm > 0) text_printf(t, ", \"clip_grad_norm\": %.17g", o->clip_grad_norm); /* absent: none */
  text_printf(t, "},\n");
  text_printf(t, "  \"budget_bytes\": %lld,\n  \"align\": %lld,\n  \"guard_bytes\": %lld,\n",
              (long long)p->budget_bytes, (long long)p->align, (long long)p->guard_bytes);
  text_printf(t, "  \"precision\": \"%s\",\n  \"loss_scaling\": %s,\n", p->precision,
              p->loss_scaling ? "true" : "false");
  if (p->dropout_masks) text_printf(t, "  \"dropout_masks\": \"%s\",\n", p->dropout_masks);
  if (p->lora_rank) /* LoRA: the exporter merges W + alpha/rank B A */
    text_printf(t, "  \"lora\": {\"rank\": %lld, \"alpha\": %.17g, \"dropout\": %.17g},\n", (long long)p->lora_rank,
                p->lora_alpha, p->lora_dropout);
  text_printf(t, "  \"fused_loss\": %s,\n  \"loss_chunk\": %lld,\n", p->loss_chunk ? "true" : "false",
              (long long)p->loss_chunk);
  /* AdamW's moments (planner/optstate.h); plans without it read as fp32 */
  text_printf(t, "  \"opt_state\": \"%s\",\n", p->opt_state ? p->opt_state : "fp32");
  /* frozen weights' storage (planner/basew.h); absent: fp32 */
  if (p->base_weights && strcmp(p->base_weights, "fp32"))
    text_printf(t, "  \"base_weights\": \"%s\",\n", p->base_weights);
  /* trainable weights' storage (--param-precision, planner/basew.h); absent: fp32 */
  if (p->param_precision && strcmp(p->param_precision, "fp32"))
    text_printf(t, "  \"param_precision\": \"%s\",\n", p->param_precision);
  /* the fused loss's tied weight gradient (--head-grad, planner/headgrad.h); absent: kept */
  if (p->head_grad && strcmp(p->head_grad, "kept")) text_printf(t, "  \"head_grad\": \"%s\",\n", p->head_grad);
  if (p->noclip_arena) /* gradient clipping's price: the same request planned without it */
    text_printf(t,
                "  \"noclip\": {\"fits\": %s, \"arena_bytes\": %lld, \"lower_bound_bytes\": %lld, "
                "\"extra_flops\": %lld, \"accumulation_steps\": %d},\n",
                p->noclip_fits ? "true" : "false", (long long)p->noclip_arena, (long long)p->noclip_lower_bound,
                (long long)p->noclip_extra_flops, p->noclip_accumulation);
  if (p->gen_context) { /* generation's KV caches (--gen-context, planner/decode.h); absent: none */
    text_printf(t,
                "  \"generation\": {\"context\": %lld, \"kv_cache_offset\": %lld, \"kv_cache_bytes\": %lld, "
                "\"alloc_bytes\": %lld, \"layers\": [",
                (long long)p->gen_context, (long long)p->kv_cache_offset, (long long)p->kv_cache_bytes,
                (long long)plan_alloc_bytes(p));
    int n = 0;
    for (int i = 0; i < p->neval; i++) {
      const PlanOp *a = &p->eval[i];
      if (a->op != OP_ATTENTION) continue;
      text_printf(t, "%s\n    {\"layer\": ", n++ ? "," : "");
      text_json_str(t, a->layer);
      text_printf(t, ", \"kv_heads\": %lld, \"head_dim\": %lld, \"bytes\": %lld}", (long long)a->dim[4],
                  (long long)(a->dim[2] / a->dim[3]), (long long)decode_layer_bytes(a, p->gen_context));
    }
    text_printf(t, "]},\n");
  }
}

static void totals(const Plan *p, Text *t) {
  text_printf(t,
              "  \"totals\": {\"arena_bytes\": %lld, \"lower_bound_bytes\": %lld, \"persistent_bytes\": %lld, "
              "\"train_peak_bytes\": %lld, \"eval_peak_bytes\": %lld, \"unfused_lower_bound_bytes\": %lld,\n"
              "             \"param_count\": %lld, \"frozen_param_count\": %lld, \"step_flops\": %lld, "
              "\"extra_flops\": %lld, "
              "\"micro_batch\": %d, \"accumulation_steps\": %d, \"peak_position\": %d,\n"
              "             \"assign_method\": ",
              (long long)p->arena_bytes, (long long)p->lower_bound_bytes, (long long)p->persistent_bytes,
              (long long)p->train_peak_bytes, (long long)p->eval_peak_bytes, (long long)p->unfused_lower_bound,
              (long long)p->param_count, (long long)p->frozen_count, (long long)p->step_flops,
              (long long)p->extra_flops, p->micro_batch, p->accumulation_steps, p->peak_position);
  text_json_str(t, p->assign_method ? p->assign_method : "");
  text_printf(t, ", \"assign_optimal\": %s,\n             \"peak_by_role\": {", p->assign_optimal ? "true" : "false");
  for (int r = 0; r < ROLE_COUNT; r++)
    text_printf(t, "%s\"%s\": %lld", r ? ", " : "", plan_role_name((Role)r), (long long)p->peak_by_role[r]);
  text_printf(t, "}},\n");
}

/* The budget's levers: every configuration considered, in the order
 * enumerated, with its bounds, its plan's estimate, or why it was pruned. */
static void levers(const Plan *p, Text *t) {
  text_printf(t, "  \"levers\": [");
  for (int i = 0; i < p->nlevers; i++) {
    const PlanLever *l = &p->levers[i];
    text_printf(t,
                "%s\n    {\"precision\": \"%s\", \"micro_batch\": %d, \"accumulation_steps\": %d, "
                "\"keep_arena_bytes\": %lld, \"arena_bytes\": %lld, \"extra_flops\": %lld, \"step_flops\": %lld, "
                "\"fits\": %s, \"chosen\": %s",
                i ? "," : "", l->precision, l->micro_batch, l->accumulation_steps, (long long)l->keep_arena,
                (long long)l->arena, (long long)l->extra_flops, (long long)l->step_flops, l->fits ? "true" : "false",
                l->chosen ? "true" : "false");
    if (l->dropout_masks) text_printf(t, ", \"dropout_masks\": \"%s\"", l->dropout_masks);
    if (l->loss_chunk) text_printf(t, ", \"loss_chunk\": %lld", (long long)l->loss_chunk);
    if (l->opt_state) text_printf(t, ", \"opt_state\": \"%s\"", l->opt_state);
    text_printf(t, ", \"est_seconds\": %.17g, \"time_bound_seconds\": %.17g, \"memory_bound_bytes\": %lld",
                l->est_seconds, l->time_bound, (long long)l->memory_bound);
    if (l->pruned) text_printf(t, ", \"pruned\": \"%s\"", l->pruned);
    text_printf(t, "}");
  }
  text_printf(t, "%s],\n", p->nlevers ? "\n  " : "");
}

/* Checkpointing stages as chosen: K keep all, S selective, R rerun. */
static void stages(const Plan *p, Text *t) {
  text_printf(t, "  \"stages\": [");
  for (int i = 0; i < p->nstages; i++) {
    const PlanStage *s = &p->stages[i];
    text_printf(t, "%s\n    {\"first_layer\": ", i ? "," : "");
    text_json_str(t, s->first_layer);
    text_printf(t, ", \"last_layer\": ");
    text_json_str(t, s->last_layer);
    text_printf(t, ", \"choice\": \"%c\", \"half\": %s, \"runs\": %d, \"kept_bytes\": %lld}", s->choice,
                s->half ? "true" : "false", s->runs, (long long)s->kept_bytes);
  }
  text_printf(t, "%s],\n", p->nstages ? "\n  " : "");
  if (p->whole_graph) text_printf(t, "  \"stages_whole_graph\": true,\n");
}

static void buffers(const Plan *p, Text *t) {
  static const char *const set[] = {"train", "eval", "both"};
  static const char *const init[] = {"none", "normal", "zeros", "ones", "uniform"};
  text_printf(t, "  \"buffers\": [\n");
  for (int b = 0; b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    text_printf(t, "    {\"id\": %d, \"name\": ", b);
    text_json_str(t, pb->name);
    text_printf(t, ", \"role\": \"%s\", \"dtype\": \"%s\", \"shape\": ", plan_role_name(pb->role),
                dtype_name(pb->dtype));
    ints(t, pb->shape.d, pb->shape.rank);
    text_printf(t, ", \"shape_sym\": [");
    for (int d = 0; d < pb->shape.rank; d++) {
      text_printf(t, "%s", d ? ", " : "");
      text_json_str(t, pb->shape.sym[d]);
    }
    text_printf(t, "], \"bytes\": %lld, \"offset\": %lld, \"schedule\": \"%s\", \"live\": [%d, %d]",
                (long long)pb->bytes, (long long)pb->offset, set[pb->sched], pb->first, pb->last);
    if (*pb->aliases) {
      text_printf(t, ", \"in_place\": ");
      text_json_str(t, pb->aliases);
    }
    if (pb->role == ROLE_PARAM || pb->role == ROLE_STATE)
      text_printf(t, ", \"init\": {\"kind\": \"%s\", \"scale\": %.9g}", init[pb->init.kind], pb->init.scale);
    if (pb->role == ROLE_PARAM) text_printf(t, ", \"weight_decay\": %s", pb->decay ? "true" : "false");
    if (pb->frozen) text_printf(t, ", \"frozen\": true");
    text_printf(t, "}%s\n", b + 1 < p->nbuf ? "," : "");
  }
  text_printf(t, "  ],\n");
}

static void schedule(Text *t, const char *key, const PlanOp *ops, int n, bool last) {
  text_printf(t, "  \"%s\": [\n", key);
  for (int i = 0; i < n; i++) {
    const PlanOp *o = &ops[i];
    text_printf(t, "    {\"id\": %d, \"op\": \"%s\", \"phase\": \"%s\", \"layer\": ", i, op_info(o->op)->name,
                plan_phase_name(o->phase));
    text_json_str(t, o->layer);
    text_printf(t, ", \"inputs\": ");
    buffer_ids(t, o->in, o->nin);
    text_printf(t, ", \"outputs\": ");
    buffer_ids(t, o->out, o->nout);
    text_printf(t, ", \"accumulate\": [");
    for (int k = 0; k < o->nout; k++) text_printf(t, "%s%s", k ? ", " : "", o->acc[k] ? "true" : "false");
    text_printf(t, "], \"dims\": ");
    ints(t, o->dim, o->ndim);
    if (o->nfarg) { /* float attributes: only ops that have them carry the key */
      text_printf(t, ", \"floats\": [");
      for (int k = 0; k < o->nfarg; k++) text_printf(t, "%s%.17g", k ? ", " : "", o->farg[k]);
      text_printf(t, "]");
    }
    if (o->scratch >= 0) text_printf(t, ", \"scratch\": %d", o->scratch); /* only ops with op-local scratch */
    text_printf(t, ", \"flops\": %lld}%s\n", (long long)o->flops, i + 1 < n ? "," : "");
  }
  text_printf(t, "  ]%s\n", last ? "" : ",");
}

/* Data parallelism (plans for N > 1 ranks only: one process writes none):
 * the sharding, the buckets, the bytes the collectives carry. The
 * collectives are ops of the schedule ("allreduce", "reduce_scatter",
 * "all_gather"; dims: numel, ranks, bucket); the shards are buffers
 * ("<param>.grad_shard" and the optimizer state, shapes of one shard). */
static void data_parallel(const Plan *p, Text *t) {
  if (!p->data_parallel) return;
  text_printf(t,
              "  \"data_parallel\": {\"ranks\": %d, \"zero\": %d, \"zero_auto\": %s, \"buckets\": %d, "
              "\"bucket_bytes\": %lld, \"comm_bytes\": %lld, \"comm_wire_bytes\": %lld",
              p->ranks, p->zero, p->zero_auto ? "true" : "false", p->nbuckets, (long long)p->bucket_bytes,
              (long long)p->comm_bytes, (long long)p->comm_wire_bytes);
  if (p->zero_auto)
    text_printf(t, ", \"zero_arena_bytes\": [%lld, %lld, %lld]", (long long)p->zero_arena[0],
                (long long)p->zero_arena[1], (long long)p->zero_arena[2]);
  text_printf(t, "},\n");
}

void json_plan(const Plan *p, Text *t) {
  header(p, t);
  totals(p, t);
  stages(p, t);
  levers(p, t);
  data_parallel(p, t);
  text_printf(t, "  \"loss_buffer\": %d,\n  \"eval_loss_buffer\": %d,\n", p->loss_buf, p->eval_loss_buf);
  buffers(p, t);
  schedule(t, "schedule", p->sched, p->nsched, false);
  schedule(t, "eval_schedule", p->eval, p->neval, true);
  text_printf(t, "}\n");
}
