/* fit_describe.c: what a checkpointed plan does per stage, for the report. */
#include "fit_describe.h"

/* Per-stage decisions of a schedule, for the report. */
void fit_describe(Arena *ar, Plan *p, const Graph *g, const Step *plain, const Chain *c, const Actions *a) {
  p->nstages = c->n;
  p->stages = ar_alloc(ar, sizeof(PlanStage) * (size_t)c->n);
  for (int i = 0; i < c->n; i++) {
    PlanStage *ps = &p->stages[i];
    ps->first_layer = g->ops[plain->train[c->s[i].first].op].name;
    ps->last_layer = g->ops[plain->train[c->s[i].last - 1].op].name;
  }
  for (int x = 0; x < a->n; x++) {
    PlanStage *ps = &p->stages[a->a[x].stage];
    if (a->a[x].kind == ACT_BACKWARD) continue;
    ps->runs++;
    if (a->a[x].kind == ACT_KEEP) {
      const StageOption *so = &c->s[a->a[x].stage].opt[a->a[x].option];
      ps->kept_bytes = so->keep_bytes;
      ps->choice = so->keep == KEEP_SELECTIVE ? 'S' : 'K';
      ps->half = so->half && c->choose_half;
    }
  }
  for (int i = 0; i < c->n; i++) {
    PlanStage *ps = &p->stages[i];
    if (ps->runs > 1) ps->choice = 'R';
    else if (!ps->choice) /* run once, its output held from a checkpoint's forward (ckpt.h's H) */
      ps->choice = 'K', ps->kept_bytes = c->s[i].opt[0].keep_bytes;
  }
}

/* A DAG schedule's stages (one per forward op) for the report: R where the
 * op runs again, K where it runs once (what it makes that backward reads
 * is kept; half: those of its outputs stored in bf16, NULL none). */
void fit_describe_dag(Arena *ar, Plan *p, const Graph *g, const Step *plain, const Actions *a, const bool *half) {
  p->nstages = a->nstages;
  p->whole_graph = true;
  p->stages = ar_alloc(ar, sizeof(PlanStage) * (size_t)a->nstages);
  for (int x = 0; x < a->n; x++)
    if (a->a[x].kind != ACT_BACKWARD) p->stages[a->a[x].stage].runs++;
  for (int i = 0; i < a->nstages; i++) {
    PlanStage *ps = &p->stages[i];
    const Op *o = &g->ops[plain->train[i].op];
    ps->first_layer = ps->last_layer = o->name;
    ps->choice = ps->runs > 1 ? 'R' : 'K';
    for (int k = 0; k < o->nout && ps->runs == 1; k++) {
      int t = o->out[k];
      if (!plain->saved[t]) continue;
      bool h = half && half[t];
      ps->half |= h;
      ps->kept_bytes += shape_numel(&g->t[t].shape) * (h ? 2 : dtype_size(g->t[t].dtype));
    }
  }
}
