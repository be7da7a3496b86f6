/* cpu_conv.c: the CPU backend's convolution (conv2d, conv_transpose2d) and pooling (cpu_internal.h). */
#include "cpu_internal.h"

// ----------------------------------------------------------------------------
// conv2d: the batch one sample at a time; a sample's im2col matrix
// col[C kh kw, Ho Wo] goes into the plan's scratch (row (c, ki, kj) holds the
// input pixels that kernel tap meets at every output position, 0 in the
// padding), and each group is one product with its slice of the weights,
// split over the pool. A 1x1 kernel at stride 1 without padding is a
// product with x itself.

typedef struct {
  float *col, *img;                                   /* col2im: img (+)= col */
  const float *x;                                     /* im2col: one sample [C, H, W] */
  int64_t C, H, W, Ho, Wo, kh, kw, sh, sw, ph, pw, d; /* kernel, stride, padding: height and width */
  int acc;
} ConvCol;

/* rows [lo, hi) of col */
static void im2col_task(const void *ctx, int64_t lo, int64_t hi) {
  const ConvCol *c = ctx;
  int64_t kk = c->kh * c->kw, P = c->Ho * c->Wo;
  for (int64_t r = lo; r < hi; r++) {
    int64_t ch = r / kk, ki = r / c->kw % c->kh, kj = r % c->kw;
    const float *src = c->x + ch * c->H * c->W;
    float *dst = c->col + r * P;
    for (int64_t oh = 0; oh < c->Ho; oh++, dst += c->Wo) {
      int64_t ih = oh * c->sh - c->ph + ki * c->d;
      if (ih < 0 || ih >= c->H) {
        memset(dst, 0, (size_t)c->Wo * sizeof(float));
        continue;
      }
      const float *row = src + ih * c->W;
      int64_t iw0 = kj * c->d - c->pw;
      for (int64_t ow = 0; ow < c->Wo; ow++) {
        int64_t iw = iw0 + ow * c->sw;
        dst[ow] = iw >= 0 && iw < c->W ? row[iw] : 0.0f;
      }
    }
  }
}

/* channels [lo, hi) of img: each owns its kh kw rows of col, so no two tasks
 * add into one pixel, and the order of the sums is fixed */
static void col2im_task(const void *ctx, int64_t lo, int64_t hi) {
  const ConvCol *c = ctx;
  int64_t kk = c->kh * c->kw, P = c->Ho * c->Wo;
  for (int64_t ch = lo; ch < hi; ch++) {
    float *img = c->img + ch * c->H * c->W;
    if (!c->acc) memset(img, 0, (size_t)(c->H * c->W) * sizeof(float));
    for (int64_t t = 0; t < kk; t++) {
      int64_t ki = t / c->kw, kj = t % c->kw;
      const float *src = c->col + (ch * kk + t) * P;
      for (int64_t oh = 0; oh < c->Ho; oh++, src += c->Wo) {
        int64_t ih = oh * c->sh - c->ph + ki * c->d;
        if (ih < 0 || ih >= c->H) continue;
        float *row = img + ih * c->W;
        int64_t iw0 = kj * c->d - c->pw;
        for (int64_t ow = 0; ow < c->Wo; ow++) {
          int64_t iw = iw0 + ow * c->sw;
          if (iw >= 0 && iw < c->W) row[iw] += src[ow];
        }
      }
    }
  }
}

/* G independent products C_g (+)= op(A_g) op(B_g), each dense with the
 * strides sA, sB, sC between groups: big ones one after another, each split
 * over the pool; small ones (depthwise) one group per task. Either way a
 * group is computed by the same calls whatever the thread count. */
typedef struct {
  int ta, tb, acc;
  int64_t m, n, k, sA, sB, sC;
  const float *A, *B;
  float *C;
} GroupGemm;

static void group_gemm_task(const void *ctx, int64_t lo, int64_t hi) {
  const GroupGemm *q = ctx;
  for (int64_t g = lo; g < hi; g++)
    gemm1(q->ta, q->tb, q->m, q->n, q->k, q->A + g * q->sA, q->ta ? q->m : q->k, q->B + g * q->sB, q->tb ? q->k : q->n,
          q->C + g * q->sC, q->n, q->acc);
}

static void gemm_groups(int ta, int tb, int64_t G, int64_t m, int64_t n, int64_t k, const float *A, int64_t sA,
                        const float *B, int64_t sB, float *C, int64_t sC, int acc) {
  if (G == 1 || m * n * k >= RT_GEMM_PAR_MIN) {
    for (int64_t g = 0; g < G; g++) gemm(ta, tb, m, n, k, A + g * sA, B + g * sB, C + g * sC, acc);
    return;
  }
  GroupGemm q = {ta, tb, acc, m, n, k, sA, sB, sC, A, B, C};
  rt_par(group_gemm_task, &q, G, rt_chunks(G * m * n * k >= RT_GEMM_PAR_MIN));
}

/* A 1x1 kernel at stride 1 without padding: x is its own im2col */
static int conv_direct(const ConvCol *c) {
  return c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->ph == 0 && c->pw == 0;
}

static void conv_im2col(ConvCol c, float *col, const float *x) {
  c.col = col, c.x = x;
  rt_par(im2col_task, &c, c.C * c.kh * c.kw, rt_chunks(c.C * c.kh * c.kw * c.Ho * c.Wo >= RT_PAR_MIN));
}

/* out[o, :] = b[o] for one sample's O rows of P */
typedef struct {
  float *out;
  const float *b;
  int64_t P;
} BiasRows;

static void bias_rows_task(const void *ctx, int64_t lo, int64_t hi) {
  const BiasRows *c = ctx;
  for (int64_t o = lo; o < hi; o++)
    for (int64_t i = 0; i < c->P; i++) c->out[o * c->P + i] = c->b[o];
}

/* out (+)= the convolution; the bias only when out is written (acc 0) */
static void conv2d_forward(float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N,
                           int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw,
                           int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t d, int64_t G, int acc) {
  int64_t P = Ho * Wo, Cg = C / G, Og = O / G, K = Cg * kh * kw;
  ConvCol cv = {
      .C = C, .H = H, .W = Wd, .Ho = Ho, .Wo = Wo, .kh = kh, .kw = kw, .sh = sh, .sw = sw, .ph = ph, .pw = pw, .d = d};
  int direct = conv_direct(&cv);
  RT_CHECK(direct || scratch, "conv2d: no scratch buffer for an im2col");
  for (int64_t n = 0; n < N; n++) {
    const float *xs = x + n * C * H * Wd;
    float *os = out + n * O * P;
    if (!direct) conv_im2col(cv, scratch, xs);
    if (b && !acc) rt_par(bias_rows_task, &(BiasRows){os, b, P}, O, rt_chunks(O * P >= RT_PAR_MIN));
    gemm_groups(0, 0, G, Og, P, K, W, Og * K, direct ? xs : scratch, K * P, os, Og * P, acc || b != NULL);
  }
}

void rt_conv2d_forward(float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N, int64_t C,
                       int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw, int64_t sh,
                       int64_t sw, int64_t ph, int64_t pw, int64_t d, int64_t G) {
  conv2d_forward(out, x, W, b, scratch, N, C, H, Wd, O, Ho, Wo, kh, kw, sh, sw, ph, pw, d, G, 0);
}

/* db[o] (+)= sum over n and positions of dout[n, o, :], in double */
typedef struct {
  float *db;
  const float *dout;
  int64_t N, O, P;
  int acc;
} ConvBias;

static void conv_db_task(const void *ctx, int64_t lo, int64_t hi) {
  const ConvBias *c = ctx;
  for (int64_t o = lo; o < hi; o++) {
    double sum = 0.0;
    for (int64_t n = 0; n < c->N; n++) {
      const float *r = c->dout + (n * c->O + o) * c->P;
      for (int64_t i = 0; i < c->P; i++) sum += r[i];
    }
    c->db[o] = (float)(c->acc ? c->db[o] + sum : sum);
  }
}

void rt_conv2d_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W,
                        float *scratch, int64_t N, int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo,
                        int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t d, int64_t G,
                        int acc_dx, int acc_dW, int acc_db) {
  int64_t P = Ho * Wo, Cg = C / G, Og = O / G, K = Cg * kh * kw;
  ConvCol cv = {
      .C = C, .H = H, .W = Wd, .Ho = Ho, .Wo = Wo, .kh = kh, .kw = kw, .sh = sh, .sw = sw, .ph = ph, .pw = pw, .d = d};
  int direct = conv_direct(&cv);
  RT_CHECK(direct || scratch || (!dx && !dW), "conv2d: no scratch buffer for an im2col");
  if (db) rt_par(conv_db_task, &(ConvBias){db, dout, N, O, P, acc_db}, O, rt_chunks(N * O * P >= RT_PAR_MIN));
  for (int64_t n = 0; n < N; n++) {
    const float *xs = x ? x + n * C * H * Wd : NULL, *ds = dout + n * O * P; // x: NULL without dW
    float *dxs = dx ? dx + n * C * H * Wd : NULL;
    if (dW) { // dW_g (+)= dout_g [Og, P] @ col_g^T [P, K], summed over the samples
      if (!direct) conv_im2col(cv, scratch, xs);
      gemm_groups(0, 1, G, Og, K, P, ds, Og * P, direct ? xs : scratch, K * P, dW, Og * K, acc_dW || n > 0);
    }
    if (!dx) continue;
    if (direct) { // dx_g (+)= W_g^T [K, Og] @ dout_g [Og, P]
      gemm_groups(1, 0, G, K, P, Og, W, Og * K, ds, Og * P, dxs, K * P, acc_dx);
      continue;
    }
    gemm_groups(1, 0, G, K, P, Og, W, Og * K, ds, Og * P, scratch, K * P, 0);
    ConvCol c = cv;
    c.col = scratch, c.img = dxs, c.acc = acc_dx;
    rt_par(col2im_task, &c, C, rt_chunks(C * kh * kw * P >= RT_PAR_MIN));
  }
}

// ----------------------------------------------------------------------------
// conv_transpose2d x[N, C, H, W] -> out[N, O, Ho, Wo], W[C, O, k, k]: the
// conv2d from out's shape to x's with weight W ([C out, O in, k, k], the same
// layout) read the other way. Its forward is that conv2d's dx (W^T @ x's
// sample into the scratch, then col2im), its dx that conv2d's forward of dout,
// its dW that conv2d's dW with dout as the input and x as the output's
// gradient; db is conv2d's db of dout. Every product is one sample's
// sgemm on the scratch conv2d would take: O k k H W floats (planner/ops.c).

void rt_conv_transpose2d_forward(float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N,
                                 int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t k,
                                 int64_t s, int64_t p) {
  int64_t P = Ho * Wo;
  if (b) // the bias first, the taps add onto it
    for (int64_t n = 0; n < N; n++)
      rt_par(bias_rows_task, &(BiasRows){out + n * O * P, b, P}, O, rt_chunks(O * P >= RT_PAR_MIN));
  rt_conv2d_backward(out, NULL, NULL, x, NULL, W, scratch, N, O, Ho, Wo, C, H, Wd, k, k, s, s, p, p, 1, 1, b != NULL, 0,
                     0);
}

void rt_conv_transpose2d_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W,
                                  float *scratch, int64_t N, int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho,
                                  int64_t Wo, int64_t k, int64_t s, int64_t p, int acc_dx, int acc_dW, int acc_db) {
  int64_t P = Ho * Wo;
  if (db) rt_par(conv_db_task, &(ConvBias){db, dout, N, O, P, acc_db}, O, rt_chunks(N * O * P >= RT_PAR_MIN));
  if (dx) conv2d_forward(dx, dout, W, NULL, scratch, N, O, Ho, Wo, C, H, Wd, k, k, s, s, p, p, 1, 1, acc_dx);
  if (dW)
    rt_conv2d_backward(NULL, dW, NULL, x, dout, NULL, scratch, N, O, Ho, Wo, C, H, Wd, k, k, s, s, p, p, 1, 1, 0,
                       acc_dW, 0);
}

// ----------------------------------------------------------------------------
// pooling: parallel over the N*C planes, each plane owned by one task, so a
// gradient's additions run in one order whatever the thread count

typedef struct {
  float *out;
  const float *x, *dout;
  int64_t H, W, Ho, Wo, k, s, p;
  int acc;
} PoolTask;

/* The first maximum of window (ho, wo) of plane x, torch's rule: start at the
 * first element inside the input, take v > max or a NaN. */
static inline int64_t pool_argmax(const PoolTask *c, const float *x, int64_t ho, int64_t wo) {
  int64_t h0 = ho * c->s - c->p, w0 = wo * c->s - c->p;
  int64_t h1 = h0 + c->k < c->H ? h0 + c->k : c->H, w1 = w0 + c->k < c->W ? w0 + c->k : c->W;
  if (h0 < 0) h0 = 0;
  if (w0 < 0) w0 = 0;
  int64_t best = h0 * c->W + w0;
  float mx = -INFINITY;
  for (int64_t h = h0; h < h1; h++)
    for (int64_t w = w0; w < w1; w++) {
      float v = x[h * c->W + w];
      if (v > mx || isnan(v)) {
        mx = v;
        best = h * c->W + w;
      }
    }
  return best;
}

static void maxpool_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *x = c->x + pl * c->H * c->W;
    float *out = c->out + pl * c->Ho * c->Wo;
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) out[ho * c->Wo + wo] = x[pool_argmax(c, x, ho, wo)];
  }
}

static void maxpool_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *x = c->x + pl * c->H * c->W, *dout = c->dout + pl * c->Ho * c->Wo;
    float *dx = c->out + pl * c->H * c->W;
    if (!c->acc) memset(dx, 0, sizeof(float) * (size_t)(c->H * c->W));
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) dx[pool_argmax(c, x, ho, wo)] += dout[ho * c->Wo + wo];
  }
}

/* torch's divisor (count_include_pad): the window's pixels within the padded input, k k but for a last
 * window past it (ceil_mode) */
static inline int64_t avg_div(int64_t h0, int64_t w0, int64_t k, int64_t H, int64_t W, int64_t p) {
  return ((h0 + k < H + p ? h0 + k : H + p) - h0) * ((w0 + k < W + p ? w0 + k : W + p) - w0);
}

static void avgpool_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *x = c->x + pl * c->H * c->W;
    float *out = c->out + pl * c->Ho * c->Wo;
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) {
        int64_t h0 = ho * c->s - c->p, w0 = wo * c->s - c->p;
        double sum = 0.0;
        for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + c->k && h < c->H; h++)
          for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + c->k && w < c->W; w++) sum += x[h * c->W + w];
        out[ho * c->Wo + wo] = (float)(sum / (double)avg_div(h0, w0, c->k, c->H, c->W, c->p));
      }
  }
}

static void avgpool_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *dout = c->dout + pl * c->Ho * c->Wo;
    float *dx = c->out + pl * c->H * c->W;
    if (!c->acc) memset(dx, 0, sizeof(float) * (size_t)(c->H * c->W));
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) {
        int64_t h0 = ho * c->s - c->p, w0 = wo * c->s - c->p;
        float g = dout[ho * c->Wo + wo] / (float)avg_div(h0, w0, c->k, c->H, c->W, c->p);
        for (int64_t h = h0 < 0 ? 0 : h0; h < h0 + c->k && h < c->H; h++)
          for (int64_t w = w0 < 0 ? 0 : w0; w < w0 + c->k && w < c->W; w++) dx[h * c->W + w] += g;
      }
  }
}

static void pool_run(RtTask fn, PoolTask t, int64_t N, int64_t C) {
  int64_t planes = N * C, work = planes * t.Ho * t.Wo * t.k * t.k;
  rt_par(fn, &t, planes, rt_chunks(work >= RT_PAR_MIN));
}

void rt_maxpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                          int64_t Wo, int64_t k, int64_t s, int64_t p) {
  pool_run(maxpool_task, (PoolTask){out, x, NULL, H, W, Ho, Wo, k, s, p, 0}, N, C);
}

void rt_maxpool2d_backward(float *dx, const float *dout, const float *x, int64_t N, int64_t C, int64_t H, int64_t W,
                           int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p, int acc) {
  if (!dx) return;
  pool_run(maxpool_backward_task, (PoolTask){dx, x, dout, H, W, Ho, Wo, k, s, p, acc}, N, C);
}

void rt_avgpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                          int64_t Wo, int64_t k, int64_t s, int64_t p) {
  pool_run(avgpool_task, (PoolTask){out, x, NULL, H, W, Ho, Wo, k, s, p, 0}, N, C);
}

void rt_avgpool2d_backward(float *dx, const float *dout, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                           int64_t Wo, int64_t k, int64_t s, int64_t p, int acc) {
  if (!dx) return;
  pool_run(avgpool_backward_task, (PoolTask){dx, NULL, dout, H, W, Ho, Wo, k, s, p, acc}, N, C);
}

/* adaptive_avgpool2d: window o of a dim of n outputs out and n inputs, torch's [floor(o n / out), ceil((o + 1) n /
 * out)); the outputs whose windows hold input i: [floor(i out / n), ceil((i + 1) out / n)) */
static inline int64_t adaptive_lo(int64_t o, int64_t n, int64_t out) { return o * n / out; }
static inline int64_t adaptive_hi(int64_t o, int64_t n, int64_t out) { return ((o + 1) * n + out - 1) / out; }

static void adaptive_pool_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *x = c->x + pl * c->H * c->W;
    float *out = c->out + pl * c->Ho * c->Wo;
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) {
        int64_t h0 = adaptive_lo(ho, c->H, c->Ho), h1 = adaptive_hi(ho, c->H, c->Ho);
        int64_t w0 = adaptive_lo(wo, c->W, c->Wo), w1 = adaptive_hi(wo, c->W, c->Wo);
        double sum = 0.0;
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) sum += x[h * c->W + w];
        out[ho * c->Wo + wo] = (float)(sum / (double)((h1 - h0) * (w1 - w0)));
      }
  }
}

static void adaptive_pool_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    const float *dout = c->dout + pl * c->Ho * c->Wo;
    float *dx = c->out + pl * c->H * c->W;
    if (!c->acc) memset(dx, 0, sizeof(float) * (size_t)(c->H * c->W));
    for (int64_t ho = 0; ho < c->Ho; ho++)
      for (int64_t wo = 0; wo < c->Wo; wo++) {
        int64_t h0 = adaptive_lo(ho, c->H, c->Ho), h1 = adaptive_hi(ho, c->H, c->Ho);
        int64_t w0 = adaptive_lo(wo, c->W, c->Wo), w1 = adaptive_hi(wo, c->W, c->Wo);
        float g = dout[ho * c->Wo + wo] / (float)((h1 - h0) * (w1 - w0));
        for (int64_t h = h0; h < h1; h++)
          for (int64_t w = w0; w < w1; w++) dx[h * c->W + w] += g;
      }
  }
}

/* PoolTask's k: the largest window's side, for pool_run's work estimate */
void rt_adaptive_avgpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                                   int64_t Wo) {
  pool_run(adaptive_pool_task, (PoolTask){out, x, NULL, H, W, Ho, Wo, H / Ho + W / Wo + 2, 0, 0, 0}, N, C);
}

void rt_adaptive_avgpool2d_backward(float *dx, const float *dout, int64_t N, int64_t C, int64_t H, int64_t W,
                                    int64_t Ho, int64_t Wo, int acc) {
  if (!dx) return;
  pool_run(adaptive_pool_backward_task, (PoolTask){dx, NULL, dout, H, W, Ho, Wo, H / Ho + W / Wo + 2, 0, 0, acc}, N, C);
}

static void gap_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  for (int64_t pl = lo; pl < hi; pl++) {
    double sum = 0.0;
    for (int64_t i = 0; i < c->H; i++) sum += c->x[pl * c->H + i];
    c->out[pl] = (float)(sum / (double)c->H);
  }
}

static void gap_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const PoolTask *c = ctx;
  float div = (float)c->H;
  for (int64_t pl = lo; pl < hi; pl++) {
    float g = c->dout[pl] / div, *dx = c->out + pl * c->H;
    for (int64_t i = 0; i < c->H; i++) dx[i] = c->acc ? dx[i] + g : g;
  }
}

/* PoolTask's H is the plane size HW here */
void rt_global_avgpool_forward(float *out, const float *x, int64_t NC, int64_t HW) {
  rt_par(gap_task, &(PoolTask){.out = out, .x = x, .H = HW}, NC, rt_chunks(NC * HW >= RT_PAR_MIN));
}

void rt_global_avgpool_backward(float *dx, const float *dout, int64_t NC, int64_t HW, int acc) {
  if (!dx) return;
  rt_par(gap_backward_task, &(PoolTask){.out = dx, .dout = dout, .H = HW, .acc = acc}, NC,
         rt_chunks(NC * HW >= RT_PAR_MIN));
}
