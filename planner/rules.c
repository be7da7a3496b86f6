/* rules.c: the ops' shape rules (see rules.h), by the op table's sections;
 * each op's other fields (dims, FLOPs, slots) are its entry in ops.c. */
#include "rules.h"

#include "rules_attention.h"
#include "rules_diffusion.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers shared by shape rules ---- */

static const Shape *in_shape(BuildCtx *c, int k) { return &build_input(c, k)->shape; }
static int64_t attr_i(BuildCtx *c, const char *key) { return build_attr(c, key)->i; }
static const char *attr_sym(BuildCtx *c, const char *key) { return build_attr(c, key)->s; }
static int64_t last(const Shape *s) { return s->d[s->rank - 1]; }

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
/* layer_scale: x [N, C, ...] times a learned weight [C] (ConvNeXt's [C, 1, 1] `gamma * x`): its own op, as the
 * ops make memplan's parameters. Init 1 (the identity); an imported model brings torchvision's 1e-6. */
static void layer_scale_build(BuildCtx *c) {
  need_float(c, 0);
  need_rank(c, 0, 2);
  const Shape *x = in_shape(c, 0);
  build_data(c, 0, 0);
  build_param(c, 1, "weight", NULL, vec_shape(c, x->d[1], x->sym[1]), (Init){INIT_ONES, 0});
  build_output(c, 0, NULL, *x, DT_F32);
}
static void unary_build(BuildCtx *c) {
  need_float(c, 0);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, *in_shape(c, 0), DT_F32);
}

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

/* ---- attention core ---- */

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
  static const char *const QKV[3] = {"q", "k", "v"}; /* LoRA's targets: PEFT's q_proj, k_proj, v_proj */
  build_parts(c, 3, QKV, (int64_t[3]){Cqkv - 2 * KVH * (C / NH), KVH * (C / NH), KVH * (C / NH)});
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

/* ---- rope: rotary position embedding of a packed qkv [B, T, (heads + 2 kv_heads) hd] ---- */

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

static void mse_build(BuildCtx *c) {
  need_float(c, 0);
  need_float(c, 1);
  same_shape(c, 0, 1);
  build_data(c, 0, 0);
  build_data(c, 1, 1);
  build_output(c, 0, NULL, build_shape(c, 0, NULL, NULL), DT_F32);
}

/* ---- linear_cross_entropy ---- */
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

/* ---- conv2d ---- */

/* a (height, width) pair as "H" when square, else "HxW" */
static const char *hw_str(BuildCtx *c, bool square, const int64_t *v) {
  Arena *a = build_scratch(c);
  return square ? ar_printf(a, "%lld", (long long)v[0]) : ar_printf(a, "%lldx%lld", (long long)v[0], (long long)v[1]);
}

static void conv2d_build(BuildCtx *c) {
  need_float(c, 0);
  const Tensor *xt = build_input(c, 0);
  const Shape *x = &xt->shape;
  if (x->rank != 4) {
    Arena *tmp = build_scratch(c);
    build_error(c, NULL, "conv2d needs an input of shape (N, C, H, W); '%s' is %s %s", xt->name, shape_sym_str(tmp, x),
                shape_val_str(tmp, x));
  }
  const Attr *kh = build_attr(c, "kernel"), *kw = build_attr(c, "kernel_w");
  int64_t C = x->d[1], H = x->d[2], W = x->d[3], O = attr_i(c, "out"), dil = attr_i(c, "dilation");
  int64_t G = attr_i(c, "groups"), k[2] = {kh->i, conv2d_w(kw, kh)};
  int64_t s[2] = {attr_i(c, "stride"), conv2d_w(build_attr(c, "stride_w"), build_attr(c, "stride"))};
  int64_t pad[2] = {attr_i(c, "padding"), conv2d_w(build_attr(c, "padding_w"), build_attr(c, "padding"))};
  if (C % G != 0 || O % G != 0)
    build_error(c, "groups", "groups = %lld must divide the input channels %lld and out = %lld", (long long)G,
                (long long)C, (long long)O);
  /* per side (height, width): the kernel's reach and the padded input, in checked arithmetic (all are dims) */
  int64_t reach[2], padded[2], in[2] = {H, W}, o[2];
  for (int i = 0; i < 2; i++)
    if (!(ck_mul(dil, k[i] - 1, &reach[i]) && ck_add(reach[i], 1, &reach[i]) && ck_mul(2, pad[i], &padded[i]) &&
          ck_add(in[i], padded[i], &padded[i])))
      build_error(c, i && build_attr(c, "padding_w")->s ? "padding_w" : "padding",
                  "padding and dilation * (kernel - 1) must fit in 64 bits");
  if (reach[0] > padded[0] || reach[1] > padded[1]) {
    bool sq = k[0] == k[1] && pad[0] == pad[1];
    build_error(c, reach[0] <= padded[0] && kw->s ? "kernel_w" : "kernel",
                "kernel %s with dilation %lld spans %s pixels, but input '%s' padded by %s is %lldx%lld; use a "
                "smaller kernel or dilation, or more padding",
                hw_str(c, sq, k), (long long)dil, hw_str(c, sq, reach), xt->name, hw_str(c, sq, pad),
                (long long)padded[0], (long long)padded[1]);
  }
  for (int i = 0; i < 2; i++) o[i] = (padded[i] - reach[i]) / s[i] + 1;
  double fan = (double)(C / G) * (double)k[0] * (double)k[1]; /* in double: the weight's size is checked when built */
  build_data(c, 0, 0);
  int64_t wd[4] = {O, C / G, k[0], k[1]};
  const char *wsym[4] = {attr_sym(c, "out"), G == 1 ? x->sym[1] : NULL, kh->s, kw->s ? kw->s : kh->s};
  Init u = {INIT_UNIFORM, 1.0 / sqrt(fan)}; /* nn.Conv2d: weight and bias U(+-1/sqrt(fan_in)) */
  build_param(c, 1, "weight", NULL, build_shape(c, 4, wd, wsym), u);
  if (attr_i(c, "bias")) build_param(c, 2, "bias", NULL, vec_shape(c, O, attr_sym(c, "out")), u);
  int64_t od[4] = {x->d[0], O, o[0], o[1]};
  const char *osym[4] = {x->sym[0], attr_sym(c, "out"), NULL, NULL};
  for (int i = 0; i < 2; i++) /* Ho = H: the input's symbols carry over */
    if (s[i] == 1 && reach[i] == 2 * pad[i] + 1) osym[2 + i] = x->sym[2 + i];
  build_output(c, 0, NULL, build_shape(c, 4, od, osym), DT_F32);
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

/* ---- shape ops ---- */

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

/* pad: zeros after the end of one axis (after > 0), or that many elements cut off its end (after < 0): F.pad's */
static void pad_build(BuildCtx *c) {
  need_float(c, 0);
  Shape s = *in_shape(c, 0);
  int ax = axis_attr(c, "axis", s.rank, 0);
  if ((s.d[ax] += attr_i(c, "after")) < 1)
    build_error(c, "after", "after = %lld leaves axis %d of input '%s' no elements (it has %lld)",
                (long long)attr_i(c, "after"), ax, build_input(c, 0)->name, (long long)(s.d[ax] - attr_i(c, "after")));
  s.sym[ax] = NULL;
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, s.rank, s.d, s.sym), DT_F32);
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

/* floor((n + 2 p - k) / s) + 1, torch's output size; with ceil_mode the division rounds up, less
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
  int64_t d[4] = {x->d[0], x->d[1], pool_out(c, x->d[2], "H", k, s, p, ceil), pool_out(c, x->d[3], "W", k, s, p, ceil)};
  const char *sym[4] = {x->sym[0], x->sym[1], NULL, NULL};
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, 4, d, sym), DT_F32);
}
/* maxpool2d, avgpool2d (whose kernels divide a last window past the padded input by its pixels within it) */
static void pool_build(BuildCtx *c) { pool_build_mode(c, attr_i(c, "ceil_mode")); }

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

static void gap_build(BuildCtx *c) {
  need_float(c, 0);
  need_nchw(c);
  const Shape *x = in_shape(c, 0);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, build_shape(c, 2, x->d, x->sym), DT_F32);
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

/* ---- stochastic_depth (torchvision.ops.StochasticDepth) ---- */

static void sd_build(BuildCtx *c) {
  need_float(c, 0);
  const Attr *p = build_attr(c, "p");
  if (!(p->f >= 0 && p->f < 1))
    build_error(c, "p", "'p' (the probability of dropping a row) must be in [0, 1), not %s", p->s);
  build_data(c, 0, 0);
  build_output(c, 0, NULL, *in_shape(c, 0), DT_F32);
}

/* ---- the rules, by op (OpKind) ---- */

const ShapeRule shape_rules[OP_COUNT] = {
    [OP_LINEAR] = linear_build,
    [OP_MATMUL] = matmul_build,
    [OP_ADD] = add_build,
    [OP_MUL] = add_build, /* same shapes, as add */
    [OP_SCALE_CHANNELS] = scale_channels_build,
    [OP_LAYER_SCALE] = layer_scale_build,
    [OP_RELU] = unary_build,
    [OP_RELU6] = unary_build,
    [OP_SIGMOID] = unary_build,
    [OP_HARDSWISH] = unary_build,
    [OP_HARDSIGMOID] = unary_build,
    [OP_GELU] = unary_build,
    [OP_SILU] = unary_build,
    [OP_LAYERNORM] = layernorm_build,
    [OP_RMSNORM] = rmsnorm_build,
    [OP_SOFTMAX] = unary_build,
    [OP_ATTENTION] = attention_build,
    [OP_CAUSAL_SELF_ATTENTION] = csa_build,
    [OP_EMBEDDING] = embedding_build,
    [OP_POS_EMBEDDING] = posemb_build,
    [OP_ROPE] = rope_build,
    [OP_CROSS_ENTROPY] = ce_build,
    [OP_MSE] = mse_build,
    [OP_LINEAR_CROSS_ENTROPY] = lce_build,
    [OP_CONV2D] = conv2d_build,
    [OP_BATCHNORM2D] = batchnorm_build,
    [OP_FLATTEN] = flatten_build,
    [OP_RESHAPE] = reshape_build,
    [OP_TRANSPOSE] = transpose_build,
    [OP_CONCAT] = concat_build,
    [OP_CLASS_TOKEN] = class_token_build,
    [OP_SELECT] = select_build,
    [OP_MAXPOOL2D] = pool_build,
    [OP_AVGPOOL2D] = pool_build,
    [OP_ADAPTIVE_AVGPOOL2D] = adaptive_pool_build,
    [OP_GLOBAL_AVGPOOL] = gap_build,
    [OP_DROPOUT] = dropout_build,
    [OP_STOCHASTIC_DEPTH] = sd_build,
    [OP_SCALE] = unary_build,
    [OP_WINDOW_ATTENTION] = window_attention_build,
    [OP_PAD] = pad_build,
    [OP_CROSS_ATTENTION] = cross_attention_build,
    [OP_GROUPNORM] = groupnorm_build,
    [OP_ADD_CHANNELS] = add_channels_build,
    [OP_UPSAMPLE] = upsample_build,
    [OP_TIMESTEP_EMBEDDING] = timestep_embedding_build,
    [OP_CONV_TRANSPOSE2D] = conv_transpose2d_build,
    [OP_DDPM_NOISE] = ddpm_noise_build,
};
