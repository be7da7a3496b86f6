/* report.c: the memory report printed by `memplan compile`. */
#include <stdio.h>
#include <string.h>

#include "emit.h"

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
  int ph[PHASE_COUNT] = {0};
  for (int i = 0; i < p->nsched; i++) ph[p->sched[i].phase]++;
  char pc[40];
  commas(pc, sizeof pc, p->param_count);
  char x[32];
  fprintf(out, "  parameters   %s (%s as f32)\n", pc, b(x, p->param_count * 4));
  fprintf(out, "  step         %d ops: %d forward, %d backward, %d updates (%s); eval %d ops\n", p->nsched,
          ph[PHASE_FORWARD], ph[PHASE_BACKWARD], ph[PHASE_UPDATE], p->opt.kind == OPT_ADAMW ? "AdamW" : "SGD",
          p->neval);
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
  fprintf(out, "\nmemory at the training peak (op %d, %s of %s):\n", p->peak_position, plan_phase_name(at->phase),
          at->layer);
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

void report_plan(const Plan *p, FILE *out) {
  fprintf(out, "memplan: %s (model %s)\n  dims        ", p->source, p->model);
  for (int i = 0; i < p->ndims; i++)
    fprintf(out, " %s=%lld%s", p->dims[i].name, (long long)p->dims[i].value, p->dims[i].overridden ? "*" : "");
  fprintf(out, "\n");
  counts(p, out);
  peak(p, out);
  arena(p, out);
  levers(p, out);
  masks(p, out);
  lowered(p, out);
  stages(p, out);
  clipping(p, out);
}
