/* ops.c: the op table (see ops.h). Each op's dims and FLOPs come first; the
 * table, one designated-initializer entry per op, is at the end of the file.
 * The shape rules are above the builder, in rules.c. */
#include "ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- helpers shared by dims and FLOPs ---- */

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

/* NC S: the planes and their size */
static void scale_channels_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0] * x->d[1];
  d[1] = d[0] ? out_numel(g, op) / d[0] : 0;
  *n = 2;
}
/* N C S: the samples, the channels and the size of a plane */
static void layer_scale_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0];
  d[1] = x->d[1];
  d[2] = d[0] && d[1] ? out_numel(g, op) / (d[0] * d[1]) : 0;
  *n = 3;
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

static void rowwise_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = rows(x);
  d[1] = last(x);
  *n = 2;
}
static int64_t rowwise_flops(const Graph *g, const Op *op, bool bwd) { return FLOPS(bwd ? 10 : 6, out_numel(g, op)); }

/* ---- attention core: qkv[B, T, (NH + 2 KVH) hd] -> out[B, T, NH hd], lse[B, NH, T] ----
 * Per position, qkv holds q (NH heads), k and v (KVH heads each), all of
 * size hd; query head h reads kv head h / (NH / KVH) (grouped-query
 * attention; KVH = NH is multi-head, KVH = 1 multi-query). */

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

/* ---- window_attention: qkv[B, H, W, 3C], table[(2ws-1)^2, NH] -> out[B, H, W, C], lse[B, NH, H, W] ----
 * B H W C NH ws shift (attrs: heads, window, shift). */
static void window_attention_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  for (int i = 0; i < 3; i++) d[i] = x->d[i];
  d[3] = last(x) / 3;
  for (int i = 0; i < 3; i++) d[4 + i] = op->attr[i].i;
  *n = 7;
}
static int64_t window_attention_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[MAX_KDIM];
  int n;
  window_attention_dims(g, op, d, &n);
  /* q k^T and p v over each window's ws^2 keys; backward as attention's */
  int64_t f = FLOPS(4, d[0], d[1], d[2], d[5], d[5], d[3]);
  return !bwd ? f : f > INT64_MAX / 5 ? INT64_MAX : 5 * f / 2;
}

/* ---- cross-attention: q[B, Tq, C] to kv[B, Tk, 2C] (k | v side by side)
 * -> out[B, Tq, C], lse[B, NH, Tq]; every query sees every key. */

/* B Tq Tk C NH. */
static void cross_attention_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *q = tshape(g, op->in[0]);
  d[0] = q->d[0];
  d[1] = q->d[1];
  d[2] = tshape(g, op->in[1])->d[1];
  d[3] = q->d[2];
  d[4] = op->attr[0].i;
  *n = 5;
}
static int64_t cross_attention_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[MAX_KDIM];
  int n;
  cross_attention_dims(g, op, d, &n);
  int64_t f = FLOPS(4, d[0], d[1], d[2], d[3]); /* q k^T and p v; backward as attention's */
  return !bwd ? f : f > INT64_MAX / 5 ? INT64_MAX : 5 * f / 2;
}

/* ---- embeddings ---- */

static void embedding_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *w = tshape(g, op->in[1]);
  d[0] = in_numel(g, op);
  d[1] = w->d[1];
  d[2] = w->d[0];
  *n = 3;
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

static int64_t ce_flops(const Graph *g, const Op *op, bool bwd) { return FLOPS(bwd ? 4 : 5, in_numel(g, op)); }
/* eval keeps no row statistics: the CUDA kernel borrows 4 bytes a row */
static int64_t ce_workspace(const int64_t *d) { return 4 * d[0]; } /* N V */

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

/* ---- conv2d: x[N, C, H, W] * weight[out, C/groups, kh, kw] (+ bias[out]) -> [N, out, Ho, Wo] ----
 * PyTorch's nn.Conv2d: kernel, stride and padding per side (kernel_w, stride_w, padding_w; square unless
 * written), one dilation; Ho = (H + 2 ph - dilation (kh - 1) - 1) / sh + 1, likewise Wo. */

enum { CV_N, CV_C, CV_H, CV_W, CV_O, CV_HO, CV_WO, CV_KH, CV_KW, CV_SH, CV_SW, CV_PH, CV_PW, CV_D, CV_G, CV_NDIM };

static void conv2d_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]), *y = tshape(g, op->out[0]);
  /* out, kernel, stride, padding, dilation, groups, bias, kernel_w, stride_w, padding_w: the table's order */
  const Attr *a = op->attr;
  d[CV_N] = x->d[0], d[CV_C] = x->d[1], d[CV_H] = x->d[2], d[CV_W] = x->d[3];
  d[CV_O] = y->d[1], d[CV_HO] = y->d[2], d[CV_WO] = y->d[3];
  d[CV_KH] = a[1].i, d[CV_SH] = a[2].i, d[CV_PH] = a[3].i, d[CV_D] = a[4].i, d[CV_G] = a[5].i;
  d[CV_KW] = conv2d_w(&a[7], &a[1]), d[CV_SW] = conv2d_w(&a[8], &a[2]), d[CV_PW] = conv2d_w(&a[9], &a[3]);
  *n = CV_NDIM;
}
static int64_t conv2d_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t d[MAX_KDIM];
  int n;
  conv2d_dims(g, op, d, &n);
  return FLOPS(bwd ? 4 : 2, d[CV_N], d[CV_O], d[CV_HO], d[CV_WO], d[CV_C] / d[CV_G], d[CV_KH], d[CV_KW]);
}
/* cuBLAS's split-K sums: one sample's output, as linear's */
static int64_t conv2d_workspace(const int64_t *d) { return 4 * d[CV_O] * d[CV_HO] * d[CV_WO]; }
/* The im2col matrix of one sample, [C kh kw, Ho Wo] floats: the kernels take
 * the batch one sample at a time (each product split over the threads),
 * forward (columns of x), backward (columns of x for dW, then the columns
 * of dx before col2im, in the same buffer). A 1x1 kernel at stride 1
 * without padding reads x as it is: no scratch. */
static int64_t conv2d_scratch(const int64_t *d, bool backward) {
  (void)backward;
  if (d[CV_KH] == 1 && d[CV_KW] == 1 && d[CV_SH] == 1 && d[CV_SW] == 1 && d[CV_PH] == 0 && d[CV_PW] == 0) return 0;
  return FLOPS(4, d[CV_C], d[CV_KH], d[CV_KW], d[CV_HO], d[CV_WO]);
}

/* ---- batchnorm2d: x [N, C, H, W] or [N, C], statistics per channel over N (H, W) ---- */

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

static int64_t prod(const Shape *s, int lo, int hi) { /* dims [lo, hi) */
  int64_t v = 1;
  for (int i = lo; i < hi; i++) v *= s->d[i];
  return v;
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

static void class_token_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0], d[1] = x->d[1], d[2] = x->d[2];
  *n = 3;
}

/* O N I index: x as [O, N, I], out [O, I] = x[:, index, :] */
/* pad: x as [O, N, In] around its axis; dims O N In Nout (the output's size there) */
static void pad_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  int ax = (int)op->attr[0].i; /* axis, after */
  ax = ax < 0 ? ax + x->rank : ax;
  d[0] = prod(x, 0, ax);
  d[1] = x->d[ax];
  d[2] = prod(x, ax + 1, x->rank);
  d[3] = x->d[ax] + op->attr[1].i;
  *n = 4;
}
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

/* kernel, stride (0: the kernel) and padding, the attributes' order */
static int64_t pool_stride(const Attr *a) { return a[1].i ? a[1].i : a[0].i; }

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

/* NC HW */
static void gap_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0] * x->d[1];
  d[1] = x->d[2] * x->d[3];
  *n = 2;
}

/* ---- stochastic_depth (torchvision.ops.StochasticDepth): out = x * keep / (1 - p), keep one draw per row of
 * the first dim ("row") or one for the batch ("batch"), dropout's hash of (key, row); nothing stored ---- */

static const char *const sd_mode[] = {"row", "batch", NULL};
/* N S batch: rows of S elements, batch mode (one draw for all rows) */
static void sd_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->rank ? x->d[0] : 1;
  d[1] = d[0] ? out_numel(g, op) / d[0] : 0;
  d[2] = op->attr[1].i;
  *n = 3;
}

/* ---- diffusion (docs/diffusion.md; shape rules in rules_diffusion.c) ---- */

/* groupnorm: N C S G, S the positions per channel */
static void groupnorm_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0];
  d[1] = x->d[1];
  d[2] = d[0] && d[1] ? in_numel(g, op) / (d[0] * d[1]) : 0;
  d[3] = op->attr[0].i; /* groups */
  *n = 4;
}
/* upsample: NC H W scale */
static void upsample_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0] * x->d[1];
  d[1] = x->d[2];
  d[2] = x->d[3];
  d[3] = op->attr[0].i;
  *n = 4;
}
/* timestep_embedding: B dim flip_sin_to_cos */
static void temb_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *y = tshape(g, op->out[0]);
  d[0] = y->d[0];
  d[1] = y->d[1];
  d[2] = op->attr[1].i;
  *n = 3;
}
static int64_t temb_flops(const Graph *g, const Op *op, bool bwd) { return FLOPS(bwd ? 8 : 4, out_numel(g, op)); }
/* conv_transpose2d: N C H W O Ho Wo k stride padding */
static void convt_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]), *y = tshape(g, op->out[0]);
  for (int i = 0; i < 4; i++) d[i] = x->d[i];
  d[4] = y->d[1];
  d[5] = y->d[2];
  d[6] = y->d[3];
  d[7] = op->attr[1].i; /* out kernel stride padding output_padding bias: the table's order */
  d[8] = op->attr[2].i;
  d[9] = op->attr[3].i;
  *n = 10;
}
/* a multiply-add per input element, output channel and kernel tap; backward: dx and dW */
static int64_t convt_flops(const Graph *g, const Op *op, bool bwd) {
  int64_t k = op->attr[1].i;
  return FLOPS(bwd ? 4 : 2, in_numel(g, op), tshape(g, op->out[0])->d[1], k, k);
}
/* The kernels are conv2d's from the output's shape to x's (runtime/cpu_conv.c): its im2col matrix of one
 * sample, [O k k, H W] floats, forward (the columns before col2im) and backward (dout's columns for dx, then
 * for dW); none at k = s = 1, p = 0. cuBLAS's split-K sums: the largest of one sample's products. */
static int64_t convt_scratch(const int64_t *d, bool backward) {
  (void)backward;
  if (d[7] == 1 && d[8] == 1 && d[9] == 0) return 0;
  return FLOPS(4, d[4], d[7], d[7], d[2], d[3]);
}
static int64_t convt_workspace(const int64_t *d) {
  int64_t col = FLOPS(4, d[4], d[7], d[7], d[2], d[3]), dx = FLOPS(4, d[1], d[2], d[3]),
          dw = FLOPS(4, d[1], d[4], d[7], d[7]);
  return col > dx ? (col > dw ? col : dw) : (dx > dw ? dx : dw);
}
/* ddpm_noise: B S T, S the elements per sample */
static void ddpm_dims(const Graph *g, const Op *op, int64_t *d, int *n) {
  const Shape *x = tshape(g, op->in[0]);
  d[0] = x->d[0];
  d[1] = d[0] ? in_numel(g, op) / d[0] : 0;
  d[2] = op->attr[0].i; /* timesteps */
  *n = 3;
}
static int64_t ddpm_flops(const Graph *g, const Op *op, bool bwd) { return FLOPS(bwd ? 1 : 8, in_numel(g, op)); }

/* ---- the table ---- */

/* An entry groups related fields on a line. */
/* clang-format off */
static const OpInfo table[OP_COUNT] = {
    [OP_LINEAR] =
        {
            .name = "linear",
            .attrs = {{"out", ATTR_INT, .required = true}, {"bias", ATTR_BOOL, .dflt = 1}, {"weight", ATTR_PARAM}},
            .min_inputs = 1, .max_inputs = 1, .nin = 3, .nout = 1,
            .dims = linear_dims, .flops = linear_flops,
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
            .dims = matmul_dims, .flops = matmul_flops,
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
            .dims = numel_dims, .flops = numel_flops,
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
            .dims = scale_channels_dims, .flops = mul_flops,
            .cheap = true, .half_bin = SLOT(1) | SLOT(2), /* x, s */
            .nbin = 3, .bin = {REF_DOUT, REF_IN(0), REF_IN(1)},
            .bin_for = {0, SLOT(1), SLOT(0)}, /* x for ds, s for dx */
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_LAYER_SCALE] =
        {
            .name = "layer_scale",
            .min_inputs = 1, .max_inputs = 1, .nin = 2, .nout = 1,
            .dims = layer_scale_dims, .flops = mul_flops,
            .cheap = true, .half_bin = SLOT(1), /* x */
            .nbin = 3, .bin = {REF_DOUT, REF_IN(0), REF_IN(1)},
            .bin_for = {0, SLOT(1), SLOT(0)}, /* x for dw, w for dx */
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_RELU] =
        {
            .name = "relu",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .dims = numel_dims, .flops = numel_flops,
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
            .dims = numel_dims, .flops = numel_flops,
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
            .dims = numel_dims, .flops = silu_flops,
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
            .dims = numel_dims, .flops = mul_flops,
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
            .dims = numel_dims, .flops = numel_flops,
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
            .dims = gelu_dims, .flops = gelu_flops,
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
            .dims = numel_dims, .flops = silu_flops,
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
            .dims = rowwise_dims, .flops = rowwise_flops,
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
            .dims = rowwise_dims, .flops = rowwise_flops,
            .cheap = true,
            .nbin = 4, .bin = {REF_DOUT, REF_IN(0), REF_IN(1), REF_OUT(1)},
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
        },
    [OP_SOFTMAX] =
        {
            .name = "softmax",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .dims = rowwise_dims, .flops = rowwise_flops,
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
            .dims = attention_dims, .flops = attention_flops,
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
            .composite = true,
        },
    [OP_WINDOW_ATTENTION] =
        {
            .name = "window_attention",
            .attrs = {{"heads", ATTR_INT, .required = true}, {"window", ATTR_INT, .required = true},
                      {"shift", ATTR_INT, .nonneg = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 2, .nout = 2, .nstats = 1,
            .dims = window_attention_dims, .flops = window_attention_flops,
            .gemm = true,
            .nbin = 5, .bin = {REF_DOUT, REF_IN(0), REF_IN(1), REF_OUT(0), REF_OUT(1)},
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
        },
    [OP_EMBEDDING] =
        {
            .name = "embedding",
            .attrs = {{"num", ATTR_INT, .required = true}, {"dim", ATTR_INT, .required = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 2, .nout = 1,
            .dims = embedding_dims, .flops = numel_flops,
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
            .dims = posemb_dims, .fwd_ndim = 3, /* forward never reads Wrows */
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
            .dims = rope_dims, .flops = rope_flops,
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
            .dims = rowwise_dims, .flops = ce_flops,
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
            .dims = mse_dims, .flops = mse_flops,
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
            .dims = lce_dims, .flops = lce_flops,
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
                      {"bias", ATTR_BOOL, .dflt = 1}, {"kernel_w", ATTR_INT, .dflt = 0},
                      {"stride_w", ATTR_INT, .dflt = 0}, {"padding_w", ATTR_INT, .dflt = 0, .nonneg = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 3, .nout = 1,
            .dims = conv2d_dims, .flops = conv2d_flops,
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
            .dims = batchnorm_dims, .flops = rowwise_flops,
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
            .dims = shape_numel_dims, .flops = shape_flops,
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
            .dims = shape_numel_dims, .flops = shape_flops,
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
            .dims = transpose_dims, .flops = shape_flops,
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
            .dims = concat_dims, .flops = shape_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = MAX_OP_IN, .bout = {REF_GIN(0), REF_GIN(1), REF_GIN(2), REF_GIN(3), REF_GIN(4), REF_GIN(5)},
            .grad_to = {true, true, true, true, true, true},
        },
    [OP_CLASS_TOKEN] =
        {
            .name = "class_token",
            .min_inputs = 1, .max_inputs = 1, .nin = 2, .nout = 1,
            .dims = class_token_dims, .flops = shape_flops,
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
            .dims = select_dims, .flops = shape_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_PAD] =
        {
            .name = "pad",
            .attrs = {{"axis", ATTR_INDEX, .required = true}, {"after", ATTR_INDEX, .required = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .dims = pad_dims, .flops = shape_flops,
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
            .dims = pool_dims, .flops = pool_flops,
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
                      {"padding", ATTR_INT, .nonneg = true}, {"ceil_mode", ATTR_BOOL}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .dims = pool_dims, .flops = pool_flops,
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
            .dims = adaptive_pool_dims, .flops = adaptive_pool_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_GLOBAL_AVGPOOL] =
        {
            .name = "global_avgpool",
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .dims = gap_dims, .flops = numel_flops, /* one addition per input element */
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
            .dims = numel_dims, .flops = numel_flops,
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
            .dims = sd_dims, .flops = numel_flops,
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
            .dims = numel_dims, .flops = numel_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_CROSS_ATTENTION] =
        {
            .name = "cross_attention",
            .attrs = {{"heads", ATTR_INT, .required = true}},
            .min_inputs = 2, .max_inputs = 2, .nin = 2, .nout = 2, .nstats = 1,
            .dims = cross_attention_dims, .flops = cross_attention_flops,
            .gemm = true, .half_bin = SLOT(1) | SLOT(2) | SLOT(3), /* q, kv, out (not lse) */
            .nbin = 5, .bin = {REF_DOUT, REF_IN(0), REF_IN(1), REF_OUT(0), REF_OUT(1)},
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
        },
    [OP_GROUPNORM] =
        {
            .name = "groupnorm",
            .attrs = {{"groups", ATTR_INT, .required = true}, {"eps", ATTR_FLOAT, .dflt = 1e-5, .positive = true},
                      {"affine", ATTR_BOOL, .dflt = 1}},
            .min_inputs = 1, .max_inputs = 1, .nin = 3, .nout = 3, .nstats = 2,
            .dims = groupnorm_dims, .flops = rowwise_flops,
            .cheap = true,
            .nbin = 5, .bin = {REF_DOUT, REF_IN(0), REF_IN(1), REF_OUT(1), REF_OUT(2)},
            .nbout = 3, .bout = {REF_GIN(0), REF_GIN(1), REF_GIN(2)},
            .grad_to = {true, true, true},
        },
    [OP_ADD_CHANNELS] =
        {
            .name = "add_channels",
            .min_inputs = 2, .max_inputs = 2, .nin = 2, .nout = 1,
            .dims = scale_channels_dims, .flops = numel_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 2, .bout = {REF_GIN(0), REF_GIN(1)},
            .grad_to = {true, true},
            .inplace_fwd = SLOT(0), .inplace_bwd = {SLOT(0)},
        },
    [OP_UPSAMPLE] =
        {
            .name = "upsample",
            .attrs = {{"scale", ATTR_INT, .dflt = 2}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .dims = upsample_dims, .flops = numel_flops,
            .cheap = true,
            .nbin = 1, .bin = {REF_DOUT},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
        },
    [OP_TIMESTEP_EMBEDDING] =
        {
            .name = "timestep_embedding",
            .attrs = {{"dim", ATTR_INT, .required = true}, {"flip_sin_to_cos", ATTR_BOOL},
                      {"downscale_freq_shift", ATTR_FLOAT, .dflt = 1}, {"max_period", ATTR_FLOAT, .dflt = 10000,
                      .positive = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 1,
            .dims = temb_dims, .flops = temb_flops,
            .cheap = true,
            /* the timesteps are data (ddpm_noise's draws): no gradient flows to them; the backward kernel is
             * the derivative for completeness (gradcheck) */
            .nbin = 2, .bin = {REF_DOUT, REF_IN(0)},
            .nbout = 1, .bout = {REF_GIN(0)},
        },
    [OP_CONV_TRANSPOSE2D] =
        {
            .name = "conv_transpose2d",
            .attrs = {{"out", ATTR_INT, .required = true}, {"kernel", ATTR_INT, .required = true},
                      {"stride", ATTR_INT, .dflt = 1}, {"padding", ATTR_INT, .nonneg = true},
                      {"output_padding", ATTR_INT, .nonneg = true}, {"bias", ATTR_BOOL, .dflt = 1}},
            .min_inputs = 1, .max_inputs = 1, .nin = 3, .nout = 1,
            .dims = convt_dims, .flops = convt_flops,
            .gemm = true, .workspace = convt_workspace, .scratch = convt_scratch,
            .nbin = 3, .bin = {REF_DOUT, REF_IN(0), REF_IN(1)},
            .bin_for = {0, SLOT(1), SLOT(0)}, /* x for dW, W for dx */
            .nbout = 3, .bout = {REF_GIN(0), REF_GIN(1), REF_GIN(2)},
            .grad_to = {true, true, true},
        },
    [OP_DDPM_NOISE] =
        {
            .name = "ddpm_noise",
            .attrs = {{"timesteps", ATTR_INT, .dflt = 1000}, {"beta_start", ATTR_FLOAT, .dflt = 1e-4,
                      .positive = true}, {"beta_end", ATTR_FLOAT, .dflt = 0.02, .positive = true}},
            .min_inputs = 1, .max_inputs = 1, .nin = 1, .nout = 3,
            .dims = ddpm_dims, .flops = ddpm_flops,
            .cheap = true, /* a recompute draws the same eps and t from the same key */
            .nbin = 2, .bin = {REF_DOUT, REF_OUT(2)},
            .nbout = 1, .bout = {REF_GIN(0)},
            .grad_to = {true},
            .mode_arg = true,
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
  if (!backward && o->kind == OP_LINEAR_CROSS_ENTROPY && bout && bout[0] < 0 && bout[2] >= 0) {
    int64_t d[MAX_KDIM];
    int n;
    lce_dims(g, o, d, &n);
    return f - FLOPS(4, d[0], d[1], d[2]); /* 2 N K V and the rows' cross-entropy */
  }
  if (!backward || !oi->bout_split) return f;
  int n = 0, run = 0;
  for (int k = 0; k < oi->nbout; k++)
    if (oi->bout_split & SLOT(k)) n++, run += bout[k] >= 0;
  return f / n * run;
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
