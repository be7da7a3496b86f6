/* bench_ckpt.c: checkpointing on GPT-2 124M (T = 1024) against the schemes
 * people apply by hand, all planned and measured by the same passes (arena
 * after offsets, extra FLOPs of the recompute ops):
 *   - per-block full checkpointing (torch.utils.checkpoint around each block),
 *   - Chen et al.'s sqrt(n) segments,
 *   - selective recompute everywhere (Korthikanti et al. 2022 report about
 *     70% less activation memory for about 2.7% extra FLOPs on GPT-3 layers),
 * and memplan's fit at the same arena, and at 50%, 25% and the least
 * activation memory. Then the DP alone on a 100-stage chain with 500 units.
 * Usage: bench_ckpt MODELS_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "fit.h"
#include "load.h"

/* Actions for hand-made schemes: seg[i] is the segment of stage i (equal
 * ids are contiguous); segments with redo[seg] run forward without keeping
 * and are rerun, keeping option opt, before their backward. */
static Actions scheme(Arena *ar, const Chain *c, const int *seg, const bool *redo, KeepOption opt) {
  Action *a = ar_alloc(ar, sizeof(Action) * (size_t)(4 * c->n));
  int n = 0;
  for (int i = 0; i < c->n; i++)
    a[n++] = (Action){redo[seg[i]] ? ACT_FORWARD : ACT_KEEP, i, chain_option(&c->s[i], opt, false)};
  for (int hi = c->n - 1; hi >= 0;) {
    int lo = hi;
    while (lo > 0 && seg[lo - 1] == seg[hi]) lo--;
    if (redo[seg[hi]])
      for (int i = lo; i <= hi; i++) a[n++] = (Action){ACT_KEEP, i, chain_option(&c->s[i], opt, false)};
    for (int i = hi; i >= lo; i--) a[n++] = (Action){ACT_BACKWARD, i, chain_option(&c->s[i], opt, false)};
    hi = lo - 1;
  }
  return (Actions){a, n, chain_stage_first(ar, c), c->n, chain_keeps_cb, c, false};
}

static Plan *plan_of(Arena *ar, const Graph *g, const Actions *a, const FitOptions *o) {
  return fit_plan(ar, g, ad_build(ar, g, o->fuse, a), o);
}

static double pct(int64_t a, int64_t b) { return 100.0 * (double)a / (double)b; }

static void row(const char *name, const Plan *p, int64_t act_full) {
  int64_t act = p->arena_bytes - p->persistent_bytes;
  printf("%-34s %10.1f MiB %7.1f%% %9.2f%%\n", name, (double)act / 1048576, pct(act, act_full),
         pct(p->extra_flops, p->step_flops));
}

/* memplan's plan at the arena of p (or less). */
static void versus(const Graph *g, const FitOptions *o, const Plan *p, int64_t act_full, const char *what) {
  Arena ar = {0};
  FitResult r = fit_budget(&ar, g, p->arena_bytes, o);
  char name[80];
  snprintf(name, sizeof name, "  memplan at that arena (%s)", what);
  if (r.plan) {
    row(name, r.plan, act_full);
    printf("%34s %s\n", "", r.plan->extra_flops <= p->extra_flops ? "memplan no worse" : "MEMPLAN WORSE");
  }
  ar_free(&ar);
}

static void gpt2(const char *models) {
  char path[1024];
  snprintf(path, sizeof path, "%s/gpt2-124m.yaml", models);
  int units = getenv("UNITS") ? atoi(getenv("UNITS")) : 500;
  FitOptions o = {.fuse = true, .align = 256, .time_limit = 0.2, .backend = BACKEND_CPU, .units = units};
  Arena ar = {0};
  Graph *g = load_model(&ar, path, NULL, 0);
  Step *plain = ad_build(&ar, g, true, NULL);
  Chain *c = chain_build(&ar, g, plain, cost_model(BACKEND_CPU), NULL, false);
  Plan *full = fit_plan(&ar, g, plain, &o);
  int64_t act_full = full->arena_bytes - full->persistent_bytes;
  printf("GPT-2 124M, B=8 T=1024 fp32, %d stages; activation memory = arena - parameters and optimizer state\n", c->n);
  printf("%-34s %14s %8s %10s\n", "schedule", "activations", "of full", "extra FLOPs");
  row("keep everything", full, act_full);

  int *seg = ar_alloc(&ar, sizeof(int) * (size_t)c->n);
  bool *redo = ar_alloc(&ar, sizeof(bool) * (size_t)(c->n + 1));
  /* per-block: the two half-block stages of each transformer block form a
   * segment; embeddings and head are not checkpointed */
  int nblock = 0;
  for (int i = 0; i < c->n; i++) {
    const char *l = g->ops[plain->train[c->s[i].first].op].name;
    bool block = l[0] == 'h' && l[1] >= '0' && l[1] <= '9';
    seg[i] = block ? 1000 + atoi(l + 1) : i;
    nblock += block;
  }
  for (int i = 0; i < c->n; i++) redo[i] = false;
  bool *redo_block = ar_alloc(&ar, sizeof(bool) * 2000);
  for (int i = 0; i < 2000; i++) redo_block[i] = i >= 1000;
  Actions a = scheme(&ar, c, seg, redo_block, KEEP_ALL);
  Plan *pb = plan_of(&ar, g, &a, &o);
  row("per-block checkpointing", pb, act_full);
  versus(g, &o, pb, act_full, "per-block");

  /* Chen et al.: segments of about sqrt(n) stages, each recomputed once */
  int k = (int)lround(sqrt((double)c->n));
  for (int i = 0; i < c->n; i++) {
    seg[i] = i / k;
    redo[i / k] = true;
  }
  redo[(c->n - 1) / k] = false; /* the last segment runs straight into its backward */
  a = scheme(&ar, c, seg, redo, KEEP_ALL);
  Plan *pc = plan_of(&ar, g, &a, &o);
  char name[64];
  snprintf(name, sizeof name, "Chen sqrt(n) segments (%d stages)", k);
  row(name, pc, act_full);
  versus(g, &o, pc, act_full, "sqrt(n)");

  /* selective everywhere, nothing rerun from checkpoints */
  for (int i = 0; i < c->n; i++) {
    seg[i] = i;
    redo[i] = false;
  }
  a = scheme(&ar, c, seg, redo, KEEP_SELECTIVE);
  Plan *ps = plan_of(&ar, g, &a, &o);
  row("selective everywhere", ps, act_full);
  printf("%34s saves %.1f%% of activation memory for %.2f%% extra FLOPs (Korthikanti et al.: ~70%% for ~2.7%%)\n", "",
         100 - pct(ps->arena_bytes - ps->persistent_bytes, act_full), pct(ps->extra_flops, ps->step_flops));
  versus(g, &o, ps, act_full, "selective");

  FitResult least = fit_budget(&ar, g, 1, &o);
  int64_t floor_act = least.min_arena - full->persistent_bytes;
  double target[3] = {0.5, 0.25, 0};
  for (int i = 0; i < 3; i++) {
    int64_t act = target[i] ? (int64_t)(target[i] * (double)act_full) : floor_act;
    Arena tmp = {0};
    FitResult r = fit_budget(&tmp, g, full->persistent_bytes + act, &o);
    snprintf(name, sizeof name, target[i] ? "memplan at %.0f%% activations" : "memplan at the least memory",
             100 * target[i]);
    if (r.plan) row(name, r.plan, act_full);
    else printf("%-34s does not fit (least activation memory %.1f%% of full)\n", name, pct(floor_act, act_full));
    ar_free(&tmp);
  }
  ar_free(&ar);
}

/* The DP alone: 100 stages, 500 memory units, four keep options per stage
 * (random, each keeping less for more backward time). */
static void dp_speed(void) {
  Arena ar = {0};
  int n = 100;
  Chain c = {ar_alloc(&ar, sizeof(Stage) * (size_t)n), n, NULL, NULL, false}; /* the DP alone */
  uint64_t s = 12345;
  for (int i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int r = (int)(s >> 33);
    c.s[i] = (Stage){.x_in = i ? 10 + r % 20 : 0, .work = 5 + r % 7, .f = 1 + r % 5, .nopt = STAGE_MAX_OPTIONS};
    for (int k = 0; k < STAGE_MAX_OPTIONS; k++)
      c.s[i].opt[k] = (StageOption){.b = 2 + k + r % 6, .keep_bytes = 40 + r % 30 - 8 * k};
  }
  double t0 = mp_now();
  CkptTable *T = ckpt_solve(&ar, &c, 500, ckpt_unit(&c, 500));
  double dt = mp_now() - t0;
  int finite = 0;
  for (int m = 0; m <= 500; m++) finite += isfinite(ckpt_cost(T, m));
  printf(
      "\nDP: %d stages, 500 memory units, %d keep options + checkpointing: %.3f s (%d feasible sizes); target < 1 s\n",
      n, STAGE_MAX_OPTIONS, dt, finite);
  ar_free(&ar);
}

int main(int argc, char **argv) {
  gpt2(argc > 1 ? argv[1] : "models");
  dp_speed();
  return 0;
}
