/* test_ranks.c: plans for N ranks (planner/comm.c, ctest ranks_unit): the
 * collectives and shards of each ZeRO level on gpt2-mini, the buckets of
 * GPT-2 124M, its per-rank arena at N = 1, 2, 4, 8 for each level (a table
 * checked against its recorded values and against what sharding must
 * save), --zero auto, the verifier catching broken collectives, plan.json
 * round trip, the report and the emitted calls. The trainers run under MPI
 * in tests/mpi (label mpi). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "driver.h"
#include "emit.h"
#include "ops.h"
#include "plan_read.h"
#include "verify.h"
#include "check.h"

static const char *models;

static PlanOutcome plan(Arena *ar, const char *model, int ranks, int zero, int64_t budget, int64_t micro) {
  PlanRequest rq = {.model = ar_printf(ar, "%s/%s.yaml", models, model),
                    .budget = budget,
                    .micro_batch = micro,
                    .fit = {.fuse = true,
                            .align = 256,
                            .time_limit = 0.5,
                            .units = 500,
                            .accumulation = 1,
                            .ranks = ranks > 1 ? ranks : 0,
                            .zero = ranks > 1 ? zero : 0}};
  PlanOutcome r = plan_model(ar, &rq);
  if (r.status != PLAN_OK)
    fprintf(stderr, "%s --ranks %d --zero %d: status %d %s\n", model, ranks, zero, r.status,
            r.message ? r.message : "");
  return r;
}

static int count(const Plan *p, OpKind k) {
  int n = 0;
  for (int i = 0; i < p->nsched; i++) n += p->sched[i].op == k;
  return n;
}

/* gpt2-mini at 2 ranks: every gradient reduced once, by its level's
 * collective; shards of ceil(n/2) elements; the bytes communicated. */
static void test_levels(void) {
  Arena ar = {0};
  const Plan *one = plan(&ar, "gpt2-mini", 1, 0, 0, 0).plan;
  CHECK(one && one->ranks == 1 && one->nbuckets == 0 && one->comm_bytes == 0);
  if (!one) return;
  int nupd = count(one, OP_ADAMW);
  int64_t elems = 0, shard_bytes = 0;
  for (int i = 0; i < one->nsched; i++)
    if (one->sched[i].op == OP_ADAMW) {
      elems += one->sched[i].dim[0];
      shard_bytes += comm_shard(one->sched[i].dim[0], 2) * 4;
    }
  CHECK(count(one, OP_ALLREDUCE) + count(one, OP_REDUCE_SCATTER) + count(one, OP_ALL_GATHER) == 0);
  for (int z = 0; z <= 2; z++) {
    const Plan *p = plan(&ar, "gpt2-mini", 2, z, 0, 0).plan;
    CHECK(p != NULL);
    if (!p) continue;
    CHECK(p->ranks == 2 && p->zero == z && !p->zero_auto && p->nbuckets == 1); /* 7 MiB of gradients: one bucket */
    CHECK(count(p, OP_ADAMW) == nupd);
    CHECK(count(p, OP_ALLREDUCE) == (z == 0 ? nupd : 0));
    CHECK(count(p, OP_REDUCE_SCATTER) == (z == 0 ? 0 : nupd));
    CHECK(count(p, OP_ALL_GATHER) == (z == 0 ? 0 : nupd));
    /* bytes carried: every gradient once (allreduce), or every gradient and parameter once */
    CHECK(p->comm_bytes == (z == 0 ? 4 : 8) * elems);
    int64_t opt = 0, shards = 0;
    int nshards = 0;
    for (int b = 0; b < p->nbuf; b++) {
      if (p->buf[b].role == ROLE_OPT_STATE) opt += p->buf[b].bytes;
      if (strstr(p->buf[b].name, ".grad_shard")) shards += p->buf[b].bytes, nshards++;
    }
    CHECK(opt == (z == 0 ? 8 * elems : 2 * shard_bytes)); /* AdamW's m and v */
    CHECK(nshards == (z == 2 ? nupd : 0) && shards == (z == 2 ? shard_bytes : 0));
    for (int i = 0; i < p->nsched; i++) {
      const PlanOp *o = &p->sched[i];
      if (op_is_comm(o->op)) CHECK(o->ndim == 3 && o->dim[1] == 2 && o->dim[2] == 0 && o->flops == 0);
      if (o->op == OP_ADAMW) CHECK(o->ndim == (z ? 2 : 1));
    }
    CHECK(verify_plan(p) == NULL);
  }
  ar_free(&ar);
}

/* GPT-2 124M, 2 ranks, no sharding: 25 MiB buckets in the order backward
 * completes gradients, each but the last reaching the cap; every bucket
 * but the last issued while backward still has ops to run (overlap). */
static void test_buckets(void) {
  Arena ar = {0};
  const Plan *p = plan(&ar, "gpt2-124m", 2, 0, 0, 0).plan;
  CHECK(p != NULL);
  if (!p) return;
  CHECK(p->nbuckets == 13 && p->bucket_bytes == COMM_BUCKET_BYTES);
  int last_bwd = -1;
  for (int i = 0; i < p->nsched; i++)
    if (p->sched[i].phase == PHASE_BACKWARD) last_bwd = i;
  int prev = -1, buckets = 0;
  for (int b = 0; b < p->nbuckets; b++) {
    int64_t bytes = 0;
    int first = -1, lastop = -1;
    for (int i = 0; i < p->nsched; i++)
      if (p->sched[i].op == OP_ALLREDUCE && p->sched[i].dim[2] == b) {
        bytes += p->buf[p->sched[i].in[0]].bytes;
        if (first < 0) first = i;
        lastop = i;
      }
    CHECK(first > prev); /* in issue order, contiguous */
    for (int i = first; i <= lastop; i++) CHECK(p->sched[i].op == OP_ALLREDUCE && p->sched[i].dim[2] == b);
    prev = lastop;
    if (b < p->nbuckets - 1) CHECK(bytes >= COMM_BUCKET_BYTES && lastop < last_bwd);
    buckets++;
  }
  CHECK(buckets == 13);
  /* 2 (N-1)/N of every gradient: each rank sends the whole model's gradients once at N = 2 */
  CHECK(p->comm_wire_bytes == p->comm_bytes);
  /* the verifier: a gradient written after its bucket's collective (the last backward op, after bucket 0) */
  Plan *m = (Plan *)p;
  int ar0 = -1;
  for (int i = 0; i < m->nsched && ar0 < 0; i++)
    if (m->sched[i].op == OP_ALLREDUCE) ar0 = i;
  CHECK(ar0 >= 0 && ar0 < last_bwd && verify_plan(m) == NULL);
  if (ar0 >= 0) {
    int saved = m->sched[last_bwd].out[0], g = m->sched[ar0].in[0], glast = m->buf[g].last;
    m->sched[last_bwd].out[0] = g;
    m->buf[g].last = last_bwd + 1; /* live there: the collectives' check, not liveness, catches it */
    const char *e = verify_plan(m);
    if (!e || !strstr(e, "after its collective")) fprintf(stderr, "verifier: %s\n", e ? e : "(passed)");
    CHECK(e && strstr(e, "after its collective"));
    m->sched[last_bwd].out[0] = saved, m->buf[g].last = glast;
    CHECK(verify_plan(m) == NULL);
  }
  ar_free(&ar);
}

/* The measured table (README): GPT-2 124M's per-rank arena, and what
 * sharding must save: ZeRO >= 1 holds AdamW's m and v as 1/N shards, so
 * the persistent bytes drop by 2 (align(4n) - align(4 ceil(n/N))) over the
 * parameters; no sharding keeps the one-rank persistent bytes. */
static void test_gpt2_table(void) {
  static const int64_t arena[4][3] = {
      {8243886336, 8243886336, 8243886336}, /* N = 1: today's plan (no --zero) */
      {8243886336, 7745982720, 7745982720},
      {8243886336, 7497030912, 7497030912},
      {8243886336, 7372577024, 7372577024},
  };
  static const int ranks[4] = {1, 2, 4, 8};
  Arena ar = {0};
  const Plan *one = plan(&ar, "gpt2-124m", 1, 0, 0, 0).plan;
  CHECK(one != NULL);
  if (!one) return;
  for (int r = 0; r < 4; r++)
    for (int z = 0; z <= (ranks[r] > 1 ? 2 : 0); z++) {
      const Plan *p = ranks[r] > 1 ? plan(&ar, "gpt2-124m", ranks[r], z, 0, 0).plan : one;
      CHECK(p != NULL);
      if (!p) continue;
      int64_t saved = 0;
      for (int i = 0; z >= 1 && i < one->nsched; i++)
        if (one->sched[i].op == OP_ADAMW)
          saved += 2 * (mp_align_up(4 * one->sched[i].dim[0], 256) -
                        mp_align_up(4 * comm_shard(one->sched[i].dim[0], ranks[r]), 256));
      CHECK(p->persistent_bytes == one->persistent_bytes - saved);
      if (p->arena_bytes != arena[r][z])
        fprintf(stderr, "gpt2-124m --ranks %d --zero %d: arena %lld, recorded %lld\n", ranks[r], z,
                (long long)p->arena_bytes, (long long)arena[r][z]);
      CHECK(p->arena_bytes == arena[r][z]);
      CHECK(p->arena_bytes <= one->arena_bytes - saved); /* what sharding saves, the arena saves */
    }
  ar_free(&ar);
}

/* ZeRO-2 with micro-batches: only the gradient shards persist across the
 * passes (reduce-scattered in every pass), so it needs less than ZeRO-1,
 * whose full gradients accumulate. */
static void test_zero2_micro(void) {
  Arena ar = {0};
  const Plan *z1 = plan(&ar, "gpt2-mini", 2, 1, 0, 2).plan, *z2 = plan(&ar, "gpt2-mini", 2, 2, 0, 2).plan;
  CHECK(z1 && z2);
  if (!z1 || !z2) return;
  CHECK(z1->accumulation_steps == 2 && z2->accumulation_steps == 2); /* B = 4 in micro-batches of 2 */
  CHECK(z2->arena_bytes < z1->arena_bytes);
  for (int i = 0; i < z2->nsched; i++) /* in backward, accumulating: runs every pass */
    if (z2->sched[i].op == OP_REDUCE_SCATTER) CHECK(z2->sched[i].phase == PHASE_BACKWARD && z2->sched[i].acc[0]);
  for (int i = 0; i < z1->nsched; i++) /* once, after the last pass */
    if (z1->sched[i].op == OP_REDUCE_SCATTER) CHECK(z1->sched[i].phase == PHASE_UPDATE);
  ar_free(&ar);
}

/* --zero auto: 7.5G for GPT-2 124M on 4 ranks: no sharding fits only by
 * recomputing, ZeRO-1 keeps everything: ZeRO-1. No budget: no sharding. */
static void test_auto(void) {
  Arena ar = {0};
  const Plan *p = plan(&ar, "gpt2-124m", 4, -1, (int64_t)15 << 29, 0).plan;
  CHECK(p && p->zero_auto && p->zero == 1 && p->extra_flops == 0);
  if (p) CHECK(p->zero_arena[0] > 0 && p->zero_arena[1] == p->arena_bytes && p->zero_arena[2] == 0);
  p = plan(&ar, "gpt2-mini", 2, -1, 0, 0).plan;
  CHECK(p && p->zero_auto && p->zero == 0 && p->zero_arena[1] == 0);
  ar_free(&ar);
}

/* The verifier catches broken collectives. */
static void test_verifier(void) {
  Arena ar = {0};
  Plan *p = (Plan *)plan(&ar, "gpt2-mini", 2, 2, 0, 0).plan;
  CHECK(p != NULL);
  if (!p) return;
  int rs = -1, upd = -1, ag = -1, bwd = -1;
  for (int i = 0; i < p->nsched; i++) {
    if (p->sched[i].op == OP_REDUCE_SCATTER && rs < 0) rs = i;
    if (p->sched[i].op == OP_ADAMW && upd < 0) upd = i;
    if (p->sched[i].op == OP_ALL_GATHER && ag < 0) ag = i;
    if (p->sched[i].phase == PHASE_BACKWARD) bwd = i;
  }
  CHECK(rs >= 0 && upd > rs && ag > upd && bwd > 0);
  CHECK(verify_plan(p) == NULL);
  PlanOp save;
#define MUTANT(desc, at, stmt)                                \
  do {                                                        \
    save = p->sched[at];                                      \
    stmt;                                                     \
    const char *e = verify_plan(p);                           \
    if (!e) fprintf(stderr, "mutant not caught: %s\n", desc); \
    CHECK(e != NULL);                                         \
    p->sched[at] = save;                                      \
  } while (0)
  MUTANT("a reduce_scatter turned allreduce", rs, p->sched[rs].op = OP_ALLREDUCE);
  MUTANT("a collective for 3 ranks", rs, p->sched[rs].dim[1] = 3);
  MUTANT("an update of the whole parameter", upd, p->sched[upd].ndim = 1);
  MUTANT("an update reading an unreduced gradient", upd, p->sched[upd].in[0] = p->sched[rs].in[0]);
  MUTANT("no all_gather", ag, p->sched[ag].out[0] = p->sched[ag].in[0] = p->sched[upd].in[0]);
  int64_t b = p->buf[p->sched[upd].out[1]].bytes;
  p->buf[p->sched[upd].out[1]].bytes *= 2;
  CHECK(verify_plan(p) != NULL); /* optimizer state not one shard */
  p->buf[p->sched[upd].out[1]].bytes = b;
  p->data_parallel = false;
  CHECK(verify_plan(p) != NULL); /* collectives in a one-process plan */
  p->data_parallel = true;
  CHECK(verify_plan(p) == NULL);
  ar_free(&ar);
}

/* plan.json keeps the data-parallel fields; the report and the trainers. */
static void test_outputs(void) {
  Arena ar = {0};
  const Plan *p = plan(&ar, "gpt2-mini", 2, 1, 0, 0).plan;
  CHECK(p != NULL);
  if (!p) return;
  Text j = {0}, c = {0}, cu = {0};
  json_plan(p, &j);
  Plan *q = plan_read(&ar, "plan.json", j.s, j.n);
  CHECK(q->ranks == 2 && q->zero == 1 && q->nbuckets == p->nbuckets && q->comm_bytes == p->comm_bytes &&
        q->comm_wire_bytes == p->comm_wire_bytes && q->bucket_bytes == p->bucket_bytes && verify_plan(q) == NULL);
  Text j1 = {0};
  const Plan *one = plan(&ar, "gpt2-mini", 1, 0, 0, 0).plan;
  json_plan(one, &j1);
  CHECK(!strstr(j1.s, "data_parallel") && plan_read(&ar, "plan.json", j1.s, j1.n)->ranks == 1);
  char *rep = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&rep, &len);
  report_plan(p, f);
  fclose(f);
  static const char *const want[] = {
      "memory per rank at the training peak",
      "data parallel: 2 ranks, ZeRO-1 (optimizer state sharded; gradients reduce-scattered, parameters all-gathered)",
      "batch        4 rows per rank, 8 per step over the ranks; --budget is per rank",
      "per rank     parameters 1.67 MiB (whole), optimizer state 1.67 MiB (1/2 shards of 3.34 MiB)",
      "buckets      1 (a bucket closes at 25.00 MiB of gradients",
      "communicated per step: 28 reduce_scatter + 28 all_gather over 3.34 MiB of tensors; each rank sends 1.67 MiB"};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    if (!strstr(rep, want[k])) fprintf(stderr, "report lacks: %s\n%s", want[k], rep);
    CHECK(strstr(rep, want[k]) != NULL);
  }
  free(rep);
  CHECK(emit_trainer(p, &emit_backend_c, &c) == 0 && emit_trainer(p, &emit_backend_cuda, &cu) == 0);
  CHECK(strstr(c.s, "tr_reduce_scatter(") && strstr(c.s, "tr_all_gather(") && strstr(c.s, "tr_shard_len(") &&
        strstr(c.s, ".ranks = 2, .zero = 1"));
  CHECK(strstr(cu.s, "tr_cuda_reduce_scatter(") && strstr(cu.s, "tr_cuda_all_gather("));
  Text mk = {0};
  emit_cmakelists(p, &mk);
  CHECK(strstr(mk.s, "add_executable(trainer_mpi") && strstr(mk.s, "MPI::MPI_C"));
  text_free(&mk);
  emit_cmakelists(one, &mk);
  CHECK(!strstr(mk.s, "trainer_mpi"));
  text_free(&mk);
  text_free(&j), text_free(&j1), text_free(&c), text_free(&cu);
  ar_free(&ar);
}

/* fp16's loss scaling decides skipped steps per rank: refused. */
static void test_refusals(void) {
  Arena ar = {0};
  PlanRequest rq = {.model = ar_printf(&ar, "%s/gpt2-mini.yaml", models),
                    .fit = {.fuse = true,
                            .align = 256,
                            .time_limit = 0.2,
                            .units = 500,
                            .accumulation = 1,
                            .precision = PREC_FP16,
                            .ranks = 2,
                            .zero = 0}};
  PlanOutcome r = plan_model(&ar, &rq);
  CHECK(r.status == PLAN_BAD_REQUEST && r.message && strstr(r.message, "--ranks with --precision fp16"));
  ar_free(&ar);
}

int main(int argc, char **argv) {
  models = argc > 1 ? argv[1] : "models";
  test_levels();
  test_buckets();
  test_gpt2_table();
  test_zero2_micro();
  test_auto();
  test_verifier();
  test_outputs();
  test_refusals();
  return check_summary("test_ranks");
}
