/* cpu_norm.c: the CPU backend's normalization: layernorm, rmsnorm, softmax, batchnorm2d (cpu_internal.h). */
#include "cpu_internal.h"

// ----------------------------------------------------------------------------
// row statistics, layernorm's and groupnorm's (cpu_diffusion.c)

void row_stats(const float *x, int64_t n, float eps, float *mean, float *rstd) {
  double s = 0.0;
  for (int64_t j = 0; j < n; j++) s += x[j];
  float m = (float)(s / (double)n);
  double v = 0.0;
  for (int64_t j = 0; j < n; j++) v += (double)(x[j] - m) * (x[j] - m);
  *mean = m;
  *rstd = 1.0f / sqrtf((float)(v / (double)n) + eps);
}

// ----------------------------------------------------------------------------
// layernorm: out = (x - mean) * rstd * w (+ b), rstd = 1 / sqrt(var + eps) per row

static void layernorm_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0], *mean = A->o[1], *rstd = A->o[2];
  const float *x = A->i[0], *w = A->i[1], *b = A->i[2];
  int64_t C = A->d[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *xi = x + i * C;
    float *oi = out + i * C;
    float m, r;
    row_stats(xi, C, A->f[0], &m, &r);
    if (b)
      for (int64_t j = 0; j < C; j++) oi[j] = (xi[j] - m) * r * w[j] + b[j];
    else
      for (int64_t j = 0; j < C; j++) oi[j] = (xi[j] - m) * r * w[j];
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = r;
  }
}

void rt_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                          int64_t N, int64_t C, float eps) {
  RtArgs a = {.o = {out, mean, rstd}, .i = {x, w, b}, .d = {C}, .f = {eps}};
  rt_par(layernorm_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

/* dx (+)= rstd (w dout - mean(w dout) - xhat mean(w dout xhat)), per row. */
static void layernorm_dx_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dx = A->o[0];
  const float *dout = A->i[0], *x = A->i[1], *w = A->i[2], *mean = A->i[3], *rstd = A->i[4];
  int64_t C = A->d[0];
  int acc = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *xi = x + i * C, *gi = dout + i * C;
    float *dxi = dx + i * C;
    float m = mean[i], r = rstd[i];
    double s1 = 0.0, s2 = 0.0;
    for (int64_t j = 0; j < C; j++) {
      float wg = w[j] * gi[j];
      s1 += wg;
      s2 += wg * ((xi[j] - m) * r);
    }
    float m1 = (float)(s1 / (double)C), m2 = (float)(s2 / (double)C);
    for (int64_t j = 0; j < C; j++) {
      float g = r * (w[j] * gi[j] - m1 - (xi[j] - m) * r * m2);
      dxi[j] = acc ? dxi[j] + g : g;
    }
  }
}

static void layernorm_backward_dx(float *dx, const float *dout, const float *x, const float *w, const float *mean,
                                  const float *rstd, int64_t N, int64_t C, int acc) {
  RtArgs a = {.o = {dx}, .i = {dout, x, w, mean, rstd}, .d = {C}, .acc = {acc}};
  rt_par(layernorm_dx_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

/* dw (+)= sum_rows dout * xhat; db (+)= sum_rows dout. */
static void layernorm_wb_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dw = A->o[0], *db = A->o[1];
  const float *dout = A->i[0], *x = A->i[1], *mean = A->i[2], *rstd = A->i[3];
  int64_t N = A->d[0], C = A->d[1];
  int acc_dw = A->acc[0], acc_db = A->acc[1];
  for (int64_t it = lo; it < hi; it++) {
    int64_t j0 = it * RT_COL_BLOCK;
    int64_t nj = C - j0 < RT_COL_BLOCK ? C - j0 : RT_COL_BLOCK;
    double sw[RT_COL_BLOCK] = {0}, sb[RT_COL_BLOCK] = {0};
    for (int64_t i = 0; i < N; i++) {
      const float *xi = x + i * C + j0, *gi = dout + i * C + j0;
      for (int64_t j = 0; j < nj; j++) {
        sw[j] += gi[j] * ((xi[j] - mean[i]) * rstd[i]);
        sb[j] += gi[j];
      }
    }
    for (int64_t j = 0; j < nj; j++) {
      if (dw) dw[j0 + j] = (float)(acc_dw ? dw[j0 + j] + sw[j] : sw[j]);
      if (db) db[j0 + j] = (float)(acc_db ? db[j0 + j] + sb[j] : sb[j]);
    }
  }
}

static void layernorm_backward_wb(float *dw, float *db, const float *dout, const float *x, const float *mean,
                                  const float *rstd, int64_t N, int64_t C, int acc_dw, int acc_db) {
  RtArgs a = {.o = {dw, db}, .i = {dout, x, mean, rstd}, .d = {N, C}, .acc = {acc_dw, acc_db}};
  rt_par(layernorm_wb_task, &a, col_blocks(C), rt_chunks(N * C >= RT_PAR_MIN));
}

void rt_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                           const float *mean, const float *rstd, int64_t N, int64_t C, float eps, int acc_dx,
                           int acc_dw, int acc_db) {
  (void)eps; /* rstd is saved */
  if (dx) layernorm_backward_dx(dx, dout, x, w, mean, rstd, N, C, acc_dx);
  if (dw || db) layernorm_backward_wb(dw, db, dout, x, mean, rstd, N, C, acc_dw, acc_db);
}

// ----------------------------------------------------------------------------
// rmsnorm: out = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps) per row

static void rmsnorm_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0], *rstd = A->o[1];
  const float *x = A->i[0], *w = A->i[1];
  int64_t C = A->d[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *xi = x + i * C;
    float *oi = out + i * C;
    double s = 0.0;
    for (int64_t j = 0; j < C; j++) s += (double)xi[j] * xi[j];
    float r = 1.0f / sqrtf((float)(s / (double)C) + A->f[0]);
    for (int64_t j = 0; j < C; j++) oi[j] = xi[j] * r * w[j];
    if (rstd) rstd[i] = r;
  }
}

void rt_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int64_t N, int64_t C, float eps) {
  RtArgs a = {.o = {out, rstd}, .i = {x, w}, .d = {C}, .f = {eps}};
  rt_par(rmsnorm_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

/* dx (+)= rstd (w dout - x rstd^2 mean(w dout x)), per row. */
static void rmsnorm_dx_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dx = A->o[0];
  const float *dout = A->i[0], *x = A->i[1], *w = A->i[2], *rstd = A->i[3];
  int64_t C = A->d[0];
  int acc = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *xi = x + i * C, *gi = dout + i * C;
    float *dxi = dx + i * C;
    float r = rstd[i];
    double s = 0.0;
    for (int64_t j = 0; j < C; j++) s += (double)(w[j] * gi[j]) * xi[j];
    float m = (float)(s / (double)C) * r * r;
    for (int64_t j = 0; j < C; j++) {
      float g = r * (w[j] * gi[j] - xi[j] * m);
      dxi[j] = acc ? dxi[j] + g : g;
    }
  }
}

/* dw (+)= sum_rows dout * x * rstd, over column blocks. */
static void rmsnorm_dw_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dw = A->o[0];
  const float *dout = A->i[0], *x = A->i[1], *rstd = A->i[2];
  int64_t N = A->d[0], C = A->d[1];
  for (int64_t it = lo; it < hi; it++) {
    int64_t j0 = it * RT_COL_BLOCK;
    int64_t nj = C - j0 < RT_COL_BLOCK ? C - j0 : RT_COL_BLOCK;
    double sw[RT_COL_BLOCK] = {0};
    for (int64_t i = 0; i < N; i++) {
      const float *xi = x + i * C + j0, *gi = dout + i * C + j0;
      for (int64_t j = 0; j < nj; j++) sw[j] += gi[j] * (xi[j] * rstd[i]);
    }
    for (int64_t j = 0; j < nj; j++) dw[j0 + j] = (float)(A->acc[0] ? dw[j0 + j] + sw[j] : sw[j]);
  }
}

void rt_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                         int64_t N, int64_t C, float eps, int acc_dx, int acc_dw) {
  (void)eps; /* rstd is saved */
  if (dx) {
    RtArgs a = {.o = {dx}, .i = {dout, x, w, rstd}, .d = {C}, .acc = {acc_dx}};
    rt_par(rmsnorm_dx_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
  }
  if (dw) {
    RtArgs a = {.o = {dw}, .i = {dout, x, rstd}, .d = {N, C}, .acc = {acc_dw}};
    rt_par(rmsnorm_dw_task, &a, col_blocks(C), rt_chunks(N * C >= RT_PAR_MIN));
  }
}

// ----------------------------------------------------------------------------
// softmax

static void softmax_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *out = A->o[0];
  const float *x = A->i[0];
  int64_t C = A->d[0];
  for (int64_t i = lo; i < hi; i++) {
    if (out != x) memcpy(out + i * C, x + i * C, (size_t)C * sizeof(float));
    softmax_row(out + i * C, C);
  }
}

void rt_softmax_forward(float *out, const float *x, int64_t N, int64_t C) {
  RtArgs a = {.o = {out}, .i = {x}, .d = {C}};
  rt_par(softmax_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

static void softmax_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *dx = A->o[0];
  const float *dout = A->i[0], *out = A->i[1];
  int64_t C = A->d[0];
  int acc = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    const float *gi = dout + i * C, *yi = out + i * C;
    float *dxi = dx + i * C;
    double s = 0.0; // read all of the row's dout before dx (may alias it) is written
    for (int64_t j = 0; j < C; j++) s += gi[j] * yi[j];
    for (int64_t j = 0; j < C; j++) {
      float g = yi[j] * (gi[j] - (float)s);
      dxi[j] = acc ? dxi[j] + g : g;
    }
  }
}

void rt_softmax_backward(float *dx, const float *dout, const float *out, int64_t N, int64_t C, int acc) {
  RtArgs a = {.o = {dx}, .i = {dout, out}, .d = {C}, .acc = {acc}};
  rt_par(softmax_backward_task, &a, N, rt_chunks(N * C >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// batchnorm2d: statistics per channel over N and S = H*W, parallel over channels

typedef struct {
  float *out, *mean, *rstd, *rmean, *rvar, *dx, *dw, *db;
  const float *x, *w, *b, *dout, *smean, *srstd;
  int64_t N, C, S;
  float eps, momentum;
  int mode, acc_dx, acc_dw, acc_db;
} BnArgs;

static void batchnorm_task(const void *ctx, int64_t lo, int64_t hi) {
  const BnArgs *A = ctx;
  int64_t N = A->N, C = A->C, S = A->S, M = N * S;
  for (int64_t c = lo; c < hi; c++) {
    float m, r;
    if (A->mode == RT_MODE_EVAL) {
      m = A->rmean[c];
      r = (float)(1.0 / sqrt((double)A->rvar[c] + (double)A->eps));
    } else {
      double s = 0.0;
      for (int64_t n = 0; n < N; n++) {
        const float *xc = A->x + (n * C + c) * S;
        for (int64_t k = 0; k < S; k++) s += xc[k];
      }
      double md = s / (double)M, v = 0.0; // two-pass biased variance: no cancellation
      for (int64_t n = 0; n < N; n++) {
        const float *xc = A->x + (n * C + c) * S;
        for (int64_t k = 0; k < S; k++) v += ((double)xc[k] - md) * ((double)xc[k] - md);
      }
      v /= (double)M;
      m = (float)md;
      r = (float)(1.0 / sqrt(v + (double)A->eps));
      if (A->mean) A->mean[c] = m;
      if (A->rstd) A->rstd[c] = r;
      if (A->mode == RT_MODE_TRAIN) { // a recompute must not update them a second time
        double mom = A->momentum;
        A->rmean[c] = (float)((1.0 - mom) * A->rmean[c] + mom * md);
        A->rvar[c] = (float)((1.0 - mom) * A->rvar[c] + mom * v * (double)M / (double)(M - 1));
      }
    }
    float wc = A->w[c], bc = A->b ? A->b[c] : 0.0f;
    for (int64_t n = 0; n < N; n++) {
      const float *xc = A->x + (n * C + c) * S;
      float *oc = A->out + (n * C + c) * S;
      for (int64_t k = 0; k < S; k++) oc[k] = (xc[k] - m) * r * wc + bc;
    }
  }
}

void rt_batchnorm2d_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                            float *running_mean, float *running_var, int64_t N, int64_t C, int64_t S, float eps,
                            float momentum, int mode, uint64_t key) {
  (void)key;
  BnArgs a = {.out = out,
              .mean = mean,
              .rstd = rstd,
              .rmean = running_mean,
              .rvar = running_var,
              .x = x,
              .w = w,
              .b = b,
              .N = N,
              .C = C,
              .S = S,
              .eps = eps,
              .momentum = momentum,
              .mode = mode};
  rt_par(batchnorm_task, &a, C, rt_chunks(N * C * S >= RT_PAR_MIN));
}

/* Per channel: dw = sum dout xhat, db = sum dout, then dx from both. */
static void batchnorm_backward_task(const void *ctx, int64_t lo, int64_t hi) {
  const BnArgs *A = ctx;
  int64_t N = A->N, C = A->C, S = A->S, M = N * S;
  for (int64_t c = lo; c < hi; c++) {
    float m = A->smean[c], r = A->srstd[c];
    double sg = 0.0, sgx = 0.0;
    for (int64_t n = 0; n < N; n++) {
      const float *xc = A->x + (n * C + c) * S, *gc = A->dout + (n * C + c) * S;
      for (int64_t k = 0; k < S; k++) {
        sg += gc[k];
        sgx += gc[k] * ((xc[k] - m) * r);
      }
    }
    if (A->dw) A->dw[c] = (float)(A->acc_dw ? A->dw[c] + sgx : sgx);
    if (A->db) A->db[c] = (float)(A->acc_db ? A->db[c] + sg : sg);
    if (!A->dx) continue;
    float wr = A->w[c] * r, m1 = (float)(sg / (double)M), m2 = (float)(sgx / (double)M);
    for (int64_t n = 0; n < N; n++) {
      const float *xc = A->x + (n * C + c) * S, *gc = A->dout + (n * C + c) * S;
      float *dxc = A->dx + (n * C + c) * S;
      for (int64_t k = 0; k < S; k++) {
        float g = wr * (gc[k] - m1 - (xc[k] - m) * r * m2);
        dxc[k] = A->acc_dx ? dxc[k] + g : g;
      }
    }
  }
}

void rt_batchnorm2d_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                             const float *mean, const float *rstd, int64_t N, int64_t C, int64_t S, float eps,
                             float momentum, int mode, uint64_t key, int acc_dx, int acc_dw, int acc_db) {
  (void)eps, (void)momentum, (void)mode, (void)key; /* batch statistics, saved */
  BnArgs a = {.dx = dx,
              .dw = dw,
              .db = db,
              .dout = dout,
              .x = x,
              .w = w,
              .smean = mean,
              .srstd = rstd,
              .N = N,
              .C = C,
              .S = S,
              .acc_dx = acc_dx,
              .acc_dw = acc_dw,
              .acc_db = acc_db};
  rt_par(batchnorm_backward_task, &a, C, rt_chunks(N * C * S >= RT_PAR_MIN));
}
