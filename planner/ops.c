/* ops.c: the op table (see ops.h). Each op's shape rule, dims and FLOPs
 * come first; the table, one designated-initializer entry per op, is at the
 * end of the file. */
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers shared by shape rules ---- */

static const Shape *in_shape(BuildCtx *c, int k) { return &build_input(c, k)->shape; }
static int64_t attr_i(BuildCtx *c, const char *key) { return build_attr(c, key)->i; }
static const char *attr_sym(BuildCtx *c, const char *key) { return build_attr(c, key)->s; }

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
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "shape mismatch: '%s' is %s %s but '%s' is %s %s", build_input(c, a)->name,
                shape_sym_str(tmp, x), shape_val_str(tmp, x), build_input(c, b)->name, shape_sym_str(tmp, y),
                shape_val_str(tmp, y));
  }
}

/* FLOP counts saturate at INT64_MAX instead of overflowing: the builder
 * rejects any op whose count reaches its limit (build.c, MAX_STEP_FLOPS),
 * so a saturated count never reaches a plan. */
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
static int64_t out_numel(const Graph *g, const Op *op) { return shape_numel(tshape(g, op->out[0])); }
static int64_t in_numel(const Graph *g, const Op *op) { return shape_numel(tshape(g, op->in[0])); }

/* ---- linear ---- */

static void linear_build(BuildCtx *c) {
  need_float(c, 0);
  need_rank(c, 0, 1);
  const Shape *x = in_shape(c, 0);
  int64_t K = last(x), N = attr_i(c, "out");
  const char *ksym = x->sym[x->rank - 1], *nsym = attr_sym(c, "out");
  build_data(c, 0, 0);
  Init u = {INIT_UNIFORM, 1.0 / sqrt((double)K)};
  build_param(c, 1, "weight", "weight", mat_shape(c, N, nsym, K, ksym), u);
  if (attr_i(c, "bias")) build_param(c, 2, "bias", NULL, vec_shape(c, N, nsym), u);
  build_output(c, 0, NULL, with_last(c, x, N, nsym), DT_F32);
}
static void linear_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]), *y = tshape(g, op->out[0]);
  d[0] = rows(x);
  d[1] = last(x);
  d[2] = last(y);
  *n = 3;
}
static int64_t linear_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[MAX_KDIM];
  int n;
  linear_dims(g, op, d, &n);
  return FLOPS(bwd ? 4 : 2, d[0], d[1], d[2]);
}
static int64_t linear_workspace(const int64_t *d) { return 4 * d[0] * d[2]; } /* M K N */

/* ---- matmul: a[..., M, K] @ b[..., K, N], equal leading dims ---- */

static void matmul_build(BuildCtx *c) {
  for (int k = 0; k < 2; k++) {
    need_float(c, k);
    need_rank(c, k, 2);
  }
  const Shape *a = in_shape(c, 0), *b = in_shape(c, 1);
  bool ok = a->rank == b->rank && a->d[a->rank - 1] == b->d[b->rank - 2];
  for (int i = 0; ok && i + 2 < a->rank; i++) ok = a->d[i] == b->d[i];
  if (!ok) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "shape mismatch: matmul of '%s' %s %s and '%s' %s %s (need [..., M, K] @ [..., K, N])",
                build_input(c, 0)->name, shape_sym_str(tmp, a), shape_val_str(tmp, a), build_input(c, 1)->name,
                shape_sym_str(tmp, b), shape_val_str(tmp, b));
  }
  build_data(c, 0, 0);
  build_data(c, 1, 1);
  build_output(c, 0, NULL, with_last(c, a, last(b), b->sym[b->rank - 1]), DT_F32);
}
static void matmul_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *a = tshape(g, op->in[0]), *b = tshape(g, op->in[1]);
  d[1] = a->d[a->rank - 2];
  d[2] = last(a);
  d[3] = last(b);
  d[0] = rows(a) / d[1];
  *n = 4;
}
static int64_t matmul_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[MAX_KDIM];
  int n;
  matmul_dims(g, op, d, &n);
  return FLOPS(bwd ? 4 : 2, d[0], d[1], d[2], d[3]);
}
static int64_t matmul_workspace(const int64_t *d) { return 4 * d[0] * d[1] * d[3]; } /* Bt M K N */

/* ---- element-wise ---- */

static void add_build(BuildCtx *c) {
  need_float(c, 0);
  need_float(c, 1);
  same_shape(c, 0, 1);
  build_data(c, 0, 0);
  build_data(c, 1, 1);
  build_output(c, 0, NULL, *in_shape(c, 0), DT_F32);
}
/* scale_channels: x [N, C, ...] times s [N, C] or [N, C, 1, ...], one factor per (n, c): torch's broadcasting
 * `x * s` of squeeze-excitation. Its own op, not a broadcasting mul: s's gradient is a sum over each plane, and
 * mul stays one elementwise kernel with its alias rules. */
static void scale_channels_build(BuildCtx *c) {
  need_float(c, 0);
  need_float(c, 1);
  need_rank(c, 0, 3);
  if (build_input_id(c, 0) == build_input_id(c, 1)) build_error(c, NULL, "scale_channels of a tensor by itself");
  const Shape *x = in_shape(c, 0), *s = in_shape(c, 1);
  bool ok = s->rank >= 2 && s->rank <= x->rank && s->d[0] == x->d[0] && s->d[1] == x->d[1];
  for (int i = 2; ok && i < s->rank; i++) ok = s->d[i] == 1;
  if (!ok) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL,
                "'%s' is %s %s; scale_channels needs one factor per (N, C) of '%s' %s %s: [N, C] or "
                "[N, C, 1, 1]",
                build_input(c, 1)->name, shape_sym_str(tmp, s), shape_val_str(tmp, s), build_input(c, 0)->name,
                shape_sym_str(tmp, x), shape_val_str(tmp, x));
  }
  build_data(c, 0, 0);
  build_data(c, 1, 1);
  build_output(c, 0, NULL, *x, DT_F32);
}
/* NC S: the planes and their size */
static void scale_channels_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0] * x->d[1];
  d[1] = d[0] ? out_numel(g, op) / d[0] : 0;
  *n = 2;
}
static void unary_build(BuildCtx *c) {
  need_float(c, 0);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, *in_shape(c, 0), DT_F32);
}
static void numel_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  d[0] = out_numel(g, op);
  *n = 1;
}
static int64_t numel_flops(const Graph *g, const Op *op, bool bwd) {
  (void)bwd;
  return out_numel(g, op);
}
static int64_t mul_flops(const Graph *g, const Op *op, bool bwd) { return FLOPS(bwd ? 2 : 1, out_numel(g, op)); }
/* gelu's approximate: the word's index in the op's attribute (tanh first, the
 * default) and the kernels' flag (1 tanh, 0 exact erf). */
static const char *const gelu_approximate[] = {"tanh", "none", NULL};
enum { GELU_TANH, GELU_NONE };
static void gelu_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  d[0] = out_numel(g, op);
  d[1] = op->attr[0].i == GELU_TANH; /* approximate */
  *n = 2;
}
static int64_t gelu_flops(const Graph *g, const Op *op, bool bwd) { return FLOPS(bwd ? 16 : 8, out_numel(g, op)); }
static int64_t silu_flops(const Graph *g, const Op *op, bool bwd) { return FLOPS(bwd ? 8 : 4, out_numel(g, op)); }

/* ---- row-wise: layernorm, softmax ---- */

/* layernorm: out = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps); bias: false
 * creates no b (slot 2 stays -1, and the kernels get NULL). */
static void layernorm_build(BuildCtx *c) {
  need_float(c, 0);
  need_rank(c, 0, 1);
  const Shape *x = in_shape(c, 0);
  const char *csym = x->sym[x->rank - 1];
  build_data(c, 0, 0);
  build_param(c, 1, "weight", NULL, vec_shape(c, last(x), csym), (Init){INIT_ONES, 0});
  if (attr_i(c, "bias")) build_param(c, 2, "bias", NULL, vec_shape(c, last(x), csym), (Init){INIT_ZEROS, 0});
  build_output(c, 0, NULL, *x, DT_F32);
  build_output(c, 1, "mean", rows_of(c, x), DT_F32);
  build_output(c, 2, "rstd", rows_of(c, x), DT_F32);
}
static void rowwise_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = rows(x);
  d[1] = last(x);
  *n = 2;
}
/* rmsnorm: out = x / sqrt(mean(x^2) + eps) * w, no centering, no bias (Llama). */
static void rmsnorm_build(BuildCtx *c) {
  need_float(c, 0);
  need_rank(c, 0, 1);
  const Shape *x = in_shape(c, 0);
  build_data(c, 0, 0);
  build_param(c, 1, "weight", NULL, vec_shape(c, last(x), x->sym[x->rank - 1]), (Init){INIT_ONES, 0});
  build_output(c, 0, NULL, *x, DT_F32);
  build_output(c, 1, "rstd", rows_of(c, x), DT_F32);
}
static int64_t rowwise_flops(const Graph *g, const Op *op, bool bwd) { return FLOPS(bwd ? 10 : 6, out_numel(g, op)); }

/* ---- attention core: qkv[B, T, (NH + 2 KVH) hd] -> out[B, T, NH hd], lse[B, NH, T] ----
 * Per position, qkv holds q (NH heads), k and v (KVH heads each), all of
 * size hd; query head h reads kv head h / (NH / KVH) (grouped-query
 * attention; KVH = NH is multi-head, KVH = 1 multi-query). */

/* kv_heads, heads when absent (its default 0); must divide heads. */
static int64_t kv_heads(BuildCtx *c) {
  int64_t NH = attr_i(c, "heads"), KVH = attr_i(c, "kv_heads");
  if (KVH == 0) return NH;
  if (NH % KVH != 0)
    build_error(c, "kv_heads", "kv_heads = %lld must divide heads = %lld", (long long)KVH, (long long)NH);
  return KVH;
}

static void attention_build(BuildCtx *c) {
  need_float(c, 0);
  const Shape *x = in_shape(c, 0);
  bool kv_given = attr_sym(c, "kv_heads") != NULL;
  if (x->rank != 3 || (!kv_given && x->d[2] % 3 != 0)) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "attention needs qkv of shape (B, T, %s); '%s' is %s %s",
                kv_given ? "(heads + 2*kv_heads)*hd" : "3*C", build_input(c, 0)->name, shape_sym_str(tmp, x),
                shape_val_str(tmp, x));
  }
  int64_t NH = attr_i(c, "heads"), KVH = kv_heads(c), heads3 = 0; /* q, k, v heads: NH + 2 KVH */
  if (!kv_given && x->d[2] / 3 % NH != 0)
    build_error(c, "heads", "heads = %lld must be positive and divide the channels %lld", (long long)NH,
                (long long)(x->d[2] / 3));
  bool fits = ck_mul(2, KVH, &heads3) && ck_add(heads3, NH, &heads3);
  if (!fits || x->d[2] % heads3 != 0)
    build_error(c, "kv_heads",
                "qkv '%s' has %lld channels; heads = %lld and kv_heads = %lld need (heads + 2*kv_heads)*hd",
                build_input(c, 0)->name, (long long)x->d[2], (long long)NH, (long long)KVH);
  int64_t C = x->d[2] / heads3 * NH; /* <= the qkv channels */
  build_data(c, 0, 0);
  int64_t od[3] = {x->d[0], x->d[1], C}, ld[3] = {x->d[0], NH, x->d[1]};
  const char *osym[3] = {x->sym[0], x->sym[1], NULL}, *lsym[3] = {x->sym[0], attr_sym(c, "heads"), x->sym[1]};
  build_output(c, 0, NULL, build_shape(c, 3, od, osym), DT_F32);
  build_output(c, 1, "lse", build_shape(c, 3, ld, lsym), DT_F32);
}
/* B T C NH KVH causal, C = NH hd (the output's channels). */
static void attention_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  const Attr *a = op->attr; /* heads, kv_heads, causal: the table's order */
  d[0] = x->d[0];
  d[1] = x->d[1];
  d[2] = last(tshape(g, op->out[0]));
  d[3] = a[0].i;
  d[4] = a[1].i ? a[1].i : a[0].i;
  d[5] = a[2].i;
  *n = 6;
}
static int64_t attention_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[MAX_KDIM];
  int n;
  attention_dims(g, op, d, &n);
  /* q k^T and att v, 2 flops per multiply-add: the full square, or half of
   * it when causal; kv heads shared by a group change nothing. Backward
   * recomputes q k^T (FlashAttention-style) on top of its 4 products. */
  int64_t f = FLOPS(d[5] ? 2 : 4, d[0], d[1], d[1], d[2]);
  return !bwd ? f : f > INT64_MAX / 5 ? INT64_MAX : 5 * f / 2;
}

/* causal_self_attention (GPT-2's block, Llama's with kv_heads): qkv
 * projection to (heads + 2 kv_heads) hd channels, attention core, output
 * projection, named "<layer>.qkv", ".core" and ".proj". */
/* rope's float attributes, the kernels' order; causal_self_attention passes them on. */
static const char *const ROPE_FLOATS[5] = {"theta", "rope_factor", "low_freq_factor", "high_freq_factor",
                                           "original_max_position_embeddings"};

static void csa_build(BuildCtx *c) {
  int64_t C = last(in_shape(c, 0)), NH = attr_i(c, "heads");
  if (C % NH != 0)
    build_error(c, "heads", "heads = %lld must be positive and divide the channels %lld", (long long)NH, (long long)C);
  int64_t KVH = kv_heads(c), Cqkv;
  bool fits = ck_mul(2 * KVH, C / NH, &Cqkv) && ck_add(Cqkv, C, &Cqkv); /* KVH <= NH: 2 KVH fits */
  if (!fits)
    build_error(c, NULL, "(heads + 2*kv_heads)*hd = (%lld + 2*%lld)*%lld does not fit in 64 bits", (long long)NH,
                (long long)KVH, (long long)(C / NH));
  Attr lin[MAX_ATTR], core[MAX_ATTR];
  op_attr_defaults(OP_LINEAR, lin, build_attr(c, "heads")->loc);
  op_attr_defaults(OP_ATTENTION, core, build_attr(c, "heads")->loc);
  lin[op_attr_index(OP_LINEAR, "out")].i = Cqkv; /* written as a number: (3*C) would be a new symbol */
  const Attr *qb = build_attr(c, "qkv_bias");    /* the qkv projection's bias; default: bias's */
  lin[op_attr_index(OP_LINEAR, "bias")] = *(qb->s ? qb : build_attr(c, "bias"));
  core[op_attr_index(OP_ATTENTION, "heads")] = *build_attr(c, "heads");
  core[op_attr_index(OP_ATTENTION, "kv_heads")] = *build_attr(c, "kv_heads");
  int t = build_input_id(c, 0);
  t = build_sub(c, OP_LINEAR, "qkv", &t, 1, lin);
  if (attr_i(c, "rope")) { /* rotary embeddings on q and k, in place in the qkv buffer */
    Attr rot[MAX_ATTR];
    op_attr_defaults(OP_ROPE, rot, build_attr(c, "heads")->loc);
    rot[op_attr_index(OP_ROPE, "heads")] = *build_attr(c, "heads");
    rot[op_attr_index(OP_ROPE, "kv_heads")] = *build_attr(c, "kv_heads");
    for (int i = 0; i < 5; i++) rot[op_attr_index(OP_ROPE, ROPE_FLOATS[i])] = *build_attr(c, ROPE_FLOATS[i]);
    t = build_sub(c, OP_ROPE, "rope", &t, 1, rot);
  }
  t = build_sub(c, OP_ATTENTION, "core", &t, 1, core);
  lin[op_attr_index(OP_LINEAR, "out")].i = C;
  lin[op_attr_index(OP_LINEAR, "bias")] = *build_attr(c, "bias");
  build_sub(c, OP_LINEAR, "proj", &t, 1, lin);
}

/* ---- embeddings ---- */

static void embedding_build(BuildCtx *c) {
  const Tensor *tok = build_input(c, 0);
  if (tok->dtype != DT_I32)
    build_error(c, NULL, "embedding input '%s' must be i32 token ids, not %s", tok->name, dtype_name(tok->dtype));
  int64_t V = attr_i(c, "num"), C = attr_i(c, "dim");
  build_data(c, 0, 0);
  build_param(c, 1, "weight", NULL, mat_shape(c, V, attr_sym(c, "num"), C, attr_sym(c, "dim")),
              (Init){INIT_NORMAL, 1.0});
  if (tok->shape.rank + 1 > MAX_RANK) build_error(c, NULL, "input '%s' has too many dims", tok->name);
  Shape s = tok->shape;
  s.d[s.rank] = C;
  s.sym[s.rank++] = attr_sym(c, "dim");
  build_output(c, 0, NULL, build_shape(c, s.rank, s.d, s.sym), DT_F32);
}
static void embedding_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *w = tshape(g, op->in[1]);
  d[0] = in_numel(g, op);
  d[1] = w->d[1];
  d[2] = w->d[0];
  *n = 3;
}

/* position_embedding reads only the leading [B, T] of its input's shape. */
static void posemb_build(BuildCtx *c) {
  const Shape *x = in_shape(c, 0);
  if (x->rank < 2)
    build_error(c, NULL, "position_embedding needs an input of shape (B, T, ...); '%s' has rank %d",
                build_input(c, 0)->name, x->rank);
  int64_t maxT = attr_i(c, "max"), C = attr_i(c, "dim");
  if (x->d[1] > maxT)
    build_error(c, "max", "sequence length %lld exceeds max = %lld", (long long)x->d[1], (long long)maxT);
  build_param(c, 0, "weight", NULL, mat_shape(c, maxT, attr_sym(c, "max"), C, attr_sym(c, "dim")),
              (Init){INIT_NORMAL, 1.0});
  int64_t d[3] = {x->d[0], x->d[1], C};
  const char *sy[3] = {x->sym[0], x->sym[1], attr_sym(c, "dim")};
  build_output(c, 0, NULL, build_shape(c, 3, d, sy), DT_F32);
}
static void posemb_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *y = tshape(g, op->out[0]);
  d[0] = y->d[0];
  d[1] = y->d[1];
  d[2] = y->d[2];
  d[3] = tshape(g, op->in[0])->d[0];
  *n = 4;
}

/* ---- rope: rotary position embedding of a packed qkv [B, T, (heads + 2 kv_heads) hd] ---- */

/* kv_heads when written (0 is its default: absent), else heads. */
static int64_t rope_kv(const Attr *kv, int64_t heads) { return kv->i ? kv->i : heads; }

static void rope_build(BuildCtx *c) {
  need_float(c, 0);
  const Shape *x = in_shape(c, 0);
  if (x->rank != 3) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "rope needs qkv of shape (B, T, (heads + 2*kv_heads)*hd); '%s' is %s %s",
                build_input(c, 0)->name, shape_sym_str(tmp, x), shape_val_str(tmp, x));
  }
  int64_t H = attr_i(c, "heads"), KV = kv_heads(c), C = x->d[2], n;
  if (!ck_mul(2, KV, &n) || !ck_add(H, n, &n) || C % n != 0)
    build_error(c, "heads",
                "the channels %lld are not (heads + 2*kv_heads) * hd = (%lld + 2*%lld) * hd for an integer hd",
                (long long)C, (long long)H, (long long)KV);
  if (C / n % 2 != 0)
    build_error(c, "heads", "rope needs an even head dimension; hd = %lld / (%lld + 2*%lld) = %lld", (long long)C,
                (long long)H, (long long)KV, (long long)(C / n));
  /* Llama 3's scaling (rope_factor > 0; kernels' rt_rope_freq): the other three with it, high above low */
  double fac = build_attr(c, "rope_factor")->f, lo = build_attr(c, "low_freq_factor")->f,
         hi = build_attr(c, "high_freq_factor")->f, orig = build_attr(c, "original_max_position_embeddings")->f;
  if (fac < 0 || (fac > 0 && !(lo > 0 && hi > lo && orig > 0)) || (fac == 0 && (lo || hi || orig)))
    build_error(c, "rope_factor",
                "Llama 3 rope scaling needs rope_factor > 0 with 0 < low_freq_factor < high_freq_factor and "
                "original_max_position_embeddings > 0 (rope_factor = %g, %g, %g, %g); without rope_factor, none of "
                "them",
                fac, lo, hi, orig);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, *x, DT_F32);
}
static void rope_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  int64_t H = op->attr[0].i, KV = rope_kv(&op->attr[1], H);
  d[0] = x->d[0];
  d[1] = x->d[1];
  d[2] = H;
  d[3] = KV;
  d[4] = x->d[2] / (H + 2 * KV);
  *n = 5;
}
/* two products and a sum per rotated element; the angles' sin and cos are
 * computed once per position and frequency, shared by every head */
static int64_t rope_flops(const Graph *g, const Op *op, bool bwd) {
  (void)bwd;
  return FLOPS(3, out_numel(g, op));
}

/* ---- losses ---- */

/* Input 0's rows (every dim but the last); input 1 must be i32 targets of
 * that shape (what: how the error names input 0). */
static Shape need_targets(BuildCtx *c, const char *what) {
  need_float(c, 0);
  need_rank(c, 0, 1);
  const Shape *x = in_shape(c, 0);
  const Tensor *tg = build_input(c, 1);
  Shape r = rows_of(c, x);
  bool ok = tg->dtype == DT_I32 && tg->shape.rank == r.rank;
  for (int i = 0; ok && i < r.rank; i++) ok = tg->shape.d[i] == r.d[i];
  if (!ok) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "shape mismatch: %s '%s' %s %s needs i32 targets of shape %s %s; '%s' is %s %s %s", what,
                build_input(c, 0)->name, shape_sym_str(tmp, x), shape_val_str(tmp, x), shape_sym_str(tmp, &r),
                shape_val_str(tmp, &r), tg->name, dtype_name(tg->dtype), shape_sym_str(tmp, &tg->shape),
                shape_val_str(tmp, &tg->shape));
  }
  return r;
}

static void ce_build(BuildCtx *c) {
  Shape r = need_targets(c, "cross_entropy of logits");
  build_data(c, 0, 0);
  build_data(c, 1, 1);
  build_output(c, 0, NULL, build_shape(c, 0, NULL, NULL), DT_F32);
  build_output(c, 1, "lse", r, DT_F32);
}
static int64_t ce_flops(const Graph *g, const Op *op, bool bwd) { return FLOPS(bwd ? 4 : 5, in_numel(g, op)); }
/* eval keeps no row statistics: the CUDA kernel borrows 4 bytes a row */
static int64_t ce_workspace(const int64_t *d) { return 4 * d[0]; } /* N V */

static void mse_build(BuildCtx *c) {
  need_float(c, 0);
  need_float(c, 1);
  same_shape(c, 0, 1);
  build_data(c, 0, 0);
  build_data(c, 1, 1);
  build_output(c, 0, NULL, build_shape(c, 0, NULL, NULL), DT_F32);
}
static void mse_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  d[0] = in_numel(g, op);
  *n = 1;
}
static int64_t mse_flops(const Graph *g, const Op *op, bool bwd) {
  (void)bwd;
  return FLOPS(3, in_numel(g, op));
}

/* ---- linear_cross_entropy: cross_entropy(x W^T + b, targets), the logits
 * a chunk of rows at a time ----
 * Mean cross-entropy of the logits x W^T (+ b) against integer targets,
 * computed `chunk` rows at a time: a chunk's logits exist only in the op's
 * arena scratch (R V floats), never as a tensor. This is Liger Kernel's
 * strategy: the loss is the step's last forward op and its upstream
 * gradient is the loss scale, known up to that factor, so the training
 * forward computes the gradients right away, chunk by chunk, while the
 * chunk's logits are in scratch: dlogits = (softmax - onehot) / N in place,
 * then dx's rows (dlogits W), dW += dlogits^T x, db += colsum(dlogits). They
 * are the op's statistics (nstats), live from forward to backward, and the
 * backward scales them by the loss scale in place (inplace_bwd): the
 * classifier costs no FLOP more than linear + cross_entropy. The other
 * exact strategy, Cut Cross-Entropy's (backward recomputes every chunk's
 * logits), keeps nothing between the passes but pays 2 N K V more FLOPs
 * (about 9.5% of GPT-2 124M's step), which alone breaks the 5% goal at 4G;
 * dW's statistic costs V K floats (147 MiB for GPT-2), dx's N K, against
 * N V for the logits (1.54 GiB). Eval (statistics NULL) computes the loss
 * only. The planner builds this op from a linear whose only consumer is a
 * cross_entropy (gb_fuse_loss) and sets `chunk`; in YAML it may be written
 * directly. Slots: in x W b targets; out loss dx dW db (db: [1], unused,
 * without a bias); dims N V K R. */
static void lce_build(BuildCtx *c) {
  Shape r = need_targets(c, "linear_cross_entropy of");
  const Shape *x = in_shape(c, 0);
  int64_t K = last(x), V = attr_i(c, "out"), R = attr_i(c, "chunk"), N = shape_numel(&r);
  if (R > N)
    build_error(c, "chunk", "chunk = %lld rows is more than the %lld rows of '%s'; use at most %lld", (long long)R,
                (long long)N, build_input(c, 0)->name, (long long)N);
  const char *ksym = x->sym[x->rank - 1], *vsym = attr_sym(c, "out");
  build_data(c, 0, 0);
  build_data(c, 3, 1);
  Init u = {INIT_UNIFORM, 1.0 / sqrt((double)K)};
  Shape ws = mat_shape(c, V, vsym, K, ksym);
  build_param(c, 1, "weight", "weight", ws, u);
  bool bias = attr_i(c, "bias");
  if (bias) build_param(c, 2, "bias", NULL, vec_shape(c, V, vsym), u);
  build_output(c, 0, NULL, build_shape(c, 0, NULL, NULL), DT_F32);
  build_output(c, 1, "dx", *x, DT_F32);
  build_output(c, 2, "dweight", ws, DT_F32);
  build_output(c, 3, "dbias", bias ? vec_shape(c, V, vsym) : vec_shape(c, 1, NULL), DT_F32);
}
/* N V K R: rows, classes, features, rows per chunk (the chunk attribute; absent: N) */
static void lce_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = rows(x);
  d[1] = op->attr[0].i;
  d[2] = last(x);
  d[3] = op->attr[3].i > 0 && op->attr[3].i < d[0] ? op->attr[3].i : d[0];
  *n = 4;
}
/* Forward: the logits (2 N K V), cross-entropy and its gradient (9 N V, as
 * cross_entropy's forward and backward), dx and dW (4 N K V), the bias'
 * (N V); backward: the statistics scaled. Together what linear +
 * cross_entropy cost, forward and backward: nothing extra. */
static int64_t lce_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[MAX_KDIM];
  int n;
  lce_dims(g, op, d, &n);
  bool bias = op->in[2] >= 0;
  if (bwd) return FLOPS(d[2] + 1, d[0] + d[1]);
  int64_t f = FLOPS(6, d[0], d[1], d[2]), e = FLOPS(bias ? 10 : 9, d[0], d[1]);
  return f > INT64_MAX - e ? INT64_MAX : f + e;
}
/* One chunk's logits (R V floats), then the N rows' loss terms. */
static int64_t lce_scratch(const int64_t *d, bool backward) {
  if (backward) return 0;
  int64_t rv = FLOPS(d[3], d[1]);
  return rv > INT64_MAX / 8 ? INT64_MAX : 4 * (rv + d[0]);
}

/* ---- conv2d: x[N, C, H, W] * weight[out, C/groups, k, k] (+ bias[out]) -> [N, out, Ho, Wo] ----
 * PyTorch's nn.Conv2d with a square kernel, stride, padding and dilation;
 * Ho = (H + 2 padding - dilation (k - 1) - 1) / stride + 1, likewise Wo. */

enum { CV_N, CV_C, CV_H, CV_W, CV_O, CV_HO, CV_WO, CV_K, CV_S, CV_P, CV_D, CV_G, CV_NDIM };

static void conv2d_build(BuildCtx *c) {
  need_float(c, 0);
  const Tensor *xt = build_input(c, 0);
  const Shape *x = &xt->shape;
  if (x->rank != 4) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "conv2d needs an input of shape (N, C, H, W); '%s' is %s %s", xt->name, shape_sym_str(tmp, x),
                shape_val_str(tmp, x));
  }
  int64_t C = x->d[1], H = x->d[2], W = x->d[3], O = attr_i(c, "out"), k = attr_i(c, "kernel");
  int64_t s = attr_i(c, "stride"), pad = attr_i(c, "padding"), dil = attr_i(c, "dilation"), G = attr_i(c, "groups");
  if (C % G != 0 || O % G != 0)
    build_error(c, "groups", "groups = %lld must divide the input channels %lld and out = %lld", (long long)G,
                (long long)C, (long long)O);
  /* the kernel's reach and the padded input, in checked arithmetic (all are dims) */
  int64_t reach, ph, pw;
  bool ok = ck_mul(dil, k - 1, &reach) && ck_add(reach, 1, &reach) && ck_mul(2, pad, &ph) && ck_add(W, ph, &pw) &&
            ck_add(H, ph, &ph);
  if (!ok) build_error(c, "padding", "padding and dilation * (kernel - 1) must fit in 64 bits");
  if (reach > ph || reach > pw)
    build_error(c, "kernel",
                "kernel %lld with dilation %lld spans %lld pixels, but input '%s' padded by %lld is %lldx%lld; use a "
                "smaller kernel or dilation, or more padding",
                (long long)k, (long long)dil, (long long)reach, xt->name, (long long)pad, (long long)ph, (long long)pw);
  int64_t Ho = (ph - reach) / s + 1, Wo = (pw - reach) / s + 1;
  double fan = (double)(C / G) * (double)k * (double)k; /* in double: the weight's size is checked when built */
  bool same = s == 1 && reach == 2 * pad + 1;           /* Ho = H: the input's symbols carry over */
  build_data(c, 0, 0);
  int64_t wd[4] = {O, C / G, k, k};
  const char *wsym[4] = {attr_sym(c, "out"), G == 1 ? x->sym[1] : NULL, attr_sym(c, "kernel"), attr_sym(c, "kernel")};
  Init u = {INIT_UNIFORM, 1.0 / sqrt(fan)}; /* nn.Conv2d: weight and bias U(+-1/sqrt(fan_in)) */
  build_param(c, 1, "weight", NULL, build_shape(c, 4, wd, wsym), u);
  if (attr_i(c, "bias")) build_param(c, 2, "bias", NULL, vec_shape(c, O, attr_sym(c, "out")), u);
  int64_t od[4] = {x->d[0], O, Ho, Wo};
  const char *osym[4] = {x->sym[0], attr_sym(c, "out"), same ? x->sym[2] : NULL, same ? x->sym[3] : NULL};
  build_output(c, 0, NULL, build_shape(c, 4, od, osym), DT_F32);
}
static void conv2d_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]), *y = tshape(g, op->out[0]);
  const Attr *a = op->attr; /* out, kernel, stride, padding, dilation, groups, bias: the table's order */
  d[CV_N] = x->d[0], d[CV_C] = x->d[1], d[CV_H] = x->d[2], d[CV_W] = x->d[3];
  d[CV_O] = y->d[1], d[CV_HO] = y->d[2], d[CV_WO] = y->d[3];
  d[CV_K] = a[1].i, d[CV_S] = a[2].i, d[CV_P] = a[3].i, d[CV_D] = a[4].i, d[CV_G] = a[5].i;
  *n = CV_NDIM;
}
static int64_t conv2d_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[MAX_KDIM];
  int n;
  conv2d_dims(g, op, d, &n);
  return FLOPS(bwd ? 4 : 2, d[CV_N], d[CV_O], d[CV_HO], d[CV_WO], d[CV_C] / d[CV_G], d[CV_K], d[CV_K]);
}
/* cuBLAS's split-K sums: one sample's output, as linear's */
static int64_t conv2d_workspace(const int64_t *d) { return 4 * d[CV_O] * d[CV_HO] * d[CV_WO]; }
/* The im2col matrix of one sample, [C k k, Ho Wo] floats: the kernels take
 * the batch one sample at a time (each product split over the threads),
 * forward (columns of x), backward (columns of x for dW, then the columns
 * of dx before col2im, in the same buffer). A 1x1 kernel at stride 1
 * without padding reads x as it is: no scratch. */
static int64_t conv2d_scratch(const int64_t *d, bool backward) {
  (void)backward;
  if (d[CV_K] == 1 && d[CV_S] == 1 && d[CV_P] == 0) return 0;
  return FLOPS(4, d[CV_C], d[CV_K], d[CV_K], d[CV_HO], d[CV_WO]);
}

/* ---- batchnorm2d: x [N, C, H, W] or [N, C], statistics per channel over N (H, W) ---- */

/* out = (x - mean) rstd w + b per channel c, rstd = 1 / sqrt(var + eps):
 * batch statistics in training (saved for backward; the running ones updated
 * with momentum and the unbiased variance, as torch), the running statistics
 * (state, build_state) in eval. */
static void batchnorm_build(BuildCtx *c) {
  need_float(c, 0);
  const Shape *x = in_shape(c, 0);
  if (x->rank != 4 && x->rank != 2) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "batchnorm2d needs an input of shape (N, C, H, W) or (N, C); '%s' is %s %s (rank %d)",
                build_input(c, 0)->name, shape_sym_str(tmp, x), shape_val_str(tmp, x), x->rank);
  }
  double mom = build_attr(c, "momentum")->f;
  if (!(mom >= 0.0 && mom <= 1.0))
    build_error(c, "momentum", "momentum = %g must be in [0, 1] (the running statistics' update weight)", mom);
  int64_t C = x->d[1], per = shape_numel(x) / C; /* values per channel: N H W */
  if (per < 2)
    build_error(c, NULL, "batchnorm2d needs more than one value per channel to train; '%s' has %lld (N H W)",
                build_input(c, 0)->name, (long long)per);
  Shape cs = vec_shape(c, C, x->sym[1]);
  build_data(c, 0, 0);
  build_param(c, 1, "weight", NULL, cs, (Init){INIT_ONES, 0});
  build_param(c, 2, "bias", NULL, cs, (Init){INIT_ZEROS, 0});
  build_state(c, 3, "running_mean", cs, (Init){INIT_ZEROS, 0});
  build_state(c, 4, "running_var", cs, (Init){INIT_ONES, 0});
  build_output(c, 0, NULL, *x, DT_F32);
  build_output(c, 1, "mean", cs, DT_F32);
  build_output(c, 2, "rstd", cs, DT_F32);
}
/* N C S, S = H W (1 for [N, C]) */
static void batchnorm_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0];
  d[1] = x->d[1];
  d[2] = x->rank == 4 ? x->d[2] * x->d[3] : 1;
  *n = 3;
}

/* ---- shape ops: flatten, reshape, transpose, concat, class_token, select ----
 * Axes and indices count from the end when negative, as torch's do. flatten
 * and reshape move no data: their out may be x (planned in place where x
 * dies), and the kernels copy only when the pointers differ. */

/* Axis attribute `key` of a rank-r input, made non-negative; an error at the
 * attribute when out of range. */
static int axis_attr(BuildCtx *c, const char *key, int r, int k) {
  int64_t v = attr_i(c, key);
  if (v < -r || v >= r) {
    Arena *tmp = build_scratch(c);
    const Shape *x = in_shape(c, k);
    build_error(c, key, "%s = %lld is out of range for input '%s' %s %s of rank %d (use %d .. %d)", key, (long long)v,
                build_input(c, k)->name, shape_sym_str(tmp, x), shape_val_str(tmp, x), r, -r, r - 1);
  }
  return (int)(v < 0 ? v + r : v);
}

/* A dim symbol as an operand of `op`: a name or a number as is, an
 * expression in parentheses (sums need none). */
static const char *operand(BuildCtx *c, const char *sym, char op) {
  bool plain = true;
  for (const char *p = sym; *p; p++)
    plain &= *p == '_' || (*p >= '0' && *p <= '9') || ((*p | 32) >= 'a' && (*p | 32) <= 'z');
  return plain || op == '+' ? sym : ar_printf(build_scratch(c), "(%s)", sym);
}

/* The product of dims [lo, hi] of s (it divides the numel: no overflow),
 * with its symbol ("C*D", "(H/P)*(W/P)"). */
static int64_t span(BuildCtx *c, const Shape *s, int lo, int hi, const char **sym) {
  int64_t v = 1;
  *sym = lo == hi ? s->sym[lo] : "";
  for (int i = lo; i <= hi; i++) {
    v *= s->d[i];
    if (lo != hi) *sym = ar_printf(build_scratch(c), "%s%s%s", *sym, i > lo ? "*" : "", operand(c, s->sym[i], '*'));
  }
  return v;
}

static int64_t prod(const Shape *s, int lo, int hi) { /* dims [lo, hi) */
  int64_t v = 1;
  for (int i = lo; i < hi; i++) v *= s->d[i];
  return v;
}

static void copy_dims(const Shape *s, int lo, int hi, int64_t *d, const char **sy, int *n) {
  for (int i = lo; i < hi; i++) d[*n] = s->d[i], sy[(*n)++] = s->sym[i];
}

/* torch.flatten(x, start, end): dims start..end merged into one. */
static void flatten_build(BuildCtx *c) {
  need_float(c, 0);
  need_rank(c, 0, 1);
  const Shape *x = in_shape(c, 0);
  int r = x->rank, s = axis_attr(c, "start", r, 0), e = axis_attr(c, "end", r, 0);
  if (s > e) {
    Arena *tmp = build_scratch(c);
    build_error(c, "start", "start = %lld (dim %d) comes after end = %lld (dim %d) of input '%s' %s",
                (long long)attr_i(c, "start"), s, (long long)attr_i(c, "end"), e, build_input(c, 0)->name,
                shape_sym_str(tmp, x));
  }
  int64_t d[MAX_RANK];
  const char *sy[MAX_RANK];
  int n = 0;
  copy_dims(x, 0, s, d, sy, &n);
  d[n] = span(c, x, s, e, &sy[n]);
  n++;
  copy_dims(x, e + 1, r, d, sy, &n);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, n, d, sy), DT_F32);
}

/* reshape to `shape`, one dim of which may be -1 (inferred). */
static void reshape_build(BuildCtx *c) {
  need_float(c, 0);
  const Shape *x = in_shape(c, 0);
  const Attr *a = build_attr(c, "shape");
  const AttrList *l = a->list; /* required: the loader made it */
  int64_t d[MAX_RANK], known = 1, n = shape_numel(x);
  const char *sy[MAX_RANK];
  int infer = -1;
  bool fits = true;
  for (int k = 0; k < l->n; k++) {
    d[k] = l->v[k], sy[k] = l->sym[k];
    if (d[k] == -1) infer = k, sy[k] = NULL;
    else fits &= ck_mul(known, d[k], &known);
  }
  Arena *tmp = build_scratch(c);
  const char *xs = ar_printf(tmp, "'%s' %s %s", build_input(c, 0)->name, shape_sym_str(tmp, x), shape_val_str(tmp, x));
  if (infer >= 0 && !fits)
    build_error(c, "shape", "cannot infer the -1 of shape %s: the other dims multiply past 2^63", a->s);
  if (infer >= 0 && n % known != 0)
    build_error(c, "shape",
                "cannot infer the -1 of shape %s: input %s has %lld elements, not a multiple of %lld (the other dims)",
                a->s, xs, (long long)n, (long long)known);
  if (infer >= 0) d[infer] = n / known;
  else if (!fits || known != n) {
    Shape want = build_shape(c, l->n, d, sy);
    build_error(c, "shape", "shape %s %s has %s elements but input %s has %lld; reshape keeps the elements", a->s,
                shape_val_str(tmp, &want), fits ? ar_printf(tmp, "%lld", (long long)known) : "more than 2^63", xs,
                (long long)n);
  }
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, l->n, d, sy), DT_F32);
}

/* n: the elements (a copy, or nothing in place) */
static void shape_numel_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  d[0] = out_numel(g, op);
  *n = 1;
}
/* Shape ops do no arithmetic: their cost is the bytes they move (cost.c). */
static int64_t shape_flops(const Graph *g, const Op *op, bool bwd) {
  (void)g, (void)op, (void)bwd;
  return 0;
}

/* torch.transpose(x, dim0, dim1). */
static void transpose_build(BuildCtx *c) {
  need_float(c, 0);
  need_rank(c, 0, 1);
  Shape y = *in_shape(c, 0);
  int a = axis_attr(c, "dim0", y.rank, 0), b = axis_attr(c, "dim1", y.rank, 0);
  int64_t v = y.d[a];
  const char *sy = y.sym[a];
  y.d[a] = y.d[b], y.sym[a] = y.sym[b];
  y.d[b] = v, y.sym[b] = sy;
  build_data(c, 0, 0);
  build_output(c, 0, NULL, y, DT_F32);
}
/* x as [A, P, M, Q, Z] with P and Q the swapped axes (P = Q = 1 and M the
 * axis when they are one): out is [A, Q, M, P, Z]. */
static void transpose_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  int r = x->rank, a = (int)op->attr[0].i, b = (int)op->attr[1].i; /* dim0, dim1 */
  a = a < 0 ? a + r : a, b = b < 0 ? b + r : b;
  int lo = a < b ? a : b, hi = a < b ? b : a;
  d[0] = prod(x, 0, lo);
  d[1] = lo == hi ? 1 : x->d[lo];
  d[2] = lo == hi ? x->d[lo] : prod(x, lo + 1, hi);
  d[3] = lo == hi ? 1 : x->d[hi];
  d[4] = prod(x, hi + 1, r);
  *n = 5;
}

/* torch.cat(inputs, axis): 2..6 inputs equal but along the axis. */
static void concat_build(BuildCtx *c) {
  int n = build_ninputs(c);
  for (int k = 0; k < n; k++) {
    need_float(c, k);
    need_rank(c, k, 1);
  }
  Shape y = *in_shape(c, 0);
  int ax = axis_attr(c, "axis", y.rank, 0);
  const char *sym = y.sym[ax];
  for (int k = 1; k < n; k++) {
    const Shape *s = in_shape(c, k);
    bool ok = s->rank == y.rank;
    for (int i = 0; ok && i < y.rank; i++) ok = i == ax || s->d[i] == y.d[i];
    if (!ok) {
      Arena *tmp = build_scratch(c);
      const Shape *s0 = in_shape(c, 0);
      build_error(c, "axis",
                  "concat along axis = %lld (dim %d): '%s' is %s %s but '%s' is %s %s; only dim %d may differ",
                  (long long)attr_i(c, "axis"), ax, build_input(c, 0)->name, shape_sym_str(tmp, s0),
                  shape_val_str(tmp, s0), build_input(c, k)->name, shape_sym_str(tmp, s), shape_val_str(tmp, s), ax);
    }
    if (!ck_add(y.d[ax], s->d[ax], &y.d[ax])) build_error(c, "axis", "the concatenated dim does not fit in 64 bits");
    sym = ar_printf(build_scratch(c), "%s+%s", sym, s->sym[ax]);
  }
  y.sym[ax] = sym;
  for (int k = 0; k < n; k++) build_data(c, k, k);
  build_output(c, 0, NULL, y, DT_F32);
}
/* O I n0 .. n5: x_k as [O, n_k, I]; n_k = 0 for an absent slot */
static void concat_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *y = tshape(g, op->out[0]);
  int ax = (int)op->attr[0].i; /* axis */
  ax = ax < 0 ? ax + y->rank : ax;
  d[0] = prod(y, 0, ax);
  d[1] = prod(y, ax + 1, y->rank);
  for (int k = 0; k < MAX_OP_IN; k++) d[2 + k] = op->in[k] >= 0 ? tshape(g, op->in[k])->d[ax] : 0;
  *n = 2 + MAX_OP_IN;
}

/* class_token: x [B, N, C] -> [B, N+1, C], a learned token [C] first in
 * every sample (ViT's cls token; init N(0, 0.02) as timm's). */
static void class_token_build(BuildCtx *c) {
  need_float(c, 0);
  const Shape *x = in_shape(c, 0);
  if (x->rank != 3) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "class_token needs x of shape (B, N, C); '%s' is %s %s", build_input(c, 0)->name,
                shape_sym_str(tmp, x), shape_val_str(tmp, x));
  }
  int64_t d[3] = {x->d[0], x->d[1] + 1, x->d[2]}; /* N + 1 <= numel: no overflow */
  const char *sy[3] = {x->sym[0], ar_printf(build_scratch(c), "%s+1", x->sym[1]), x->sym[2]};
  build_data(c, 0, 0);
  build_param(c, 1, "weight", NULL, vec_shape(c, x->d[2], x->sym[2]), (Init){INIT_NORMAL, 0.02});
  build_output(c, 0, NULL, build_shape(c, 3, d, sy), DT_F32);
}
static void class_token_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0], d[1] = x->d[1], d[2] = x->d[2];
  *n = 3;
}

/* x.select(axis, index): the axis dropped. */
static void select_build(BuildCtx *c) {
  need_float(c, 0);
  need_rank(c, 0, 2);
  const Shape *x = in_shape(c, 0);
  int ax = axis_attr(c, "axis", x->rank, 0);
  int64_t i = attr_i(c, "index"), n = x->d[ax];
  if (i < -n || i >= n) {
    Arena *tmp = build_scratch(c);
    build_error(c, "index",
                "index = %lld is out of range for dim %d of input '%s' %s %s, of size %lld (use %lld .. %lld)",
                (long long)i, ax, build_input(c, 0)->name, shape_sym_str(tmp, x), shape_val_str(tmp, x), (long long)n,
                (long long)-n, (long long)(n - 1));
  }
  int64_t d[MAX_RANK];
  const char *sy[MAX_RANK];
  int r = 0;
  copy_dims(x, 0, ax, d, sy, &r);
  copy_dims(x, ax + 1, x->rank, d, sy, &r);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, r, d, sy), DT_F32);
}
/* O N I index: x as [O, N, I], out [O, I] = x[:, index, :] */
static void select_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  int ax = (int)op->attr[0].i; /* axis, index */
  ax = ax < 0 ? ax + x->rank : ax;
  d[0] = prod(x, 0, ax);
  d[1] = x->d[ax];
  d[2] = prod(x, ax + 1, x->rank);
  d[3] = op->attr[1].i < 0 ? op->attr[1].i + d[1] : op->attr[1].i;
  *n = 4;
}

/* ---- pooling: maxpool2d, avgpool2d [N, C, H, W] -> [N, C, Ho, Wo]; global_avgpool -> [N, C] ---- */

static void need_nchw(BuildCtx *c) {
  const Shape *x = in_shape(c, 0);
  if (x->rank != 4) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "this op needs an input of shape (N, C, H, W); '%s' is %s %s", build_input(c, 0)->name,
                shape_sym_str(tmp, x), shape_val_str(tmp, x));
  }
}

/* kernel, stride (0: the kernel) and padding, the attributes' order */
static int64_t pool_stride(const Attr *a) { return a[1].i ? a[1].i : a[0].i; }

/* floor((n + 2 p - k) / s) + 1, torch's output size; with ceil_mode (maxpool2d) the division rounds up, less
 * a last window that would start past the input and its left padding (torch's rule). The padded size must hold
 * one window. */
static int64_t pool_out(BuildCtx *c, int64_t n, const char *axis, int64_t k, int64_t s, int64_t p, bool ceil) {
  int64_t padded;
  if (!ck_mul(2, p, &padded) || !ck_add(padded, n, &padded) || padded < k)
    build_error(c, "kernel",
                "kernel = %lld is larger than the padded input: %s + 2 * padding = %lld + 2 * %lld; use a smaller "
                "kernel or more padding",
                (long long)k, axis, (long long)n, (long long)p);
  int64_t o = (padded - k + (ceil ? s - 1 : 0)) / s + 1;
  return ceil && (o - 1) * s >= n + p ? o - 1 : o;
}

static void pool_build_mode(BuildCtx *c, bool ceil) {
  need_float(c, 0);
  need_nchw(c);
  const Shape *x = in_shape(c, 0);
  int64_t k = attr_i(c, "kernel"), s = attr_i(c, "stride") ? attr_i(c, "stride") : k, p = attr_i(c, "padding");
  if (p > k / 2)
    build_error(c, "padding", "padding = %lld must be at most half the kernel (%lld), as torch requires", (long long)p,
                (long long)k);
  int64_t d[4] = {x->d[0], x->d[1], pool_out(c, x->d[2], "H", k, s, p, ceil),
                  pool_out(c, x->d[3], "W", k, s, p, ceil)};
  const char *sym[4] = {x->sym[0], x->sym[1], NULL, NULL};
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, 4, d, sym), DT_F32);
}
static void maxpool_build(BuildCtx *c) { pool_build_mode(c, attr_i(c, "ceil_mode")); }
/* avgpool2d has no ceil_mode: torch's divisor of a window past the padding is not k k */
static void pool_build(BuildCtx *c) { pool_build_mode(c, false); }
/* N C H W Ho Wo k s p */
static void pool_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]), *y = tshape(g, op->out[0]);
  for (int i = 0; i < 4; i++) d[i] = x->d[i];
  d[4] = y->d[2];
  d[5] = y->d[3];
  d[6] = op->attr[0].i;
  d[7] = pool_stride(op->attr);
  d[8] = op->attr[2].i;
  *n = 9;
}
/* a comparison or an addition per window element; maxpool's backward finds
 * the maximum again */
static int64_t pool_flops(const Graph *g, const Op *op, bool bwd) {
  (void)bwd;
  return FLOPS(out_numel(g, op), op->attr[0].i, op->attr[0].i);
}

/* adaptive_avgpool2d: [N, C, H, W] -> [N, C, height, width], output i of a dim of n averaging the inputs
 * floor(i n / o) .. ceil((i + 1) n / o) - 1 (torch's adaptive windows: of uneven sizes when o does not divide n,
 * overlapping or repeated when o > n) */
static void adaptive_pool_build(BuildCtx *c) {
  need_float(c, 0);
  need_nchw(c);
  const Shape *x = in_shape(c, 0);
  int64_t d[4] = {x->d[0], x->d[1], attr_i(c, "height"), attr_i(c, "width")};
  const char *sym[4] = {x->sym[0], x->sym[1], attr_sym(c, "height"), attr_sym(c, "width")};
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, 4, d, sym), DT_F32);
}
/* N C H W Ho Wo */
static void adaptive_pool_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]), *y = tshape(g, op->out[0]);
  for (int i = 0; i < 4; i++) d[i] = x->d[i];
  d[4] = y->d[2];
  d[5] = y->d[3];
  *n = 6;
}
/* an addition per window element: a window spans at most ceil(n / o) + 1 inputs of a dim */
static int64_t adaptive_pool_flops(const Graph *g, const Op *op, bool bwd) {
  (void)bwd;
  const Shape *x = tshape(g, op->in[0]), *y = tshape(g, op->out[0]);
  return FLOPS(out_numel(g, op), x->d[2] / y->d[2] + 2, x->d[3] / y->d[3] + 2);
}

static void gap_build(BuildCtx *c) {
  need_float(c, 0);
  need_nchw(c);
  const Shape *x = in_shape(c, 0);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, 2, x->d, x->sym), DT_F32);
}
/* NC HW */
static void gap_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0] * x->d[1];
  d[1] = x->d[2] * x->d[3];
  *n = 2;
}

/* ---- dropout: out = x * mask / (1 - p), the mask a hash of (key, element) ---- */

static void dropout_build(BuildCtx *c) {
  need_float(c, 0);
  const Attr *p = build_attr(c, "p");
  if (!(p->f >= 0 && p->f < 1))
    build_error(c, "p", "'p' (the probability of zeroing an element) must be in [0, 1), not %s", p->s);
  const Shape *x = in_shape(c, 0);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, *x, DT_F32);
  /* one bit per element, 32 to an i32 word */
  build_output(c, 1, "mask", vec_shape(c, shape_numel(x) / 32 + (shape_numel(x) % 32 != 0), NULL), DT_I32);
}

/* ---- stochastic_depth (torchvision.ops.StochasticDepth): out = x * keep / (1 - p), keep one draw per row of
 * the first dim ("row") or one for the batch ("batch"), dropout's hash of (key, row); nothing stored ---- */

static const char *const sd_mode[] = {"row", "batch", NULL};
static void sd_build(BuildCtx *c) {
  need_float(c, 0);
  const Attr *p = build_attr(c, "p");
  if (!(p->f >= 0 && p->f < 1))
    build_error(c, "p", "'p' (the probability of dropping a row) must be in [0, 1), not %s", p->s);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, *in_shape(c, 0), DT_F32);
}
/* N S batch: rows of S elements, batch mode (one draw for all rows) */
static void sd_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->rank ? x->d[0] : 1;
  d[1] = d[0] ? out_numel(g, op) / d[0] : 0;
  d[2] = op->attr[1].i;
  *n = 3;
}

/* ---- the table ---- */

/* An entry groups related fields on a line. */
/* clang-format off */
static const OpInfo table[OP_COUNT] = {
    [OP_LINEAR] =
        {
            .name = "linear",
            .attrs = {{"out", ATTR_INT, .required = true}, {"bias", ATTR_BOOL, .dflt = 1}, {"weight", ATTR_PARAM}},
            .min_inputs = 1, .max_inputs = 1, .nin = 3, .nout = 1,
            .build = linear_build, .dims = linear_dims, .flops = linear_flops,
            .gemm = true, .workspace = linear_workspace,
            .half_bin = SLOT(1), /* x */
            .nbin = 3, .bin = {REF_DOUT, REF_IN(0), REF_IN(1)},
            .bin_for = {0, SLOT(1), SLOT(0)}, /* x for dW, W for dx */
            .bout_split = SLOT(0) | SLOT(1),
            .nbout = 3, .bout = {REF_GIN(0), REF_GIN(1), REF_GIN(2)},
            .grad_to = {true, true, true},
            .gpt2_projection = true,
        },
    [OP_MATMUL] =
        {
            .name = "matmul",
            .min_inputs = 2, .max_inputs = 2, .nin = 2, .nout = 1,
            .build = matmul_build, .dims = matmul_dims, .flops = matmul_flops,
            .gemm = true, .workspace = matmul_workspace,
            .half_bin = SLOT(1) | SLOT(2), /* a, b */
            .nbin = 3, .bin = {REF_DOUT, REF_IN(0), REF_IN(1)},
            .bin_for = {0, SLOT(1), SLOT(0)}, /* a for db, b for da */
            .bout_split = SLOT(0) | SLOT(1),
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
        },
    [OP_ADD] =
        {
            .name = "add",
            .min_inputs = 2, .max_inputs = 2, .nin = 2, .nout = 1,
            .build = add_build, .dims = numel_dims, .flops = numel_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
            .inplace_fwd = SLOT(0) | SLOT(1), .inplace_bwd = {SLOT(0), SLOT(0)},
            .residual_join = true,
        },
    [OP_MUL] =
        {
            .name = "mul",
            .min_inputs = 2, .max_inputs = 2, .nin = 2, .nout = 1,
            .build = add_build, /* same shapes, as add */
            .dims = numel_dims, .flops = mul_flops,
            .cheap = true, .half_bin = SLOT(1) | SLOT(2), /* a, b */
            .nbin = 3, .bin = {REF_DOUT, REF_IN(0), REF_IN(1)},
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
            .inplace_fwd = SLOT(0) | SLOT(1), .inplace_bwd = {SLOT(0), SLOT(0)},
        },
    [OP_SCALE_CHANNELS] =
        {
            .name = "scale_channels",
            .min_inputs = 2, .max_inputs = 2, .nin = 2, .nout = 1,
            .build = scale_channels_build, .dims = scale_channels_dims, .flops = mul_flops,
            .cheap = true, .half_bin = SLOT(1) | SLOT(2), /* x, s */
            .nbin = 3, .bin = {REF_DOUT, REF_IN(0), REF_IN(1)},
            .bin_for = {0, SLOT(1), SLOT(0)}, /* x for ds, s for dx */
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_RELU] =
        {
            .name = "relu",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = unary_build, .dims = numel_dims, .flops = numel_flops,
            .cheap = true, .half_bin = SLOT(1), /* out */
            .nbin = 2, .bin = {REF_DOUT, REF_OUT(0)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_RELU6] =
        {
            .name = "relu6",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = unary_build, .dims = numel_dims, .flops = numel_flops,
            .cheap = true, .half_bin = SLOT(1), /* out */
            .nbin = 2, .bin = {REF_DOUT, REF_OUT(0)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_SIGMOID] =
        {
            .name = "sigmoid",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = unary_build, .dims = numel_dims, .flops = silu_flops,
            .cheap = true, .half_bin = SLOT(1), /* out */
            .nbin = 2, .bin = {REF_DOUT, REF_OUT(0)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_HARDSWISH] =
        {
            .name = "hardswish",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = unary_build, .dims = numel_dims, .flops = mul_flops,
            .cheap = true, .half_bin = SLOT(1), /* x */
            .nbin = 2, .bin = {REF_DOUT, REF_IN(0)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_HARDSIGMOID] =
        {
            .name = "hardsigmoid",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = unary_build, .dims = numel_dims, .flops = numel_flops,
            .cheap = true, .half_bin = SLOT(1), /* x: the kinks are x = +-3, not a rounded output's 0 and 1 */
            .nbin = 2, .bin = {REF_DOUT, REF_IN(0)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_GELU] =
        {
            .name = "gelu",
            .attrs = {{"approximate", ATTR_ENUM, .dflt = GELU_TANH, .choices = gelu_approximate}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = unary_build, .dims = gelu_dims, .flops = gelu_flops,
            .cheap = true, .half_bin = SLOT(1), /* x */
            .nbin = 2, .bin = {REF_DOUT, REF_IN(0)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_SILU] =
        {
            .name = "silu",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = unary_build, .dims = numel_dims, .flops = silu_flops,
            .cheap = true, .half_bin = SLOT(1), /* x */
            .nbin = 2, .bin = {REF_DOUT, REF_IN(0)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_LAYERNORM] =
        {
            .name = "layernorm",
            .attrs = {{"eps", ATTR_FLOAT, .dflt = 1e-5, .positive = true}, {"bias", ATTR_BOOL, .dflt = 1}},
            .min_inputs = 1, .max_inputs = 1, .nin = 3, .nout = 3, .nstats = 2,
            .build = layernorm_build, .dims = rowwise_dims, .flops = rowwise_flops,
            .cheap = true,
            .nbin = 5, .bin = {REF_DOUT, REF_IN(0), REF_IN(1), REF_OUT(1), REF_OUT(2)},
            .nbout = 3, .bout = {REF_GIN(0), REF_GIN(1), REF_GIN(2)},
            .grad_to = {true, true, true},
        },
    [OP_RMSNORM] =
        {
            .name = "rmsnorm",
            .attrs = {{"eps", ATTR_FLOAT, .dflt = 1e-5, .positive = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 2, .nout = 2, .nstats = 1,
            .build = rmsnorm_build, .dims = rowwise_dims, .flops = rowwise_flops,
            .cheap = true,
            .nbin = 4, .bin = {REF_DOUT, REF_IN(0), REF_IN(1), REF_OUT(1)},
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
        },
    [OP_SOFTMAX] =
        {
            .name = "softmax",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = unary_build, .dims = rowwise_dims, .flops = rowwise_flops,
            .cheap = true,
            .nbin = 2, .bin = {REF_DOUT, REF_OUT(0)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_ATTENTION] =
        {
            .name = "attention",
            /* kv_heads: default 0 = absent, that is heads (attention_dims reads them by position) */
            .attrs = {{"heads", ATTR_INT, .required = true}, {"kv_heads", ATTR_INT}, {"causal", ATTR_BOOL, .dflt = 1}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 2, .nstats = 1,
            .build = attention_build, .dims = attention_dims, .flops = attention_flops,
            .gemm = true, .half_bin = SLOT(1) | SLOT(2), /* qkv, out (not lse) */
            .nbin = 4, .bin = {REF_DOUT, REF_IN(0), REF_OUT(0), REF_OUT(1)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_CAUSAL_SELF_ATTENTION] =
        {
            .name = "causal_self_attention",
            .attrs = {{"heads", ATTR_INT, .required = true}, {"kv_heads", ATTR_INT}, {"bias", ATTR_BOOL, .dflt = 1},
                      {"rope", ATTR_BOOL}, {"theta", ATTR_FLOAT, .dflt = 10000, .positive = true},
                      {"qkv_bias", ATTR_BOOL}, /* absent: bias's (Qwen2: qkv biases, no proj bias) */
                      {"rope_factor", ATTR_FLOAT}, {"low_freq_factor", ATTR_FLOAT}, {"high_freq_factor", ATTR_FLOAT},
                      {"original_max_position_embeddings", ATTR_FLOAT}},
            .min_inputs = 1, .max_inputs = 1,
            .build = csa_build, .composite = true,
        },
    [OP_EMBEDDING] =
        {
            .name = "embedding",
            .attrs = {{"num", ATTR_INT, .required = true}, {"dim", ATTR_INT, .required = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 2, .nout = 1,
            .build = embedding_build, .dims = embedding_dims, .flops = numel_flops,
            .nbin = 2, .bin = {REF_DOUT, REF_IN(0)},
            .nbout = 1, .bout = {REF_GIN(1)},
            .grad_to = {false, true},
            .feed = {FEED_TOKENS},
        },
    [OP_POS_EMBEDDING] =
        {
            .name = "position_embedding",
            .attrs = {{"max", ATTR_INT, .required = true}, {"dim", ATTR_INT, .required = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = posemb_build, .dims = posemb_dims, .fwd_ndim = 3, /* forward never reads Wrows */
            .flops = numel_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_ROPE] =
        {
            .name = "rope",
            .attrs = {{"heads", ATTR_INT, .required = true},
                      {"kv_heads", ATTR_INT}, /* absent: heads */
                      {"theta", ATTR_FLOAT, .dflt = 10000, .positive = true},
                      /* Llama 3's scaling (Hugging Face's rope_scaling type llama3); rope_factor 0: none */
                      {"rope_factor", ATTR_FLOAT}, {"low_freq_factor", ATTR_FLOAT}, {"high_freq_factor", ATTR_FLOAT},
                      {"original_max_position_embeddings", ATTR_FLOAT}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = rope_build, .dims = rope_dims, .flops = rope_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT}, /* backward is the inverse rotation: no forward tensor */
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_CROSS_ENTROPY] =
        {
            .name = "cross_entropy",
            .min_inputs = 2, .max_inputs = 2, .nin = 2, .nout = 2, .nstats = 1,
            .build = ce_build, .dims = rowwise_dims, .flops = ce_flops,
            .workspace = ce_workspace, .workspace_floor = true,
            .nbin = 3, .bin = {REF_IN(0), REF_IN(1), REF_OUT(1)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true, false},
            .inplace_bwd = {SLOT(0)},
            .is_loss = true,
            .feed = {FEED_NONE, FEED_LABELS},
        },
    [OP_MSE] =
        {
            .name = "mse",
            .min_inputs = 2, .max_inputs = 2, .nin = 2, .nout = 1,
            .build = mse_build, .dims = mse_dims, .flops = mse_flops,
            .nbin = 2, .bin = {REF_IN(0), REF_IN(1)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true, false},
            .is_loss = true,
            .feed = {FEED_NONE, FEED_VALUES},
        },
    [OP_LINEAR_CROSS_ENTROPY] =
        {
            .name = "linear_cross_entropy",
            .attrs = {{"out", ATTR_INT, .required = true}, {"bias", ATTR_BOOL, .dflt = 1}, {"weight", ATTR_PARAM},
                      {"chunk", ATTR_INT}}, /* rows per chunk; absent: all (the planner sets it) */
            .min_inputs = 2, .max_inputs = 2, .nin = 4, .nout = 4, .nstats = 3,
            .build = lce_build, .dims = lce_dims, .flops = lce_flops,
            .gemm = true, .scratch = lce_scratch,
            .nbin = 3, .bin = {REF_OUT(1), REF_OUT(2), REF_OUT(3)},
            .bin_for = {SLOT(0), SLOT(1), SLOT(2)}, /* each gradient its own (a frozen head: no dW) */
            .nbout = 3, .bout = {REF_GIN(0), REF_GIN(1), REF_GIN(2)},
            .grad_to = {true, true, true, false},
            .inplace_bwd = {SLOT(0), SLOT(1), SLOT(2)},
            .is_loss = true,
            .feed = {FEED_NONE, FEED_NONE, FEED_NONE, FEED_LABELS},
        },
    [OP_CONV2D] =
        {
            .name = "conv2d",
            .attrs = {{"out", ATTR_INT, .required = true}, {"kernel", ATTR_INT, .required = true},
                      {"stride", ATTR_INT, .dflt = 1}, {"padding", ATTR_INT, .dflt = 0, .nonneg = true},
                      {"dilation", ATTR_INT, .dflt = 1}, {"groups", ATTR_INT, .dflt = 1},
                      {"bias", ATTR_BOOL, .dflt = 1}},
            .min_inputs = 1, .max_inputs = 1, .nin = 3, .nout = 1,
            .build = conv2d_build, .dims = conv2d_dims, .flops = conv2d_flops,
            .gemm = true, .workspace = conv2d_workspace, .scratch = conv2d_scratch,
            .half_bin = SLOT(1), /* x */
            .nbin = 3, .bin = {REF_DOUT, REF_IN(0), REF_IN(1)},
            .nbout = 3, .bout = {REF_GIN(0), REF_GIN(1), REF_GIN(2)},
            .grad_to = {true, true, true},
        },
    [OP_BATCHNORM2D] =
        {
            .name = "batchnorm2d",
            .attrs = {{"eps", ATTR_FLOAT, .dflt = 1e-5, .positive = true}, {"momentum", ATTR_FLOAT, .dflt = 0.1}},
            .min_inputs = 1, .max_inputs = 1, .nin = 5, .nout = 3, .nstats = 2,
            .build = batchnorm_build, .dims = batchnorm_dims, .flops = rowwise_flops,
            .cheap = true, /* replayed in RT_MODE_RECOMPUTE: the running statistics stay as they are */
            .nbin = 5, .bin = {REF_DOUT, REF_IN(0), REF_IN(1), REF_OUT(1), REF_OUT(2)},
            .nbout = 3, .bout = {REF_GIN(0), REF_GIN(1), REF_GIN(2)},
            .grad_to = {true, true, true, false, false}, /* the running statistics are state */
            .mode_arg = true, .batch_stats = true,
        },
    [OP_FLATTEN] =
        {
            .name = "flatten",
            .attrs = {{"start", ATTR_INDEX, .dflt = 1}, {"end", ATTR_INDEX, .dflt = -1}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = flatten_build, .dims = shape_numel_dims, .flops = shape_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_RESHAPE] =
        {
            .name = "reshape",
            .attrs = {{"shape", ATTR_DIMS, .required = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = reshape_build, .dims = shape_numel_dims, .flops = shape_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_TRANSPOSE] =
        {
            .name = "transpose",
            .attrs = {{"dim0", ATTR_INDEX, .required = true}, {"dim1", ATTR_INDEX, .required = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = transpose_build, .dims = transpose_dims, .flops = shape_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_CONCAT] =
        {
            .name = "concat",
            .attrs = {{"axis", ATTR_INDEX, .required = true}},
            .min_inputs = 2, .max_inputs = MAX_OP_IN, .nin = MAX_OP_IN, .nout = 1, /* absent slots are -1 (NULL) */
            .build = concat_build, .dims = concat_dims, .flops = shape_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = MAX_OP_IN, .bout = {REF_GIN(0), REF_GIN(1), REF_GIN(2), REF_GIN(3), REF_GIN(4), REF_GIN(5)},
            .grad_to = {true, true, true, true, true, true},
        },
    [OP_CLASS_TOKEN] =
        {
            .name = "class_token",
            .min_inputs = 1, .max_inputs = 1, .nin = 2, .nout = 1,
            .build = class_token_build, .dims = class_token_dims, .flops = shape_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
        },
    [OP_SELECT] =
        {
            .name = "select",
            .attrs = {{"axis", ATTR_INDEX, .required = true}, {"index", ATTR_INDEX, .required = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = select_build, .dims = select_dims, .flops = shape_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_MAXPOOL2D] =
        {
            .name = "maxpool2d",
            .attrs = {{"kernel", ATTR_INT, .required = true}, {"stride", ATTR_INT}, /* absent: kernel */
                      {"padding", ATTR_INT, .nonneg = true}, {"ceil_mode", ATTR_BOOL}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = maxpool_build, .dims = pool_dims, .flops = pool_flops,
            .cheap = true,
            /* backward finds each window's maximum again in x, which the op
             * before usually keeps anyway, instead of saving indices */
            .nbin = 2, .bin = {REF_DOUT, REF_IN(0)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_AVGPOOL2D] =
        {
            .name = "avgpool2d",
            .attrs = {{"kernel", ATTR_INT, .required = true}, {"stride", ATTR_INT}, /* absent: kernel */
                      {"padding", ATTR_INT, .nonneg = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = pool_build, .dims = pool_dims, .flops = pool_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_ADAPTIVE_AVGPOOL2D] =
        {
            .name = "adaptive_avgpool2d",
            .attrs = {{"height", ATTR_INT, .required = true}, {"width", ATTR_INT, .required = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = adaptive_pool_build, .dims = adaptive_pool_dims, .flops = adaptive_pool_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_GLOBAL_AVGPOOL] =
        {
            .name = "global_avgpool",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = gap_build, .dims = gap_dims, .flops = numel_flops, /* one addition per input element */
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_DROPOUT] =
        {
            .name = "dropout",
            .attrs = {{"p", ATTR_FLOAT, .dflt = 0.1}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 2, .nstats = 1,
            .build = dropout_build, .dims = numel_dims, .flops = numel_flops,
            .cheap = true,
            .nbin = 2, .bin = {REF_DOUT, REF_OUT(1)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
            .mode_arg = true, .regen_stats = true,
        },
    [OP_STOCHASTIC_DEPTH] =
        {
            .name = "stochastic_depth",
            .attrs = {{"p", ATTR_FLOAT, .required = true}, {"mode", ATTR_ENUM, .dflt = 0, .choices = sd_mode}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = sd_build, .dims = sd_dims, .flops = numel_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
            .mode_arg = true,
        },
    [OP_SCALE] =
        {
            .name = "scale",
            .attrs = {{"factor", ATTR_FLOAT, .required = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .build = unary_build, .dims = numel_dims, .flops = numel_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    /* not written in YAML (no shape rule): the updates and casts the passes
     * insert; their kernels' arguments are in emitc.c */
    [OP_ADAMW] = {.name = "adamw", .nin = 1, .nout = 3},
    [OP_SGD] = {.name = "sgd", .nin = 1, .nout = 2},
    [OP_CAST] = {.name = "cast", .nin = 1, .nout = 1},
    /* collectives of a plan for N ranks (planner/comm.c); their calls are in emitc.c */
    [OP_ALLREDUCE] = {.name = "allreduce", .nin = 1, .nout = 1},
    [OP_REDUCE_SCATTER] = {.name = "reduce_scatter", .nin = 1, .nout = 1},
    [OP_ALL_GATHER] = {.name = "all_gather", .nin = 1, .nout = 1},
};
/* clang-format on */

const OpInfo *op_info(OpKind k) {
  MP_ASSERT(k >= 0 && k < OP_COUNT);
  return &table[k];
}

int64_t op_run_flops(const Graph *g, const Op *o, bool backward, const int *bout) {
  const OpInfo *oi = op_info(o->kind);
  int64_t f = oi->flops(g, o, backward);
  if (!backward || !oi->bout_split) return f;
  int n = 0, run = 0;
  for (int k = 0; k < oi->nbout; k++)
    if (oi->bout_split & SLOT(k)) n++, run += bout[k] >= 0;
  return f / n * run;
}

int op_lookup(const char *s) {
  for (int k = 0; k < OP_COUNT; k++)
    if (table[k].build && strcmp(table[k].name, s) == 0) return k;
  return -1;
}

const char *op_suggest(const char *s) {
  const char *best = NULL;
  int bd = 1 << 30;
  for (int k = 0; k < OP_COUNT; k++) {
    if (!table[k].build) continue;
    int d = mp_edit_distance(s, table[k].name);
    if (d < bd) {
      bd = d;
      best = table[k].name;
    }
  }
  return bd <= 3 ? best : NULL;
}

int op_attr_index(OpKind k, const char *key) {
  const AttrSpec *a = op_info(k)->attrs;
  for (int i = 0; i < MAX_ATTR && a[i].key; i++)
    if (!strcmp(a[i].key, key)) return i;
  return -1;
}

void op_attr_defaults(OpKind k, Attr *a, Loc loc) {
  const AttrSpec *s = op_info(k)->attrs;
  for (int i = 0; i < MAX_ATTR; i++) {
    double v = s[i].key ? s[i].dflt : 0;
    a[i] = (Attr){.i = (int64_t)v, .f = v, .loc = loc};
  }
}

int op_float_args(const Op *op, double *out) {
  const AttrSpec *s = op_info(op->kind)->attrs;
  int n = 0;
  for (int i = 0; i < MAX_ATTR && s[i].key; i++)
    if (s[i].type == ATTR_FLOAT) out[n++] = op->attr[i].f;
  return n;
}

/* ---- graph.h helpers ---- */

int64_t dtype_size(DType t) {
  return t == DT_F32 || t == DT_I32                ? 4
         : t == DT_BF16 || t == DT_F16             ? 2
         : t == DT_U8 || t == DT_I8 || t == DT_NF4 ? 1
                                                   : 0;
}
int64_t dtype_numel_bytes(DType t, int64_t numel) { return t == DT_NF4 ? (numel + 1) / 2 : numel * dtype_size(t); }
const char *dtype_name(DType t) {
  static const char *const n[DT_COUNT] = {"f32", "i32", "bf16", "f16", "u8", "i8", "nf4"};
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
