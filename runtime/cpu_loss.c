/* cpu_loss.c: the CPU backend's losses: cross-entropy, mse, linear_cross_entropy (cpu_internal.h). */
#include "cpu_internal.h"

// ----------------------------------------------------------------------------
// losses

static void cross_entropy_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *lse = A->o[0];
  const float *logits = A->i[0];
  const int32_t *targets = A->tok;
  int64_t N = A->d[0], V = A->d[1];
  double *part = A->part;
  for (int64_t c = lo; c < hi; c++) {
    for (int64_t i = N * c / RT_SUM_PARTS; i < N * (c + 1) / RT_SUM_PARTS; i++) {
      const float *li = logits + i * V;
      float l = row_lse(li, V);
      if (lse) lse[i] = l;
      part[c] += (double)l - li[targets[i]];
    }
  }
}

void rt_cross_entropy_forward(float *loss, float *lse, const float *logits, const int32_t *targets, int64_t N,
                              int64_t V) {
  double part[RT_SUM_PARTS] = {0};
  RtArgs a = {.o = {lse}, .i = {logits}, .tok = targets, .d = {N, V}, .part = part};
  rt_par(cross_entropy_task, &a, RT_SUM_PARTS, rt_chunks(1));
  loss[0] = (float)(sum_parts(part) / (double)N);
}

static void cross_entropy_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dlogits = A->o[0];
  const float *logits = A->i[0], *lse = A->i[1];
  const int32_t *targets = A->tok;
  int64_t V = A->d[0];
  float k = A->f[0];
  int acc = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *li = logits + i * V;
    float *di = dlogits + i * V;
    float l = lse[i];
    int64_t y = targets[i];
    if (acc)
      for (int64_t j = 0; j < V; j++) di[j] += k * rt_exp(li[j] - l);
    else
      for (int64_t j = 0; j < V; j++) di[j] = k * rt_exp(li[j] - l);
    di[y] -= k;
  }
}

void rt_cross_entropy_backward(float *dlogits, const float *logits, const int32_t *targets, const float *lse, int64_t N,
                               int64_t V, float scale, int acc) {
  float k = (float)((double)scale / (double)N);
  // Each element depends on its own logit and the saved lse only, so writing
  // dlogits over logits (acc = 0) never reads an overwritten value.
  RtArgs a = {.o = {dlogits}, .i = {logits, lse}, .tok = targets, .d = {V}, .f = {k}, .acc = {acc}};
  rt_par(cross_entropy_backward_task, &a, N, rt_chunks(1));
}

static void mse_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  const float *pred = A->i[0], *target = A->i[1];
  int64_t n = A->d[0];
  double *part = A->part;
  for (int64_t c = lo; c < hi; c++) {
    for (int64_t i = n * c / RT_SUM_PARTS; i < n * (c + 1) / RT_SUM_PARTS; i++) {
      double d = (double)pred[i] - target[i];
      part[c] += d * d;
    }
  }
}

void rt_mse_forward(float *loss, const float *pred, const float *target, int64_t n) {
  double part[RT_SUM_PARTS] = {0};
  RtArgs a = {.i = {pred, target}, .d = {n}, .part = part};
  rt_par(mse_task, &a, RT_SUM_PARTS, rt_chunks(n >= RT_PAR_MIN));
  loss[0] = (float)(sum_parts(part) / (double)n);
}

static void mse_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dpred = A->o[0];
  const float *pred = A->i[0], *target = A->i[1];
  float k = A->f[0];
  int acc = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    float g = k * (pred[i] - target[i]);
    dpred[i] = acc ? dpred[i] + g : g;
  }
}

void rt_mse_backward(float *dpred, const float *pred, const float *target, int64_t n, float scale, int acc) {
  float k = (float)(2.0 * scale / (double)n);
  RtArgs a = {.o = {dpred}, .i = {pred, target}, .f = {k}, .acc = {acc}};
  rt_par(mse_backward_task, &a, n, rt_chunks(n >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// linear_cross_entropy: R rows at a time, the chunk's logits in scratch; per
// row its loss term and, in training, dlogits over the logits (as
// cross_entropy's backward computes them), then dx, dW, db from the chunk

static void lce_rows_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *z = A->o[0], *term = A->o[1];
  const int32_t *targets = A->tok;
  int64_t V = A->d[0], train = A->d[1];
  float k = A->f[0];
  for (int64_t i = lo; i < hi; i++) {
    float *zi = z + i * V;
    int64_t y = targets[i];
    float l = row_lse(zi, V);
    term[i] = l - zi[y];
    if (!train) continue;
    for (int64_t j = 0; j < V; j++) zi[j] = k * rt_exp(zi[j] - l);
    zi[y] -= k;
  }
}

void rt_linear_cross_entropy_forward(float *loss, float *dx, float *dW, float *db, const float *x, const float *W,
                                     const float *b, const int32_t *targets, float *scratch, int64_t N, int64_t V,
                                     int64_t K, int64_t R) {
  RT_CHECK(scratch && N >= 1 && R >= 1, "linear_cross_entropy needs rows, a chunk and its scratch");
  float *term = scratch + R * V;
  int train = dx || dW || (db && b);
  float k = (float)(1.0 / (double)N);
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    int64_t n = N - r0 < R ? N - r0 : R;
    const float *xc = x + r0 * K;
    rt_linear_forward(scratch, xc, W, b, n, K, V);
    RtArgs a = {.o = {scratch, term + r0}, .tok = targets + r0, .d = {V, train}, .f = {k}};
    rt_par(lce_rows_task, &a, n, rt_chunks(n * V >= RT_PAR_MIN));
    if (dx) gemm(0, 0, n, K, V, scratch, W, dx + r0 * K, 0); // [n,V] @ [V,K]
    if (dW) gemm(1, 0, V, K, n, scratch, xc, dW, r0 > 0);    // [n,V]^T @ [n,K]
    if (db && b) colsum(db, scratch, n, V, r0 > 0);
  }
  if (!loss) return; /* the deferred head gradient's recompute (planner/headgrad.h): dW only */
  double s = 0.0;
  for (int64_t i = 0; i < N; i++) s += term[i];
  loss[0] = (float)(s / (double)N);
}

static void lce_scale_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const float *in = A->i[0];
  float k = A->f[0];
  if (A->acc[0])
    for (int64_t i = lo; i < hi; i++) out[i] += k * in[i];
  else
    for (int64_t i = lo; i < hi; i++) out[i] = k * in[i];
}

/* out (+)= k in; element-wise, so out may be in (acc = 0). */
static void lce_scale(float *out, const float *in, int64_t n, float k, int acc) {
  if (!out) return;
  RtArgs a = {.o = {out}, .i = {in}, .f = {k}, .acc = {acc}};
  rt_par(lce_scale_task, &a, n, rt_chunks(n >= RT_PAR_MIN));
}

void rt_linear_cross_entropy_backward(float *dx, float *dW, float *db, const float *sdx, const float *sdW,
                                      const float *sdb, float *scratch, int64_t N, int64_t V, int64_t K, int64_t R,
                                      float scale, int acc_dx, int acc_dW, int acc_db) {
  (void)scratch, (void)R;
  lce_scale(dx, sdx, N * K, scale, acc_dx);
  lce_scale(dW, sdW, V * K, scale, acc_dW);
  lce_scale(db, sdb, V, scale, acc_db);
}
