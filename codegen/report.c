/* report.c: the memory report printed by `memplan compile`. */
#include <stdio.h>
#include <string.h>

#include "decode.h"
#include "emit.h"
#include "ops.h"

static const char *b(char *buf, int64_t v) { return mp_fmt_bytes(buf, 32, v); }

static void commas(char *buf, size_t n, int64_t v) {
  char tmp[32];
  snprintf(tmp, sizeof tmp, "%lld", (long long)v);
  size_t len = strlen(tmp), o = 0;
  for (size_t i = 0; i < len && o + 2 < n; i++) {
    buf[o++] = tmp[i];
    if ((len - i - 1) % 3 == 0 && i + 1 < len) buf[o++] = ',';
  }
  buf[o] = '\0';
}

static void counts(const Plan *p, FILE *out) {
  int ph[PHASE_COUNT] = {0}, ncomm = 0;
  for (int i = 0; i < p->nsched; i++) {
    ph[p->sched[i].phase]++;
    ncomm += op_is_comm(p->sched[i].op);
  }
  ph[PHASE_UPDATE] -= ncomm; /* collectives are counted apart (ranks()) */
  char pc[40];
  commas(pc, sizeof pc, p->param_count);
  char x[32];
  fprintf(out, "  parameters   %s (%s as f32)\n", pc, b(x, p->param_count * 4));
  if (p->frozen_count) { /* fine-tuning: what is only read */
    char fc[40], tc[40];
    commas(fc, sizeof fc, p->frozen_count);
    commas(tc, sizeof tc, p->param_count - p->frozen_count);
    fprintf(out, "  frozen       %s (%s): no gradient, no optimizer state; %s trainable\n", fc,
            b(x, p->frozen_count * 4), tc);
  }
  fprintf(out, "  step         %d ops: %d forward, %d backward, %d updates (%s)", p->nsched, ph[PHASE_FORWARD],
          ph[PHASE_BACKWARD], ph[PHASE_UPDATE], p->opt.kind == OPT_ADAMW ? "AdamW" : "SGD");
  if (ncomm) fprintf(out, ", %d collectives", ncomm);
  fprintf(out, "; eval %d ops\n", p->neval);
  double f = (double)p->step_flops * p->accumulation_steps;
  const char *u = f >= 1e12 ? "TFLOP" : f >= 1e9 ? "GFLOP" : "MFLOP";
  double d = f >= 1e12 ? 1e12 : f >= 1e9 ? 1e9 : 1e6;
  if (p->accumulation_steps > 1)
    fprintf(
        out,
        "  step FLOPs   %.2f %s (forward + backward), batch %lld as %d micro-batches of %d, gradients accumulated\n",
        f / d, u, (long long)p->batch, p->accumulation_steps, p->micro_batch);
  else fprintf(out, "  step FLOPs   %.2f %s (forward + backward), batch %d\n", f / d, u, p->micro_batch);
}

static void peak(const Plan *p, FILE *out) {
  char x[32];
  const PlanOp *at = &p->sched[p->peak_position];
  fprintf(out, "\nmemory %sat the training peak (op %d, %s of %s):\n", p->data_parallel ? "per rank " : "",
          p->peak_position, plan_phase_name(at->phase), at->layer);
  int64_t tot = 0;
  /* persistent roles first, running state beside the params; the roles past
   * activation, and state, only when the plan has them */
  static const Role order[ROLE_COUNT] = {ROLE_PARAM,      ROLE_STATE, ROLE_GRAD, ROLE_OPT_STATE,
                                         ROLE_ACTIVATION, ROLE_INPUT, ROLE_TEMP, ROLE_WORKSPACE};
  _Static_assert(ROLE_COUNT == 8, "a new role needs its place in the report's order");
  for (int i = 0; i < ROLE_COUNT; i++) {
    Role r = order[i];
    if (!p->peak_by_role[r] && r > ROLE_ACTIVATION) continue;
    fprintf(out, "  %-16s %12s\n", plan_role_name(r), b(x, p->peak_by_role[r]));
    tot += p->peak_by_role[r];
  }
  fprintf(out, "  %-16s %12s\n", "total", b(x, tot));
}

static void arena(const Plan *p, FILE *out) {
  char x[32], y[32];
  double gap =
      p->lower_bound_bytes ? 100.0 * (double)(p->arena_bytes - p->lower_bound_bytes) / (double)p->lower_bound_bytes : 0;
  fprintf(out, "\n  lower bound  %12s  (max live bytes over the step, %lld-byte aligned)\n", b(x, p->lower_bound_bytes),
          (long long)p->align);
  fprintf(out, "  arena        %12s  (%+.2f%% over the lower bound; %s%s)\n", b(x, p->arena_bytes), gap,
          p->assign_method ? p->assign_method : "-", p->assign_optimal ? ", optimal" : "");
  fprintf(out, "  train / eval %12s / %s\n", b(x, p->train_peak_bytes), b(y, p->eval_peak_bytes));
  if (p->gen_context) { /* per layer 2 x kv_heads x head_dim x context x 4 bytes (plan.json: each layer's) */
    int layers = 0;
    const PlanOp *a = NULL;
    for (int i = 0; i < p->neval; i++)
      if (p->eval[i].op == OP_ATTENTION) layers++, a = a ? a : &p->eval[i];
    fprintf(out,
            "  KV cache     %12s  (generation: %d layers x 2 x %lld kv_heads x %lld head_dim x %lld positions\n"
            "                              x 4 B%s, above the arena; the trainer allocates %s)\n",
            b(x, p->kv_cache_bytes), layers, (long long)a->dim[4], (long long)(a->dim[2] / a->dim[3]),
            (long long)p->gen_context,
            (int64_t)layers * decode_layer_bytes(a, p->gen_context) == p->kv_cache_bytes ? "" : " (the first layer's)",
            b(y, plan_alloc_bytes(p)));
  }
  if (p->budget_bytes)
    fprintf(out, "  budget       %12s  (headroom %s)\n", b(x, p->budget_bytes),
            b(y, p->budget_bytes - plan_alloc_bytes(p)));
  if (p->unfused_lower_bound > p->lower_bound_bytes)
    fprintf(out,
            "  fused updates: each parameter is updated as soon as its gradient is complete; running all\n"
            "                 updates after backward would need %s (%s more)\n",
            b(x, p->unfused_lower_bound), b(y, p->unfused_lower_bound - p->lower_bound_bytes));
  int n = 0;
  for (int i = 0; i < p->nbuf; i++)
    if (*p->buf[i].aliases) n++;
  if (n)
    fprintf(out, "  in place:    %d buffers host an op's output in its dying input (see plan.json \"in_place\")\n", n);
}

/* A whole-graph plan's stages: how many ops run again and how often, then
 * one line per run of consecutive ops run as often (kept: run once, what
 * they keep summed, the part --precision auto stores in bf16 said), not
 * one per op. */
static void op_runs(const Plan *p, FILE *out) {
  int rec = 0, reruns = 0, most = 1;
  for (int i = 0; i < p->nstages; i++)
    if (p->stages[i].runs > 1) {
      rec++, reruns += p->stages[i].runs - 1;
      if (p->stages[i].runs > most) most = p->stages[i].runs;
    }
  fprintf(out, "  whole graph: %d of %d forward ops recomputed, %d times in all (up to %d times one op)\n", rec,
          p->nstages, reruns, most - 1);
  char x[32], y[32], what[80];
  for (int i = 0, j; i < p->nstages; i = j) {
    const PlanStage *s = &p->stages[i];
    int64_t kept = 0, half = 0;
    for (j = i; j < p->nstages && p->stages[j].choice == s->choice && p->stages[j].runs == s->runs; j++) {
      kept += p->stages[j].kept_bytes;
      if (p->stages[j].half) half += p->stages[j].kept_bytes;
    }
    if (s->runs == 2) snprintf(what, sizeof what, "recomputed once");
    else if (s->runs > 2) snprintf(what, sizeof what, "recomputed %d times%s", s->runs - 1, j - i > 1 ? " each" : "");
    else if (half) snprintf(what, sizeof what, "kept, %s of it in bf16", mp_fmt_bytes(y, sizeof y, half));
    else snprintf(what, sizeof what, "kept");
    if (j - i == 1) fprintf(out, "  %-28s %-54s keeps %s\n", s->first_layer, what, mp_fmt_bytes(x, sizeof x, kept));
    else
      fprintf(out, "  %-12s .. %-12s %-54s keeps %s\n", s->first_layer, p->stages[j - 1].last_layer, what,
              mp_fmt_bytes(x, sizeof x, kept));
  }
}

/* Checkpointing: per stage, what is kept and what is recomputed. */
static void stages(const Plan *p, FILE *out) {
  if (!p->extra_flops) return;
  char x[32];
  fprintf(out, "\ncheckpointing: %.2f%% extra FLOPs (%.3g GFLOP recomputed per step)\n",
          100.0 * (double)p->extra_flops / (double)p->step_flops, (double)p->extra_flops / 1e9);
  if (p->whole_graph) {
    op_runs(p, out);
    return;
  }
  for (int i = 0; i < p->nstages; i++) {
    const PlanStage *s = &p->stages[i];
    const char *what = s->choice == 'R'   ? "recomputed from its input checkpoint"
                       : s->choice == 'S' ? "selective: matrix products kept, cheap ops recomputed"
                                          : "kept";
    if (s->half)
      what = s->choice == 'R'   ? "recomputed from its input checkpoint, kept run in bf16"
             : s->choice == 'S' ? "selective, matrix products kept in bf16"
                                : "kept, in bf16";
    fprintf(out, "  %-12s .. %-12s %-54s keeps %s\n", s->first_layer, s->last_layer, what,
            mp_fmt_bytes(x, sizeof x, s->kept_bytes));
  }
}

/* Half-precision storage: which saved activations were lowered. */
static void lowered(const Plan *p, FILE *out) {
  int n = 0;
  int64_t bytes = 0;
  for (int b = 0; b < p->nbuf; b++)
    if (plan_buf_half_saved(&p->buf[b])) {
      n++;
      bytes += p->buf[b].bytes;
    }
  if (!n) return;
  char x[32];
  fprintf(out, "\nprecision %s: %d saved activations stored in half precision (%s; computed in fp32)%s\n", p->precision,
          n, mp_fmt_bytes(x, sizeof x, bytes), p->loss_scaling ? "; dynamic loss scaling" : "");
  int col = 0;
  for (int b = 0; b < p->nbuf; b++) { /* every one, wrapped: "h0.fc@bf16" without its suffix */
    const char *name = p->buf[b].name, *at = strrchr(name, '@');
    if (!plan_buf_half_saved(&p->buf[b])) continue;
    int len = at ? (int)(at - name) : (int)strlen(name);
    if (col && col + 1 + len > 100) {
      fprintf(out, "\n");
      col = 0;
    }
    col += fprintf(out, col ? " %.*s" : "  %.*s", len, name);
  }
  fprintf(out, "\n");
}

/* AdamW's moments (--opt-state): the format, its bytes, and what fp32
 * would take (the moments' elements times 8 bytes). */
static void opt_state(const Plan *p, FILE *out) {
  if (!p->opt_state || !strcmp(p->opt_state, "fp32")) {
    if (p->opt_state_tried) fprintf(out, "\noptimizer state fp32 (--opt-state auto: %s)\n", p->opt_state_tried);
    return;
  }
  int64_t bytes = 0, numel = 0, kept = 0;
  for (int b = 0; b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    if (pb->role != ROLE_OPT_STATE) continue;
    bytes += pb->bytes;
    if (pb->dtype != DT_F32 || !strstr(pb->name, ".scale")) numel += shape_numel(&pb->shape);
    kept += pb->dtype == DT_F32 && !strstr(pb->name, ".scale");
  }
  char x[32], y[32];
  fprintf(out, "\noptimizer state %s: %s (fp32: %s); AdamW's math in fp32", p->opt_state, b(x, bytes), b(y, 4 * numel));
  if (!strcmp(p->opt_state, "8bit"))
    fprintf(out, ", moments as 8-bit codes with an f32 scale per 256; %d moments of small parameters fp32", (int)kept);
  fprintf(out, "\n");
  if (p->opt_state_tried) fprintf(out, "  --opt-state auto: %s\n", p->opt_state_tried);
}

/* Frozen weights' storage (--base-weights): the format, its bytes with the
 * absmax tensors, and what fp32 would take. */
static void base_weights(const Plan *p, FILE *out) {
  if (!p->base_weights || !strcmp(p->base_weights, "fp32")) return;
  int64_t bytes = 0;
  for (int b = 0; b < p->nbuf; b++)
    if (p->buf[b].role == ROLE_PARAM && p->buf[b].frozen) bytes += p->buf[b].bytes;
  char x[32], y[32];
  fprintf(out, "\nfrozen weights %s: %s (fp32: %s), dequantized to fp32 right before each use\n", p->base_weights,
          b(x, bytes), b(y, 4 * p->frozen_count));
  if (p->base_weights_tried) fprintf(out, "  --base-weights auto: %s\n", p->base_weights_tried);
}

/* Trainable weights' storage (--param-precision): their bytes and fp32's. */
static void param_precision(const Plan *p, FILE *out) {
  if (!p->param_precision || !strcmp(p->param_precision, "fp32")) return;
  int64_t bytes = 0, numel = 0;
  for (int b = 0; b < p->nbuf; b++)
    if (p->buf[b].role == ROLE_PARAM && !p->buf[b].frozen)
      bytes += p->buf[b].bytes, numel += shape_numel(&p->buf[b].shape);
  char x[32], y[32];
  fprintf(out,
          "\ntrainable weights %s: %s (fp32: %s), updated in fp32 and stored back with stochastic rounding; "
          "parameters under 4096 elements fp32\n",
          p->param_precision, b(x, bytes), b(y, 4 * numel));
  if (p->param_precision_tried) fprintf(out, "  --param-precision auto: %s\n", p->param_precision_tried);
}

/* Seconds as s, ms or us, three significant digits. */
static const char *secs(char *buf, double s) {
  if (s >= 1) snprintf(buf, 32, "%.3g s", s);
  else if (s >= 1e-3) snprintf(buf, 32, "%.3g ms", s * 1e3);
  else snprintf(buf, 32, "%.3g us", s * 1e6);
  return buf;
}

/* A lever configuration's name: "fp32, batch 8", "fp32, 2 micro-batches of 4". */
static const char *lever_name(char *cfg, size_t n, const PlanLever *l) {
  if (l->accumulation_steps > 1)
    snprintf(cfg, n, "%s, %d micro-batches of %d", l->precision, l->accumulation_steps, l->micro_batch);
  else snprintf(cfg, n, "%s, batch %d", l->precision, l->micro_batch);
  if (l->loss_chunk > 0) /* the fused loss: its chunk of rows (-1: not planned, no chunk chosen) */
    snprintf(cfg + strlen(cfg), n - strlen(cfg), ", fused loss, chunk %lld", (long long)l->loss_chunk);
  else if (l->loss_chunk) snprintf(cfg + strlen(cfg), n - strlen(cfg), ", fused loss");
  if (l->opt_state) snprintf(cfg + strlen(cfg), n - strlen(cfg), ", %s AdamW state", l->opt_state);
  return cfg;
}

/* The budget's levers: every configuration considered, planned or pruned
 * by its bounds, its arena, extra FLOPs and estimated step time, and why
 * the chosen one won. */
static void levers(const Plan *p, FILE *out) {
  if (p->nlevers < 2 && !p->budget_bytes) return;
  char x[32], y[32];
  fprintf(out, "\nlevers%s%s%s: the least estimated step time that fits, of %d configuration%s\n",
          p->budget_bytes ? " (budget " : "", p->budget_bytes ? b(x, p->budget_bytes) : "", p->budget_bytes ? ")" : "",
          p->nlevers, p->nlevers == 1 ? "" : "s");
  const PlanLever *chosen = NULL, *next = NULL;
  int nfit = 0, width = 34; /* the names' column: the longest name */
  for (int i = 0; i < p->nlevers; i++) {
    const PlanLever *l = &p->levers[i];
    char cfg[120];
    if (l->chosen) chosen = l;
    nfit += l->fits;
    int w = (int)strlen(lever_name(cfg, sizeof cfg, l));
    if (w > width) width = w;
  }
  for (int i = 0; i < p->nlevers; i++) {
    const PlanLever *l = &p->levers[i];
    if (l->fits && !l->chosen && (!next || l->est_seconds < next->est_seconds)) next = l;
    char cfg[120], res[160];
    if (l->pruned && !strcmp(l->pruned, "memory"))
      snprintf(res, sizeof res, "not planned: needs at least %s (persistent buffers and the largest op)",
               b(x, l->memory_bound));
    else if (l->pruned)
      snprintf(res, sizeof res, "not planned: at least %s keeping everything, no faster than the chosen",
               secs(x, l->time_bound));
    else if (!l->fits)
      snprintf(res, sizeof res, "keep all %s; recompute reaches %s: does not fit", b(x, l->keep_arena), b(y, l->arena));
    else if (l->extra_flops)
      snprintf(res, sizeof res, "keep all %s; fits at %s, %.2f%% extra FLOPs", b(x, l->keep_arena), b(y, l->arena),
               100.0 * (double)l->extra_flops / (double)l->step_flops);
    else if (l->dropout_masks && l->arena != l->keep_arena) /* keep_arena: the masks stored */
      snprintf(res, sizeof res, "keep all %s; fits at %s keeping everything, dropout masks %s", b(x, l->keep_arena),
               b(y, l->arena), l->dropout_masks);
    else snprintf(res, sizeof res, "fits at %s keeping everything", b(x, l->arena));
    if (l->dropout_masks && !strstr(res, "dropout masks"))
      snprintf(res + strlen(res), sizeof res - strlen(res), "; dropout masks %s", l->dropout_masks);
    if (l->fits && l->est_seconds > 0)
      snprintf(res + strlen(res), sizeof res - strlen(res), "; est. %s", secs(x, l->est_seconds));
    fprintf(out, "  %-*s %s%s\n", width, lever_name(cfg, sizeof cfg, l), res, l->chosen ? "   <- chosen" : "");
  }
  if (!chosen || chosen->est_seconds <= 0) return; /* a plan written before the estimates */
  char cfg[120];
  if (next)
    fprintf(out, "  chosen: the least estimated step time of the %d that fit; the next, %s, is %.1f%% slower\n", nfit,
            lever_name(cfg, sizeof cfg, next), 100.0 * (next->est_seconds / chosen->est_seconds - 1));
  else fprintf(out, "  chosen: the only one planned that fits\n");
  fprintf(out,
          "  (est.: every op's roofline under the cost model, once per micro-batch, recomputation and casts\n"
          "  included, plus its call overhead; a time or memory bound prunes what cannot win or fit)\n");
}

/* Dropout's masks as the plan decided: stored for backward, or regenerated
 * there from each op's random key. */
static void masks(const Plan *p, FILE *out) {
  if (!p->dropout_masks) return;
  int n = 0;
  int64_t bytes = 0;
  for (int i = 0; i < p->nsched; i++)
    if (p->sched[i].op == OP_DROPOUT && p->sched[i].phase == PHASE_BACKWARD) {
      n++;
      if (p->sched[i].in[1] >= 0) bytes += p->buf[p->sched[i].in[1]].bytes;
    }
  char x[32];
  const char *masks = n == 1 ? "mask" : "masks";
  if (!strcmp(p->dropout_masks, "stored"))
    fprintf(out, "\ndropout: %d %s stored for backward (1 bit per element, %s)\n", n, masks, b(x, bytes));
  else fprintf(out, "\ndropout: %d %s regenerated in backward from each op's random key (no bytes stored)\n", n, masks);
}

/* The fused classifier loss: its chunk and what it keeps from forward to backward. */
static void fused_loss(const Plan *p, FILE *out) {
  if (!p->loss_chunk) return;
  int64_t stats = 0, scratch = 0, rows = 0;
  for (int i = 0; i < p->nsched; i++) {
    const PlanOp *o = &p->sched[i];
    if (o->op != OP_LINEAR_CROSS_ENTROPY || o->phase != PHASE_FORWARD) continue;
    rows = o->dim[0];
    for (int k = 1; k < o->nout; k++)
      if (o->out[k] >= 0) stats += p->buf[o->out[k]].bytes;
    if (o->scratch >= 0) scratch = p->buf[o->scratch].bytes;
  }
  char x[32], y[32];
  fprintf(out,
          "\nfused loss: linear + cross_entropy in chunks of %lld of %lld rows (logits scratch %s); gradients "
          "computed in forward, kept for backward: %s\n",
          (long long)p->loss_chunk, (long long)rows, b(x, scratch), b(y, stats));
  if (!p->head_grad || strcmp(p->head_grad, "deferred")) return;
  const PlanOp *d = NULL; /* planner/headgrad.h: the recompute that writes the tied weight's gradient */
  for (int i = 0; i < p->nsched; i++)
    if (p->sched[i].op == OP_LINEAR_CROSS_ENTROPY && p->sched[i].phase == PHASE_RECOMPUTE) d = &p->sched[i];
  if (!d) return;
  fprintf(out,
          "  tied weight's gradient deferred (--head-grad): not kept from forward (%s); the chunks recomputed "
          "right before %s's backward write it (%.3g GFLOP), from the classifier's input kept (%s)\n",
          b(x, p->buf[d->out[2]].bytes), d + 1 < p->sched + p->nsched ? d[1].layer : "the embedding",
          (double)d->flops / 1e9, b(y, p->buf[d->in[0]].bytes));
  if (p->head_grad_tried) fprintf(out, "  --head-grad auto: %s\n", p->head_grad_tried);
}

/* Gradient clipping: its price against the same request planned without it
 * (driver.c), which fuses each update into backward and frees each gradient
 * there; with clipping every gradient waits for the norm over all of them. */
static void clipping(const Plan *p, FILE *out) {
  if (!(p->opt.clip_grad_norm > 0)) return;
  char x[32], y[32];
  double pct = 100.0 * (double)p->extra_flops / (double)p->step_flops;
  fprintf(out,
          "\ngradient clipping (global L2 norm at most %g): every gradient is kept until the norm over all\n"
          "  of them is known, so no update can run inside backward%s\n",
          p->opt.clip_grad_norm,
          !p->noclip_arena  ? "." /* --no-fuse, or a plan.json written without the price */
          : p->budget_bytes ? ". Its price, at this budget:"
                            : ". Its price:");
  fprintf(out, "    with clipping     arena %12s  lower bound %12s  %6.2f%% extra FLOPs", b(x, p->arena_bytes),
          b(y, p->lower_bound_bytes), pct);
  if (p->accumulation_steps > 1) fprintf(out, ", %d micro-batches", p->accumulation_steps);
  fprintf(out, "\n");
  if (!p->noclip_arena) return;
  if (!p->noclip_fits) {
    fprintf(out, "    without clipping  does not fit either (least arena %s)\n", b(x, p->noclip_arena));
    return;
  }
  double npct = 100.0 * (double)p->noclip_extra_flops / (double)p->step_flops;
  fprintf(out, "    without clipping  arena %12s  lower bound %12s  %6.2f%% extra FLOPs", b(x, p->noclip_arena),
          b(y, p->noclip_lower_bound), npct);
  if (p->noclip_accumulation > 1) fprintf(out, ", %d micro-batches", p->noclip_accumulation);
  else fprintf(out, " (updates fused)");
  fprintf(out, "\n");
  int64_t d = p->arena_bytes - p->noclip_arena, dl = p->lower_bound_bytes - p->noclip_lower_bound;
  fprintf(out, "    clipping costs    %s%s arena, %s%s lower bound, %+.2f%% FLOPs\n", d < 0 ? "-" : "+",
          b(x, d < 0 ? -d : d), dl < 0 ? "-" : "+", b(y, dl < 0 ? -dl : dl), pct - npct);
}

/* Data parallelism: the sharding (and what auto tried), the per-rank bytes
 * of the roles it divides, the buckets, the bytes communicated. */
static void ranks(const Plan *p, FILE *out) {
  if (!p->data_parallel) return;
  char x[32], y[32], z[32];
  static const char *const level[] = {"no sharding (gradients all-reduced)",
                                      "ZeRO-1 (optimizer state sharded; gradients reduce-scattered, parameters "
                                      "all-gathered)",
                                      "ZeRO-2 (optimizer state and gradients sharded)"};
  fprintf(out, "\ndata parallel: %d rank%s, %s\n", p->ranks, p->ranks > 1 ? "s" : "", level[p->zero]);
  fprintf(out, "  batch        %lld rows per rank, %lld per step over the ranks; --budget is per rank\n",
          (long long)p->batch, (long long)p->batch * p->ranks);
  if (p->zero_auto) {
    fprintf(out,
            "  --zero auto  the least sharding that fits keeping everything, else the least recomputing:\n"
            "              ");
    for (int k = 0; k < 3 && p->zero_arena[k]; k++)
      fprintf(out, "%s%d: %s%s", k ? ", " : "", k, b(x, p->zero_arena[k]), k == p->zero ? " <- chosen" : "");
    fprintf(out, " (the arena each reached)\n");
  }
  int64_t role[ROLE_COUNT] = {0}, full[ROLE_COUNT] = {0}, shard_grad = 0;
  for (int i = 0; i < p->nbuf; i++) {
    const PlanBuffer *pb = &p->buf[i];
    if (pb->sched != SCHED_BOTH) {
      if (pb->role == ROLE_GRAD && strstr(pb->name, ".grad_shard")) shard_grad += pb->bytes;
      continue;
    }
    role[pb->role] += pb->bytes;
  }
  for (int i = 0; i < p->nsched; i++) /* what the sharded buffers would hold unsharded */
    if (p->sched[i].phase == PHASE_UPDATE && !op_is_comm(p->sched[i].op))
      for (int k = 1; k < p->sched[i].nout; k++)
        if (p->sched[i].out[k] >= 0) full[ROLE_OPT_STATE] += p->sched[i].dim[0] * 4;
  fprintf(out, "  per rank     parameters %s (whole), optimizer state %s", b(x, role[ROLE_PARAM]),
          b(y, role[ROLE_OPT_STATE]));
  if (p->zero >= 1) fprintf(out, " (1/%d shards of %s)", p->ranks, b(z, full[ROLE_OPT_STATE]));
  if (p->zero == 2) fprintf(out, ", gradient shards %s", b(x, shard_grad));
  fprintf(out, "\n");
  int nb = p->nbuckets;
  fprintf(out,
          "  buckets      %d (a bucket closes at %s of gradients; its collectives run as soon as its last\n"
          "               gradient is complete, overlapping the rest of backward):\n",
          nb, b(x, p->bucket_bytes));
  for (int k = 0; k < nb; k++) {
    int n = 0, first = -1, last = -1;
    int64_t bytes = 0;
    for (int i = 0; i < p->nsched; i++) {
      const PlanOp *o = &p->sched[i];
      if (!op_is_comm(o->op) || o->op == OP_ALL_GATHER || o->dim[2] != k) continue;
      if (first < 0) first = i;
      last = i;
      n++;
      bytes += p->buf[o->in[0]].bytes;
    }
    if (k < 8 || k == nb - 1)
      fprintf(out, "    %3d  ops %d..%d  %3d gradients  %10s  %s .. %s\n", k, first, last, n, b(x, bytes),
              p->sched[first].layer, p->sched[last].layer);
    else if (k == 8) fprintf(out, "    ...\n");
  }
  int nk[OP_COUNT] = {0};
  for (int i = 0; i < p->nsched; i++) nk[p->sched[i].op] += op_is_comm(p->sched[i].op);
  fprintf(out, "  communicated per step: ");
  for (int k = 0, first = 1; k < OP_COUNT; k++)
    if (nk[k]) {
      fprintf(out, "%s%d %s", first ? "" : " + ", nk[k], op_info((OpKind)k)->name);
      first = 0;
    }
  fprintf(out, " over %s of tensors; each rank sends %s (ring algorithms)\n", b(x, p->comm_bytes),
          b(y, p->comm_wire_bytes));
}

void report_plan(const Plan *p, FILE *out) {
  fprintf(out, "memplan: %s (model %s)\n  dims        ", p->source, p->model);
  for (int i = 0; i < p->ndims; i++) { /* micro-batching: dims hold the micro-batch; the model's batch first */
    const Dim *d = &p->dims[i];
    if (p->accumulation_steps > 1 && p->batch_dim && !strcmp(d->name, p->batch_dim))
      fprintf(out, " %s=%lld%s (micro-batch %lld)", d->name, (long long)p->batch, d->overridden ? "*" : "",
              (long long)d->value);
    else fprintf(out, " %s=%lld%s", d->name, (long long)d->value, d->overridden ? "*" : "");
  }
  fprintf(out, "\n");
  counts(p, out);
  peak(p, out);
  arena(p, out);
  ranks(p, out);
  levers(p, out);
  opt_state(p, out);
  base_weights(p, out);
  param_precision(p, out);
  masks(p, out);
  fused_loss(p, out);
  lowered(p, out);
  stages(p, out);
  clipping(p, out);
}
