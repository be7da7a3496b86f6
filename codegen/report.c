/* report.c: the memory report printed by `memplan compile`. */
#include <stdio.h>
#include <string.h>

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
  if (p->budget_bytes)
    fprintf(out, "  budget       %12s  (headroom %s)\n", b(x, p->budget_bytes), b(y, p->budget_bytes - p->arena_bytes));
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

/* Checkpointing: per stage, what is kept and what is recomputed. */
static void stages(const Plan *p, FILE *out) {
  if (!p->extra_flops) return;
  char x[32];
  fprintf(out, "\ncheckpointing: %.2f%% extra FLOPs (%.3g GFLOP recomputed per step)\n",
          100.0 * (double)p->extra_flops / (double)p->step_flops, (double)p->extra_flops / 1e9);
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
    if (p->buf[b].dtype == DT_BF16 || p->buf[b].dtype == DT_F16) {
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
    if (p->buf[b].dtype != DT_BF16 && p->buf[b].dtype != DT_F16) continue;
    int len = at ? (int)(at - name) : (int)strlen(name);
    if (col && col + 1 + len > 100) {
      fprintf(out, "\n");
      col = 0;
    }
    col += fprintf(out, col ? " %.*s" : "  %.*s", len, name);
  }
  fprintf(out, "\n");
}

/* The budget's levers: every configuration tried, in order, and its price. */
static void levers(const Plan *p, FILE *out) {
  if (p->nlevers < 2 && !p->budget_bytes) return;
  char x[32], y[32];
  fprintf(out, "\nlevers, in the order tried%s%s%s:\n", p->budget_bytes ? " (budget " : "",
          p->budget_bytes ? b(x, p->budget_bytes) : "", p->budget_bytes ? ")" : "");
  for (int i = 0; i < p->nlevers; i++) {
    const PlanLever *l = &p->levers[i];
    char cfg[80], res[120];
    if (l->accumulation_steps > 1)
      snprintf(cfg, sizeof cfg, "%s, %d micro-batches of %d", l->precision, l->accumulation_steps, l->micro_batch);
    else snprintf(cfg, sizeof cfg, "%s, batch %d", l->precision, l->micro_batch);
    if (!l->fits)
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
    fprintf(out, "  %-34s %s%s\n", cfg, res, l->chosen ? "   <- chosen" : "");
  }
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
  for (int i = 0; i < p->ndims; i++)
    fprintf(out, " %s=%lld%s", p->dims[i].name, (long long)p->dims[i].value, p->dims[i].overridden ? "*" : "");
  fprintf(out, "\n");
  counts(p, out);
  peak(p, out);
  arena(p, out);
  ranks(p, out);
  levers(p, out);
  masks(p, out);
  lowered(p, out);
  stages(p, out);
}
