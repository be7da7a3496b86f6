/* test_ckpt.c: the checkpointing planner.
 * - DP optimality: on random heterogeneous chains (up to 9 stages, one to
 *   four keep options), the table equals an exhaustive search of every schedule of the
 *   same model, and replaying the schedule it emits costs what it claims.
 * - Uniform chains: the DP's forward count equals Revolve's closed form.
 * - Whole-graph recomputation (remat.c): the small U-Net-shaped graph at a
 *   budget that recomputes its skips more than once verifies, and the
 *   verifier's value check catches a recompute or a backward read pointed
 *   at another live buffer of the same size.
 * - The budget pass on bundled models: arena <= budget, extra FLOPs never
 *   rise as the budget grows (fp32), every plan verifies; auto precision
 *   lowers nothing when everything fits.
 * Usage: test_ckpt MODELS_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "ops.h"
#include "fit.h"
#include "load.h"
#include "verify.h"
#include "check.h"

static uint64_t rng = 88172645463325252ull;
static int rnd(int n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (int)(rng % (uint64_t)n);
}

static Chain random_chain(Arena *ar, int n) {
  Chain c = {ar_alloc(ar, sizeof(Stage) * (size_t)n), n, NULL, NULL, false}; /* replayed only: keeps is never asked */
  for (int i = 0; i < n; i++) {
    Stage *s = &c.s[i];
    s->x_in = i ? 1 + rnd(3) : 0;
    s->work = rnd(3);
    s->f = 1 + rnd(5);
    s->nopt = 1 + rnd(STAGE_MAX_OPTIONS);
    s->opt[0] = (StageOption){.b = 2 + rnd(6), .keep_bytes = 3 + rnd(9)};
    for (int k = 1; k < s->nopt; k++) /* each keeps less and costs more backward */
      s->opt[k] =
          (StageOption){.b = s->opt[k - 1].b + 1 + rnd(3), .keep_bytes = 1 + rnd((int)s->opt[k - 1].keep_bytes)};
  }
  for (int i = 0; i + 1 < n; i++) { /* keep includes the stage output */
    for (int k = 0; k < c.s[i].nopt; k++)
      if (c.s[i].opt[k].keep_bytes < c.s[i + 1].x_in) c.s[i].opt[k].keep_bytes = c.s[i + 1].x_in;
    if (rnd(2)) /* backward reads its output alone (a conv + relu): option 0 keeps just that */
      c.s[i].out_only = true, c.s[i].opt[0].keep_bytes = c.s[i + 1].x_in;
  }
  return c;
}

/* Exhaustive search over every schedule of the model, without the table;
 * held: stage t's output is held (outside m) from the forward that made
 * it, and t is out_only: its backward needs no forward. */
static double brute(const Chain *c, int s, int t, int m, bool held) {
  double best = INFINITY;
  const Stage *st = &c->s[s];
  if (held && s == t) return st->work <= m ? st->opt[0].b : INFINITY;
  for (int k = 0; k < st->nopt; k++) {
    int64_t keep = st->opt[k].keep_bytes;
    if (s == t) {
      if (keep + st->work <= m) best = fmin(best, st->f + st->opt[k].b);
    } else if (keep <= m && keep + st->work <= m) {
      best = fmin(best, st->f + st->opt[k].b + brute(c, s + 1, t, m - (int)keep, held));
    }
  }
  double fsum = 0;
  int64_t segwork = st->work;
  for (int j = s + 1; j <= t; j++) {
    fsum += c->s[j - 1].f;
    if (c->s[j - 1].work > segwork) segwork = c->s[j - 1].work;
    if (c->s[j].x_in + segwork > m) continue;
    double right = brute(c, j, t, m - (int)c->s[j].x_in, held);
    best = fmin(best, fsum + right + brute(c, s, j - 1, m, false));
    if (c->s[j - 1].out_only) /* x_j held on, past stage j's backward, into stage j - 1's */
      best = fmin(best, fsum + right + brute(c, s, j - 1, m - (int)c->s[j].x_in, true));
  }
  return best;
}

/* Replays an action list: every stage's backward exactly once, in reverse,
 * each preceded by a kept forward, or for an out_only stage by a forward
 * keeping nothing, its output held (option 0); returns the summed time. */
static double replay(const Chain *c, const Actions *a, bool *ok) {
  double t = 0;
  int next_bwd = c->n - 1, *kept = calloc((size_t)c->n, sizeof(int));
  *ok = true;
  for (int i = 0; i < a->n; i++) {
    const Action *x = &a->a[i];
    const Stage *st = &c->s[x->stage];
    if (x->kind == ACT_FORWARD) {
      t += st->f;
      kept[x->stage] = -1;
    }
    if (x->kind == ACT_KEEP) {
      t += st->f;
      kept[x->stage] = 1 + x->option;
    }
    if (x->kind == ACT_BACKWARD) {
      *ok &= x->stage == next_bwd-- &&
             (kept[x->stage] == 1 + x->option || (kept[x->stage] == -1 && st->out_only && x->option == 0));
      t += st->opt[x->option].b;
    }
  }
  *ok &= next_bwd == -1;
  free(kept);
  return t;
}

static void test_dp_optimal(void) {
  for (int trial = 0; trial < 60; trial++) {
    Arena ar = {0};
    int n = 2 + trial % 8, M = 40;
    Chain c = random_chain(&ar, n);
    CkptTable *T = ckpt_solve(&ar, &c, M, 1);
    for (int m = 0; m <= M; m++) {
      double dp = ckpt_cost(T, m), bf = brute(&c, 0, n - 1, m, false);
      CHECK((isinf(dp) && isinf(bf)) || fabs(dp - bf) < 1e-3);
      if (!isfinite(dp)) continue;
      Actions a = ckpt_actions(&ar, T, m);
      bool ok;
      CHECK(fabs(replay(&c, &a, &ok) - dp) < 1e-3 && ok);
      if (m > 0 && isfinite(ckpt_cost(T, m - 1))) CHECK(dp <= ckpt_cost(T, m - 1)); /* more memory never costs more */
    }
    ar_free(&ar);
  }
}

/* Binomial coefficient, exact for the small arguments used here. */
static int64_t binom(int n, int k) {
  if (k < 0 || k > n) return 0;
  int64_t r = 1;
  for (int i = 1; i <= k; i++) r = r * (n - k + i) / i;
  return r;
}

/* Griewank and Walther (2000), "Algorithm 799: Revolve", Prop. 1: reversing
 * l uniform steps with c checkpoints (the initial state's included) takes at
 * least t(l, c) = r l - binom(c + r, r - 1) forward steps, r the least with
 * binom(c + r, r) >= l. */
static int64_t revolve_forwards(int l, int c) {
  int r = 0;
  while (binom(c + r, r) < l) r++;
  return r * (int64_t)l - binom(c + r, r - 1);
}

/* Revolve's model as a chain: every state 1 unit, forward 1, backward 0, and
 * a tape (the keep option) of K > c units, so only the stage about to be
 * reversed is ever taped, as in Revolve where taping is part of the reverse
 * step. Free memory m = K + c: the DP does not count the chain's input (Revolve
 * does, in c) but does count the state a reverse step starts from (Revolve's
 * current state is free). Each stage is taped once (l forwards), the rest are
 * Revolve's advances. */
static void test_revolve(void) {
  enum { K = 64, MAXC = 10, MAXL = 60 };
  int mismatches = 0;
  for (int l = 1; l <= MAXL; l++) {
    Arena ar = {0};
    Chain ch = {ar_alloc(&ar, sizeof(Stage) * (size_t)l), l, NULL, NULL, false};
    for (int i = 0; i < l; i++) ch.s[i] = (Stage){.x_in = 1, .f = 1, .nopt = 1, .opt = {{.keep_bytes = K}}};
    CkptTable *T = ckpt_solve(&ar, &ch, K + MAXC, 1);
    for (int c = 1; c <= MAXC; c++) {
      double dp = ckpt_cost(T, K + c);
      int64_t want = revolve_forwards(l, c);
      if (!(isfinite(dp) && (int64_t)dp - l == want)) {
        if (mismatches++ < 5)
          fprintf(stderr, "revolve l=%d c=%d: DP %.0f advances, closed form %lld\n", l, c, dp - l, (long long)want);
      }
    }
    /* Fewer than one checkpoint beyond the tape: nothing can be reversed
     * past the first stage. */
    CHECK(l == 1 ? isfinite(ckpt_cost(T, K)) : isinf(ckpt_cost(T, K)));
    ar_free(&ar);
  }
  CHECK(mismatches == 0);
  CHECK(revolve_forwards(3, 1) == 3 && revolve_forwards(10, 10) == 9); /* by hand */
}

/* The budget pass on a bundled model: walk budgets from the least memory to
 * everything kept. */
static void test_budgets(const char *models, const char *name, bool can_save, Precision prec) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.yaml", models, name);
  FitOptions o = {
      .fuse = true, .align = 256, .time_limit = 0.1, .backend = BACKEND_CPU, .units = 200, .precision = prec};
  Arena ar = {0};
  Graph *g = load_model(&ar, path, NULL, 0);
  FitResult full = fit_budget(&ar, g, 0, &o);
  FitResult least = fit_budget(&ar, g, 1, &o); /* nothing fits 1 byte: reports the least arena */
  CHECK(!least.plan && least.min_arena <= full.plan->arena_bytes);
  CHECK(!can_save || least.min_arena < 3 * full.plan->arena_bytes / 4);
  int64_t prev_extra = INT64_MAX;
  for (int i = 0; i <= 10; i++) {
    int64_t budget = least.min_arena + (full.plan->arena_bytes - least.min_arena) * i / 10;
    Arena tmp = {0};
    FitResult r = fit_budget(&tmp, g, budget, &o);
    CHECK(r.plan != NULL);
    if (r.plan) {
      CHECK(r.plan->arena_bytes <= budget);
      r.plan->budget_bytes = budget;
      CHECK(verify_plan(r.plan) == NULL);
      /* auto trades casts against recomputation, so only its time must fall */
      if (prec != PREC_AUTO) CHECK(r.plan->extra_flops <= prev_extra);
      int lowered = 0;
      for (int b = 0; b < r.plan->nbuf; b++) lowered += r.plan->buf[b].dtype == DT_BF16;
      if (prec == PREC_AUTO && i == 10) CHECK(lowered == 0); /* everything fits in fp32 */
      printf("%-10s %-4s budget %12lld arena %12lld extra %6.2f%% lowered %d\n", name, prec_name(prec),
             (long long)budget, (long long)r.plan->arena_bytes,
             100.0 * (double)r.plan->extra_flops / (double)r.plan->step_flops, lowered);
      prev_extra = r.plan->extra_flops;
    }
    ar_free(&tmp);
  }
  ar_free(&ar);
}

/* A ViT under a budget that recomputes its patch stages: the replayed
 * reshape of the patches is planned in place again (patches@2 in t3@2's
 * buffer), and the plan verifies (ckpt_exact_vit_tiny trains it). */
static void test_vit_recompute(const char *models) {
  char path[1024];
  snprintf(path, sizeof path, "%s/../tests/reference/vit-tiny.yaml", models);
  FitOptions o = {.fuse = true, .align = 256, .time_limit = 0.1, .backend = BACKEND_CPU, .precision = PREC_FP32};
  Arena ar = {0};
  Graph *g = load_model(&ar, path, NULL, 0);
  FitResult r = fit_budget(&ar, g, 195 * 1024, &o);
  CHECK(r.plan != NULL);
  if (r.plan) {
    r.plan->budget_bytes = 195 * 1024;
    CHECK(verify_plan(r.plan) == NULL);
    CHECK(r.plan->extra_flops > 0);
    int host = -1, rec = 0;
    for (int b = 0; b < r.plan->nbuf; b++)
      if (!strcmp(r.plan->buf[b].name, "t3@2")) host = b;
    for (int i = 0; i < r.plan->nsched; i++)
      rec += r.plan->sched[i].phase == PHASE_RECOMPUTE && r.plan->sched[i].op == OP_RESHAPE;
    CHECK(host >= 0 && rec == 1);
    if (host >= 0) CHECK(strstr(r.plan->buf[host].aliases, "patches@2") != NULL);
  }
  ar_free(&ar);
}

/* Another activation buffer of b's size live at position k, -1 when none. */
static int same_size_live(const Plan *p, int b, int k) {
  for (int x = 0; x < p->nbuf; x++) {
    const PlanBuffer *c = &p->buf[x];
    bool out = false;
    for (int o = 0; o < p->sched[k].nout; o++) out |= p->sched[k].out[o] == x;
    if (x != b && !out && c->role == ROLE_ACTIVATION && c->sched == SCHED_TRAIN && c->bytes == p->buf[b].bytes &&
        c->first <= k && k < c->last)
      return x;
  }
  return -1;
}

/* Op k's input j pointed at another live buffer of its size: the verifier
 * must say the value is not the forward's. */
static void misread(Plan *p, int k, int j) {
  int other = same_size_live(p, p->sched[k].in[j], k), was = p->sched[k].in[j];
  CHECK(other >= 0);
  if (other < 0) return;
  p->sched[k].in[j] = other;
  const char *e = verify_plan(p);
  CHECK(e && strstr(e, "does not hold the value"));
  if (e) printf("caught: %s\n", e);
  p->sched[k].in[j] = was;
}

/* The U-Net-shaped graph (tests/remat) at B=2, C=8, H=16 and 390K: its
 * encoder's skips e1..e3 are recomputed more than once (for their decoder
 * block's backward and again for their own), e1 read by d1c's backward and
 * by e2c's, far apart; the plan verifies. Planted once: check_values
 * returning NULL at once; both misreads passed ("CHECK failed" twice). */
static void test_remat_values(const char *models) {
  char path[1024];
  snprintf(path, sizeof path, "%s/../tests/remat/unet-shaped.yaml", models);
  FitOptions o = {.fuse = true, .align = 256, .time_limit = 0.1, .backend = BACKEND_CPU, .precision = PREC_FP32};
  DimOverride ov[] = {{"B", 2}, {"C", 8}, {"H", 16}};
  Arena ar = {0};
  Graph *g = load_model(&ar, path, ov, 3);
  FitResult r = fit_budget(&ar, g, 390 * 1024, &o);
  CHECK(r.plan != NULL);
  if (!r.plan) return;
  Plan *p = r.plan;
  CHECK(verify_plan(p) == NULL);
  int rec_e1 = 0, k_rec = -1, k_bwd = -1;
  for (int k = 0; k < p->nsched; k++) {
    const PlanOp *x = &p->sched[k];
    if (x->phase == PHASE_RECOMPUTE && !strcmp(x->layer, "e1")) rec_e1++, k_rec = k_rec < 0 ? k : k_rec;
    if (x->phase == PHASE_BACKWARD && !strcmp(x->layer, "e2c")) k_bwd = k; /* reads e1 (its input) */
  }
  printf("unet-shaped 390K: e1 recomputed %d times, extra %.2f%%\n", rec_e1,
         100.0 * (double)p->extra_flops / (double)p->step_flops);
  CHECK(rec_e1 >= 2 && k_rec >= 0 && k_bwd >= 0);
  if (k_rec >= 0) misread(p, k_rec, 0); /* e1's recompute reads another tensor than e1c's output */
  for (int j = 0; k_bwd >= 0 && j < p->sched[k_bwd].nin; j++) /* e2c's backward reads another tensor than e1 */
    if (op_info(OP_CONV2D)->bin[j] == REF_IN(0)) misread(p, k_bwd, j);
  CHECK(verify_plan(p) == NULL);
  ar_free(&ar);
}

int main(int argc, char **argv) {
  const char *models = argc > 1 ? argv[1] : "models";
  test_dp_optimal();
  test_revolve();
  test_budgets(models, "gpt2-mini", true, PREC_FP32);
  test_budgets(models, "gpt2-mini", true, PREC_AUTO);
  test_budgets(models, "mlp", false, PREC_FP32); /* parameters and optimizer state dominate */
  test_vit_recompute(models);
  test_remat_values(models);
  return check_summary("test_ckpt");
}
