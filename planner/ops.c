/* ops.c: the op table (see ops.h for the slot layouts). */
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers shared by shape rules ---- */

static const Shape *in_shape(BuildCtx *c, int k) { return &build_input(c, k)->shape; }

/* Scratch for the shape strings of an error message: build_error does not
 * return, so the strings cannot be freed after it; the previous message's
 * are freed instead (in-process callers catch errors and go on). */
static Arena *msg_arena(void) {
  static Arena a;
  ar_free(&a);
  return &a;
}

/* The same shape with the last dim replaced. */
static Shape with_last(BuildCtx *c, const Shape *s, int64_t v, const char *sym) {
  int64_t d[MAX_RANK];
  const char *sy[MAX_RANK];
  for (int i = 0; i < s->rank; i++) {
    d[i] = s->d[i];
    sy[i] = s->sym[i];
  }
  d[s->rank - 1] = v;
  sy[s->rank - 1] = sym;
  return build_shape(c, s->rank, d, sy);
}

/* The shape without its last dim (the rows of a row-wise op). */
static Shape rows_of(BuildCtx *c, const Shape *s) { return build_shape(c, s->rank - 1, s->d, s->sym); }

static Shape vec_shape(BuildCtx *c, int64_t n, const char *sym) { return build_shape(c, 1, &n, &sym); }

static Shape mat_shape(BuildCtx *c, int64_t r, const char *rs, int64_t k, const char *ks) {
  int64_t d[2] = {r, k};
  const char *sy[2] = {rs, ks};
  return build_shape(c, 2, d, sy);
}

static void need_float(BuildCtx *c, int k) {
  const Tensor *t = build_input(c, k);
  if (t->dtype != DT_F32)
    build_error(c, NULL, "input '%s' has dtype %s; this op needs f32", t->name, dtype_name(t->dtype));
}

static void need_rank(BuildCtx *c, int k, int lo) {
  const Tensor *t = build_input(c, k);
  if (t->shape.rank < lo)
    build_error(c, NULL, "input '%s' has rank %d; this op needs rank >= %d", t->name, t->shape.rank, lo);
}

static void same_shape(BuildCtx *c, int a, int b) {
  const Shape *x = in_shape(c, a), *y = in_shape(c, b);
  bool eq = x->rank == y->rank;
  for (int i = 0; eq && i < x->rank; i++) eq = x->d[i] == y->d[i];
  if (!eq) {
    Arena *tmp = msg_arena();
    build_error(c, NULL, "shape mismatch: '%s' is %s %s but '%s' is %s %s", build_input(c, a)->name,
                shape_sym_str(tmp, x), shape_val_str(tmp, x), build_input(c, b)->name, shape_sym_str(tmp, y),
                shape_val_str(tmp, y));
  }
}

/* FLOP counts saturate at INT64_MAX instead of overflowing: the loader
 * rejects any op whose count reaches its limit (load.c, MAX_STEP_FLOPS), so
 * a saturated count never reaches a plan. */
static int64_t fl(int n, const int64_t *f) {
  int64_t r = 1;
  for (int i = 0; i < n; i++)
    if (!ck_mul(r, f[i], &r)) return INT64_MAX;
  return r;
}
#define FLOPS(...) fl((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static int64_t rows(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i + 1 < s->rank; i++) n *= s->d[i];
  return n;
}

static int64_t last(const Shape *s) { return s->d[s->rank - 1]; }
static const Shape *tshape(const Graph *g, int t) { return &g->t[t].shape; }

/* ---- linear ---- */

static const char *const linear_keys[] = {"out", "bias", "weight", NULL};
static void linear_build(BuildCtx *c) {
  need_float(c, 0);
  need_rank(c, 0, 1);
  const Shape *x = in_shape(c, 0);
  int64_t K = last(x), N = build_int(c, "out", true, 0);
  const char *ksym = x->sym[x->rank - 1];
  build_data(c, 0, 0);
  Init u = {INIT_UNIFORM, 1.0 / sqrt((double)K)};
  Shape ws = mat_shape(c, N, "out", K, ksym);
  build_param(c, 1, "weight", "weight", ws, u);
  if (build_bool(c, "bias", true)) build_param(c, 2, "bias", NULL, vec_shape(c, N, "out"), u);
  build_output(c, 0, NULL, with_last(c, x, N, "out"), DT_F32);
}
static void linear_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]), *y = tshape(g, op->out[0]);
  d[0] = rows(x), d[1] = last(x), d[2] = last(y), *n = 3;
}
static int64_t linear_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[6];
  int n;
  linear_dims(g, op, d, &n);
  return FLOPS(bwd ? 4 : 2, d[0], d[1], d[2]);
}

/* ---- matmul: a[..., M, K] @ b[..., K, N], equal leading dims ---- */

static void matmul_build(BuildCtx *c) {
  need_float(c, 0), need_float(c, 1);
  need_rank(c, 0, 2), need_rank(c, 1, 2);
  const Shape *a = in_shape(c, 0), *b = in_shape(c, 1);
  bool ok = a->rank == b->rank && a->d[a->rank - 1] == b->d[b->rank - 2];
  for (int i = 0; ok && i + 2 < a->rank; i++) ok = a->d[i] == b->d[i];
  if (!ok) {
    Arena *tmp = msg_arena();
    build_error(c, NULL, "shape mismatch: matmul of '%s' %s %s and '%s' %s %s (need [..., M, K] @ [..., K, N])",
                build_input(c, 0)->name, shape_sym_str(tmp, a), shape_val_str(tmp, a), build_input(c, 1)->name,
                shape_sym_str(tmp, b), shape_val_str(tmp, b));
  }
  build_data(c, 0, 0), build_data(c, 1, 1);
  build_output(c, 0, NULL, with_last(c, a, last(b), b->sym[b->rank - 1]), DT_F32);
}
static void matmul_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *a = tshape(g, op->in[0]), *b = tshape(g, op->in[1]);
  d[1] = a->d[a->rank - 2], d[2] = last(a), d[3] = last(b);
  d[0] = rows(a) / d[1], *n = 4;
}
static int64_t matmul_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[6];
  int n;
  matmul_dims(g, op, d, &n);
  return FLOPS(bwd ? 4 : 2, d[0], d[1], d[2], d[3]);
}

/* ---- element-wise ---- */

static void add_build(BuildCtx *c) {
  need_float(c, 0), need_float(c, 1);
  same_shape(c, 0, 1);
  build_data(c, 0, 0), build_data(c, 1, 1);
  build_output(c, 0, NULL, *in_shape(c, 0), DT_F32);
}
static void unary_build(BuildCtx *c) {
  need_float(c, 0);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, *in_shape(c, 0), DT_F32);
}
static void numel_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  d[0] = shape_numel(tshape(g, op->out[0])), *n = 1;
}
static int64_t add_flops(const Graph *g, const Op *op, bool bwd) {
  (void)bwd;
  return shape_numel(tshape(g, op->out[0]));
}
static int64_t gelu_flops(const Graph *g, const Op *op, bool bwd) {
  return FLOPS(bwd ? 16 : 8, shape_numel(tshape(g, op->out[0])));
}

/* ---- row-wise: layernorm, softmax ---- */

static void layernorm_build(BuildCtx *c) {
  need_float(c, 0);
  need_rank(c, 0, 1);
  const Shape *x = in_shape(c, 0);
  const char *csym = x->sym[x->rank - 1];
  build_data(c, 0, 0);
  build_param(c, 1, "weight", NULL, vec_shape(c, last(x), csym), (Init){INIT_ONES, 0});
  build_param(c, 2, "bias", NULL, vec_shape(c, last(x), csym), (Init){INIT_ZEROS, 0});
  build_output(c, 0, NULL, *x, DT_F32);
  build_output(c, 1, "mean", rows_of(c, x), DT_F32);
  build_output(c, 2, "rstd", rows_of(c, x), DT_F32);
}
static void rowwise_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = rows(x), d[1] = last(x), *n = 2;
}
static int64_t rowwise_flops(const Graph *g, const Op *op, bool bwd) {
  return FLOPS(bwd ? 10 : 6, shape_numel(tshape(g, op->out[0])));
}

/* ---- attention core: qkv[B, T, 3C] -> out[B, T, C], lse[B, NH, T] ---- */

static const char *const attention_keys[] = {"heads", NULL};
static void attention_build(BuildCtx *c) {
  need_float(c, 0);
  const Shape *x = in_shape(c, 0);
  if (x->rank != 3 || x->d[2] % 3 != 0) {
    Arena *tmp = msg_arena();
    build_error(c, NULL, "attention needs qkv of shape (B, T, 3*C); '%s' is %s %s", build_input(c, 0)->name,
                shape_sym_str(tmp, x), shape_val_str(tmp, x));
  }
  int64_t C = x->d[2] / 3, NH = build_int(c, "heads", true, 0);
  if (NH <= 0 || C % NH != 0)
    build_error(c, "heads", "heads = %lld must be positive and divide the channels %lld", (long long)NH, (long long)C);
  build_data(c, 0, 0);
  build_attr(c, 0, NH);
  int64_t od[3] = {x->d[0], x->d[1], C}, ld[3] = {x->d[0], NH, x->d[1]};
  const char *osym[3] = {x->sym[0], x->sym[1], NULL}, *lsym[3] = {x->sym[0], "heads", x->sym[1]};
  build_output(c, 0, NULL, build_shape(c, 3, od, osym), DT_F32);
  build_output(c, 1, "lse", build_shape(c, 3, ld, lsym), DT_F32);
}
static void attention_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0], d[1] = x->d[1], d[2] = x->d[2] / 3, d[3] = op->attr[0], *n = 4;
}
static int64_t attention_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[6];
  int n;
  attention_dims(g, op, d, &n);
  /* q k^T and att v, causal (half the square), 2 flops per multiply-add;
   * backward recomputes q k^T (FlashAttention-style) on top of its 4 products */
  int64_t f = FLOPS(2, d[0], d[1], d[1], d[2]);
  return !bwd ? f : f > INT64_MAX / 5 ? INT64_MAX : 5 * f / 2;
}

/* ---- embeddings ---- */

static const char *const embedding_keys[] = {"num", "dim", NULL};
static void embedding_build(BuildCtx *c) {
  const Tensor *tok = build_input(c, 0);
  if (tok->dtype != DT_I32)
    build_error(c, NULL, "embedding input '%s' must be i32 token ids, not %s", tok->name, dtype_name(tok->dtype));
  int64_t V = build_int(c, "num", true, 0), C = build_int(c, "dim", true, 0);
  build_data(c, 0, 0);
  build_param(c, 1, "weight", NULL, mat_shape(c, V, "num", C, "dim"), (Init){INIT_NORMAL, 1.0});
  int64_t d[MAX_RANK];
  const char *sy[MAX_RANK];
  if (tok->shape.rank + 1 > MAX_RANK) build_error(c, NULL, "input '%s' has too many dims", tok->name);
  for (int i = 0; i < tok->shape.rank; i++) {
    d[i] = tok->shape.d[i];
    sy[i] = tok->shape.sym[i];
  }
  d[tok->shape.rank] = C, sy[tok->shape.rank] = "dim";
  build_output(c, 0, NULL, build_shape(c, tok->shape.rank + 1, d, sy), DT_F32);
}
static void embedding_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *w = tshape(g, op->in[1]);
  d[0] = shape_numel(tshape(g, op->in[0])), d[1] = w->d[1], d[2] = w->d[0], *n = 3;
}
static int64_t embedding_flops(const Graph *g, const Op *op, bool bwd) {
  (void)bwd;
  return shape_numel(tshape(g, op->out[0]));
}

/* position_embedding reads only the leading [B, T] of its input's shape. */
static const char *const posemb_keys[] = {"max", "dim", NULL};
static void posemb_build(BuildCtx *c) {
  const Shape *x = in_shape(c, 0);
  if (x->rank < 2)
    build_error(c, NULL, "position_embedding needs an input of shape (B, T, ...); '%s' has rank %d",
                build_input(c, 0)->name, x->rank);
  int64_t maxT = build_int(c, "max", true, 0), C = build_int(c, "dim", true, 0);
  if (x->d[1] > maxT)
    build_error(c, "max", "sequence length %lld exceeds max = %lld", (long long)x->d[1], (long long)maxT);
  build_param(c, 0, "weight", NULL, mat_shape(c, maxT, "max", C, "dim"), (Init){INIT_NORMAL, 1.0});
  int64_t d[3] = {x->d[0], x->d[1], C};
  const char *sy[3] = {x->sym[0], x->sym[1], "dim"};
  build_output(c, 0, NULL, build_shape(c, 3, d, sy), DT_F32);
}
static void posemb_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *y = tshape(g, op->out[0]);
  d[0] = y->d[0], d[1] = y->d[1], d[2] = y->d[2], d[3] = tshape(g, op->in[0])->d[0], *n = 4;
}

/* ---- losses ---- */

static void ce_build(BuildCtx *c) {
  need_float(c, 0);
  need_rank(c, 0, 1);
  const Shape *x = in_shape(c, 0);
  const Tensor *tg = build_input(c, 1);
  Shape r = rows_of(c, x);
  bool ok = tg->dtype == DT_I32 && tg->shape.rank == r.rank;
  for (int i = 0; ok && i < r.rank; i++) ok = tg->shape.d[i] == r.d[i];
  if (!ok) {
    Arena *tmp = msg_arena();
    build_error(c, NULL,
                "shape mismatch: cross_entropy of logits '%s' %s %s needs i32 targets of shape %s %s; '%s' is %s %s %s",
                build_input(c, 0)->name, shape_sym_str(tmp, x), shape_val_str(tmp, x), shape_sym_str(tmp, &r),
                shape_val_str(tmp, &r), tg->name, dtype_name(tg->dtype), shape_sym_str(tmp, &tg->shape),
                shape_val_str(tmp, &tg->shape));
  }
  build_data(c, 0, 0), build_data(c, 1, 1);
  build_output(c, 0, NULL, build_shape(c, 0, NULL, NULL), DT_F32);
  build_output(c, 1, "lse", r, DT_F32);
}
static int64_t ce_flops(const Graph *g, const Op *op, bool bwd) {
  return FLOPS(bwd ? 4 : 5, shape_numel(tshape(g, op->in[0])));
}

static void mse_build(BuildCtx *c) {
  need_float(c, 0), need_float(c, 1);
  same_shape(c, 0, 1);
  build_data(c, 0, 0), build_data(c, 1, 1);
  build_output(c, 0, NULL, build_shape(c, 0, NULL, NULL), DT_F32);
}
static void mse_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  d[0] = shape_numel(tshape(g, op->in[0])), *n = 1;
}
static int64_t mse_flops(const Graph *g, const Op *op, bool bwd) {
  (void)bwd;
  return FLOPS(3, shape_numel(tshape(g, op->in[0])));
}

/* ---- the table ---- */

#define NO_INPLACE \
  { -1, -1 }
#define NO_INPLACE_BWD   \
  {                      \
    {-1, -1}, { -1, -1 } \
  }

/* clang-format off */
static const OpInfo table[OP_COUNT] = {
    [OP_LINEAR] = {"linear", linear_keys, 1, 1, 3, 1, 0, linear_build, linear_dims, linear_flops,
                   3, 3, {REF_DOUT, REF_IN(0), REF_IN(1)}, {REF_GIN(0), REF_GIN(1), REF_GIN(2)},
                   {true, true, true}, NO_INPLACE, NO_INPLACE_BWD, false},
    [OP_MATMUL] = {"matmul", NULL, 2, 2, 2, 1, 0, matmul_build, matmul_dims, matmul_flops,
                   3, 2, {REF_DOUT, REF_IN(0), REF_IN(1)}, {REF_GIN(0), REF_GIN(1)},
                   {true, true}, NO_INPLACE, NO_INPLACE_BWD, false},
    [OP_ADD] = {"add", NULL, 2, 2, 2, 1, 0, add_build, numel_dims, add_flops,
                1, 2, {REF_DOUT}, {REF_GIN(0), REF_GIN(1)},
                {true, true}, {0, 1}, {{0, 0}, {1, 0}}, false},
    [OP_RELU] = {"relu", NULL, 1, 1, 1, 1, 0, unary_build, numel_dims, add_flops,
                 2, 1, {REF_DOUT, REF_OUT(0)}, {REF_GIN(0)},
                 {true}, {0, -1}, {{0, 0}, {-1, -1}}, false},
    [OP_GELU] = {"gelu", NULL, 1, 1, 1, 1, 0, unary_build, numel_dims, gelu_flops,
                 2, 1, {REF_DOUT, REF_IN(0)}, {REF_GIN(0)},
                 {true}, {0, -1}, {{0, 0}, {-1, -1}}, false},
    [OP_LAYERNORM] = {"layernorm", NULL, 1, 1, 3, 3, 2, layernorm_build, rowwise_dims, rowwise_flops,
                      5, 3, {REF_DOUT, REF_IN(0), REF_IN(1), REF_OUT(1), REF_OUT(2)},
                      {REF_GIN(0), REF_GIN(1), REF_GIN(2)}, {true, true, true}, NO_INPLACE, NO_INPLACE_BWD, false},
    [OP_SOFTMAX] = {"softmax", NULL, 1, 1, 1, 1, 0, unary_build, rowwise_dims, rowwise_flops,
                    2, 1, {REF_DOUT, REF_OUT(0)}, {REF_GIN(0)},
                    {true}, {0, -1}, {{0, 0}, {-1, -1}}, false},
    [OP_ATTENTION] = {"attention", attention_keys, 1, 1, 1, 2, 1, attention_build, attention_dims, attention_flops,
                      4, 1, {REF_DOUT, REF_IN(0), REF_OUT(0), REF_OUT(1)}, {REF_GIN(0)},
                      {true}, NO_INPLACE, NO_INPLACE_BWD, false},
    [OP_EMBEDDING] = {"embedding", embedding_keys, 1, 1, 2, 1, 0, embedding_build, embedding_dims, embedding_flops,
                      2, 1, {REF_DOUT, REF_IN(0)}, {REF_GIN(1)},
                      {false, true}, NO_INPLACE, NO_INPLACE_BWD, false},
    [OP_POS_EMBEDDING] = {"position_embedding", posemb_keys, 1, 1, 1, 1, 0, posemb_build, posemb_dims,
                          embedding_flops, 1, 1, {REF_DOUT}, {REF_GIN(0)},
                          {true}, NO_INPLACE, NO_INPLACE_BWD, false},
    [OP_CROSS_ENTROPY] = {"cross_entropy", NULL, 2, 2, 2, 2, 1, ce_build, rowwise_dims, ce_flops,
                          3, 1, {REF_IN(0), REF_IN(1), REF_OUT(1)}, {REF_GIN(0)},
                          {true, false}, NO_INPLACE, {{0, 0}, {-1, -1}}, true},
    [OP_MSE] = {"mse", NULL, 2, 2, 2, 1, 0, mse_build, mse_dims, mse_flops,
                2, 1, {REF_IN(0), REF_IN(1)}, {REF_GIN(0)},
                {true, false}, NO_INPLACE, NO_INPLACE_BWD, true},
    /* not written in YAML (no build rule): updates and casts the passes insert */
    [OP_ADAMW] = {"adamw", NULL, 0, 0, 1, 3, 0, NULL, NULL, NULL, 0, 0, {0}, {0}, {false}, NO_INPLACE,
                  NO_INPLACE_BWD, false},
    [OP_SGD] = {"sgd", NULL, 0, 0, 1, 2, 0, NULL, NULL, NULL, 0, 0, {0}, {0}, {false}, NO_INPLACE,
                NO_INPLACE_BWD, false},
    [OP_CAST] = {"cast", NULL, 0, 0, 1, 1, 0, NULL, NULL, NULL, 0, 0, {0}, {0}, {false}, NO_INPLACE,
                 NO_INPLACE_BWD, false},
};
/* clang-format on */

const OpInfo *op_info(OpKind k) {
  MP_ASSERT(k >= 0 && k < OP_COUNT);
  return &table[k];
}

int op_lookup(const char *s) {
  for (int k = 0; k < OP_COUNT; k++)
    if (table[k].build && strcmp(table[k].name, s) == 0) return k;
  return -1;
}

const char *op_suggest(const char *s) {
  static const char *const extra[] = {"causal_self_attention"};
  const char *best = NULL;
  int bd = 1 << 30;
  for (int k = 0; k < OP_COUNT + 1; k++) {
    const char *n = k < OP_COUNT ? table[k].name : extra[0];
    if (k < OP_COUNT && !table[k].build) continue;
    int d = mp_edit_distance(s, n);
    if (d < bd) {
      bd = d;
      best = n;
    }
  }
  return bd <= 3 ? best : NULL;
}

/* ---- graph.h helpers ---- */

int64_t dtype_size(DType t) { return t == DT_F32 || t == DT_I32 ? 4 : t == DT_BF16 || t == DT_F16 ? 2 : 0; }
const char *dtype_name(DType t) {
  static const char *const n[DT_COUNT] = {"f32", "i32", "bf16", "f16"};
  return t < DT_COUNT ? n[t] : "?";
}

int64_t shape_numel(const Shape *s) {
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    bool ok = ck_mul(n, s->d[i], &n);
    MP_ASSERT(ok); /* sizes were checked when built */
  }
  return n;
}

char *shape_sym_str(Arena *ar, const Shape *s) {
  char buf[512] = "(";
  for (int i = 0; i < s->rank; i++) {
    size_t n = strlen(buf);
    snprintf(buf + n, sizeof buf - n, "%s%s", i ? ", " : "", s->sym[i] ? s->sym[i] : "?");
  }
  strncat(buf, ")", sizeof buf - strlen(buf) - 1);
  return ar_strdup(ar, buf);
}

char *shape_val_str(Arena *ar, const Shape *s) {
  char buf[512] = "[";
  for (int i = 0; i < s->rank; i++) {
    size_t n = strlen(buf);
    snprintf(buf + n, sizeof buf - n, "%s%lld", i ? ", " : "", (long long)s->d[i]);
  }
  strncat(buf, "]", sizeof buf - strlen(buf) - 1);
  return ar_strdup(ar, buf);
}
