/* bench_compile.c: for each bundled model, compile time (median of repeated
 * in-process compiles: load, autodiff, liveness, plan, offsets, verify), the
 * arena against its liveness lower bound, and the bytes by role at the peak.
 * Usage: bench_compile MODELS_DIR [REPEATS] */
#include <stdio.h>
#include <stdlib.h>

#include "autodiff.h"
#include "live.h"
#include "load.h"
#include "plan_build.h"
#include "verify.h"

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static Plan *compile(Arena *ar, const char *path) {
  Graph *g = load_model(ar, path, NULL, 0);
  Step *s = ad_build(ar, g, true, NULL);
  Plan *p = plan_build(ar, g, s, live_build(ar, s, s->train, s->ntrain), live_build(ar, s, s->eval, s->neval), 256);
  plan_assign(p, 0.5);
  if (verify_plan(p)) {
    fprintf(stderr, "%s: plan failed verification\n", path);
    exit(1);
  }
  return p;
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : "models";
  int reps = argc > 2 ? atoi(argv[2]) : 21;
  const char *models[] = {"mlp", "gpt2-mini", "gpt2-124m"};
  printf("%-10s %6s %10s %14s %14s %9s   peak by role (MiB): param grad opt act input\n", "model", "bufs", "compile ms",
         "arena", "lower bound", "arena/LB");
  for (int m = 0; m < 3; m++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.yaml", dir, models[m]);
    double t[101];
    if (reps > 101) reps = 101;
    Plan last = {0};
    int nbuf = 0;
    for (int r = 0; r < reps; r++) {
      Arena ar = {0};
      double t0 = mp_now();
      Plan *p = compile(&ar, path);
      t[r] = 1e3 * (mp_now() - t0);
      last = *p;
      nbuf = p->nbuf;
      ar_free(&ar);
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp);
    const double mib = 1 << 20;
    printf("%-10s %6d %10.2f %14lld %14lld %9.6f   %.1f %.1f %.1f %.1f %.2f\n", models[m], nbuf, t[reps / 2],
           (long long)last.arena_bytes, (long long)last.lower_bound_bytes,
           (double)last.arena_bytes / (double)last.lower_bound_bytes, last.peak_by_role[ROLE_PARAM] / mib,
           last.peak_by_role[ROLE_GRAD] / mib, last.peak_by_role[ROLE_OPT_STATE] / mib,
           last.peak_by_role[ROLE_ACTIVATION] / mib, last.peak_by_role[ROLE_INPUT] / mib);
  }
  printf("target: GPT-2 124M compiles in under 100 ms; arena within 1%% of the lower bound on every model\n");
  return 0;
}
