/* cpu_optim.c: the CPU backend's optimizers, their state in bf16 and 8 bits (cpu_internal.h). */
#include "cpu_internal.h"

// ----------------------------------------------------------------------------
// optimizers

static void adamw_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *p = A->o[0], *m = A->o[1], *v = A->o[2];
  const float *g = A->i[0];
  float step = A->f[0], bc2_sqrt = A->f[1], decay = A->f[2], epsf = A->f[3];
  float b1 = A->f[4], b2 = A->f[5], a1 = A->f[6], a2 = A->f[7];
  for (int64_t i = lo; i < hi; i++) {
    float gi = g[i];
    m[i] = m[i] * b1 + a1 * gi;
    v[i] = v[i] * b2 + a2 * (gi * gi);
    float pd = p[i] * decay;
    p[i] = pd - step * m[i] / (sqrtf(v[i]) / bc2_sqrt + epsf);
  }
}

void rt_adamw_update(float *p, const float *g, float *m, float *v, int64_t n, double lr, double beta1, double beta2,
                     double eps, double wd, int64_t t) {
  // Same operations as torch.optim.AdamW (1.13, single-tensor path), with its
  // roundings: the scalars are doubles rounded to float where torch passes
  // them to a float tensor op. p *= 1 - lr wd; m = b1 m + (1 - b1) g;
  // v = b2 v + (1 - b2) g^2; p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  float step = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2);
  float decay = (float)(1.0 - lr * wd), epsf = (float)eps;
  float b1 = (float)beta1, b2 = (float)beta2;
  float a1 = (float)(1.0 - beta1), a2 = (float)(1.0 - beta2);
  RtArgs a = {.o = {p, m, v}, .i = {g}, .f = {step, bc2_sqrt, decay, epsf, b1, b2, a1, a2}};
  rt_par(adamw_task, &a, n, rt_chunks(n >= RT_PAR_MIN));
}

static void sgd_task(const void *ctx, int64_t lo, int64_t hi) {
  const RtArgs *A = ctx;
  float *p = A->o[0], *buf = A->o[1];
  const float *g = A->i[0];
  float lrf = A->f[0], mom = A->f[1], wdf = A->f[2];
  int nesterov = A->acc[0];
  for (int64_t i = lo; i < hi; i++) {
    float d = g[i] + wdf * p[i];
    if (mom != 0.0f) {
      buf[i] = mom * buf[i] + d;
      d = nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] -= lrf * d;
  }
}

void rt_sgd_update(float *p, const float *g, float *buf, int64_t n, double lr, double momentum, double wd,
                   int nesterov) {
  // torch.optim.SGD (dampening 0): scalars rounded to float as torch does.
  float lrf = (float)lr, mom = (float)momentum, wdf = (float)wd;
  RtArgs a = {.o = {p, buf}, .i = {g}, .f = {lrf, mom, wdf}, .acc = {nesterov}};
  rt_par(sgd_task, &a, n, rt_chunks(n >= RT_PAR_MIN));
}

// ----------------------------------------------------------------------------
// optimizer state in bf16 and in 8 bits (the plan's --opt-state)

typedef struct {
  float *p;
  const float *g;
  uint16_t *m16, *v16;
  uint8_t *m8, *v8;
  float *ms, *vs;
  int64_t n;
  float f[8]; /* adamw_update's scalars, in adamw_task's order */
} AdamLowTask;

static AdamLowTask adam_low_scalars(double lr, double beta1, double beta2, double eps, double wd, int64_t t) {
  double bc1 = 1.0 - pow(beta1, (double)t), bc2 = 1.0 - pow(beta2, (double)t);
  AdamLowTask a = {0};
  float f[8] = {(float)(lr / bc1), (float)sqrt(bc2), (float)(1.0 - lr * wd), (float)eps,
                (float)beta1,      (float)beta2,     (float)(1.0 - beta1),   (float)(1.0 - beta2)};
  memcpy(a.f, f, sizeof f);
  return a;
}

/* adamw_task's float operations on one element: m and v in, updated in place. */
static inline void adam_elem(const float *f, float *p, float gi, float *m, float *v) {
  *m = *m * f[4] + f[6] * gi;
  *v = *v * f[5] + f[7] * (gi * gi);
  float pd = *p * f[2];
  *p = pd - f[0] * *m / (sqrtf(*v) / f[1] + f[3]);
}

static void adamw_bf16_task(const void *ctx, int64_t lo, int64_t hi) {
  const AdamLowTask *A = ctx;
  for (int64_t i = lo; i < hi; i++) {
    float m = from_bf16(A->m16[i]), v = from_bf16(A->v16[i]);
    adam_elem(A->f, &A->p[i], A->g[i], &m, &v);
    A->m16[i] = to_bf16(m);
    A->v16[i] = to_bf16(v);
  }
}

void rt_adamw_update_bf16(float *p, const float *g, uint16_t *m, uint16_t *v, int64_t n, double lr, double beta1,
                          double beta2, double eps, double wd, int64_t t) {
  AdamLowTask a = adam_low_scalars(lr, beta1, beta2, eps, wd, t);
  a.p = p, a.g = g, a.m16 = m, a.v16 = v, a.n = n;
  rt_par(adamw_bf16_task, &a, n, rt_chunks(n >= RT_PAR_MIN));
}

static float rt_qtab[2][256]; /* rt_qmap(s, c), [0] unsigned, [1] signed */

static void qtab_init(void) {
  if (rt_qtab[0][255] == 1.0f) return;
  for (int s = 0; s < 2; s++)
    for (int c = 0; c < 256; c++) rt_qtab[s][c] = rt_qmap(s, c);
}

/* The nearest code of x (ties to the lower code) in the increasing table q:
 * a branchless binary search for the last q[lo] <= x, then the nearer of lo
 * and lo + 1. */
static uint8_t qencode(const float *q, float x) {
  if (x <= q[0]) return 0;
  if (x >= q[255]) return 255;
  int lo = 0; /* q[lo] <= x < q[lo + 1] after the halvings */
  for (int step = 128; step; step >>= 1) lo += q[lo + step] <= x ? step : 0;
  return (uint8_t)(x - q[lo] <= q[lo + 1] - x ? lo : lo + 1);
}

static void adamw_8bit_task(const void *ctx, int64_t lo, int64_t hi) {
  const AdamLowTask *A = ctx;
  float m[RT_QBLOCK], v[RT_QBLOCK];
  for (int64_t b = lo; b < hi; b++) {
    int64_t i0 = b * RT_QBLOCK, k = A->n - i0 < RT_QBLOCK ? A->n - i0 : RT_QBLOCK;
    float ms = A->ms[b], vs = A->vs[b], mmax = 0.0f, vmax = 0.0f;
    for (int64_t i = 0; i < k; i++) {
      m[i] = rt_qtab[1][A->m8[i0 + i]] * ms;
      v[i] = rt_qtab[0][A->v8[i0 + i]] * vs;
      adam_elem(A->f, &A->p[i0 + i], A->g[i0 + i], &m[i], &v[i]);
      mmax = fmaxf(mmax, fabsf(m[i]));
      vmax = fmaxf(vmax, v[i]);
    }
    A->ms[b] = mmax, A->vs[b] = vmax;
    for (int64_t i = 0; i < k; i++) {
      A->m8[i0 + i] = mmax > 0.0f ? qencode(rt_qtab[1], m[i] / mmax) : 127;
      uint8_t c = vmax > 0.0f ? qencode(rt_qtab[0], v[i] / vmax) : 0;
      A->v8[i0 + i] = c == 0 && v[i] > 0.0f ? 1 : c;
    }
  }
}

void rt_adamw_update_8bit(float *p, const float *g, uint8_t *m, uint8_t *v, float *m_scale, float *v_scale, int64_t n,
                          double lr, double beta1, double beta2, double eps, double wd, int64_t t) {
  qtab_init();
  AdamLowTask a = adam_low_scalars(lr, beta1, beta2, eps, wd, t);
  a.p = p, a.g = g, a.m8 = m, a.v8 = v, a.ms = m_scale, a.vs = v_scale, a.n = n;
  int64_t blocks = (n + RT_QBLOCK - 1) / RT_QBLOCK;
  rt_par(adamw_8bit_task, &a, blocks, rt_chunks(n >= RT_PAR_MIN));
}
