/* fuzz_model.c: libFuzzer harness for the YAML front end through planning.
 *
 * bytes -> load_model_text (user errors caught with diag_catch) -> fit_budget
 * without a budget and, for small graphs, under budgets that force
 * checkpointing -> verify_plan on every plan returned. A user error is a
 * normal outcome; a crash, a sanitizer report, a hang or a plan that fails
 * verification (abort) is a bug. Options (fused updates, precision,
 * accumulation, budget) are picked from a hash of the input, so every input
 * reproduces on its own. Built by tests/fuzz/run.sh. */
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "load.h"
#include "verify.h"

/* Checkpointing search is cubic in the stages; bigger graphs only go
 * through the plain plan so that each input stays in milliseconds. */
#define MAX_OPS_FOR_BUDGET 64

static FILE *devnull;

static uint64_t fnv(const uint8_t *d, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ d[i]) * 1099511628211ull;
  return h;
}

static void check(const Plan *p, const char *what) {
  if (!p) return;
  const char *bad = verify_plan(p);
  if (bad) {
    fprintf(stderr, "fuzz_model: %s plan fails verification: %s\n", what, bad);
    abort();
  }
}

/* Everything after the load; runs under the caller's catcher. */
static void plan_all(Arena *ar, const Graph *g, uint64_t h) {
  static const Precision prec[] = {PREC_FP32, PREC_BF16, PREC_FP16, PREC_AUTO};
  FitOptions o = {.fuse = (h & 1) != 0,
                  .align = (h & 2) ? 256 : 64,
                  .time_limit = 0.005,
                  .backend = BACKEND_CPU,
                  .units = 40,
                  .accumulation = (h & 4) ? 2 : 1,
                  .precision = prec[(h >> 3) % 4]};
  if (o.accumulation > 1) o.fuse = false;
  FitResult r = fit_budget(ar, g, 0, &o);
  check(r.plan, "plain");
  if (!r.plan || g->nops > MAX_OPS_FOR_BUDGET) return;
  load_dump(g, devnull);
  plan_dump(r.plan, devnull);
  /* a budget between nothing and the plain arena: recomputation, or a
   * clean "does not fit" (plan NULL) */
  int64_t budget = r.plan->arena_bytes / 8 * (int64_t)(1 + ((h >> 5) % 7));
  if (budget <= 0) return;
  FitResult b = fit_budget(ar, g, budget, &o);
  check(b.plan, "budget");
  if (b.plan && b.plan->arena_bytes > budget) {
    fprintf(stderr, "fuzz_model: plan of %lld bytes over the budget of %lld\n", (long long)b.plan->arena_bytes,
            (long long)budget);
    abort();
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  devnull = fopen("/dev/null", "w");
  if (!devnull) abort();
  return 0;
}

/* Static: read after the longjmp, so never in a register. */
static Arena ar;
static char *text;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > (1 << 16)) return 0;
  if (memchr(data, 0, size)) return 0; /* load_model rejects NUL bytes before parsing */
  text = malloc(size + 1);
  if (!text) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  ar = (Arena){0};
  jmp_buf jb;
  if (!setjmp(jb)) {
    diag_catch(&jb);
    Graph *g = load_model_text(&ar, "fuzz.yaml", text, size, NULL, 0);
    plan_all(&ar, g, fnv(data, size));
  }
  diag_catch(NULL);
  ar_free(&ar);
  free(text);
  return 0;
}
