/* cpu.c: the CPU backend of memplan_rt.h (C17, OpenMP, OpenBLAS).
 *
 * Matrix products go through cblas_sgemm, transposes as CBLAS flags and
 * beta = acc ? 1 : 0, so "=" and "+=" cost the same; OpenBLAS runs on one
 * thread per call and gemm() splits a product over the OpenMP threads. Everything else is a
 * plain loop, parallel over rows, or over column blocks where rows would race
 * on a sum (bias, layernorm and embedding gradients). Row reductions (means,
 * softmax sums, losses) accumulate in double. Nothing here allocates.
 */
#include "memplan_rt.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An OpenBLAS extension; some cblas.h declare it, some don't. */
void openblas_set_num_threads(int num_threads);

/* Longest sequence attention handles: its per-row scratch is T floats on the
 * stack, 64 KiB at this limit (the header's per-call stack budget). */
#define RT_ATT_MAX_T 16384
/* Columns per task when a gradient sums over rows: each task owns whole
 * columns, so no two threads add into one element and the summation order
 * does not depend on the thread count. */
#define RT_COL_BLOCK 64
/* Element-wise kernels below this size run on one thread: a parallel region
 * costs more than the loop. */
#define RT_PAR_MIN 16384
/* Losses sum over a fixed number of parts, added in order: OpenMP's
 * reduction clause combines in whatever order threads finish, and a loss
 * must not depend on the thread count or on timing. */
#define RT_SUM_PARTS 64
/* Products below this many multiply-adds run on one thread; a split gives
 * each thread blocks of whole multiples of the quantum (SIMD-friendly). */
#define RT_GEMM_PAR_MIN (1 << 18)
#define RT_GEMM_QUANTUM 16

/* for header { body } on the OpenMP threads when par holds and there is more
 * than one thread, else as a plain loop. Not entering a region at all matters
 * beyond speed: libgomp allocates a team for every region that runs on one
 * thread (an if clause or one thread), and a trainer allocates nothing while
 * it trains. Teams of several threads are cached. */
#define RT_PAR_FOR(par, header, ...)                                             \
  do {                                                                           \
    if ((par) && omp_get_max_threads() > 1) {                                    \
      _Pragma("omp parallel for") for header { __VA_ARGS__ }                     \
    } else {                                                                     \
      for header { __VA_ARGS__ }                                                 \
    }                                                                            \
  } while (0)
#define RT_PAR_FOR2(par, h1, h2, ...)                                            \
  do {                                                                           \
    if ((par) && omp_get_max_threads() > 1) {                                    \
      _Pragma("omp parallel for collapse(2)") for h1 for h2 { __VA_ARGS__ }      \
    } else {                                                                     \
      for h1 for h2 { __VA_ARGS__ }                                              \
    }                                                                            \
  } while (0)
#define RT_PAR_FOR3(par, h1, h2, h3, ...)                                        \
  do {                                                                           \
    if ((par) && omp_get_max_threads() > 1) {                                    \
      _Pragma("omp parallel for collapse(3)") for h1 for h2 for h3 { __VA_ARGS__ } \
    } else {                                                                     \
      for h1 for h2 for h3 { __VA_ARGS__ }                                       \
    }                                                                            \
  } while (0)

static const float RT_LN_EPS = 1e-5f;                   /* PyTorch's default */
static const float RT_SQRT_2_OVER_PI = 0.7978845608028654f; /* M_PI is not C17 */

_Noreturn static void rt_fail(const char *file, int line, const char *msg) {
  fprintf(stderr, "%s:%d: memplan runtime: %s\n", file, line, msg);
  abort();
}
#define RT_CHECK(cond, msg) ((cond) ? (void)0 : rt_fail(__FILE__, __LINE__, (msg)))

void rt_set_threads(int n) {
  if (n < 1) n = 1;
  omp_set_num_threads(n);
  openblas_set_num_threads(1); // gemm() splits products over OpenMP threads
}

// ----------------------------------------------------------------------------
// helpers

/* BLAS takes int dimensions (LP64 OpenBLAS). */
static int blas_dim(int64_t d) {
  RT_CHECK(d >= 0 && d <= INT_MAX, "matrix dimension does not fit BLAS int");
  return (int)d;
}

/* C[m,n] (+)= op(A)[m,k] @ op(B)[k,n], row-major. ta: A is stored [k,m];
 * tb: B is stored [n,k]. beta = 0 never reads C (BLAS contract), so acc = 0
 * needs no memset. */
static void gemm1(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A,
                  int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, int acc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, blas_dim(m), blas_dim(n), blas_dim(k),
              1.0f, A, blas_dim(lda), B, blas_dim(ldb), acc ? 1.0f : 0.0f, C,
              blas_dim(ldc));
}

/* The same product split across the OpenMP threads, each calling a
 * single-threaded sgemm on a block of rows of C (or of columns, when C is
 * wider than tall). One thread pool for everything: OpenBLAS's own threads
 * and OpenMP's spinning workers would fight over the cores. Blocks depend on
 * the thread count only, so results are deterministic for a given count. */
static void gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, const float *A,
                 const float *B, float *C, int acc) {
  int64_t lda = ta ? m : k, ldb = tb ? k : n;
  int nt = omp_get_max_threads();
  if (nt == 1 || m * n * k < RT_GEMM_PAR_MIN) {
    gemm1(ta, tb, m, n, k, A, lda, B, ldb, C, n, acc);
    return;
  }
  int rows = m >= n;
#pragma omp parallel num_threads(nt)
  {
    int id = omp_get_thread_num(), tn = omp_get_num_threads();
    int64_t len = rows ? m : n, q = RT_GEMM_QUANTUM;
    int64_t lo = (len / q) * id / tn * q, hi = id + 1 == tn ? len : (len / q) * (id + 1) / tn * q;
    if (hi > lo) {
      if (rows)
        gemm1(ta, tb, hi - lo, n, k, ta ? A + lo : A + lo * lda, lda, B, ldb, C + lo * n,
              n, acc);
      else
        gemm1(ta, tb, m, hi - lo, k, A, lda, tb ? B + lo * ldb : B + lo, ldb, C + lo, n,
              acc);
    }
  }
}

/* dst (+)= src. dst == src with acc = 0 is the in-place no-op. */
static void accumulate(float *dst, const float *src, int64_t n, int acc) {
  if (!dst || (dst == src && !acc)) return;
  if (!acc) {
    memmove(dst, src, (size_t)n * sizeof(float));
    return;
  }
  RT_PAR_FOR(n >= RT_PAR_MIN, (int64_t i = 0; i < n; i++),
    dst[i] += src[i];);
}

/* out[j] (+)= sum_i in[i,j] over M rows of N columns. */
static void colsum(float *out, const float *in, int64_t M, int64_t N, int acc) {
  RT_PAR_FOR(1, (int64_t j0 = 0; j0 < N; j0 += RT_COL_BLOCK),
    int64_t nj = N - j0 < RT_COL_BLOCK ? N - j0 : RT_COL_BLOCK;
    double s[RT_COL_BLOCK] = {0};
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < nj; j++) s[j] += in[i * N + j0 + j];
    for (int64_t j = 0; j < nj; j++)
      out[j0 + j] = (float)(acc ? out[j0 + j] + s[j] : s[j]););
}

/* Eight partial sums: without -ffast-math the compiler may not reorder a
 * float reduction, but it vectorizes independent lanes. */
static float dot(const float *a, const float *b, int64_t n) {
  float s[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; i++) r += a[i] * b[i];
  return r;
}

static double sum_parts(const double *part) {
  double s = 0.0;
  for (int c = 0; c < RT_SUM_PARTS; c++) s += part[c];
  return s;
}

/* log(sum(exp(x))) of one row, max subtracted so nothing overflows. */
static float row_lse(const float *x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) s += expf(x[i] - mx);
  return mx + (float)log(s);
}

/* In place: x[0..n) = softmax(x[0..n)). */
static void softmax_row(float *x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  double s = 0.0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = expf(x[i] - mx);
    s += x[i];
  }
  float inv = (float)(1.0 / s);
  for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

// ----------------------------------------------------------------------------
// linear, matmul

void rt_linear_forward(float *out, const float *x, const float *W, const float *b,
                       int64_t M, int64_t K, int64_t N) {
  // With a bias, rows start as b and the product is added onto them (beta = 1).
  if (b) {
    RT_PAR_FOR(1, (int64_t i = 0; i < M; i++),
      memcpy(out + i * N, b, (size_t)N * sizeof(float)););
  }
  gemm(0, 1, M, N, K, x, W, out, b != NULL);
}

void rt_linear_backward(float *dx, float *dW, float *db, const float *dout,
                        const float *x, const float *W, int64_t M, int64_t K,
                        int64_t N, int acc_dx, int acc_dW, int acc_db) {
  if (dx) gemm(0, 0, M, K, N, dout, W, dx, acc_dx); // [M,N] @ [N,K]
  if (dW) gemm(1, 0, N, K, M, dout, x, dW, acc_dW); // [M,N]^T @ [M,K]
  if (db) colsum(db, dout, M, N, acc_db);
}

void rt_matmul_forward(float *out, const float *a, const float *b, int64_t Bt,
                       int64_t M, int64_t K, int64_t N) {
  for (int64_t i = 0; i < Bt; i++)
    gemm(0, 0, M, N, K, a + i * M * K, b + i * K * N, out + i * M * N, 0);
}

void rt_matmul_backward(float *da, float *db, const float *dout, const float *a,
                        const float *b, int64_t Bt, int64_t M, int64_t K, int64_t N,
                        int acc_da, int acc_db) {
  for (int64_t i = 0; i < Bt; i++) {
    const float *dout_i = dout + i * M * N;
    if (da) gemm(0, 1, M, K, N, dout_i, b + i * K * N, da + i * M * K, acc_da);
    if (db) gemm(1, 0, K, N, M, a + i * M * K, dout_i, db + i * K * N, acc_db);
  }
}

// ----------------------------------------------------------------------------
// element-wise: add, relu, gelu

void rt_add_forward(float *out, const float *a, const float *b, int64_t n) {
  RT_PAR_FOR(n >= RT_PAR_MIN, (int64_t i = 0; i < n; i++),
    out[i] = a[i] + b[i];);
}

void rt_add_backward(float *da, float *db, const float *dout, int64_t n, int acc_da,
                     int acc_db) {
  // A gradient may alias dout only with acc = 0, where its write is a no-op:
  // dout is intact for the other one whichever goes first.
  accumulate(da, dout, n, acc_da);
  accumulate(db, dout, n, acc_db);
}

void rt_relu_forward(float *out, const float *x, int64_t n) {
  RT_PAR_FOR(n >= RT_PAR_MIN, (int64_t i = 0; i < n; i++),
    out[i] = x[i] > 0.0f ? x[i] : 0.0f;);
}

void rt_relu_backward(float *dx, const float *dout, const float *out, int64_t n, int acc) {
  RT_PAR_FOR(n >= RT_PAR_MIN, (int64_t i = 0; i < n; i++),
    float g = out[i] > 0.0f ? dout[i] : 0.0f;
    dx[i] = acc ? dx[i] + g : g;);
}

void rt_gelu_forward(float *out, const float *x, int64_t n) {
  RT_PAR_FOR(n >= RT_PAR_MIN, (int64_t i = 0; i < n; i++),
    float xi = x[i];
    float u = RT_SQRT_2_OVER_PI * (xi + 0.044715f * xi * xi * xi);
    out[i] = 0.5f * xi * (1.0f + tanhf(u)););
}

void rt_gelu_backward(float *dx, const float *dout, const float *x, int64_t n, int acc) {
  RT_PAR_FOR(n >= RT_PAR_MIN, (int64_t i = 0; i < n; i++),
    float xi = x[i];
    float u = RT_SQRT_2_OVER_PI * (xi + 0.044715f * xi * xi * xi);
    float ch = coshf(u);
    float du = RT_SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * xi * xi);
    // d/dx 0.5 x (1 + tanh u) = 0.5 (1 + tanh u) + 0.5 x sech^2(u) du/dx.
    // 1/cosh^2 is ~3x more accurate than 1 - tanh^2 where tanh nears +-1,
    // and an overflowing cosh gives sech^2 = 0, the right limit.
    float g = dout[i] * (0.5f * (1.0f + tanhf(u)) + 0.5f * xi * du / (ch * ch));
    dx[i] = acc ? dx[i] + g : g;);
}

// ----------------------------------------------------------------------------
// layernorm

void rt_layernorm_forward(float *out, float *mean, float *rstd, const float *x,
                          const float *w, const float *b, int64_t N, int64_t C) {
  RT_PAR_FOR(1, (int64_t i = 0; i < N; i++),
    const float *xi = x + i * C;
    float *oi = out + i * C;
    double s = 0.0;
    for (int64_t j = 0; j < C; j++) s += xi[j];
    float m = (float)(s / (double)C);
    double v = 0.0; // two-pass biased variance: no cancellation
    for (int64_t j = 0; j < C; j++) v += (double)(xi[j] - m) * (xi[j] - m);
    float r = 1.0f / sqrtf((float)(v / (double)C) + RT_LN_EPS);
    for (int64_t j = 0; j < C; j++) oi[j] = (xi[j] - m) * r * w[j] + b[j];
    if (mean) mean[i] = m;
    if (rstd) rstd[i] = r;);
}

/* dx (+)= rstd (w dout - mean(w dout) - xhat mean(w dout xhat)), per row. */
static void layernorm_backward_dx(float *dx, const float *dout, const float *x,
                                  const float *w, const float *mean, const float *rstd,
                                  int64_t N, int64_t C, int acc) {
  RT_PAR_FOR(1, (int64_t i = 0; i < N; i++),
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
    });
}

/* dw (+)= sum_rows dout * xhat; db (+)= sum_rows dout. */
static void layernorm_backward_wb(float *dw, float *db, const float *dout,
                                  const float *x, const float *mean, const float *rstd,
                                  int64_t N, int64_t C, int acc_dw, int acc_db) {
  RT_PAR_FOR(1, (int64_t j0 = 0; j0 < C; j0 += RT_COL_BLOCK),
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
    });
}

void rt_layernorm_backward(float *dx, float *dw, float *db, const float *dout,
                           const float *x, const float *w, const float *mean,
                           const float *rstd, int64_t N, int64_t C, int acc_dx,
                           int acc_dw, int acc_db) {
  if (dx) layernorm_backward_dx(dx, dout, x, w, mean, rstd, N, C, acc_dx);
  if (dw || db) layernorm_backward_wb(dw, db, dout, x, mean, rstd, N, C, acc_dw, acc_db);
}

// ----------------------------------------------------------------------------
// softmax

void rt_softmax_forward(float *out, const float *x, int64_t N, int64_t C) {
  RT_PAR_FOR(1, (int64_t i = 0; i < N; i++),
    if (out != x) memcpy(out + i * C, x + i * C, (size_t)C * sizeof(float));
    softmax_row(out + i * C, C););
}

void rt_softmax_backward(float *dx, const float *dout, const float *out, int64_t N,
                         int64_t C, int acc) {
  RT_PAR_FOR(1, (int64_t i = 0; i < N; i++),
    const float *gi = dout + i * C, *yi = out + i * C;
    float *dxi = dx + i * C;
    double s = 0.0; // read all of the row's dout before dx (may alias it) is written
    for (int64_t j = 0; j < C; j++) s += gi[j] * yi[j];
    for (int64_t j = 0; j < C; j++) {
      float g = yi[j] * (gi[j] - (float)s);
      dxi[j] = acc ? dxi[j] + g : g;
    });
}

// ----------------------------------------------------------------------------
// causal self-attention
//
// Layout: qkv[b,t,:] = q (C) | k (C) | v (C); head h uses channels h*hs..h*hs+hs
// of each. A (b,t,h) query row reads keys and values of positions 0..t only.

/* One query row: p[0..t] = softmax(q . k[t2] * scale), out = sum_t2 p[t2] v[t2];
 * returns the row's log-sum-exp of scaled scores. k and v point at position 0
 * of this head; positions are C3 floats apart; p is t+1 floats of scratch. */
static float attention_row(float *out, float *p, const float *q, const float *k,
                           const float *v, int64_t t, int64_t hs, int64_t C3,
                           float scale) {
  float mx = -INFINITY;
  for (int64_t t2 = 0; t2 <= t; t2++) {
    p[t2] = dot(q, k + t2 * C3, hs) * scale;
    mx = p[t2] > mx ? p[t2] : mx;
  }
  double s = 0.0;
  for (int64_t t2 = 0; t2 <= t; t2++) {
    p[t2] = expf(p[t2] - mx);
    s += p[t2];
  }
  float inv = (float)(1.0 / s);
  for (int64_t i = 0; i < hs; i++) out[i] = 0.0f;
  for (int64_t t2 = 0; t2 <= t; t2++) {
    float w = p[t2] * inv;
    const float *v2 = v + t2 * C3;
    for (int64_t i = 0; i < hs; i++) out[i] += w * v2[i];
  }
  return mx + (float)log(s);
}

void rt_attention_forward(float *out, float *lse, const float *qkv, int64_t B,
                          int64_t T, int64_t C, int64_t NH) {
  RT_CHECK(T <= RT_ATT_MAX_T, "attention needs T <= 16384");
  int64_t hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  RT_PAR_FOR3(1, (int64_t b = 0; b < B; b++), (int64_t t = 0; t < T; t++), (int64_t h = 0; h < NH; h++),
    float p[RT_ATT_MAX_T]; // only p[0..t] is touched
    const float *base = qkv + b * T * C3 + h * hs;
    float l = attention_row(out + (b * T + t) * C + h * hs, p, base + t * C3,
                            base + C, base + 2 * C, t, hs, C3, scale);
    if (lse) lse[(b * NH + h) * T + t] = l;);
}

/* Backward of one query row t with output grad g, FlashAttention-style: the
 * probabilities are recomputed as p = exp(q . k[t2] scale - lse), and the
 * softmax backward's sum_t2 p dp equals D = g . out (out = sum p v), so one
 * pass over t2 suffices: dp = g . v[t2], ds = p (dp - D) scale,
 * dq += ds k[t2], dk[t2] += ds q, dv[t2] += p g. No scratch. */
static void attention_row_backward(float *dq, float *dk, float *dv, const float *g,
                                   const float *o, float lse, const float *q,
                                   const float *k, const float *v, int64_t t,
                                   int64_t hs, int64_t C3, float scale) {
  float D = dot(g, o, hs);
  for (int64_t t2 = 0; t2 <= t; t2++) {
    const float *k2 = k + t2 * C3, *v2 = v + t2 * C3;
    float p = expf(dot(q, k2, hs) * scale - lse);
    float ds = p * (dot(g, v2, hs) - D) * scale;
    float *dk2 = dk + t2 * C3, *dv2 = dv + t2 * C3;
    for (int64_t i = 0; i < hs; i++) {
      dq[i] += ds * k2[i];
      dk2[i] += ds * q[i];
      dv2[i] += p * g[i];
    }
  }
}

void rt_attention_backward(float *dqkv, const float *dout, const float *qkv,
                           const float *out, const float *lse, int64_t B, int64_t T,
                           int64_t C, int64_t NH, int acc) {
  int64_t hs = C / NH, C3 = 3 * C;
  float scale = 1.0f / sqrtf((float)hs);
  // Parallel over (b, h) only: row t adds into dk, dv of every t2 <= t, but
  // a (b, h) pair owns its channels of dqkv, so pairs never race.
  RT_PAR_FOR2(1, (int64_t b = 0; b < B; b++), (int64_t h = 0; h < NH; h++),
    const float *base = qkv + b * T * C3 + h * hs;
    float *dbase = dqkv + b * T * C3 + h * hs;
    if (!acc)
      for (int64_t t = 0; t < T; t++)
        for (int64_t part = 0; part < 3; part++)
          memset(dbase + t * C3 + part * C, 0, (size_t)hs * sizeof(float));
    for (int64_t t = 0; t < T; t++) {
      int64_t row = (b * T + t) * C + h * hs;
      attention_row_backward(dbase + t * C3, dbase + C, dbase + 2 * C, dout + row,
                             out + row, lse[(b * NH + h) * T + t], base + t * C3,
                             base + C, base + 2 * C, t, hs, C3, scale);
    });
}

// ----------------------------------------------------------------------------
// embeddings

void rt_embedding_forward(float *out, const int32_t *tokens, const float *W, int64_t N,
                          int64_t C, int64_t V) {
  (void)V; // ids were checked by the data loader
  RT_PAR_FOR(1, (int64_t i = 0; i < N; i++),
    memcpy(out + i * C, W + (int64_t)tokens[i] * C, (size_t)C * sizeof(float)););
}

void rt_embedding_backward(float *dW, const float *dout, const int32_t *tokens,
                           int64_t N, int64_t C, int64_t V, int acc) {
  if (!acc) {
    RT_PAR_FOR(1, (int64_t v = 0; v < V; v++),
      memset(dW + v * C, 0, (size_t)C * sizeof(float)););
  }
  // Repeated tokens add into the same row: tasks own column blocks, not rows.
  RT_PAR_FOR(1, (int64_t j0 = 0; j0 < C; j0 += RT_COL_BLOCK),
    int64_t nj = C - j0 < RT_COL_BLOCK ? C - j0 : RT_COL_BLOCK;
    for (int64_t i = 0; i < N; i++) {
      float *row = dW + (int64_t)tokens[i] * C + j0;
      const float *gi = dout + i * C + j0;
      for (int64_t j = 0; j < nj; j++) row[j] += gi[j];
    });
}

void rt_position_embedding_forward(float *out, const float *W, int64_t B, int64_t T,
                                   int64_t C) {
  RT_PAR_FOR2(1, (int64_t b = 0; b < B; b++), (int64_t t = 0; t < T; t++),
    memcpy(out + (b * T + t) * C, W + t * C, (size_t)C * sizeof(float)););
}

void rt_position_embedding_backward(float *dW, const float *dout, int64_t B, int64_t T,
                                    int64_t C, int64_t Wrows, int acc) {
  RT_PAR_FOR(1, (int64_t t = 0; t < Wrows; t++),
    float *row = dW + t * C;
    if (!acc) memset(row, 0, (size_t)C * sizeof(float));
    if (t >= T) continue;
    for (int64_t b = 0; b < B; b++) {
      const float *gi = dout + (b * T + t) * C;
      for (int64_t j = 0; j < C; j++) row[j] += gi[j];
    });
}

// ----------------------------------------------------------------------------
// losses

void rt_cross_entropy_forward(float *loss, float *lse, const float *logits,
                              const int32_t *targets, int64_t N, int64_t V) {
  double part[RT_SUM_PARTS] = {0};
  RT_PAR_FOR(1, (int64_t c = 0; c < RT_SUM_PARTS; c++),
    for (int64_t i = N * c / RT_SUM_PARTS; i < N * (c + 1) / RT_SUM_PARTS; i++) {
      const float *li = logits + i * V;
      float l = row_lse(li, V);
      if (lse) lse[i] = l;
      part[c] += (double)l - li[targets[i]];
    });
  loss[0] = (float)(sum_parts(part) / (double)N);
}

void rt_cross_entropy_backward(float *dlogits, const float *logits,
                               const int32_t *targets, const float *lse, int64_t N,
                               int64_t V, float scale, int acc) {
  float k = (float)((double)scale / (double)N);
  // Each element depends on its own logit and the saved lse only, so writing
  // dlogits over logits (acc = 0) never reads an overwritten value.
  RT_PAR_FOR(1, (int64_t i = 0; i < N; i++),
    const float *li = logits + i * V;
    float *di = dlogits + i * V;
    float l = lse[i];
    int64_t y = targets[i];
    for (int64_t j = 0; j < V; j++) {
      float g = k * (expf(li[j] - l) - (j == y ? 1.0f : 0.0f));
      di[j] = acc ? di[j] + g : g;
    });
}

void rt_mse_forward(float *loss, const float *pred, const float *target, int64_t n) {
  double part[RT_SUM_PARTS] = {0};
  RT_PAR_FOR(n >= RT_PAR_MIN, (int64_t c = 0; c < RT_SUM_PARTS; c++),
    for (int64_t i = n * c / RT_SUM_PARTS; i < n * (c + 1) / RT_SUM_PARTS; i++) {
      double d = (double)pred[i] - target[i];
      part[c] += d * d;
    });
  loss[0] = (float)(sum_parts(part) / (double)n);
}

void rt_mse_backward(float *dpred, const float *pred, const float *target, int64_t n,
                     float scale, int acc) {
  float k = (float)(2.0 * scale / (double)n);
  RT_PAR_FOR(n >= RT_PAR_MIN, (int64_t i = 0; i < n; i++),
    float g = k * (pred[i] - target[i]);
    dpred[i] = acc ? dpred[i] + g : g;);
}

// ----------------------------------------------------------------------------
// optimizers

void rt_adamw_update(float *p, const float *g, float *m, float *v, int64_t n, double lr,
                     double beta1, double beta2, double eps, double wd, int64_t t) {
  // Same operations as torch.optim.AdamW (1.13, single-tensor path), with its
  // roundings: the scalars are doubles rounded to float where torch passes
  // them to a float tensor op. p *= 1 - lr wd; m = b1 m + (1 - b1) g;
  // v = b2 v + (1 - b2) g^2; p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  float step = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float decay = (float)(1.0 - lr * wd), epsf = (float)eps;
  float b1 = (float)beta1, b2 = (float)beta2;
  float a1 = (float)(1.0 - beta1), a2 = (float)(1.0 - beta2);
  RT_PAR_FOR(n >= RT_PAR_MIN, (int64_t i = 0; i < n; i++),
    float gi = g[i];
    m[i] = m[i] * b1 + a1 * gi;
    v[i] = v[i] * b2 + a2 * (gi * gi);
    float pd = p[i] * decay;
    p[i] = pd - step * m[i] / (sqrtf(v[i]) / bc2_sqrt + epsf););
}

void rt_sgd_update(float *p, const float *g, float *buf, int64_t n, double lr,
                   double momentum, double wd, int nesterov) {
  // torch.optim.SGD (dampening 0): scalars rounded to float as torch does.
  float lrf = (float)lr, mom = (float)momentum, wdf = (float)wd;
  RT_PAR_FOR(n >= RT_PAR_MIN, (int64_t i = 0; i < n; i++),
    float d = g[i] + wdf * p[i];
    if (mom != 0.0f) {
      buf[i] = mom * buf[i] + d;
      d = nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] -= lrf * d;);
}

// ----------------------------------------------------------------------------
// storage precision and loss scaling

static uint16_t to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);              /* nearest even */
}

static float from_bf16(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* IEEE binary16, nearest even, subnormals kept. */
static uint16_t to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
  if (exp == 0xffu) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 31) return (uint16_t)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - e), half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) half++; /* a carry may round up to inf: correct */
  return (uint16_t)(sign | half);
}

static float from_f16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, x;
  if (exp == 0x1fu) x = sign | 0x7f800000u | (mant << 13);
  else if (exp == 0) {
    float f = (float)mant * 0x1p-24f; /* zero or subnormal: exact in float */
    memcpy(&x, &f, 4);
    x |= sign;
  } else x = sign | ((exp + 112u) << 23) | (mant << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

void rt_f32_to_bf16(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = to_bf16(src[i]);
}
void rt_bf16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = from_bf16(src[i]);
}
void rt_f32_to_f16(uint16_t *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = to_f16(src[i]);
}
void rt_f16_to_f32(float *dst, const uint16_t *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = from_f16(src[i]);
}

int rt_unscale_check(float *g, int64_t n, float inv_scale) {
  int finite = 1;
  for (int64_t i = 0; i < n; i++) {
    finite &= isfinite(g[i]) != 0;
    g[i] *= inv_scale;
  }
  return finite;
}
