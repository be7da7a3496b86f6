/* test_ckpt.c: the checkpointing planner.
 * - DP optimality: on random heterogeneous chains (up to 9 stages, two keep
 *   options), the table equals an exhaustive search of every schedule of the
 *   same model, and replaying the schedule it emits costs what it claims.
 * - The budget pass on bundled models: arena <= budget, extra FLOPs never
 *   rise as the budget grows, every plan verifies.
 * Usage: test_ckpt MODELS_DIR */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "fit.h"
#include "load.h"
#include "verify.h"

static int failures, checks;
#define CHECK(c)                                                                                   \
  do {                                                                                             \
    checks++;                                                                                      \
    if (!(c)) failures++, fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);    \
  } while (0)

static uint64_t rng = 88172645463325252ull;
static int rnd(int n) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (int)(rng % (uint64_t)n);
}

static Chain random_chain(Arena *ar, int n) {
  Chain c = {ar_alloc(ar, sizeof(Stage) * (size_t)n), n, NULL, NULL}; /* replayed only: keeps is never asked */
  for (int i = 0; i < n; i++) {
    Stage *s = &c.s[i];
    s->x_in = i ? 1 + rnd(3) : 0;
    s->work = rnd(3);
    s->f = 1 + rnd(5);
    s->nopt = 1 + rnd(2);
    s->opt[0] = (StageOption){2 + rnd(6), 3 + rnd(6), 0, 0};
    s->opt[1] = (StageOption){s->opt[0].b + 1 + rnd(3), 1 + rnd((int)s->opt[0].keep_bytes - 1), 0, 0};
  }
  for (int i = 0; i + 1 < n; i++) /* keep includes the stage output */
    for (int k = 0; k < c.s[i].nopt; k++)
      if (c.s[i].opt[k].keep_bytes < c.s[i + 1].x_in) c.s[i].opt[k].keep_bytes = c.s[i + 1].x_in;
  return c;
}

/* Exhaustive search over every schedule of the model, without the table. */
static double brute(const Chain *c, int s, int t, int m) {
  double best = INFINITY;
  const Stage *st = &c->s[s];
  for (int k = 0; k < st->nopt; k++) {
    int64_t keep = st->opt[k].keep_bytes;
    if (s == t) {
      if (keep + st->work <= m) best = fmin(best, st->f + st->opt[k].b);
    } else if (keep <= m && keep + st->work <= m) {
      best = fmin(best, st->f + st->opt[k].b + brute(c, s + 1, t, m - (int)keep));
    }
  }
  double fsum = 0;
  int64_t segwork = st->work;
  for (int j = s + 1; j <= t; j++) {
    fsum += c->s[j - 1].f;
    if (c->s[j - 1].work > segwork) segwork = c->s[j - 1].work;
    if (c->s[j].x_in + segwork > m) continue;
    best = fmin(best, fsum + brute(c, j, t, m - (int)c->s[j].x_in) + brute(c, s, j - 1, m));
  }
  return best;
}

/* Replays an action list: every stage's backward exactly once, in reverse,
 * each preceded by a kept forward; returns the summed time. */
static double replay(const Chain *c, const Actions *a, bool *ok) {
  double t = 0;
  int next_bwd = c->n - 1, *kept = calloc((size_t)c->n, sizeof(int));
  *ok = true;
  for (int i = 0; i < a->n; i++) {
    const Action *x = &a->a[i];
    const Stage *st = &c->s[x->stage];
    if (x->kind == ACT_FORWARD) t += st->f;
    if (x->kind == ACT_KEEP) t += st->f, kept[x->stage] = 1 + x->option;
    if (x->kind == ACT_BACKWARD) {
      *ok &= x->stage == next_bwd-- && kept[x->stage] == 1 + x->option;
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
      double dp = ckpt_cost(T, m), bf = brute(&c, 0, n - 1, m);
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

/* The budget pass on a bundled model: walk budgets from the least memory to
 * everything kept. */
static void test_budgets(const char *models, const char *name, bool can_save) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.yaml", models, name);
  FitOptions o = {.fuse = true, .align = 256, .time_limit = 0.1, .backend = BACKEND_CPU, .units = 200};
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
      CHECK(r.plan->extra_flops <= prev_extra);
      printf("%-10s budget %12lld arena %12lld extra %6.2f%%\n", name, (long long)budget,
             (long long)r.plan->arena_bytes, 100.0 * (double)r.plan->extra_flops / (double)r.plan->step_flops);
      prev_extra = r.plan->extra_flops;
    }
    ar_free(&tmp);
  }
  ar_free(&ar);
}

int main(int argc, char **argv) {
  const char *models = argc > 1 ? argv[1] : "models";
  test_dp_optimal();
  test_budgets(models, "gpt2-mini", true);
  test_budgets(models, "mlp", false); /* parameters and optimizer state dominate */
  printf("%d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
