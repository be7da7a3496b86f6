/* test_planner.c: unit tests of each planner pass, and the verifier attacked
 * with mutated plans. Usage: test_planner MODELS_DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autodiff.h"
#include "build.h"
#include "chain.h"
#include "expr.h"
#include "fit.h"
#include "levers.h"
#include "live.h"
#include "load.h"
#include "ops.h"
#include "plan_build.h"
#include "verify.h"
#include "check.h"

static const char *models;

/* Runs load on text and returns the graph, or NULL with the error in diag_last(). */
static Graph *try_load(Arena *ar, const char *text, const DimOverride *ov, int nov) {
  static jmp_buf jb;
  if (setjmp(jb)) {
    diag_catch(NULL);
    return NULL;
  }
  diag_catch(&jb);
  Graph *g = load_model_text(ar, "t.yaml", text, strlen(text), ov, nov);
  diag_catch(NULL);
  return g;
}

static int64_t try_expr(const char *s, const Dim *d, int n, bool *ok) {
  static jmp_buf jb;
  static const Loc at = {"e", 1, 1};
  if (setjmp(jb)) {
    diag_catch(NULL);
    *ok = false;
    return 0;
  }
  diag_catch(&jb);
  int64_t v = expr_eval(s, at, d, n);
  diag_catch(NULL);
  *ok = true;
  return v;
}

static void test_expr(void) {
  Dim d[2] = {{"C", 768, {0}, false}, {"NH", 12, {0}, false}};
  bool ok;
  CHECK(try_expr("4*C", d, 2, &ok) == 3072 && ok);
  CHECK(try_expr("(C + 1) / 2 - NH % 5", d, 2, &ok) == 382 && ok);
  CHECK(try_expr("-3 + 2*3", d, 2, &ok) == 3 && ok);
  try_expr("C / (NH - 12)", d, 2, &ok);
  CHECK(!ok && strstr(diag_last(), "division by zero"));
  try_expr("9223372036854775807 + 1", d, 2, &ok);
  CHECK(!ok && strstr(diag_last(), "integer overflow"));
  try_expr("4*Cx", d, 2, &ok);
  CHECK(!ok && strstr(diag_last(), "e:1:3: error: unknown dim 'Cx'; did you mean 'C'?"));
  try_expr("4*(C", d, 2, &ok);
  CHECK(!ok && strstr(diag_last(), "expected ')'"));
}

static const char *block_model =
    "model: t\n"
    "dims: {B: 2, C: 8, D: 2*C}\n"
    "inputs:\n"
    "  x: {shape: [B, C]}\n"
    "  y: {shape: [B, C]}\n"
    "layers:\n"
    "  - {name: inp, op: linear, input: x, out: C}\n"
    "  - repeat: 2\n"
    "    name: h\n"
    "    layers:\n"
    "      - {name: fc, op: linear, out: D}\n"
    "      - {name: act, op: gelu}\n"
    "      - {name: proj, op: linear, out: C}\n"
    "      - {name: res, op: add, inputs: [proj, $in]}\n"
    "  - {name: out, op: linear, out: C, weight: inp.weight, bias: false}\n"
    "  - {name: loss, op: mse, inputs: [out, y]}\n";

static int find_tensor(const Graph *g, const char *name) {
  for (int i = 0; i < g->nt; i++)
    if (!strcmp(g->t[i].name, name)) return i;
  return -1;
}

static int find_op(const Graph *g, const char *name) {
  for (int i = 0; i < g->nops; i++)
    if (!strcmp(g->ops[i].name, name)) return i;
  return -1;
}

static void test_load(void) {
  Arena ar = {0};
  Graph *g = try_load(&ar, block_model, NULL, 0);
  CHECK(g != NULL);
  if (!g) {
    ar_free(&ar);
    return;
  }
  CHECK(g->ndims == 3 && g->dims[2].value == 16);
  int fc = find_op(g, "h1.fc"), res0 = find_op(g, "h0.res"), res1 = find_op(g, "h1.res");
  CHECK(fc >= 0 && res0 >= 0 && res1 >= 0);
  /* default input chains to the previous layer; block 1 starts from block 0's output */
  CHECK(g->ops[fc].in[0] == g->ops[res0].out[0]);
  /* $in of block 1 is block 0's last layer, of block 0 the layer before the block */
  CHECK(g->ops[res1].in[1] == g->ops[res0].out[0]);
  CHECK(g->ops[res0].in[1] == g->ops[find_op(g, "inp")].out[0]);
  /* a shared weight is one tensor, used by both layers */
  int out = find_op(g, "out"), pw = find_tensor(g, "inp.weight");
  CHECK(pw >= 0 && g->ops[out].in[1] == pw && g->ops[out].in[2] == -1);
  CHECK(find_tensor(g, "out.weight") < 0);
  CHECK(g->t[find_tensor(g, "h0.fc")].shape.d[1] == 16);
  CHECK(!strcmp(g->t[find_tensor(g, "h0.fc")].shape.sym[1], "D"));
  /* --set replaces a dim before later dims are computed */
  DimOverride ov = {"C", 4};
  Graph *g2 = try_load(&ar, block_model, &ov, 1);
  CHECK(g2 && g2->dims[2].value == 8 && g2->dims[1].overridden);
  ar_free(&ar);
}

/* attention's kv_heads and causal reach its kernel dims (B T C NH KVH
 * causal): the reference test reads them from the plan on both sides, so a
 * wrong dim there would go unnoticed. */
static const char *attention_model =
    "model: t\n"
    "dims: {B: 2, T: 8, C: 32, NH: 4}\n"
    "inputs:\n"
    "  x: {shape: [B, T, C]}\n"
    "  y: {shape: [B, T, C]}\n"
    "layers:\n"
    "  - {name: gpt, op: causal_self_attention, input: x, heads: NH}\n"
    "  - {name: gqa, op: causal_self_attention, heads: NH, kv_heads: 2, bias: false}\n"
    "  - {name: qkv, op: linear, out: C + 2*C/NH}\n"
    "  - {name: mqa, op: attention, heads: NH, kv_heads: 1, causal: false}\n"
    "  - {name: loss, op: mse, inputs: [mqa, y]}\n";

static void check_attention_dims(const Graph *g, const char *name, const int64_t *want) {
  int i = find_op(g, name);
  CHECK(i >= 0 && g->ops[i].kind == OP_ATTENTION);
  if (i < 0) return;
  int64_t d[MAX_KDIM];
  int n = 0;
  op_info(OP_ATTENTION)->dims(g, &g->ops[i], d, &n);
  CHECK(n == 6);
  for (int k = 0; k < 6; k++) CHECK(d[k] == want[k]);
}

static void test_attention(void) {
  Arena ar = {0};
  Graph *g = try_load(&ar, attention_model, NULL, 0);
  CHECK(g != NULL);
  if (!g) {
    ar_free(&ar);
    return;
  }
  check_attention_dims(g, "gpt.core", (const int64_t[]){2, 8, 32, 4, 4, 1});
  check_attention_dims(g, "gqa.core", (const int64_t[]){2, 8, 32, 4, 2, 1});
  check_attention_dims(g, "mqa", (const int64_t[]){2, 8, 32, 4, 1, 0});
  /* the qkv projections: (heads + 2 kv_heads) * hd rows, hd = 8 */
  CHECK(g->t[find_tensor(g, "gpt.qkv.weight")].shape.d[0] == 96);
  CHECK(g->t[find_tensor(g, "gqa.qkv.weight")].shape.d[0] == 64);
  CHECK(find_tensor(g, "gqa.qkv.bias") < 0);
  const Tensor *lse = &g->t[find_tensor(g, "mqa.lse")];
  CHECK(lse->shape.rank == 3 && lse->shape.d[1] == 4 && lse->shape.d[2] == 8);
  /* not causal: the full square of scores, twice the causal FLOPs */
  const OpInfo *oi = op_info(OP_ATTENTION);
  const Op *gqa = &g->ops[find_op(g, "gqa.core")], *mqa = &g->ops[find_op(g, "mqa")];
  CHECK(oi->flops(g, mqa, false) == 2 * oi->flops(g, gqa, false));
  CHECK(oi->flops(g, mqa, true) == 2 * oi->flops(g, gqa, true));
  ar_free(&ar);
}

/* Each gradient's first write assigns, later ones accumulate; an update
 * follows the last write of its gradient (fused, or after all of backward);
 * eval saves nothing. */
static void test_autodiff(bool fuse) {
  Arena ar = {0};
  Graph *g = try_load(&ar, block_model, NULL, 0);
  if (!g) {
    ar_free(&ar);
    return;
  }
  Step *s = ad_build(&ar, g, fuse, NULL);
  bool seen_update = false;
  int *writes = calloc((size_t)s->nt, sizeof(int));
  bool *updated = calloc((size_t)s->nt, sizeof(bool));
  int nupd = 0;
  for (int i = 0; i < s->ntrain; i++) {
    const Instr *x = &s->train[i];
    CHECK(fuse || !seen_update || x->phase == PHASE_UPDATE); /* unfused: updates come last */
    if (x->phase == PHASE_UPDATE) {
      seen_update = true;
      nupd++;
      int gt = x->in[0];
      CHECK(writes[gt] > 0 && !updated[gt]);
      updated[gt] = true;
      continue;
    }
    for (int k = 0; k < x->nout && x->phase == PHASE_BACKWARD; k++) {
      int t = x->out[k];
      if (t < 0) continue;
      CHECK(x->acc[k] == (writes[t] > 0));
      CHECK(!updated[t]); /* no write after the update */
      writes[t]++;
    }
  }
  int nparams = 0;
  for (int t = 0; t < g->nt; t++) nparams += g->t[t].kind == TK_PARAM;
  CHECK(nupd == nparams);
  /* the shared weight gets two gradient contributions */
  CHECK(writes[s->grad[find_tensor(g, "inp.weight")]] == 2);
  for (int i = 0; i < s->neval; i++) CHECK(s->eval[i].phase == PHASE_FORWARD);
  /* the saved set is exactly what backward reads: gelu saves its input */
  CHECK(s->saved[find_tensor(g, "h0.fc")]);
  CHECK(s->saved[find_tensor(g, "h0.act")]);   /* the next linear's input */
  CHECK(s->saved[find_tensor(g, "h0.res")]);   /* h1.fc's input */
  CHECK(!s->saved[find_tensor(g, "h0.proj")]); /* only an add reads it */
  free(writes), free(updated);
  ar_free(&ar);
}

static void test_live(void) {
  Arena ar = {0};
  Graph *g = try_load(&ar, block_model, NULL, 0);
  if (!g) {
    ar_free(&ar);
    return;
  }
  Step *s = ad_build(&ar, g, true, NULL);
  Live *lt = live_build(&ar, s, s->train, s->ntrain), *le = live_build(&ar, s, s->eval, s->neval);
  int fc = find_tensor(g, "h0.fc"), act = find_tensor(g, "h0.act");
  int proj = find_tensor(g, "h0.proj"), res = find_tensor(g, "h0.res");
  /* training: gelu's input is saved for backward, so it cannot run in place */
  CHECK(lt->buf_of[fc] != lt->buf_of[act]);
  /* eval: gelu and the residual add run in place */
  CHECK(le->buf_of[fc] == le->buf_of[act]);
  CHECK(le->buf_of[proj] == le->buf_of[res]);
  /* parameters are live over the whole step */
  int w = lt->buf_of[find_tensor(g, "h0.fc.weight")];
  CHECK(lt->b[w].first == 0 && lt->b[w].last == s->ntrain && lt->b[w].persistent);
  /* a fused update ends its gradient's life */
  int gw = lt->buf_of[s->grad[find_tensor(g, "h0.fc.weight")]];
  CHECK(lt->b[gw].last < s->ntrain);
  ar_free(&ar);
}

static Plan *plan_of(Arena *ar, const char *path, const DimOverride *ov, int nov) {
  Graph *g = load_model(ar, path, ov, nov);
  Step *s = ad_build(ar, g, true, NULL);
  Plan *p = plan_build(ar, g, s, live_build(ar, s, s->train, s->ntrain), live_build(ar, s, s->eval, s->neval), 256);
  plan_assign(p, 0.2);
  return p;
}

/* Two training buffers live at the same time. */
static bool coexisting(const Plan *p, int *a, int *b) {
  for (int i = 0; i < p->nbuf; i++)
    for (int j = i + 1; j < p->nbuf; j++) {
      const PlanBuffer *x = &p->buf[i], *y = &p->buf[j];
      if (x->sched != SCHED_TRAIN || y->sched != SCHED_TRAIN) continue;
      if (x->first < y->last && y->first < x->last && x->bytes >= 256 && y->bytes >= 256) {
        *a = i;
        *b = j;
        return true;
      }
    }
  return false;
}

/* Two training buffers sharing bytes at different times. */
static bool sharing(const Plan *p, int *a, int *b) {
  for (int i = 0; i < p->nbuf; i++)
    for (int j = 0; j < p->nbuf; j++) {
      const PlanBuffer *x = &p->buf[i], *y = &p->buf[j];
      if (i == j || x->sched != SCHED_TRAIN || y->sched != SCHED_TRAIN || x->last > y->first) continue;
      if (x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes) {
        *a = i;
        *b = j;
        return true;
      }
    }
  return false;
}

static void test_verifier_mutants(void) {
  Arena ar = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/gpt2-mini.yaml", models);
  Plan *p = plan_of(&ar, path, NULL, 0);
  CHECK(verify_plan(p) == NULL);
  size_t size = sizeof(PlanBuffer) * (size_t)p->nbuf;
  PlanBuffer *orig = malloc(size);
  memcpy(orig, p->buf, size);
  int a = 0, b = 0, mutants = 0;
#define MUTANT(desc, stmt)                                    \
  do {                                                        \
    memcpy(p->buf, orig, size);                               \
    stmt;                                                     \
    mutants++;                                                \
    const char *e = verify_plan(p);                           \
    if (!e) fprintf(stderr, "mutant not caught: %s\n", desc); \
    CHECK(e != NULL);                                         \
  } while (0)
  CHECK(coexisting(p, &a, &b));
  MUTANT("shift an offset onto a coexisting neighbor", p->buf[b].offset = p->buf[a].offset);
  MUTANT("overlap by one aligned unit", p->buf[b].offset = p->buf[a].offset + mp_align_up(p->buf[a].bytes, 256) - 256);
  CHECK(sharing(p, &a, &b));
  MUTANT("extend a live range into the next tenant of its bytes", p->buf[a].last = p->buf[b].first + 1);
  MUTANT("misalign an offset", p->buf[a].offset += 4);
  MUTANT("exceed the arena", p->buf[a].offset = p->arena_bytes - p->buf[a].bytes + 256);
  MUTANT("negative offset", p->buf[a].offset = -256);
  MUTANT("shrink a live range before its last use", p->buf[a].last = p->buf[a].first);
  MUTANT("a persistent buffer over another", p->buf[1].offset = p->buf[0].offset);
  MUTANT("a size that does not match the shape", p->buf[a].bytes += 256);
  MUTANT("a parameter only in one schedule", p->buf[0].sched = SCHED_TRAIN);
  memcpy(p->buf, orig, size);
  int saved = p->sched[3].in[0];
  p->sched[3].in[0] = p->nbuf + 5;
  CHECK(verify_plan(p) != NULL);
  p->sched[3].in[0] = saved;
  p->budget_bytes = p->arena_bytes - 1;
  CHECK(verify_plan(p) != NULL);
  p->budget_bytes = 0;
  CHECK(verify_plan(p) == NULL);
  CHECK(mutants == 10);
  free(orig);
  ar_free(&ar);
}

/* Op-local scratch (ROLE_TEMP): conv2d's im2col matrix, one temp buffer per
 * forward and backward op that needs one (none for a 1x1 kernel at stride
 * 1), of the bytes the op table asks for, live at that position only;
 * verified, and caught by the verifier when misplaced. */
static const char *conv_model =
    "model: t\n"
    "dims: {B: 2, C: 3, F: 4}\n"
    "inputs:\n"
    "  x: {shape: [B, C, 9, 7]}\n"
    "  y: {shape: [B, F, 5, 4]}\n"
    "layers:\n"
    "  - {name: c1, op: conv2d, input: x, out: F, kernel: 3, stride: 2, padding: 1}\n"
    "  - {name: a1, op: relu}\n"
    "  - {name: c2, op: conv2d, out: F, kernel: 1}\n"
    "  - {name: loss, op: mse, inputs: [c2, y]}\n";

static void check_scratch(const Plan *p, const PlanOp *ops, int n, SchedSet set, int *ntemp) {
  for (int i = 0; i < n; i++) {
    const PlanOp *o = &ops[i];
    bool c1 = o->op == OP_CONV2D && !strcmp(o->layer, "c1");
    if (!c1) { /* c2 is 1x1 at stride 1: no scratch, like every other op */
      CHECK(o->scratch == -1);
      continue;
    }
    CHECK(o->scratch >= 0);
    if (o->scratch < 0) continue;
    const PlanBuffer *b = &p->buf[o->scratch];
    /* one sample's im2col: C k k x Ho Wo floats = 3*3*3 x 5*4 */
    CHECK(b->role == ROLE_TEMP && b->sched == set && b->bytes == 4 * 27 * 20 && b->dtype == DT_F32);
    CHECK(b->first == i && b->last == i + 1);
    (*ntemp)++;
  }
}

static void test_scratch(void) {
  Arena ar = {0};
  Graph *g = try_load(&ar, conv_model, NULL, 0);
  CHECK(g != NULL);
  if (!g) {
    ar_free(&ar);
    return;
  }
  Step *s = ad_build(&ar, g, true, NULL);
  Plan *p = plan_build(&ar, g, s, live_build(&ar, s, s->train, s->ntrain), live_build(&ar, s, s->eval, s->neval), 256);
  plan_assign(p, 0.2);
  CHECK(verify_plan(p) == NULL);
  int train = 0, eval = 0, temps = 0;
  check_scratch(p, p->sched, p->nsched, SCHED_TRAIN, &train);
  check_scratch(p, p->eval, p->neval, SCHED_EVAL, &eval);
  for (int b = 0; b < p->nbuf; b++) temps += p->buf[b].role == ROLE_TEMP;
  CHECK(train == 2 && eval == 1 && temps == 3); /* c1's forward and backward; eval's forward */
  /* the lower bound counts it: the live bytes at c1's forward include it */
  int at = -1;
  for (int i = 0; i < p->nsched && at < 0; i++)
    if (p->sched[i].scratch >= 0) at = i;
  int64_t live = 0;
  for (int b = 0; at >= 0 && b < p->nbuf; b++) {
    const PlanBuffer *pb = &p->buf[b];
    if (pb->sched == SCHED_BOTH || (pb->sched == SCHED_TRAIN && pb->first <= at && at < pb->last))
      live += mp_align_up(pb->bytes, 256);
  }
  CHECK(at >= 0 && live <= p->lower_bound_bytes && live > mp_align_up(4 * 27 * 20, 256));
  /* the verifier: scratch overlapping the op's input, outliving the op,
   * another role, an activation as scratch */
  PlanOp *o = &p->sched[at];
  PlanBuffer *sb = &p->buf[o->scratch], keep = *sb;
  sb->offset = p->buf[o->in[0]].offset;
  CHECK(verify_plan(p) != NULL);
  *sb = keep;
  sb->last++;
  CHECK(verify_plan(p) != NULL);
  *sb = keep;
  sb->role = ROLE_ACTIVATION;
  CHECK(verify_plan(p) != NULL);
  *sb = keep;
  int ks = o->scratch;
  o->scratch = o->out[0];
  CHECK(verify_plan(p) != NULL);
  o->scratch = ks;
  CHECK(verify_plan(p) == NULL);
  ar_free(&ar);
}

/* The shape ops: shapes and symbols (negative axes counted from the end,
 * reshape's -1 inferred), kernel dims, flatten and reshape in place exactly
 * where their input dies, list attribute errors. */
static const char *shape_model =
    "model: t\n"
    "dims: {B: 2, C: 3, N: 4, D: 5}\n"
    "inputs:\n"
    "  x: {shape: [B, C, N]}\n"
    "  y: {shape: [B, 3*D]}\n"
    "layers:\n"
    "  - {name: f, op: linear, input: x, out: D}\n"  /* [B, C, D] */
    "  - {name: fl, op: flatten}\n"                  /* [B, C*D], f dies here */
    "  - {name: r, op: reshape, shape: [B*C, -1]}\n" /* [6, 5] */
    "  - {name: g, op: gelu}\n"
    "  - {name: back, op: reshape, shape: [B, C, D]}\n"             /* g is read by add later: a copy */
    "  - {name: t, op: transpose, dim0: -1, dim1: 0}\n"             /* [D, C, B] */
    "  - {name: u, op: transpose, dim0: 2, dim1: 0}\n"              /* [B, C, D] */
    "  - {name: cat, op: concat, inputs: [u, back, u], axis: -2}\n" /* [B, 3*C, D] */
    "  - {name: s, op: select, axis: -2, index: -1}\n"              /* [B, D] */
    "  - {name: xs, op: reshape, input: x, shape: [B, C*N]}\n"      /* a graph input: a copy */
    "  - {name: sum, op: linear, input: xs, out: 3*D}\n"
    "  - {name: z, op: flatten, input: g, start: 0, end: -1}\n" /* [B*C*D] */
    "  - {name: zz, op: reshape, shape: [B, C*D]}\n"
    "  - {name: k, op: concat, inputs: [zz, s], axis: 1}\n" /* [B, C*D + D] */
    "  - {name: j, op: linear, out: 3*D}\n"
    "  - {name: o, op: add, inputs: [j, sum]}\n"
    "  - {name: loss, op: mse, inputs: [o, y]}\n";

static bool shape_is(const Graph *g, const char *name, int rank, const int64_t *d, const char *sym) {
  int t = find_tensor(g, name);
  if (t < 0 || g->t[t].shape.rank != rank) return false;
  Arena tmp = {0};
  bool ok = !strcmp(shape_sym_str(&tmp, &g->t[t].shape), sym);
  ar_free(&tmp);
  for (int i = 0; i < rank; i++) ok &= g->t[t].shape.d[i] == d[i];
  if (!ok) fprintf(stderr, "%s: unexpected shape\n", name);
  return ok;
}

static void check_dims(const Graph *g, const char *name, int n, const int64_t *want) {
  int i = find_op(g, name);
  CHECK(i >= 0);
  if (i < 0) return;
  int64_t d[MAX_KDIM];
  int nd = 0;
  op_info(g->ops[i].kind)->dims(g, &g->ops[i], d, &nd);
  CHECK(nd == n);
  for (int k = 0; k < n && k < nd; k++)
    if (d[k] != want[k]) {
      fprintf(stderr, "%s: dim %d is %lld, not %lld\n", name, k, (long long)d[k], (long long)want[k]);
      CHECK(d[k] == want[k]);
    }
}

static const char *load_error(Arena *ar, const char *layer) {
  char text[1024];
  snprintf(text, sizeof text,
           "model: t\ndims: {B: 2}\ninputs:\n  x: {shape: [B, 3, 4]}\n  y: {shape: [B, 12]}\nlayers:\n"
           "  - %s\n  - {name: loss, op: mse, inputs: [r, y]}\n",
           layer);
  return try_load(ar, text, NULL, 0) ? NULL : diag_last();
}

static void test_shape_ops(void) {
  Arena ar = {0};
  Graph *g = try_load(&ar, shape_model, NULL, 0);
  CHECK(g != NULL);
  if (!g) {
    fprintf(stderr, "%s\n", diag_last());
    ar_free(&ar);
    return;
  }
  CHECK(shape_is(g, "fl", 2, (const int64_t[]){2, 15}, "(B, C*D)"));
  CHECK(shape_is(g, "r", 2, (const int64_t[]){6, 5}, "(B*C, 5)"));
  CHECK(shape_is(g, "t", 3, (const int64_t[]){5, 3, 2}, "(D, C, B)"));
  CHECK(shape_is(g, "cat", 3, (const int64_t[]){2, 9, 5}, "(B, C+C+C, D)"));
  CHECK(shape_is(g, "s", 2, (const int64_t[]){2, 5}, "(B, D)"));
  CHECK(shape_is(g, "z", 1, (const int64_t[]){30}, "((B*C)*5)")); /* g is r's shape, (B*C, 5) */
  CHECK(shape_is(g, "k", 2, (const int64_t[]){2, 20}, "(B, C*D+D)"));
  check_dims(g, "t", 5, (const int64_t[]){1, 2, 3, 5, 1});            /* A P M Q Z: dims 0 and 2 of [2, 3, 5] */
  check_dims(g, "cat", 8, (const int64_t[]){2, 5, 3, 3, 3, 0, 0, 0}); /* O In n0 .. n5 */
  check_dims(g, "s", 4, (const int64_t[]){2, 9, 5, 8});               /* O N In index: -1 is 8 */
  check_dims(g, "fl", 1, (const int64_t[]){30});
  /* in place where the input dies: f only feeds fl (linear's backward reads
   * its input, not its output), fl only r; gelu's input r is saved, g is read
   * by back and z, x is a graph input */
  Step *st = ad_build(&ar, g, true, NULL);
  Live *l = live_build(&ar, st, st->train, st->ntrain);
  int f = find_tensor(g, "f");
  CHECK(l->buf_of[find_tensor(g, "fl")] == l->buf_of[f] && l->buf_of[find_tensor(g, "r")] == l->buf_of[f]);
  CHECK(l->buf_of[find_tensor(g, "back")] != l->buf_of[find_tensor(g, "g")]);
  CHECK(l->buf_of[find_tensor(g, "xs")] != l->buf_of[find_tensor(g, "x")]);
  CHECK(l->buf_of[find_tensor(g, "zz")] == l->buf_of[find_tensor(g, "z")]); /* z dies at zz */
  /* backward: fl's and r's gradients in place in the one flowing back */
  CHECK(l->buf_of[st->grad[f]] == l->buf_of[st->grad[find_tensor(g, "r")]]);
  /* concat [u, back, u]: u's gradient written by slot 0, added by slot 2 */
  int u = find_tensor(g, "u"), seen = 0;
  for (int i = 0; i < st->ntrain; i++) {
    const Instr *x = &st->train[i];
    if (x->phase != PHASE_BACKWARD || strcmp(x->name, "cat")) continue;
    seen++;
    CHECK(x->out[0] == st->grad[u] && x->out[2] == st->grad[u] && !x->acc[0] && x->acc[2]);
    CHECK(x->out[3] < 0 && x->out[4] < 0 && x->out[5] < 0);
  }
  CHECK(seen == 1);
  /* errors of the list attribute and the axes, at the item or the key */
  const char *e;
  e = load_error(&ar, "{name: r, op: reshape, input: x, shape: B}");
  CHECK(e && strstr(e, "'shape' must be a list, not a scalar"));
  e = load_error(&ar, "{name: r, op: reshape, input: x, shape: []}");
  CHECK(e && strstr(e, "'shape' must list at least one dim"));
  e = load_error(&ar, "{name: r, op: reshape, input: x, shape: [1, 1, 1, 1, 1, 1, 1, 1, B, -1]}");
  CHECK(e && strstr(e, "'shape' has more than 8 dims") && strstr(e, "t.yaml:7:70:"));
  e = load_error(&ar, "{name: r, op: reshape, input: x, shape: [B, -1, -1]}");
  CHECK(e && strstr(e, "t.yaml:7:53: error: 'shape' has a second -1"));
  e = load_error(&ar, "{name: r, op: reshape, input: x, shape: [B, 13]}");
  CHECK(e && strstr(e, "shape [B, 13] [2, 13] has 26 elements but input 'x' (B, 3, 4) [2, 3, 4] has 24"));
  e = load_error(&ar, "{name: r, op: reshape, input: x}");
  CHECK(e && strstr(e, "op 'reshape' needs the key 'shape'"));
  e = load_error(&ar, "{name: r, op: flatten, input: x, start: -4}");
  CHECK(e && strstr(e, "start = -4 is out of range for input 'x' (B, 3, 4) [2, 3, 4] of rank 3 (use -3 .. 2)"));
  e = load_error(&ar, "{name: r, op: select, input: x, axis: 1, index: -4}");
  CHECK(e && strstr(e, "index = -4 is out of range for dim 1"));
  e = load_error(&ar, "{name: r, op: concat, inputs: [x], axis: 0}");
  CHECK(e && strstr(e, "op 'concat' takes 2 to 6 inputs, got 1"));
  e = load_error(&ar, "{name: r, op: transpose, input: x, dim0: 0}");
  CHECK(e && strstr(e, "needs the key 'dim1'"));
  e = load_error(&ar, "{name: r, op: transpose, input: x, dim0: 0, dim1: a}");
  CHECK(e && strstr(e, "unknown dim 'a'"));
  ar_free(&ar);
}

/* A ViT's stages: every patch op and the embedding on their own, then the
 * half-blocks (ln1 .. res1, ln2 .. res2) as GPT-2's, and the read-out. */
static void test_vit_chain(void) {
  Arena ar = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/../tests/reference/vit-tiny.yaml", models);
  Graph *g = load_model(&ar, path, NULL, 0);
  Step *plain = ad_build(&ar, g, true, NULL);
  Chain *c = chain_build(&ar, g, plain, cost_model(BACKEND_CPU), NULL, false);
  static const char *const outs[] = {"grid",    "t1",      "t2",      "t3",      "patches", "embed", "cls",  "tokens",
                                     "h0.res1", "h0.res2", "h1.res1", "h1.res2", "lnf",     "read",  "head", "loss"};
  int n = (int)(sizeof outs / sizeof outs[0]);
  CHECK(c->n == n);
  for (int i = 0; i < n && i < c->n; i++) {
    bool ok = !strcmp(g->t[c->s[i].out].name, outs[i]);
    if (!ok) fprintf(stderr, "stage %d ends at %s, not %s\n", i, g->t[c->s[i].out].name, outs[i]);
    CHECK(ok);
  }
  ar_free(&ar);
}

/* Every bundled model: the plan verifies and its arena is within 1% of the
 * lower bound; GPT-2 small has its published parameter count. */
static void test_models(void) {
  const char *names[] = {"mlp", "gpt2-mini", "gpt2-124m"};
  for (int i = 0; i < 3; i++) {
    Arena ar = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.yaml", models, names[i]);
    Plan *p = plan_of(&ar, path, NULL, 0);
    CHECK(verify_plan(p) == NULL);
    CHECK((double)p->arena_bytes <= 1.01 * (double)p->lower_bound_bytes);
    printf("%-10s arena %lld lower bound %lld params %lld\n", names[i], (long long)p->arena_bytes,
           (long long)p->lower_bound_bytes, (long long)p->param_count);
    ar_free(&ar);
  }
  Arena ar = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/gpt2-124m.yaml", models);
  DimOverride ov = {"V", 50257};
  CHECK(plan_of(&ar, path, &ov, 1)->param_count == 124439808);
  ar_free(&ar);
}

/* The dropout op of a plan's schedule in a phase (the first). */
static const PlanOp *dropout_op(const Plan *p, Phase ph) {
  for (int i = 0; i < p->nsched; i++)
    if (p->sched[i].op == OP_DROPOUT && p->sched[i].phase == ph) return &p->sched[i];
  return NULL;
}

/* Dropout's masks (32 KiB, live at the peak): stored when keeping everything fits; regenerated (no mask
 * buffer: forward writes none, backward reads NULL) when only that fits, with
 * nothing recomputed; --dropout-masks forces either. Pooling's padding may be
 * written as 0. */
static void test_dropout_masks(void) {
  Arena ar = {0};
  const char *y =
      "model: m\ndims: {B: 64}\ninputs:\n  x: {shape: [B, 8]}\n  t: {shape: [B], dtype: i32}\n"
      "layers:\n  - {name: fc, op: linear, input: x, out: 4096}\n  - {name: d, op: dropout, p: 0.5}\n"
      "  - {name: fc2, op: linear, out: 10}\n  - {name: loss, op: cross_entropy, inputs: [fc2, t]}\n";
  Graph *g = try_load(&ar, y, NULL, 0);
  CHECK(g != NULL);
  if (!g) return;
  FitOptions o = {.fuse = true, .align = 256, .time_limit = 0.1, .units = 500, .accumulation = 1};
  FitResult keep = fit_budget(&ar, g, 0, &o);
  const PlanOp *fw = dropout_op(keep.plan, PHASE_FORWARD), *bw = dropout_op(keep.plan, PHASE_BACKWARD);
  CHECK(!strcmp(keep.plan->dropout_masks, "stored") && fw && bw && fw->out[1] >= 0 && bw->in[1] == fw->out[1]);
  CHECK(bw && keep.plan->buf[bw->in[1]].bytes == 64 * 4096 / 8 && keep.plan->buf[bw->in[1]].dtype == DT_I32);
  FitResult lean = fit_budget(&ar, g, keep.plan->arena_bytes - 1, &o);
  CHECK(lean.plan && !strcmp(lean.plan->dropout_masks, "regenerated") && lean.plan->extra_flops == 0);
  CHECK(lean.plan && lean.plan->arena_bytes <= keep.plan->arena_bytes - 64 * 4096 / 8);
  fw = lean.plan ? dropout_op(lean.plan, PHASE_FORWARD) : NULL,
  bw = lean.plan ? dropout_op(lean.plan, PHASE_BACKWARD) : NULL;
  CHECK(fw && bw && fw->out[1] == -1 && bw->in[1] == -1);
  CHECK(lean.plan && verify_plan(lean.plan) == NULL);
  o.masks = MASKS_STORE; /* forced: keeping the masks, that budget needs recomputation or less */
  FitResult st = fit_budget(&ar, g, keep.plan->arena_bytes - 1, &o);
  CHECK(!st.plan || (!strcmp(st.plan->dropout_masks, "stored") && st.plan->arena_bytes < keep.plan->arena_bytes));
  o.masks = MASKS_REGEN;
  FitResult rg = fit_budget(&ar, g, 0, &o);
  CHECK(!strcmp(rg.plan->dropout_masks, "regenerated") && rg.plan->arena_bytes == lean.plan->arena_bytes);
  /* recomputing with regenerated masks replays a dropout only where its
   * output is read again (not for the mask no step saves) */
  char path[1024];
  snprintf(path, sizeof path, "%s/../tests/reference/dropout-mlp.yaml", models);
  Graph *dg = load_model(&ar, path, NULL, 0);
  FitResult rc = fit_budget(&ar, dg, 670 << 10, &o);
  CHECK(rc.plan && rc.plan->extra_flops > 0 && !strcmp(rc.plan->dropout_masks, "regenerated"));
  int dead = 0, replays = 0;
  for (int i = 0; rc.plan && i < rc.plan->nsched; i++) {
    const PlanOp *x = &rc.plan->sched[i];
    if (x->phase != PHASE_RECOMPUTE || x->op != OP_DROPOUT) continue;
    replays++;
    bool read = false;
    for (int j = i + 1; j < rc.plan->nsched && !read; j++)
      for (int k = 0; k < rc.plan->sched[j].nin; k++) read |= rc.plan->sched[j].in[k] == x->out[0];
    dead += !read;
  }
  CHECK(dead == 0 && replays > 0);
  /* a model without dropout says nothing about masks */
  const char *np =
      "model: m\ndims: {B: 2}\ninputs:\n  x: {shape: [B, 3, 8, 8]}\n  y: {shape: [B, 3, 8, 8]}\n"
      "layers:\n  - {name: mp, op: maxpool2d, input: x, kernel: 3, stride: 1, padding: 1}\n"
      "  - {name: ap, op: avgpool2d, kernel: 1, padding: 0}\n  - {name: loss, op: mse, inputs: [ap, y]}\n";
  Graph *pg = try_load(&ar, np, NULL, 0);
  CHECK(pg != NULL);
  if (pg) {
    o.masks = MASKS_AUTO;
    FitResult pr = fit_budget(&ar, pg, 0, &o);
    CHECK(pr.plan->dropout_masks == NULL && pr.plan->sched[0].ndim == 9 && pr.plan->sched[0].dim[4] == 8);
  }
  ar_free(&ar);
}

/* The memo of packings (plan_assign_memo): a packing identical in items,
 * alignment and limit is copied (the same offsets as packing it), one that
 * differs in any of them is packed. */
static Plan *unassigned(Arena *ar, Graph *g, int64_t guard) {
  Step *s = ad_build(ar, g, true, NULL);
  Plan *p = plan_build(ar, g, s, live_build(ar, s, s->train, s->ntrain), live_build(ar, s, s->eval, s->neval), 256);
  p->guard_bytes = guard;
  return p;
}

static void test_pack_memo(void) {
  Arena ar = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/gpt2-mini.yaml", models);
  Graph *g = load_model(&ar, path, NULL, 0);
  PackMemo *m = pack_memo_new(&ar);
  Plan *a = unassigned(&ar, g, 0), *b = unassigned(&ar, g, 0);
  plan_assign_memo(a, 0.2, m);
  CHECK(pack_memo_hits(m) == 0); /* train and eval differ */
  plan_assign_memo(b, 0.2, m);
  CHECK(pack_memo_hits(m) == 2 && b->arena_bytes == a->arena_bytes && verify_plan(b) == NULL);
  bool same = a->nbuf == b->nbuf;
  for (int i = 0; same && i < a->nbuf; i++) same = a->buf[i].offset == b->buf[i].offset;
  CHECK(same);
  /* guard bytes: as many items, other sizes; another limit: the same items */
  Plan *c = unassigned(&ar, g, 64), *d = unassigned(&ar, g, 0);
  plan_assign_memo(c, 0.2, m);
  plan_assign_memo(d, 0.1, m);
  CHECK(pack_memo_hits(m) == 2 && verify_plan(c) == NULL && c->arena_bytes > a->arena_bytes);
  CHECK(pack_memo_hits(NULL) == 0);
  ar_free(&ar);
}

/* Two steps alike: the same tensors and instructions. */
static bool same_step(const Step *a, const Step *b) {
  bool same = a->nt == b->nt && a->ntrain == b->ntrain && a->neval == b->neval && a->loss == b->loss;
  for (int i = 0; same && i < a->nt; i++)
    same = !strcmp(a->t[i].name, b->t[i].name) && a->t[i].role == b->t[i].role && a->saved[i] == b->saved[i];
  for (int i = 0; same && i < a->ntrain; i++) {
    const Instr *x = &a->train[i], *y = &b->train[i];
    same = x->kind == y->kind && x->phase == y->phase && x->op == y->op && x->nin == y->nin && x->nout == y->nout &&
           !memcmp(x->in, y->in, sizeof x->in) && !memcmp(x->out, y->out, sizeof x->out);
  }
  return same;
}

/* The step keeping everything is built once per graph (GraphMemo, in the
 * graph's arena): ad_build again copies it, each caller its own Step over
 * the same tables; the unfused step is another; the fused loss's graph, a
 * copy of g, keeps none (g's steps would be the wrong ones, and its arena
 * may not live as long as it: graph.h). */
static void test_step_memo(void) {
  Arena ar = {0}, tmp = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/gpt2-mini.yaml", models);
  Graph *g = load_model(&ar, path, NULL, 0);
  Step *a = ad_build(&tmp, g, true, NULL), *b = ad_build(&tmp, g, true, NULL);
  CHECK(g->memo && g->memo->hits == 1 && a != b && a->train == b->train && same_step(a, b));
  b->accumulation = 4; /* build_step sets it on its copy */
  CHECK(a->accumulation == 1);
  Step *u = ad_build(&tmp, g, false, NULL);
  CHECK(g->memo->hits == 1 && !u->fused && a->fused && u->train != a->train);
  Graph by_hand = *g; /* no memo: built afresh, the same step */
  by_hand.memo = NULL;
  Step *fresh = ad_build(&ar, &by_hand, true, NULL);
  ar_free(&tmp); /* the kept steps live in the graph's arena */
  Step *c = ad_build(&ar, g, true, NULL);
  CHECK(g->memo->hits == 2 && same_step(c, fresh) && c->train != fresh->train);
  const Graph *f = gb_fuse_loss(&ar, g, 0);
  CHECK(f && !f->memo);
  Step *fs = ad_build(&ar, f, true, NULL), *fs2 = ad_build(&ar, f, true, NULL);
  CHECK(g->memo->hits == 2 && !same_step(fs, c) && same_step(fs, fs2) && fs->train != fs2->train);
  ar_free(&ar);
}

/* The levers build each micro-batch's graph once per compilation
 * (PlanRequest.graphs): gpt2-mini at 5M fits only with 8-bit moments, so the
 * levers run for fp32, bf16 and 8bit moments, each at micro-batches of 2 and
 * 1 (the whole batch is the model's own graph): 4 graphs reused. */
static void test_lever_graphs(void) {
  Arena ar = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/gpt2-mini.yaml", models);
  PlanRequest rq = {.model = path,
                    .budget = 5 << 20,
                    .fit = {.fuse = true,
                            .align = 256,
                            .time_limit = 0.2,
                            .units = 500,
                            .accumulation = 1,
                            .loss_chunk = LOSS_AUTO,
                            .opt_state = OPTS_AUTO}};
  rq.graphs = levers_graphs_new(&ar);
  PlanOutcome out = plan_model(&ar, &rq);
  CHECK(out.status == PLAN_OK && out.plan && !strcmp(out.plan->opt_state, "8bit"));
  CHECK(levers_graphs_hits(rq.graphs) == 4);
  CHECK(levers_graphs_hits(NULL) == 0);
  ar_free(&ar);
}

/* A format lever's earlier formats are fitted without looking for their
 * least arena when a later one fits (driver.c's fit_formats): llama-mini,
 * its projections and embeddings frozen, under 66 MiB keeping everything in
 * one pass fits only with int8 base weights (as
 * plan_base_weights_auto_llama_mini), and fp32's and bf16's plans over the
 * budget are not packed (6 packings, not 10). With nothing fitting (60 MiB) they are fitted again
 * for it: the smallest budget is the least of all formats (nf4's, 63.06
 * MiB). */
static void test_formats_least(void) {
  Arena ar = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/llama-mini.yaml", models);
  static const char *const frozen[] = {"emb.weight", "h*.attn.*", "h*.gate.*", "h*.up.*", "h*.down.*", "logits.weight"};
  PlanRequest rq = {.model = path,
                    .tune = {.freeze = frozen, .nfreeze = 6},
                    .budget = 66 << 20,
                    .no_micro_batch = true,
                    .fit = {.fuse = true,
                            .align = 256,
                            .time_limit = 0.2,
                            .units = 500,
                            .accumulation = 1,
                            .loss_chunk = LOSS_AUTO,
                            .opt_state = OPTS_AUTO,
                            .base_weights = BW_AUTO,
                            .no_recompute = true}};
  rq.fit.memo = pack_memo_new(&ar);
  PlanOutcome out = plan_model(&ar, &rq);
  CHECK(out.status == PLAN_OK && !strcmp(out.plan->base_weights, "int8"));
  CHECK(pack_memo_packed(rq.fit.memo) == 6); /* 10 when fp32 and bf16 look for their least arenas */
  rq.budget = 60 << 20;
  rq.fit.memo = pack_memo_new(&ar);
  out = plan_model(&ar, &rq);
  CHECK(out.status == PLAN_OVER_BUDGET && out.min_arena == 66121984);
  CHECK(pack_memo_packed(NULL) == 0);
  ar_free(&ar);
}

/* A schedule whose step's liveness bound is within the budget but whose
 * plan's (plan_lower_bound: with the library workspace) is not is never
 * packed (fit.c's try_fit): no offset search could fit it. The
 * DenseNet-shaped graph at 91% of its keep-all arena plans with no extra
 * FLOPs and 4 packings (2 copied from the memo); packing those two
 * schedules over the budget by their plan's bound too makes 6 (4: their
 * eval schedule the memo's; mutant fit_packs_over_plan_bound). Its plan
 * is the search's under the arena (fit.c runs it whenever a faster
 * schedule missed the budget): 46.452 ms under the cost model in 33789440
 * bytes, where the walk's own was 46.505 ms (a concat's recompute: no
 * FLOPs, a copy's seconds) in 33527296; the walk packs the search's
 * winner once more (the fourth packing). */
static void test_plan_bound_skips(void) {
  Arena ar = {0};
  char path[1024];
  snprintf(path, sizeof path, "%s/../tests/remat/densenet-shaped.yaml", models);
  Graph *g = load_model(&ar, path, NULL, 0);
  FitOptions o = {.fuse = true, .align = 256, .time_limit = 0.1, .units = 500, .accumulation = 1};
  Plan *keep = fit_budget(&ar, g, 0, &o).plan;
  CHECK(keep && plan_lower_bound(keep) == keep->lower_bound_bytes && verify_plan(keep) == NULL);
  o.memo = pack_memo_new(&ar);
  FitResult r = fit_budget(&ar, g, keep->arena_bytes - keep->arena_bytes / 100 * 9, &o);
  CHECK(r.plan && r.plan->arena_bytes == 33789440 && r.plan->extra_flops == 0 && verify_plan(r.plan) == NULL);
  CHECK(pack_memo_packed(o.memo) == 4 && pack_memo_hits(o.memo) == 2);
  ar_free(&ar);
}

/* ar_grow: the newest allocation grows in place, keeping its bytes and
 * zeroing the new ones (in a reused, dirty block); any other is copied. */
static bool bytes_are(const unsigned char *p, size_t from, size_t to, unsigned char v) {
  for (size_t i = from; i < to; i++)
    if (p[i] != v) return false;
  return true;
}

static void test_arena_grow(void) {
  Arena ar = {0};
  memset(ar_alloc(&ar, 1000), 0xff, 1000);
  ar_reset(&ar); /* the next allocations reuse those dirty bytes */
  unsigned char *a = ar_alloc(&ar, 40);
  CHECK(bytes_are(a, 0, 40, 0));
  memset(a, 0xab, 40);
  unsigned char *b = ar_grow(&ar, a, 40, 200);
  CHECK(b == a && bytes_are(b, 0, 40, 0xab) && bytes_are(b, 40, 200, 0));
  unsigned char *c = ar_alloc(&ar, 16);
  memset(c, 0xcd, 16);
  unsigned char *d = ar_grow(&ar, b, 200, 400); /* not the newest: copied */
  CHECK(d != b && bytes_are(d, 0, 40, 0xab) && bytes_are(d, 40, 400, 0) && bytes_are(c, 0, 16, 0xcd));
  unsigned char *e = ar_grow(&ar, d, 400, 3u << 20); /* past the block: copied */
  CHECK(e != d && bytes_are(e, 0, 40, 0xab) && bytes_are(e, 40, 3u << 20, 0));
  ar_free(&ar);
}

int main(int argc, char **argv) {
  models = argc > 1 ? argv[1] : "models";
  test_expr();
  test_load();
  test_attention();
  test_autodiff(true);
  test_autodiff(false);
  test_live();
  test_shape_ops();
  test_vit_chain();
  test_verifier_mutants();
  test_scratch();
  test_models();
  test_dropout_masks();
  test_pack_memo();
  test_step_memo();
  test_lever_graphs();
  test_formats_least();
  test_plan_bound_skips();
  test_arena_grow();
  return check_summary("test_planner");
}
