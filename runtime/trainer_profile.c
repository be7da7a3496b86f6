/* trainer_profile.c: the trainer program's profiling (--profile): time per op (trainer_internal.h). */
#include "trainer_internal.h"

// ----------------------------------------------------------------------------
// profiling

int tr_profiling;
double *prof_time, prof_last;

void tr_tick(int op) {
  double t = now_s();
  prof_time[op] += t - prof_last;
  prof_last = t;
}

typedef struct {
  const char *kind, *phase, *layer;
  double t;
} ProfRow;

static int prof_cmp(const void *a, const void *b) {
  double x = ((const ProfRow *)a)->t, y = ((const ProfRow *)b)->t;
  return x < y ? 1 : x > y ? -1 : 0;
}

void prof_report(const TrModel *m, int64_t steps, double step_s) {
  ProfRow *rows = xmalloc(sizeof(ProfRow) * (size_t)m->nops, "profile"),
          *kinds = xmalloc(sizeof(ProfRow) * (size_t)m->nops, "profile");
  int nk = 0;
  double total = 0.0;
  for (int i = 0; i < m->nops; i++) {
    rows[i] = (ProfRow){m->ops[i].kind, m->ops[i].phase, m->ops[i].layer, prof_time[i] / (double)steps};
    total += rows[i].t;
    int k = 0;
    while (k < nk && (strcmp(kinds[k].kind, rows[i].kind) || strcmp(kinds[k].phase, rows[i].phase))) k++;
    if (k == nk) kinds[nk++] = (ProfRow){rows[i].kind, rows[i].phase, "", 0.0};
    kinds[k].t += rows[i].t;
  }
  qsort(rows, (size_t)m->nops, sizeof *rows, prof_cmp);
  qsort(kinds, (size_t)nk, sizeof *kinds, prof_cmp);
  printf("\nprofile over %lld steps: ops take %.2f ms of a %.2f ms step\n", (long long)steps, 1e3 * total,
         1e3 * step_s);
  printf("by op kind:\n  %10s %6s  %-16s %s\n", "ms/step", "share", "kind", "phase");
  for (int k = 0; k < nk; k++)
    printf("  %10.3f %5.1f%%  %-16s %s\n", 1e3 * kinds[k].t, 100.0 * kinds[k].t / step_s, kinds[k].kind,
           kinds[k].phase);
  int top = m->nops < 20 ? m->nops : 20;
  printf("top %d ops:\n  %10s %6s  %-16s %-9s %s\n", top, "ms/step", "share", "kind", "phase", "layer");
  for (int i = 0; i < top; i++)
    printf("  %10.3f %5.1f%%  %-16s %-9s %s\n", 1e3 * rows[i].t, 100.0 * rows[i].t / step_s, rows[i].kind,
           rows[i].phase, rows[i].layer);
  free(rows);
  free(kinds);
}
