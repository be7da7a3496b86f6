/* ref.c: naive double-precision references of the runtime kernels (ref.h). */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double *dnew(int64_t n) {
  double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  if (!p) {
    fprintf(stderr, "%s:%d: out of memory\n", __FILE__, __LINE__);
    exit(1);
  }
  return p;
}

/* dst (+)= val, rounded once; then frees val. NULL dst: nothing wanted. */
static void store(float *dst, double *val, int64_t n, int acc) {
  if (dst)
    for (int64_t i = 0; i < n; i++) dst[i] = (float)(acc ? dst[i] + val[i] : val[i]);
  free(val);
}

// ----------------------------------------------------------------------------
// products

void ref_linear_forward(float *out, const float *x, const float *W, const float *b, int64_t M, int64_t K, int64_t N) {
  double *o = dnew(M * N);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = b ? b[j] : 0.0;
      for (int64_t k = 0; k < K; k++) s += (double)x[i * K + k] * W[j * K + k];
      o[i * N + j] = s;
    }
  store(out, o, M * N, 0);
}

void ref_linear_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W, int64_t M,
                         int64_t K, int64_t N, int acc_dx, int acc_dW, int acc_db) {
  double *gx = dnew(M * K), *gW = dnew(N * K), *gb = dnew(N);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double g = dout[i * N + j];
      gb[j] += g;
      for (int64_t k = 0; k < K; k++) {
        gx[i * K + k] += g * W[j * K + k];
        gW[j * K + k] += g * x[i * K + k];
      }
    }
  store(dx, gx, M * K, acc_dx);
  store(dW, gW, N * K, acc_dW);
  store(db, gb, N, acc_db);
}

void ref_matmul_forward(float *out, const float *a, const float *b, int64_t Bt, int64_t M, int64_t K, int64_t N) {
  double *o = dnew(Bt * M * N);
  for (int64_t t = 0; t < Bt; t++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0.0;
        for (int64_t k = 0; k < K; k++) s += (double)a[(t * M + i) * K + k] * b[(t * K + k) * N + j];
        o[(t * M + i) * N + j] = s;
      }
  store(out, o, Bt * M * N, 0);
}

void ref_matmul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t Bt, int64_t M,
                         int64_t K, int64_t N, int acc_da, int acc_db) {
  double *ga = dnew(Bt * M * K), *gb = dnew(Bt * K * N);
  for (int64_t t = 0; t < Bt; t++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double g = dout[(t * M + i) * N + j];
        for (int64_t k = 0; k < K; k++) {
          ga[(t * M + i) * K + k] += g * b[(t * K + k) * N + j];
          gb[(t * K + k) * N + j] += g * a[(t * M + i) * K + k];
        }
      }
  store(da, ga, Bt * M * K, acc_da);
  store(db, gb, Bt * K * N, acc_db);
}

// ----------------------------------------------------------------------------
// element-wise

void ref_add_forward(float *out, const float *a, const float *b, int64_t n) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) o[i] = (double)a[i] + b[i];
  store(out, o, n, 0);
}

void ref_add_backward(float *da, float *db, const float *dout, int64_t n, int acc_da, int acc_db) {
  double *ga = dnew(n), *gb = dnew(n);
  for (int64_t i = 0; i < n; i++) ga[i] = gb[i] = dout[i];
  store(da, ga, n, acc_da);
  store(db, gb, n, acc_db);
}

void ref_mul_forward(float *out, const float *a, const float *b, int64_t n) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) o[i] = (double)a[i] * b[i];
  store(out, o, n, 0);
}

/* da is stored before db, so one buffer for both (acc_db = 1) sums them. */
void ref_mul_backward(float *da, float *db, const float *dout, const float *a, const float *b, int64_t n, int acc_da,
                      int acc_db) {
  double *ga = dnew(n), *gb = dnew(n);
  for (int64_t i = 0; i < n; i++) {
    ga[i] = (double)dout[i] * b[i];
    gb[i] = (double)dout[i] * a[i];
  }
  store(da, ga, n, acc_da);
  store(db, gb, n, acc_db);
}

void ref_relu_forward(float *out, const float *x, int64_t n) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) o[i] = x[i] > 0.0f ? x[i] : 0.0;
  store(out, o, n, 0);
}

void ref_relu_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  double *g = dnew(n);
  for (int64_t i = 0; i < n; i++) g[i] = out[i] > 0.0f ? dout[i] : 0.0;
  store(dx, g, n, acc);
}

void ref_relu6_forward(float *out, const float *x, int64_t n) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) o[i] = x[i] > 0.0f ? (x[i] < 6.0f ? x[i] : 6.0) : 0.0;
  store(out, o, n, 0);
}

void ref_relu6_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  double *g = dnew(n);
  for (int64_t i = 0; i < n; i++) g[i] = out[i] > 0.0f && out[i] < 6.0f ? dout[i] : 0.0;
  store(dx, g, n, acc);
}

void ref_sigmoid_forward(float *out, const float *x, int64_t n) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) o[i] = 1.0 / (1.0 + exp(-(double)x[i]));
  store(out, o, n, 0);
}

void ref_sigmoid_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  double *g = dnew(n);
  for (int64_t i = 0; i < n; i++) g[i] = (double)dout[i] * out[i] * (1.0 - out[i]);
  store(dx, g, n, acc);
}

void ref_hardswish_forward(float *out, const float *x, int64_t n) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) {
    double v = x[i];
    o[i] = v * fmin(fmax(v + 3.0, 0.0), 6.0) / 6.0;
  }
  store(out, o, n, 0);
}

void ref_hardswish_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  double *g = dnew(n);
  for (int64_t i = 0; i < n; i++) g[i] = x[i] < -3.0f ? 0.0 : x[i] <= 3.0f ? dout[i] * (x[i] / 3.0 + 0.5) : dout[i];
  store(dx, g, n, acc);
}

void ref_hardsigmoid_forward(float *out, const float *x, int64_t n) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) o[i] = fmin(fmax(x[i] + 3.0, 0.0), 6.0) / 6.0;
  store(out, o, n, 0);
}

void ref_hardsigmoid_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  double *g = dnew(n);
  for (int64_t i = 0; i < n; i++) g[i] = x[i] > -3.0f && x[i] < 3.0f ? dout[i] / 6.0 : 0.0;
  store(dx, g, n, acc);
}

void ref_scale_channels_forward(float *out, const float *x, const float *s, int64_t NC, int64_t S) {
  double *o = dnew(NC * S);
  for (int64_t i = 0; i < NC * S; i++) o[i] = (double)x[i] * s[i / S];
  store(out, o, NC * S, 0);
}

/* ds is computed before dx is stored, so dx may be dout. */
void ref_scale_channels_backward(float *dx, float *ds, const float *dout, const float *x, const float *s, int64_t NC,
                                 int64_t S, int acc_dx, int acc_ds) {
  double *gx = dnew(NC * S), *gs = dnew(NC);
  for (int64_t i = 0; i < NC * S; i++) {
    gx[i] = (double)dout[i] * s[i / S];
    gs[i / S] += (double)dout[i] * x[i];
  }
  store(ds, gs, NC, acc_ds);
  store(dx, gx, NC * S, acc_dx);
}

void ref_layer_scale_forward(float *out, const float *x, const float *w, int64_t N, int64_t C, int64_t S) {
  double *o = dnew(N * C * S);
  for (int64_t i = 0; i < N * C * S; i++) o[i] = (double)x[i] * w[i / S % C];
  store(out, o, N * C * S, 0);
}

/* dw is computed before dx is stored, so dx may be dout. */
void ref_layer_scale_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, int64_t N,
                              int64_t C, int64_t S, int acc_dx, int acc_dw) {
  double *gx = dnew(N * C * S), *gw = dnew(C);
  for (int64_t i = 0; i < N * C * S; i++) {
    gx[i] = (double)dout[i] * w[i / S % C];
    gw[i / S % C] += (double)dout[i] * x[i];
  }
  store(dw, gw, C, acc_dw);
  store(dx, gx, N * C * S, acc_dx);
}

static const double SQRT_2_OVER_PI = 0.79788456080286535588;

static const double SQRT1_2 = 0.70710678118654752440, INV_SQRT_2PI = 0.39894228040143267794;

void ref_gelu_forward(float *out, const float *x, int64_t n, int approximate) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) {
    double xi = x[i], u = SQRT_2_OVER_PI * (xi + 0.044715 * xi * xi * xi);
    o[i] = approximate ? 0.5 * xi * (1.0 + tanh(u)) : 0.5 * xi * (1.0 + erf(xi * SQRT1_2));
  }
  store(out, o, n, 0);
}

void ref_gelu_backward(float *dx, const float *dout, const float *x, int64_t n, int approximate, int acc) {
  double *g = dnew(n);
  for (int64_t i = 0; i < n; i++) {
    double xi = x[i], u = SQRT_2_OVER_PI * (xi + 0.044715 * xi * xi * xi);
    double du = SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * xi * xi), ch = cosh(u);
    double exact = 0.5 * (1.0 + erf(xi * SQRT1_2)) + xi * INV_SQRT_2PI * exp(-0.5 * xi * xi);
    g[i] = dout[i] * (approximate ? 0.5 * (1.0 + tanh(u)) + 0.5 * xi * du / (ch * ch) : exact);
  }
  store(dx, g, n, acc);
}

void ref_scale_forward(float *out, const float *x, int64_t n, double factor) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) o[i] = (double)(float)factor * x[i];
  store(out, o, n, 0);
}

void ref_scale_backward(float *dx, const float *dout, int64_t n, double factor, int acc) {
  double *g = dnew(n);
  for (int64_t i = 0; i < n; i++) g[i] = (double)(float)factor * dout[i];
  store(dx, g, n, acc);
}

void ref_silu_forward(float *out, const float *x, int64_t n) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) o[i] = x[i] / (1.0 + exp(-(double)x[i]));
  store(out, o, n, 0);
}

void ref_silu_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  double *g = dnew(n);
  for (int64_t i = 0; i < n; i++) {
    double xi = x[i], s = 1.0 / (1.0 + exp(-xi));
    g[i] = dout[i] * s * (1.0 + xi * (1.0 - s));
  }
  store(dx, g, n, acc);
}

// ----------------------------------------------------------------------------
// layernorm, softmax

void ref_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                           int64_t N, int64_t C, float eps) {
  double *o = dnew(N * C), *mu = dnew(N), *rs = dnew(N);
  for (int64_t i = 0; i < N; i++) {
    const float *xi = x + i * C;
    double m = 0.0, v = 0.0;
    for (int64_t j = 0; j < C; j++) m += xi[j];
    m /= (double)C;
    for (int64_t j = 0; j < C; j++) v += (xi[j] - m) * (xi[j] - m);
    double r = 1.0 / sqrt(v / (double)C + eps);
    for (int64_t j = 0; j < C; j++) o[i * C + j] = (xi[j] - m) * r * w[j] + (b ? b[j] : 0.0);
    mu[i] = m;
    rs[i] = r;
  }
  store(out, o, N * C, 0);
  store(mean, mu, N, 0);
  store(rstd, rs, N, 0);
}

void ref_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                            const float *mean, const float *rstd, int64_t N, int64_t C, float eps, int acc_dx,
                            int acc_dw, int acc_db) {
  (void)eps;
  double *gx = dnew(N * C), *gw = dnew(C), *gb = dnew(C);
  for (int64_t i = 0; i < N; i++) {
    const float *xi = x + i * C, *gi = dout + i * C;
    double r = rstd[i], s1 = 0.0, s2 = 0.0;
    for (int64_t j = 0; j < C; j++) {
      double xh = (xi[j] - (double)mean[i]) * r, wg = (double)w[j] * gi[j];
      s1 += wg;
      s2 += wg * xh;
      gw[j] += gi[j] * xh;
      gb[j] += gi[j];
    }
    s1 /= (double)C;
    s2 /= (double)C;
    for (int64_t j = 0; j < C; j++) {
      double xh = (xi[j] - (double)mean[i]) * r;
      gx[i * C + j] = r * ((double)w[j] * gi[j] - s1 - xh * s2);
    }
  }
  store(dx, gx, N * C, acc_dx);
  store(dw, gw, C, acc_dw);
  store(db, gb, C, acc_db);
}

void ref_rmsnorm_forward(float *out, float *rstd, const float *x, const float *w, int64_t N, int64_t C, float eps) {
  double *o = dnew(N * C), *rs = dnew(N);
  for (int64_t i = 0; i < N; i++) {
    const float *xi = x + i * C;
    double ms = 0.0;
    for (int64_t j = 0; j < C; j++) ms += (double)xi[j] * xi[j];
    double r = 1.0 / sqrt(ms / (double)C + eps);
    for (int64_t j = 0; j < C; j++) o[i * C + j] = xi[j] * r * w[j];
    rs[i] = r;
  }
  store(out, o, N * C, 0);
  store(rstd, rs, N, 0);
}

void ref_rmsnorm_backward(float *dx, float *dw, const float *dout, const float *x, const float *w, const float *rstd,
                          int64_t N, int64_t C, float eps, int acc_dx, int acc_dw) {
  (void)eps;
  double *gx = dnew(N * C), *gw = dnew(C);
  for (int64_t i = 0; i < N; i++) {
    const float *xi = x + i * C, *gi = dout + i * C;
    double r = rstd[i], s = 0.0;
    for (int64_t j = 0; j < C; j++) {
      s += (double)w[j] * gi[j] * xi[j];
      gw[j] += gi[j] * (xi[j] * r);
    }
    s /= (double)C;
    for (int64_t j = 0; j < C; j++) gx[i * C + j] = r * ((double)w[j] * gi[j] - xi[j] * r * r * s);
  }
  store(dx, gx, N * C, acc_dx);
  store(dw, gw, C, acc_dw);
}

void ref_softmax_forward(float *out, const float *x, int64_t N, int64_t C) {
  double *o = dnew(N * C);
  for (int64_t i = 0; i < N; i++) {
    const float *xi = x + i * C;
    double mx = -INFINITY, s = 0.0;
    for (int64_t j = 0; j < C; j++) mx = xi[j] > mx ? xi[j] : mx;
    for (int64_t j = 0; j < C; j++) s += o[i * C + j] = exp(xi[j] - mx);
    for (int64_t j = 0; j < C; j++) o[i * C + j] /= s;
  }
  store(out, o, N * C, 0);
}

void ref_softmax_backward(float *dx, const float *dout, const float *out, int64_t N, int64_t C, int acc) {
  double *g = dnew(N * C);
  for (int64_t i = 0; i < N; i++) {
    double s = 0.0;
    for (int64_t j = 0; j < C; j++) s += (double)dout[i * C + j] * out[i * C + j];
    for (int64_t j = 0; j < C; j++) g[i * C + j] = out[i * C + j] * (dout[i * C + j] - s);
  }
  store(dx, g, N * C, acc);
}

// ----------------------------------------------------------------------------
// attention: the full [t, t2] probability rows, recomputed per query

/* Positions are C3 floats apart; query head h reads kv head h / G at channels
 * C + (h / G) hs (k) and C + KC + (h / G) hs (v); a query row sees n(t) keys. */
typedef struct {
  int64_t T, C, hs, KC, C3, G, causal;
} Att;

static Att att_of(int64_t T, int64_t C, int64_t NH, int64_t KVH, int64_t causal) {
  int64_t hs = C / NH;
  return (Att){T, C, hs, KVH * hs, C + 2 * KVH * hs, NH / KVH, causal};
}
static int64_t att_keys(const Att *a, int64_t t) { return a->causal ? t + 1 : a->T; }
static const float *att_k(const Att *a, const float *qkv, int64_t b, int64_t t2, int64_t h) {
  return qkv + (b * a->T + t2) * a->C3 + a->C + h / a->G * a->hs;
}

/* p[0..n) = softmax of the scaled scores of query t in (b, h); returns lse. */
static double att_probs(double *p, const float *qkv, const Att *a, int64_t b, int64_t t, int64_t h) {
  const float *q = qkv + (b * a->T + t) * a->C3 + h * a->hs;
  double scale = 1.0 / sqrt((double)a->hs), mx = -INFINITY, s = 0.0;
  int64_t n = att_keys(a, t);
  for (int64_t t2 = 0; t2 < n; t2++) {
    const float *k = att_k(a, qkv, b, t2, h);
    double d = 0.0;
    for (int64_t i = 0; i < a->hs; i++) d += (double)q[i] * k[i];
    p[t2] = d * scale;
    mx = p[t2] > mx ? p[t2] : mx;
  }
  for (int64_t t2 = 0; t2 < n; t2++) s += p[t2] = exp(p[t2] - mx);
  for (int64_t t2 = 0; t2 < n; t2++) p[t2] /= s;
  return mx + log(s);
}

void ref_attention_forward(float *out, float *lse, const float *qkv, int64_t B, int64_t T, int64_t C, int64_t NH,
                           int64_t KVH, int64_t causal) {
  Att a = att_of(T, C, NH, KVH, causal);
  double *o = dnew(B * T * C), *l = dnew(B * NH * T), *p = dnew(T);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t t = 0; t < T; t++) {
        l[(b * NH + h) * T + t] = att_probs(p, qkv, &a, b, t, h);
        for (int64_t t2 = 0; t2 < att_keys(&a, t); t2++) {
          const float *v = att_k(&a, qkv, b, t2, h) + a.KC;
          for (int64_t i = 0; i < a.hs; i++) o[(b * T + t) * C + h * a.hs + i] += p[t2] * v[i];
        }
      }
  free(p);
  store(out, o, B * T * C, 0);
  store(lse, l, B * NH * T, 0);
}

/* Softmax backward in its textbook form: ds = p (dp - sum_t2 p dp). */
void ref_attention_backward(float *dqkv, const float *dout, const float *qkv, const float *out, const float *lse,
                            int64_t B, int64_t T, int64_t C, int64_t NH, int64_t KVH, int64_t causal, int acc) {
  (void)out, (void)lse;
  Att a = att_of(T, C, NH, KVH, causal);
  int64_t hs = a.hs, C3 = a.C3;
  double scale = 1.0 / sqrt((double)hs);
  double *g = dnew(B * T * C3), *p = dnew(T), *dp = dnew(T);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t t = 0; t < T; t++) {
        att_probs(p, qkv, &a, b, t, h);
        int64_t n = att_keys(&a, t);
        const float *go = dout + (b * T + t) * C + h * hs;
        const float *q = qkv + (b * T + t) * C3 + h * hs;
        double sum = 0.0;
        for (int64_t t2 = 0; t2 < n; t2++) {
          const float *v = att_k(&a, qkv, b, t2, h) + a.KC;
          double d = 0.0;
          for (int64_t i = 0; i < hs; i++) d += (double)go[i] * v[i];
          dp[t2] = d;
          sum += p[t2] * d;
        }
        for (int64_t t2 = 0; t2 < n; t2++) {
          const float *k = att_k(&a, qkv, b, t2, h);
          double ds = p[t2] * (dp[t2] - sum) * scale;
          double *gq = g + (b * T + t) * C3 + h * hs, *gk = g + (k - qkv);
          double *gv = gk + a.KC;
          for (int64_t i = 0; i < hs; i++) {
            gq[i] += ds * k[i];
            gk[i] += ds * q[i];
            gv[i] += p[t2] * go[i];
          }
        }
      }
  free(p);
  free(dp);
  store(dqkv, g, B * T * C3, acc);
}

// ----------------------------------------------------------------------------
// cross_attention: every query row sees all Tk keys of kv = k | v

/* p[0..Tk) = softmax of query (b, t, h)'s scaled scores; returns lse. */
static double xattn_probs(double *p, const float *q, const float *kv, int64_t b, int64_t t, int64_t h, int64_t Tq,
                          int64_t Tk, int64_t C, int64_t hs) {
  const float *qr = q + (b * Tq + t) * C + h * hs;
  double mx = -INFINITY, s = 0.0;
  for (int64_t j = 0; j < Tk; j++) {
    const float *k = kv + (b * Tk + j) * 2 * C + h * hs;
    double d = 0.0;
    for (int64_t i = 0; i < hs; i++) d += (double)qr[i] * k[i];
    p[j] = d / sqrt((double)hs);
    mx = p[j] > mx ? p[j] : mx;
  }
  for (int64_t j = 0; j < Tk; j++) s += p[j] = exp(p[j] - mx);
  for (int64_t j = 0; j < Tk; j++) p[j] /= s;
  return mx + log(s);
}

void ref_cross_attention_forward(float *out, float *lse, const float *q, const float *kv, int64_t B, int64_t Tq,
                                 int64_t Tk, int64_t C, int64_t NH) {
  int64_t hs = C / NH;
  double *o = dnew(B * Tq * C), *l = dnew(B * NH * Tq), *p = dnew(Tk);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t t = 0; t < Tq; t++) {
        l[(b * NH + h) * Tq + t] = xattn_probs(p, q, kv, b, t, h, Tq, Tk, C, hs);
        for (int64_t j = 0; j < Tk; j++)
          for (int64_t i = 0; i < hs; i++)
            o[(b * Tq + t) * C + h * hs + i] += p[j] * kv[(b * Tk + j) * 2 * C + C + h * hs + i];
      }
  free(p);
  store(out, o, B * Tq * C, 0);
  store(lse, l, B * NH * Tq, 0);
}

/* Softmax backward in its textbook form, as ref_attention_backward. */
void ref_cross_attention_backward(float *dq, float *dkv, const float *dout, const float *q, const float *kv,
                                  const float *out, const float *lse, int64_t B, int64_t Tq, int64_t Tk, int64_t C,
                                  int64_t NH, int acc_dq, int acc_dkv) {
  (void)out, (void)lse;
  int64_t hs = C / NH;
  double scale = 1.0 / sqrt((double)hs);
  double *gq = dnew(B * Tq * C), *gkv = dnew(B * Tk * 2 * C), *p = dnew(Tk), *dp = dnew(Tk);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t t = 0; t < Tq; t++) {
        xattn_probs(p, q, kv, b, t, h, Tq, Tk, C, hs);
        int64_t row = (b * Tq + t) * C + h * hs;
        double sum = 0.0;
        for (int64_t j = 0; j < Tk; j++) {
          double d = 0.0;
          for (int64_t i = 0; i < hs; i++) d += (double)dout[row + i] * kv[(b * Tk + j) * 2 * C + C + h * hs + i];
          dp[j] = d;
          sum += p[j] * d;
        }
        for (int64_t j = 0; j < Tk; j++) {
          int64_t kr = (b * Tk + j) * 2 * C + h * hs;
          double ds = p[j] * (dp[j] - sum) * scale;
          for (int64_t i = 0; i < hs; i++) {
            gq[row + i] += ds * kv[kr + i];
            gkv[kr + i] += ds * q[row + i];
            gkv[kr + C + i] += p[j] * dout[row + i];
          }
        }
      }
  free(p);
  free(dp);
  store(dq, gq, B * Tq * C, acc_dq);
  store(dkv, gkv, B * Tk * 2 * C, acc_dkv);
}

// ----------------------------------------------------------------------------
// embeddings

void ref_embedding_forward(float *out, const int32_t *tokens, const float *W, int64_t N, int64_t C, int64_t V) {
  (void)V;
  double *o = dnew(N * C);
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < C; j++) o[i * C + j] = W[(int64_t)tokens[i] * C + j];
  store(out, o, N * C, 0);
}

void ref_embedding_backward(float *dW, const float *dout, const int32_t *tokens, int64_t N, int64_t C, int64_t V,
                            int acc) {
  double *g = dnew(V * C);
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < C; j++) g[(int64_t)tokens[i] * C + j] += dout[i * C + j];
  store(dW, g, V * C, acc);
}

void ref_position_embedding_forward(float *out, const float *W, int64_t B, int64_t T, int64_t C) {
  double *o = dnew(B * T * C);
  for (int64_t i = 0; i < B * T * C; i++) o[i] = W[i % (T * C)];
  store(out, o, B * T * C, 0);
}

void ref_position_embedding_backward(float *dW, const float *dout, int64_t B, int64_t T, int64_t C, int64_t Wrows,
                                     int acc) {
  double *g = dnew(Wrows * C);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < T * C; i++) g[i] += dout[b * T * C + i];
  store(dW, g, Wrows * C, acc); // rows >= T: 0, or their contents plus 0
}

/* Llama 3's frequencies, as Hugging Face's _compute_llama3_parameters writes
 * them (s: factor, low_freq_factor, high_freq_factor, original max positions;
 * factor 0: theta^(-2i/hd) unscaled). */
static double llama3_freq(double theta, int64_t i, int64_t hd, const float *s) {
  double inv = 1.0 / pow(theta, (double)(2 * i) / (double)hd);
  if (s[0] == 0) return inv;
  double low_wl = s[3] / s[1], high_wl = s[3] / s[2], wl = 2 * 3.14159265358979323846 / inv;
  double scaled = wl > low_wl ? inv / s[0] : inv;
  double smooth = (s[3] / wl - s[1]) / (s[2] - s[1]);
  int medium = !(wl < high_wl) && !(wl > low_wl);
  return medium ? (1 - smooth) * scaled / s[0] + smooth * scaled : scaled;
}

/* Each q and k head's pairs (i, i + hd/2) rotated by sign * t f_i (llama3_freq),
 * cos and sin in double throughout (the kernels round them to float); v copied. */
static void rope_ref(float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, float theta,
                     const float *scaling, double sign, int acc) {
  int64_t nr = H + KV, W = (nr + KV) * hd, h2 = hd / 2;
  double *o = dnew(B * T * W);
  for (int64_t r = 0; r < B * T; r++)
    for (int64_t h = 0; h < nr + KV; h++)
      for (int64_t i = 0; i < h2; i++) {
        int64_t k = r * W + h * hd + i;
        double a = (double)(r % T) * llama3_freq(theta, i, hd, scaling);
        double c = h < nr ? cos(a) : 1.0, s = h < nr ? sign * sin(a) : 0.0;
        o[k] = x[k] * c - x[k + h2] * s;
        o[k + h2] = x[k + h2] * c + x[k] * s;
      }
  store(out, o, B * T * W, acc);
}

void ref_rope_forward(float *out, const float *x, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd, float theta,
                      float factor, float low, float high, float orig) {
  rope_ref(out, x, B, T, H, KV, hd, theta, (const float[4]){factor, low, high, orig}, 1.0, 0);
}

void ref_rope_backward(float *dx, const float *dout, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t hd,
                       float theta, float factor, float low, float high, float orig, int acc) {
  rope_ref(dx, dout, B, T, H, KV, hd, theta, (const float[4]){factor, low, high, orig}, -1.0, acc);
}

// ----------------------------------------------------------------------------
// shape ops: every element by its index formula, into a temporary

static void ref_same(float *dst, const float *src, int64_t n, int acc) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++) o[i] = src[i];
  store(dst, o, n, acc);
}

void ref_flatten_forward(float *out, const float *x, int64_t n) { ref_same(out, x, n, 0); }
void ref_flatten_backward(float *dx, const float *dout, int64_t n, int acc) { ref_same(dx, dout, n, acc); }
void ref_reshape_forward(float *out, const float *x, int64_t n) { ref_same(out, x, n, 0); }
void ref_reshape_backward(float *dx, const float *dout, int64_t n, int acc) { ref_same(dx, dout, n, acc); }

/* out[a, q, m, p, z] = in[a, p, m, q, z] */
static void ref_transpose(float *out, const float *in, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z, int acc) {
  double *o = dnew(A * P * M * Q * Z);
  for (int64_t a = 0; a < A; a++)
    for (int64_t p = 0; p < P; p++)
      for (int64_t m = 0; m < M; m++)
        for (int64_t q = 0; q < Q; q++)
          for (int64_t z = 0; z < Z; z++)
            o[(((a * Q + q) * M + m) * P + p) * Z + z] = in[(((a * P + p) * M + m) * Q + q) * Z + z];
  store(out, o, A * P * M * Q * Z, acc);
}

void ref_transpose_forward(float *out, const float *x, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z) {
  ref_transpose(out, x, A, P, M, Q, Z, 0);
}

void ref_transpose_backward(float *dx, const float *dout, int64_t A, int64_t P, int64_t M, int64_t Q, int64_t Z,
                            int acc) {
  if (dx) ref_transpose(dx, dout, A, Q, M, P, Z, acc);
}

void ref_concat_forward(float *out, const float *a0, const float *a1, const float *a2, const float *a3, const float *a4,
                        const float *a5, int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2, int64_t n3,
                        int64_t n4, int64_t n5) {
  const float *a[6] = {a0, a1, a2, a3, a4, a5};
  int64_t n[6] = {n0, n1, n2, n3, n4, n5}, W = n0 + n1 + n2 + n3 + n4 + n5;
  double *o = dnew(O * W * In);
  for (int64_t r = 0; r < O; r++)
    for (int k = 0, off = 0; k < 6; off += (int)n[k++])
      for (int64_t j = 0; j < n[k]; j++)
        for (int64_t i = 0; i < In; i++) o[(r * W + off + j) * In + i] = a[k][(r * n[k] + j) * In + i];
  store(out, o, O * W * In, 0);
}

void ref_concat_backward(float *da0, float *da1, float *da2, float *da3, float *da4, float *da5, const float *dout,
                         int64_t O, int64_t In, int64_t n0, int64_t n1, int64_t n2, int64_t n3, int64_t n4, int64_t n5,
                         int acc0, int acc1, int acc2, int acc3, int acc4, int acc5) {
  float *da[6] = {da0, da1, da2, da3, da4, da5};
  int64_t n[6] = {n0, n1, n2, n3, n4, n5}, W = n0 + n1 + n2 + n3 + n4 + n5;
  int acc[6] = {acc0, acc1, acc2, acc3, acc4, acc5};
  double *g[6];
  for (int k = 0, off = 0; k < 6; off += (int)n[k++]) { // every slice first: da_k may be one buffer
    g[k] = dnew(O * n[k] * In);
    for (int64_t r = 0; r < O; r++)
      for (int64_t j = 0; j < n[k]; j++)
        for (int64_t i = 0; i < In; i++) g[k][(r * n[k] + j) * In + i] = dout[(r * W + off + j) * In + i];
  }
  for (int k = 0; k < 6; k++) store(n[k] ? da[k] : NULL, g[k], O * n[k] * In, acc[k]);
}

void ref_class_token_forward(float *out, const float *x, const float *W, int64_t B, int64_t N, int64_t C) {
  double *o = dnew(B * (N + 1) * C);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t <= N; t++)
      for (int64_t j = 0; j < C; j++) o[(b * (N + 1) + t) * C + j] = t ? x[(b * N + t - 1) * C + j] : W[j];
  store(out, o, B * (N + 1) * C, 0);
}

void ref_class_token_backward(float *dx, float *dW, const float *dout, int64_t B, int64_t N, int64_t C, int acc_dx,
                              int acc_dW) {
  double *gx = dnew(B * N * C), *gw = dnew(C);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t <= N; t++)
      for (int64_t j = 0; j < C; j++) {
        double g = dout[(b * (N + 1) + t) * C + j];
        if (t) gx[(b * N + t - 1) * C + j] = g;
        else gw[j] += g;
      }
  store(dx, gx, B * N * C, acc_dx);
  store(dW, gw, C, acc_dW);
}

void ref_select_forward(float *out, const float *x, int64_t O, int64_t N, int64_t In, int64_t index) {
  double *o = dnew(O * In);
  for (int64_t r = 0; r < O; r++)
    for (int64_t i = 0; i < In; i++) o[r * In + i] = x[(r * N + index) * In + i];
  store(out, o, O * In, 0);
}

void ref_select_backward(float *dx, const float *dout, int64_t O, int64_t N, int64_t In, int64_t index, int acc) {
  double *g = dnew(O * N * In); // zeros but at index
  for (int64_t r = 0; r < O; r++)
    for (int64_t i = 0; i < In; i++) g[(r * N + index) * In + i] = dout[r * In + i];
  store(dx, g, O * N * In, acc);
}

void ref_pad_forward(float *out, const float *x, int64_t O, int64_t N, int64_t In, int64_t Nout) {
  double *o = dnew(O * Nout * In); // zeros past N
  for (int64_t r = 0; r < O; r++)
    for (int64_t n = 0; n < N && n < Nout; n++)
      for (int64_t i = 0; i < In; i++) o[(r * Nout + n) * In + i] = x[(r * N + n) * In + i];
  store(out, o, O * Nout * In, 0);
}

void ref_pad_backward(float *dx, const float *dout, int64_t O, int64_t N, int64_t In, int64_t Nout, int acc) {
  double *g = dnew(O * N * In); // zeros past Nout
  for (int64_t r = 0; r < O; r++)
    for (int64_t n = 0; n < N && n < Nout; n++)
      for (int64_t i = 0; i < In; i++) g[(r * N + n) * In + i] = dout[(r * Nout + n) * In + i];
  store(dx, g, O * N * In, acc);
}

// ----------------------------------------------------------------------------
// losses

static double row_lse(const float *x, int64_t n) {
  double mx = -INFINITY, s = 0.0;
  for (int64_t j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
  for (int64_t j = 0; j < n; j++) s += exp(x[j] - mx);
  return mx + log(s);
}

void ref_cross_entropy_forward(float *loss, float *lse, const float *logits, const int32_t *targets, int64_t N,
                               int64_t V) {
  double *l = dnew(N), *total = dnew(1);
  for (int64_t i = 0; i < N; i++) {
    l[i] = row_lse(logits + i * V, V);
    total[0] += l[i] - logits[i * V + targets[i]];
  }
  total[0] /= (double)N;
  store(lse, l, N, 0);
  store(loss, total, 1, 0);
}

void ref_cross_entropy_backward(float *dlogits, const float *logits, const int32_t *targets, const float *lse,
                                int64_t N, int64_t V, float scale, int acc) {
  (void)lse;
  double *g = dnew(N * V);
  for (int64_t i = 0; i < N; i++) {
    double l = row_lse(logits + i * V, V);
    for (int64_t j = 0; j < V; j++)
      g[i * V + j] = (double)scale / (double)N * (exp(logits[i * V + j] - l) - (j == targets[i] ? 1.0 : 0.0));
  }
  store(dlogits, g, N * V, acc);
}

/* The whole logits at once, in double (no chunks: R only sizes scratch). */
void ref_linear_cross_entropy_forward(float *loss, float *dx, float *dW, float *db, const float *x, const float *W,
                                      const float *b, const int32_t *targets, float *scratch, int64_t N, int64_t V,
                                      int64_t K, int64_t R) {
  (void)scratch, (void)R;
  double *z = dnew(N * V), *total = dnew(1), *gx = dnew(N * K), *gw = dnew(V * K), *gb = dnew(V);
  for (int64_t i = 0; i < N; i++) {
    double *zi = z + i * V;
    for (int64_t j = 0; j < V; j++) {
      double s = b ? b[j] : 0.0;
      for (int64_t c = 0; c < K; c++) s += (double)x[i * K + c] * W[j * K + c];
      zi[j] = s;
    }
    double mx = -INFINITY, se = 0.0;
    for (int64_t j = 0; j < V; j++) mx = zi[j] > mx ? zi[j] : mx;
    for (int64_t j = 0; j < V; j++) se += exp(zi[j] - mx);
    double l = mx + log(se);
    total[0] += l - zi[targets[i]];
    for (int64_t j = 0; j < V; j++) {
      double g = (exp(zi[j] - l) - (j == targets[i] ? 1.0 : 0.0)) / (double)N;
      gb[j] += g;
      for (int64_t c = 0; c < K; c++) {
        gx[i * K + c] += g * W[j * K + c];
        gw[j * K + c] += g * x[i * K + c];
      }
    }
  }
  total[0] /= (double)N;
  free(z);
  store(loss, total, 1, 0);
  store(dx, gx, N * K, 0);
  store(dW, gw, V * K, 0);
  store(b ? db : NULL, gb, V, 0);
}

void ref_linear_cross_entropy_backward(float *dx, float *dW, float *db, const float *sdx, const float *sdW,
                                       const float *sdb, float *scratch, int64_t N, int64_t V, int64_t K, int64_t R,
                                       float scale, int acc_dx, int acc_dW, int acc_db) {
  (void)scratch, (void)R;
  double *gx = dnew(N * K), *gw = dnew(V * K), *gb = dnew(V);
  for (int64_t i = 0; dx && i < N * K; i++) gx[i] = (double)scale * sdx[i];
  for (int64_t i = 0; dW && i < V * K; i++) gw[i] = (double)scale * sdW[i];
  for (int64_t i = 0; db && i < V; i++) gb[i] = (double)scale * sdb[i];
  store(dx, gx, N * K, acc_dx);
  store(dW, gw, V * K, acc_dW);
  store(db, gb, V, acc_db);
}

void ref_mse_forward(float *loss, const float *pred, const float *target, int64_t n) {
  double *total = dnew(1);
  for (int64_t i = 0; i < n; i++) {
    double d = (double)pred[i] - target[i];
    total[0] += d * d;
  }
  total[0] /= (double)n;
  store(loss, total, 1, 0);
}

void ref_mse_backward(float *dpred, const float *pred, const float *target, int64_t n, float scale, int acc) {
  double *g = dnew(n);
  for (int64_t i = 0; i < n; i++) g[i] = 2.0 * scale * ((double)pred[i] - target[i]) / (double)n;
  store(dpred, g, n, acc);
}

// ----------------------------------------------------------------------------
// conv2d (direct loops; scratch is not read: the references need none)

/* The input pixel (offset in one channel) that tap (ki, kj) meets at output
 * (oh, ow), or -1 in the padding. */
static int64_t conv_src(int64_t H, int64_t W, int64_t oh, int64_t ow, int64_t ki, int64_t kj, int64_t sh, int64_t sw,
                        int64_t ph, int64_t pw, int64_t d) {
  int64_t ih = oh * sh - ph + ki * d, iw = ow * sw - pw + kj * d;
  return ih < 0 || ih >= H || iw < 0 || iw >= W ? -1 : ih * W + iw;
}

void ref_conv2d_forward(float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N,
                        int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t kh, int64_t kw,
                        int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t d, int64_t G) {
  (void)scratch;
  int64_t Cg = C / G, Og = O / G;
  double *o = dnew(N * O * Ho * Wo);
  for (int64_t n = 0; n < N; n++)
    for (int64_t oc = 0; oc < O; oc++)
      for (int64_t oh = 0; oh < Ho; oh++)
        for (int64_t ow = 0; ow < Wo; ow++) {
          double sum = b ? b[oc] : 0.0;
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t ki = 0; ki < kh; ki++)
              for (int64_t kj = 0; kj < kw; kj++) {
                int64_t src = conv_src(H, Wd, oh, ow, ki, kj, sh, sw, ph, pw, d);
                int64_t wi = ((oc * Cg + ci) * kh + ki) * kw + kj;
                if (src >= 0) sum += (double)x[(n * C + oc / Og * Cg + ci) * H * Wd + src] * W[wi];
              }
          o[((n * O + oc) * Ho + oh) * Wo + ow] = sum;
        }
  store(out, o, N * O * Ho * Wo, 0);
}

void ref_conv2d_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W,
                         float *scratch, int64_t N, int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo,
                         int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t d, int64_t G,
                         int acc_dx, int acc_dW, int acc_db) {
  (void)scratch;
  int64_t Cg = C / G, Og = O / G;
  double *gx = dnew(N * C * H * Wd), *gW = dnew(O * Cg * kh * kw), *gb = dnew(O);
  for (int64_t n = 0; n < N; n++)
    for (int64_t oc = 0; oc < O; oc++)
      for (int64_t oh = 0; oh < Ho; oh++)
        for (int64_t ow = 0; ow < Wo; ow++) {
          double g = dout[((n * O + oc) * Ho + oh) * Wo + ow];
          gb[oc] += g;
          for (int64_t ci = 0; ci < Cg; ci++)
            for (int64_t ki = 0; ki < kh; ki++)
              for (int64_t kj = 0; kj < kw; kj++) {
                int64_t src = conv_src(H, Wd, oh, ow, ki, kj, sh, sw, ph, pw, d);
                int64_t wi = ((oc * Cg + ci) * kh + ki) * kw + kj;
                if (src < 0) continue;
                int64_t xi = (n * C + oc / Og * Cg + ci) * H * Wd + src;
                gx[xi] += g * W[wi];
                gW[wi] += g * x[xi];
              }
        }
  store(dx, gx, N * C * H * Wd, acc_dx);
  store(dW, gW, O * Cg * kh * kw, acc_dW);
  store(db, gb, O, acc_db);
}

// ----------------------------------------------------------------------------
// batchnorm2d: x[N,C,S], statistics per channel over its N*S values

void ref_batchnorm2d_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                             float *running_mean, float *running_var, int64_t N, int64_t C, int64_t S, float eps,
                             float momentum, int mode, uint64_t key) {
  (void)key;
  int64_t M = N * S;
  double *o = dnew(N * C * S), *mu = dnew(C), *rs = dnew(C);
  for (int64_t c = 0; c < C; c++) {
    double m = 0.0, v = 0.0;
    if (mode == RT_MODE_EVAL) {
      m = running_mean[c];
      v = running_var[c];
    } else {
      for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < S; k++) m += x[(n * C + c) * S + k];
      m /= (double)M;
      for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < S; k++) v += (x[(n * C + c) * S + k] - m) * (x[(n * C + c) * S + k] - m);
      v /= (double)M;
      if (mode == RT_MODE_TRAIN) {
        running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * m);
        running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * v * (double)M / (double)(M - 1));
      }
    }
    double r = 1.0 / sqrt(v + eps);
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < S; k++) {
        int64_t i = (n * C + c) * S + k;
        o[i] = (x[i] - m) * r * w[c] + (b ? b[c] : 0.0);
      }
    mu[c] = m;
    rs[c] = r;
  }
  store(out, o, N * C * S, 0);
  store(mean, mu, C, 0);
  store(rstd, rs, C, 0);
}

void ref_batchnorm2d_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                              const float *mean, const float *rstd, int64_t N, int64_t C, int64_t S, float eps,
                              float momentum, int mode, uint64_t key, int acc_dx, int acc_dw, int acc_db) {
  (void)eps, (void)momentum, (void)mode, (void)key;
  int64_t M = N * S;
  double *gx = dnew(N * C * S), *gw = dnew(C), *gb = dnew(C);
  for (int64_t c = 0; c < C; c++) {
    double m = mean[c], r = rstd[c];
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < S; k++) {
        int64_t i = (n * C + c) * S + k;
        gw[c] += dout[i] * (x[i] - m) * r;
        gb[c] += dout[i];
      }
    for (int64_t n = 0; n < N; n++)
      for (int64_t k = 0; k < S; k++) {
        int64_t i = (n * C + c) * S + k;
        gx[i] = w[c] * r * (dout[i] - gb[c] / (double)M - (x[i] - m) * r * gw[c] / (double)M);
      }
  }
  store(dx, gx, N * C * S, acc_dx);
  store(dw, gw, C, acc_dw);
  store(db, gb, C, acc_db);
}

// ----------------------------------------------------------------------------
// pooling and dropout

/* torch's first maximum of window (ho, wo): the first element inside the
 * input, then any larger one or a NaN */
static int64_t ref_argmax(const float *x, int64_t H, int64_t W, int64_t ho, int64_t wo, int64_t k, int64_t s,
                          int64_t p) {
  int64_t best = -1;
  double mx = -INFINITY;
  for (int64_t h = ho * s - p; h < ho * s - p + k; h++)
    for (int64_t w = wo * s - p; w < wo * s - p + k; w++) {
      if (h < 0 || h >= H || w < 0 || w >= W) continue;
      double v = x[h * W + w];
      if (best < 0 || v > mx || isnan(v)) {
        mx = v;
        best = h * W + w;
      }
    }
  return best;
}

void ref_maxpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                           int64_t Wo, int64_t k, int64_t s, int64_t p) {
  for (int64_t pl = 0; pl < N * C; pl++)
    for (int64_t i = 0; i < Ho * Wo; i++)
      out[pl * Ho * Wo + i] = x[pl * H * W + ref_argmax(x + pl * H * W, H, W, i / Wo, i % Wo, k, s, p)];
}

void ref_maxpool2d_backward(float *dx, const float *dout, const float *x, int64_t N, int64_t C, int64_t H, int64_t W,
                            int64_t Ho, int64_t Wo, int64_t k, int64_t s, int64_t p, int acc) {
  double *g = dnew(N * C * H * W);
  for (int64_t pl = 0; pl < N * C; pl++)
    for (int64_t i = 0; i < Ho * Wo; i++)
      g[pl * H * W + ref_argmax(x + pl * H * W, H, W, i / Wo, i % Wo, k, s, p)] += dout[pl * Ho * Wo + i];
  store(dx, g, N * C * H * W, acc);
}

/* torch's divisor of output i (count_include_pad): the window's pixels within the padded input */
static double ref_avg_div(int64_t i, int64_t Wo, int64_t k, int64_t s, int64_t p, int64_t H, int64_t W) {
  int64_t h0 = i / Wo * s - p, w0 = i % Wo * s - p;
  return (double)(((h0 + k < H + p ? h0 + k : H + p) - h0) * ((w0 + k < W + p ? w0 + k : W + p) - w0));
}

void ref_avgpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                           int64_t Wo, int64_t k, int64_t s, int64_t p) {
  double *o = dnew(N * C * Ho * Wo);
  for (int64_t pl = 0; pl < N * C; pl++)
    for (int64_t i = 0; i < Ho * Wo; i++)
      for (int64_t h = i / Wo * s - p; h < i / Wo * s - p + k; h++)
        for (int64_t w = i % Wo * s - p; w < i % Wo * s - p + k; w++)
          if (h >= 0 && h < H && w >= 0 && w < W)
            o[pl * Ho * Wo + i] += x[pl * H * W + h * W + w] / ref_avg_div(i, Wo, k, s, p, H, W);
  store(out, o, N * C * Ho * Wo, 0);
}

void ref_avgpool2d_backward(float *dx, const float *dout, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                            int64_t Wo, int64_t k, int64_t s, int64_t p, int acc) {
  double *g = dnew(N * C * H * W);
  for (int64_t pl = 0; pl < N * C; pl++)
    for (int64_t i = 0; i < Ho * Wo; i++)
      for (int64_t h = i / Wo * s - p; h < i / Wo * s - p + k; h++)
        for (int64_t w = i % Wo * s - p; w < i % Wo * s - p + k; w++)
          if (h >= 0 && h < H && w >= 0 && w < W)
            g[pl * H * W + h * W + w] += dout[pl * Ho * Wo + i] / ref_avg_div(i, Wo, k, s, p, H, W);
  store(dx, g, N * C * H * W, acc);
}

/* torch's adaptive windows: [floor(o n / out), ceil((o + 1) n / out)) of each dim */
static void ref_adaptive_window(int64_t o, int64_t n, int64_t out, int64_t *lo, int64_t *hi) {
  *lo = (int64_t)floor((double)o * (double)n / (double)out);
  *hi = (int64_t)ceil((double)(o + 1) * (double)n / (double)out);
}

void ref_adaptive_avgpool2d_forward(float *out, const float *x, int64_t N, int64_t C, int64_t H, int64_t W, int64_t Ho,
                                    int64_t Wo) {
  double *o = dnew(N * C * Ho * Wo);
  for (int64_t pl = 0; pl < N * C; pl++)
    for (int64_t i = 0; i < Ho * Wo; i++) {
      int64_t h0, h1, w0, w1;
      ref_adaptive_window(i / Wo, H, Ho, &h0, &h1);
      ref_adaptive_window(i % Wo, W, Wo, &w0, &w1);
      for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++)
          o[pl * Ho * Wo + i] += x[pl * H * W + h * W + w] / (double)((h1 - h0) * (w1 - w0));
    }
  store(out, o, N * C * Ho * Wo, 0);
}

void ref_adaptive_avgpool2d_backward(float *dx, const float *dout, int64_t N, int64_t C, int64_t H, int64_t W,
                                     int64_t Ho, int64_t Wo, int acc) {
  double *g = dnew(N * C * H * W);
  for (int64_t pl = 0; pl < N * C; pl++)
    for (int64_t i = 0; i < Ho * Wo; i++) {
      int64_t h0, h1, w0, w1;
      ref_adaptive_window(i / Wo, H, Ho, &h0, &h1);
      ref_adaptive_window(i % Wo, W, Wo, &w0, &w1);
      for (int64_t h = h0; h < h1; h++)
        for (int64_t w = w0; w < w1; w++)
          g[pl * H * W + h * W + w] += dout[pl * Ho * Wo + i] / (double)((h1 - h0) * (w1 - w0));
    }
  store(dx, g, N * C * H * W, acc);
}

void ref_global_avgpool_forward(float *out, const float *x, int64_t NC, int64_t HW) {
  double *o = dnew(NC);
  for (int64_t i = 0; i < NC * HW; i++) o[i / HW] += x[i] / (double)HW;
  store(out, o, NC, 0);
}

void ref_global_avgpool_backward(float *dx, const float *dout, int64_t NC, int64_t HW, int acc) {
  double *g = dnew(NC * HW);
  for (int64_t i = 0; i < NC * HW; i++) g[i] = dout[i / HW] / (double)HW;
  store(dx, g, NC * HW, acc);
}

/* memplan_kernels.h's mask: the top 24 bits of splitmix64's output function
 * of key ^ i, at or above ceil(p 2^24) */
static int ref_keep(uint64_t key, int64_t i, float p) {
  uint64_t z = (key ^ (uint64_t)i) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 40) >= ceil((double)p * 16777216.0);
}

void ref_dropout_forward(float *out, int32_t *mask, const float *x, int64_t n, float p, int mode, uint64_t key) {
  double *o = dnew(n);
  for (int64_t i = 0; i < n; i++)
    o[i] = mode == RT_MODE_EVAL ? x[i] : ref_keep(key, i, p) ? x[i] / (1.0 - (double)p) : 0.0;
  for (int64_t w = 0; mask && mode != RT_MODE_EVAL && w < (n + 31) / 32; w++) {
    uint32_t bits = 0;
    for (int64_t i = w * 32; i < n && i < w * 32 + 32; i++) bits |= (uint32_t)ref_keep(key, i, p) << (i % 32);
    mask[w] = (int32_t)bits;
  }
  store(out, o, n, 0);
}

void ref_dropout_backward(float *dx, const float *dout, const int32_t *mask, int64_t n, float p, int mode, uint64_t key,
                          int acc) {
  (void)mode;
  double *g = dnew(n);
  for (int64_t i = 0; i < n; i++) {
    int kept = mask ? (int)((uint32_t)mask[i / 32] >> (i % 32) & 1u) : ref_keep(key, i, p);
    g[i] = kept ? dout[i] / (1.0 - (double)p) : 0.0;
  }
  store(dx, g, n, acc);
}

void ref_stochastic_depth_forward(float *out, const float *x, int64_t N, int64_t S, int64_t batch, float p, int mode,
                                  uint64_t key) {
  double *o = dnew(N * S);
  for (int64_t i = 0; i < N * S; i++)
    o[i] = mode == RT_MODE_EVAL ? x[i] : ref_keep(key, batch ? 0 : i / S, p) ? x[i] / (1.0 - (double)p) : 0.0;
  store(out, o, N * S, 0);
}

void ref_stochastic_depth_backward(float *dx, const float *dout, int64_t N, int64_t S, int64_t batch, float p, int mode,
                                   uint64_t key, int acc) {
  (void)mode;
  double *g = dnew(N * S);
  for (int64_t i = 0; i < N * S; i++) g[i] = ref_keep(key, batch ? 0 : i / S, p) ? dout[i] / (1.0 - (double)p) : 0.0;
  store(dx, g, N * S, acc);
}

// ----------------------------------------------------------------------------
// optimizers

void ref_adamw_update(float *p, const float *g, float *m, float *v, int64_t n, double lr, double beta1, double beta2,
                      double eps, double wd, int64_t t) {
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  for (int64_t i = 0; i < n; i++) {
    double pi = p[i] * (1.0 - lr * wd);
    double mi = beta1 * m[i] + (1.0 - beta1) * g[i];
    double vi = beta2 * v[i] + (1.0 - beta2) * (double)g[i] * g[i];
    p[i] = (float)(pi - lr * (mi / bc1) / (sqrt(vi / bc2) + eps));
    m[i] = (float)mi;
    v[i] = (float)vi;
  }
}

/* bf16 and 8-bit moments: the update in double from the stored (decoded)
 * moments, p from the double m and v, and the moments stored back rounded
 * once from double: to bf16 nearest even, or to the nearest code of rt_qmap
 * (ties to the lower code) of value / scale, the scale the block's double
 * absmax rounded to float. */
static uint16_t ref_to_bf16(double x) {
  if (x == 0.0) return signbit(x) ? 0x8000u : 0;
  int e;
  double f = frexp(x, &e); /* |f| in [0.5, 1): 8 significant bits kept */
  float r = (float)ldexp(nearbyint(ldexp(f, 8)), e - 8);
  uint32_t b;
  memcpy(&b, &r, 4);
  return (uint16_t)(b >> 16);
}

static double ref_from_bf16(uint16_t h) {
  uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

static void ref_adam_elem(double *p, double g, double *m, double *v, double lr, double beta1, double beta2, double eps,
                          double wd, int64_t t) {
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  *m = beta1 * *m + (1.0 - beta1) * g;
  *v = beta2 * *v + (1.0 - beta2) * g * g;
  *p = *p * (1.0 - lr * wd) - lr * (*m / bc1) / (sqrt(*v / bc2) + eps);
}

void ref_adamw_update_bf16(float *p, const float *g, uint16_t *m, uint16_t *v, int64_t n, double lr, double beta1,
                           double beta2, double eps, double wd, int64_t t) {
  for (int64_t i = 0; i < n; i++) {
    double pi = p[i], mi = ref_from_bf16(m[i]), vi = ref_from_bf16(v[i]);
    ref_adam_elem(&pi, g[i], &mi, &vi, lr, beta1, beta2, eps, wd, t);
    p[i] = (float)pi;
    m[i] = ref_to_bf16(mi);
    v[i] = ref_to_bf16(vi);
  }
}

static uint8_t ref_qencode(int is_signed, double x) {
  int best = 0;
  for (int c = 1; c < 256; c++) /* strictly nearer only: ties keep the lower code */
    if (fabs(x - (double)rt_qmap(is_signed, c)) < fabs(x - (double)rt_qmap(is_signed, best))) best = c;
  return (uint8_t)best;
}

void ref_adamw_update_8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *m_scale, float *v_scale, int64_t n,
                           double lr, double beta1, double beta2, double eps, double wd, int64_t t) {
  double mb[RT_QBLOCK], vb[RT_QBLOCK];
  for (int64_t i0 = 0; i0 < n; i0 += RT_QBLOCK) {
    int64_t b = i0 / RT_QBLOCK, k = n - i0 < RT_QBLOCK ? n - i0 : RT_QBLOCK;
    double mmax = 0.0, vmax = 0.0;
    for (int64_t i = 0; i < k; i++) {
      double pi = p[i0 + i];
      mb[i] = (double)rt_qmap(1, m[i0 + i]) * m_scale[b];
      vb[i] = (double)rt_qmap(0, v[i0 + i]) * v_scale[b];
      ref_adam_elem(&pi, g[i0 + i], &mb[i], &vb[i], lr, beta1, beta2, eps, wd, t);
      p[i0 + i] = (float)pi;
      mmax = fmax(mmax, fabs(mb[i]));
      vmax = fmax(vmax, vb[i]);
    }
    m_scale[b] = (float)mmax, v_scale[b] = (float)vmax;
    for (int64_t i = 0; i < k; i++) {
      m[i0 + i] = mmax > 0.0 ? ref_qencode(1, mb[i] / (float)mmax) : 127;
      uint8_t c = vmax > 0.0 ? ref_qencode(0, vb[i] / (float)vmax) : 0;
      v[i0 + i] = c == 0 && vb[i] > 0.0 ? 1 : c;
    }
  }
}

void ref_sgd_update(float *p, const float *g, float *buf, int64_t n, double lr, double momentum, double wd,
                    int nesterov) {
  for (int64_t i = 0; i < n; i++) {
    double d = g[i] + wd * p[i];
    if (momentum != 0.0) {
      double bi = momentum * buf[i] + d;
      buf[i] = (float)bi;
      d = nesterov ? d + momentum * bi : bi;
    }
    p[i] = (float)(p[i] - lr * d);
  }
}

/* cpu.c's float sequence (torch's roundings), statement for statement. */
void ref_adamw_update_f32(float *p, const float *g, float *m, float *v, int64_t n, double lr, double beta1,
                          double beta2, double eps, double wd, int64_t t) {
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  float step = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float decay = (float)(1.0 - lr * wd), epsf = (float)eps;
  float b1 = (float)beta1, b2 = (float)beta2;
  float a1 = (float)(1.0 - beta1), a2 = (float)(1.0 - beta2);
  for (int64_t i = 0; i < n; i++) {
    float gi = g[i];
    m[i] = m[i] * b1 + a1 * gi;
    v[i] = v[i] * b2 + a2 * (gi * gi);
    float pd = p[i] * decay;
    p[i] = pd - step * m[i] / (sqrtf(v[i]) / bc2_sqrt + epsf);
  }
}

void ref_sgd_update_f32(float *p, const float *g, float *buf, int64_t n, double lr, double momentum, double wd,
                        int nesterov) {
  float lrf = (float)lr, mom = (float)momentum, wdf = (float)wd;
  for (int64_t i = 0; i < n; i++) {
    float d = g[i] + wdf * p[i];
    if (mom != 0.0f) {
      buf[i] = mom * buf[i] + d;
      d = nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] -= lrf * d;
  }
}

double ref_grad_sqnorm(const float *g, int64_t n) {
  long double s = 0.0L;
  for (int64_t i = 0; i < n; i++) s += (long double)g[i] * (long double)g[i];
  return (double)s;
}

// ----------------------------------------------------------------------------
// window_attention: per (image, window, head, query) the probability row in double, the geometry
// memplan_kernels.h's rt_window_pos and rt_window_rel (cpu_window.c's gradient check builds it from
// torchvision's definitions instead)

typedef struct {
  int64_t H, W, C, NH, ws, shift, hs, N, nw;
} Win;

/* p[0..N) of query j, head h, window w of image b; returns lse. pos: the window's flat positions. */
static double win_probs(double *p, int64_t *pos, const float *qkv, const float *table, const Win *a, int64_t b,
                        int64_t w, int64_t h, int64_t j) {
  int reg[1024];
  for (int64_t k = 0; k < a->N; k++)
    pos[k] = b * a->H * a->W + rt_window_pos(w, k, a->H, a->W, a->ws, a->shift, &reg[k]);
  double mx = -INFINITY, s = 0.0;
  for (int64_t k = 0; k < a->N; k++) {
    double d = 0.0;
    for (int64_t i = 0; i < a->hs; i++)
      d += (double)qkv[pos[j] * 3 * a->C + h * a->hs + i] * qkv[pos[k] * 3 * a->C + a->C + h * a->hs + i];
    p[k] = d / sqrt((double)a->hs) + table[rt_window_rel(j, k, a->ws) * a->NH + h] + (reg[j] != reg[k] ? -100.0 : 0.0);
    mx = p[k] > mx ? p[k] : mx;
  }
  for (int64_t k = 0; k < a->N; k++) s += p[k] = exp(p[k] - mx);
  for (int64_t k = 0; k < a->N; k++) p[k] /= s;
  return mx + log(s);
}

static Win win_of(int64_t H, int64_t W, int64_t C, int64_t NH, int64_t ws, int64_t shift) {
  return (Win){H, W, C, NH, ws, shift, C / NH, ws * ws, H / ws * (W / ws)};
}

void ref_window_attention_forward(float *out, float *lse, const float *qkv, const float *table, int64_t B, int64_t H,
                                  int64_t W, int64_t C, int64_t NH, int64_t ws, int64_t shift) {
  Win a = win_of(H, W, C, NH, ws, shift);
  double *o = dnew(B * H * W * C), *l = dnew(B * NH * H * W), *p = dnew(a.N);
  int64_t *pos = calloc((size_t)a.N, sizeof *pos);
  for (int64_t b = 0; b < B; b++)
    for (int64_t w = 0; w < a.nw; w++)
      for (int64_t h = 0; h < NH; h++)
        for (int64_t j = 0; j < a.N; j++) {
          double lj = win_probs(p, pos, qkv, table, &a, b, w, h, j);
          l[(b * NH + h) * H * W + pos[j] - b * H * W] = lj;
          for (int64_t k = 0; k < a.N; k++)
            for (int64_t i = 0; i < a.hs; i++)
              o[pos[j] * C + h * a.hs + i] += p[k] * qkv[pos[k] * 3 * C + 2 * C + h * a.hs + i];
        }
  free(p);
  free(pos);
  store(out, o, B * H * W * C, 0);
  store(lse, l, B * NH * H * W, 0);
}

/* Softmax backward in its textbook form, as attention's: ds = p (dp - sum_k p dp). */
void ref_window_attention_backward(float *dqkv, float *dtable, const float *dout, const float *qkv, const float *table,
                                   const float *out, const float *lse, int64_t B, int64_t H, int64_t W, int64_t C,
                                   int64_t NH, int64_t ws, int64_t shift, int acc, int acc_table) {
  (void)out, (void)lse;
  Win a = win_of(H, W, C, NH, ws, shift);
  int64_t R = (2 * ws - 1) * (2 * ws - 1);
  double *g = dnew(B * H * W * 3 * C), *gt = dnew(R * NH), *p = dnew(a.N), *dp = dnew(a.N);
  int64_t *pos = calloc((size_t)a.N, sizeof *pos);
  double scale = 1.0 / sqrt((double)a.hs);
  for (int64_t b = 0; b < B; b++)
    for (int64_t w = 0; w < a.nw; w++)
      for (int64_t h = 0; h < NH; h++)
        for (int64_t j = 0; j < a.N; j++) {
          win_probs(p, pos, qkv, table, &a, b, w, h, j);
          const float *go = dout + pos[j] * C + h * a.hs;
          double sum = 0.0;
          for (int64_t k = 0; k < a.N; k++) {
            double d = 0.0;
            for (int64_t i = 0; i < a.hs; i++) d += (double)go[i] * qkv[pos[k] * 3 * C + 2 * C + h * a.hs + i];
            dp[k] = d;
            sum += p[k] * d;
          }
          for (int64_t k = 0; k < a.N; k++) {
            double ds = p[k] * (dp[k] - sum);
            gt[rt_window_rel(j, k, ws) * NH + h] += ds;
            for (int64_t i = 0; i < a.hs; i++) {
              g[pos[j] * 3 * C + h * a.hs + i] += ds * scale * qkv[pos[k] * 3 * C + C + h * a.hs + i];
              g[pos[k] * 3 * C + C + h * a.hs + i] += ds * scale * qkv[pos[j] * 3 * C + h * a.hs + i];
              g[pos[k] * 3 * C + 2 * C + h * a.hs + i] += p[k] * go[i];
            }
          }
        }
  free(p);
  free(dp);
  free(pos);
  store(dqkv, g, B * H * W * 3 * C, acc);
  store(dtable, gt, R * NH, acc_table);
}

// diffusion ops (runtime/cpu_diffusion.c's contracts), in double

void ref_groupnorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b,
                           int64_t N, int64_t C, int64_t S, int64_t G, float eps) {
  int64_t m = C / G * S;
  double *o = dnew(N * C * S);
  for (int64_t ng = 0; ng < N * G; ng++) {
    double mu = 0.0, v = 0.0;
    for (int64_t j = 0; j < m; j++) mu += x[ng * m + j];
    mu /= (double)m;
    for (int64_t j = 0; j < m; j++) v += (x[ng * m + j] - mu) * (x[ng * m + j] - mu);
    double r = 1.0 / sqrt(v / (double)m + (double)eps);
    for (int64_t j = 0; j < m; j++) {
      int64_t c = ng % G * (C / G) + j / S;
      o[ng * m + j] = (x[ng * m + j] - mu) * r * (w ? w[c] : 1.0) + (b ? b[c] : 0.0);
    }
    if (mean) mean[ng] = (float)mu;
    if (rstd) rstd[ng] = (float)r;
  }
  store(out, o, N * C * S, 0);
}

void ref_groupnorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w,
                            const float *mean, const float *rstd, int64_t N, int64_t C, int64_t S, int64_t G, float eps,
                            int acc_dx, int acc_dw, int acc_db) {
  (void)eps;
  int64_t m = C / G * S;
  double *gx = dnew(N * C * S), *gw = dnew(C), *gb = dnew(C);
  for (int64_t ng = 0; ng < N * G; ng++) {
    double r = rstd[ng], s1 = 0.0, s2 = 0.0;
    for (int64_t j = 0; j < m; j++) {
      int64_t c = ng % G * (C / G) + j / S;
      double xh = (x[ng * m + j] - (double)mean[ng]) * r, wg = (w ? w[c] : 1.0) * dout[ng * m + j];
      s1 += wg;
      s2 += wg * xh;
      gw[c] += dout[ng * m + j] * xh;
      gb[c] += dout[ng * m + j];
    }
    s1 /= (double)m;
    s2 /= (double)m;
    for (int64_t j = 0; j < m; j++) {
      int64_t c = ng % G * (C / G) + j / S;
      double xh = (x[ng * m + j] - (double)mean[ng]) * r;
      gx[ng * m + j] = r * ((w ? w[c] : 1.0) * dout[ng * m + j] - s1 - xh * s2);
    }
  }
  store(dx, gx, N * C * S, acc_dx);
  store(dw, gw, C, acc_dw);
  store(db, gb, C, acc_db);
}

void ref_add_channels_forward(float *out, const float *x, const float *e, int64_t NC, int64_t S) {
  double *o = dnew(NC * S);
  for (int64_t i = 0; i < NC * S; i++) o[i] = (double)x[i] + e[i / S];
  store(out, o, NC * S, 0);
}

void ref_add_channels_backward(float *dx, float *de, const float *dout, int64_t NC, int64_t S, int acc_dx, int acc_de) {
  double *gx = dnew(NC * S), *ge = dnew(NC);
  for (int64_t i = 0; i < NC * S; i++) gx[i] = dout[i], ge[i / S] += dout[i];
  store(dx, gx, NC * S, acc_dx);
  store(de, ge, NC, acc_de);
}

void ref_upsample_forward(float *out, const float *x, int64_t NC, int64_t H, int64_t W, int64_t s) {
  for (int64_t pl = 0; pl < NC; pl++)
    for (int64_t y = 0; y < H * s; y++)
      for (int64_t z = 0; z < W * s; z++) out[(pl * H * s + y) * W * s + z] = x[(pl * H + y / s) * W + z / s];
}

void ref_upsample_backward(float *dx, const float *dout, int64_t NC, int64_t H, int64_t W, int64_t s, int acc) {
  double *g = dnew(NC * H * W);
  for (int64_t pl = 0; pl < NC; pl++)
    for (int64_t y = 0; y < H * s; y++)
      for (int64_t z = 0; z < W * s; z++) g[(pl * H + y / s) * W + z / s] += dout[(pl * H * s + y) * W * s + z];
  store(dx, g, NC * H * W, acc);
}

static double ref_temb_angle(const float *t, int64_t b, int64_t i, int64_t D, float shift, float max_period) {
  return (double)t[b] * exp(-log((double)max_period) * (double)i / ((double)(D / 2) - (double)shift));
}

void ref_timestep_embedding_forward(float *out, const float *t, int64_t B, int64_t D, int64_t flip, float shift,
                                    float max_period) {
  int64_t h = D / 2;
  for (int64_t b = 0; b < B; b++) {
    for (int64_t i = 0; i < h; i++) {
      double a = ref_temb_angle(t, b, i, D, shift, max_period);
      out[b * D + (flip ? h + i : i)] = (float)sin(a);
      out[b * D + (flip ? i : h + i)] = (float)cos(a);
    }
    if (D % 2) out[b * D + D - 1] = 0.0f;
  }
}

void ref_timestep_embedding_backward(float *dt, const float *dout, const float *t, int64_t B, int64_t D, int64_t flip,
                                     float shift, float max_period, int acc) {
  int64_t h = D / 2;
  double *g = dnew(B);
  for (int64_t b = 0; b < B; b++)
    for (int64_t i = 0; i < h; i++) {
      double a = ref_temb_angle(t, b, i, D, shift, max_period), f = a / (double)t[b];
      g[b] += f * (dout[b * D + (flip ? h + i : i)] * cos(a) - dout[b * D + (flip ? i : h + i)] * sin(a));
    }
  store(dt, g, B, acc);
}

/* scatter form: input (h, w) through tap (i, j) adds into output (h s - p + i, w s - p + j) */
void ref_conv_transpose2d_forward(float *out, const float *x, const float *W, const float *b, float *scratch, int64_t N,
                                  int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho, int64_t Wo, int64_t k,
                                  int64_t s, int64_t p) {
  (void)scratch;
  double *o = dnew(N * O * Ho * Wo);
  for (int64_t i = 0; i < N * O * Ho * Wo; i++) o[i] = b ? b[i / (Ho * Wo) % O] : 0.0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < Wd; w++)
          for (int64_t q = 0; q < O * k * k; q++) {
            int64_t oc = q / (k * k), y = h * s - p + q / k % k, z = w * s - p + q % k;
            if (y >= 0 && y < Ho && z >= 0 && z < Wo)
              o[((n * O + oc) * Ho + y) * Wo + z] += (double)x[((n * C + c) * H + h) * Wd + w] * W[c * O * k * k + q];
          }
  store(out, o, N * O * Ho * Wo, 0);
}

void ref_conv_transpose2d_backward(float *dx, float *dW, float *db, const float *dout, const float *x, const float *W,
                                   float *scratch, int64_t N, int64_t C, int64_t H, int64_t Wd, int64_t O, int64_t Ho,
                                   int64_t Wo, int64_t k, int64_t s, int64_t p, int acc_dx, int acc_dW, int acc_db) {
  (void)scratch;
  double *gx = dnew(N * C * H * Wd), *gw = dnew(C * O * k * k), *gb = dnew(O);
  for (int64_t i = 0; i < N * O * Ho * Wo; i++) gb[i / (Ho * Wo) % O] += dout[i];
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < Wd; w++)
          for (int64_t q = 0; q < O * k * k; q++) {
            int64_t oc = q / (k * k), y = h * s - p + q / k % k, z = w * s - p + q % k;
            if (y < 0 || y >= Ho || z < 0 || z >= Wo) continue;
            double g = dout[((n * O + oc) * Ho + y) * Wo + z];
            gx[((n * C + c) * H + h) * Wd + w] += g * W[c * O * k * k + q];
            gw[c * O * k * k + q] += g * x[((n * C + c) * H + h) * Wd + w];
          }
  store(dx, gx, N * C * H * Wd, acc_dx);
  store(dW, gw, C * O * k * k, acc_dW);
  store(db, gb, O, acc_db);
}

static uint64_t ref_mix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double ref_ddpm_abar(int64_t t, int64_t T, float b0, float b1) {
  double a = 1.0;
  for (int64_t i = 0; i <= t; i++) a *= 1.0 - ((double)b0 + ((double)b1 - (double)b0) * (double)i / (double)(T - 1));
  return a;
}

void ref_ddpm_noise_forward(float *xt, float *eps, float *t, const float *x0, int64_t B, int64_t S, int64_t T,
                            float beta_start, float beta_end, int mode, uint64_t key) {
  (void)mode;
  for (int64_t b = 0; b < B; b++) {
    int64_t tb = (int64_t)((ref_mix64(ref_mix64(key ^ 0x74696d65u) ^ (uint64_t)b) >> 11) % (uint64_t)T);
    double ab = ref_ddpm_abar(tb, T, beta_start, beta_end);
    t[b] = (float)tb;
    for (int64_t i = b * S; i < (b + 1) * S; i++) {
      uint64_t q = (uint64_t)i / 2;
      double u1 = ((double)(ref_mix64(key ^ 2 * q) >> 11) + 0.5) * 0x1p-53;
      double u2 = ((double)(ref_mix64(key ^ (2 * q + 1)) >> 11) + 0.5) * 0x1p-53;
      double e = sqrt(-2.0 * log(u1)) * (i % 2 ? sin(6.283185307179586 * u2) : cos(6.283185307179586 * u2));
      eps[i] = (float)e;
      xt[i] = (float)(sqrt(ab) * x0[i] + sqrt(1.0 - ab) * e);
    }
  }
}

void ref_ddpm_noise_backward(float *dx0, const float *dout, const float *t, int64_t B, int64_t S, int64_t T,
                             float beta_start, float beta_end, int mode, uint64_t key, int acc) {
  (void)mode, (void)key;
  double *g = dnew(B * S);
  for (int64_t i = 0; i < B * S; i++) g[i] = sqrt(ref_ddpm_abar((int64_t)t[i / S], T, beta_start, beta_end)) * dout[i];
  store(dx0, g, B * S, acc);
}
